"""The scenario's `[workload]` table: what the default queue workload does (docs/architecture.md §2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kafka_chaos.workloads.drivers import check_client

# `[cluster] timeouts = "kafka-defaults"`: the client's own defaults (librdkafka CONFIGURATION.md: request.timeout.ms
# 30 s, message.timeout.ms alias delivery.timeout.ms 300 s) instead of the fast profile's 5 s / 15 s, unless the
# scenario's [workload] sets them. The fast ones let a stalled send fail within a short chaos run.
CLIENT_TIMEOUT_PROFILES: dict[str, dict[str, int]] = {
    "fast": {"request_timeout_ms": 5000, "delivery_timeout_ms": 15000},
    "kafka-defaults": {"request_timeout_ms": 30000, "delivery_timeout_ms": 300000},
}


class WorkloadConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    producers: int = Field(2, ge=0, le=32, description="producer threads")
    in_flight: int = Field(8, ge=1, le=1024, description="Jepsen processes per producer thread, one op each")
    consumers: int = Field(1, ge=0, le=32)
    consumer_mode: Literal["assign", "subscribe"] = "assign"
    acks: Literal["0", "1", "all"] = "all"
    idempotence: bool = True
    retries: int | None = Field(None, ge=0)
    linger_ms: int = Field(5, ge=0)
    batch_size: int = Field(16384, ge=1)
    record_size: int = Field(100, ge=8, le=1_000_000)
    rate: float = Field(200, ge=0, description="sends per second per producer thread; 0 = unthrottled")
    delivery_timeout_ms: int = Field(CLIENT_TIMEOUT_PROFILES["fast"]["delivery_timeout_ms"], ge=1000,
                                     description="unset: the [cluster] timeouts profile's")
    request_timeout_ms: int = Field(CLIENT_TIMEOUT_PROFILES["fast"]["request_timeout_ms"], ge=100,
                                    description="unset: the [cluster] timeouts profile's")
    poll_max_records: int = Field(500, ge=1)
    auto_offset_reset: Literal["earliest", "latest"] = Field(
        "earliest", description="consumers' auto.offset.reset: where a consumer goes when the client resets its "
        "position (an offset out of range, a failed offset validation); assign-mode consumers start at the "
        "beginning either way and the final drain always reads from the earliest")
    drain_timeout_s: float = Field(60, gt=0)
    partition_eof: bool = Field(
        False, description="subscribe: the group consumers run with enable.partition.eof=true, so consume() hands "
        "them an end-of-partition event whenever they catch up (skipped: it is not a record), as an application "
        "that watches for the end of a partition does")
    consumer_reopen_s: float | None = Field(
        None, gt=0, description="subscribe: every this many seconds each group consumer is closed (committing its "
        "offsets) and a new one subscribes in the same history process, as a restarted application does; the "
        "group resumes it from the committed offsets, so a position committed past a record shows as a poll skip")
    client_rack: str | None = Field(None, description="consumers' client.rack: fetch from the closest replica")
    client: str = Field("librdkafka", description="the client library the workload's clients run: librdkafka "
                        "(confluent-kafka) or java (the Apache Kafka Java client) (workloads.drivers)")
    client_version: str | None = Field(None, description="the client's release, run in worker processes of its own "
                                       "(a confluent-kafka release from PyPI, a Java client from Maven Central); "
                                       "unset: the confluent-kafka installed with kafka-chaos, in process")
    # --- kind = "txn": the transactional workload (workloads.txn); ignored by the queue workload ---
    kind: Literal["queue", "txn"] = Field("queue", description="queue (default) or txn (workloads.txn)")
    txn_keys: int = Field(2, ge=1, le=64, description="txn: distinct keys (partitions) written per transaction")
    txn_abort_share: float = Field(0.1, ge=0, le=1, description="txn: share of transactions aborted on purpose")
    txn_abort_wait_ms: int | None = Field(
        None, ge=1, description="txn: before an abort on purpose, wait up to this long for the transaction's sends "
        "to be acknowledged (flush), so the abort ends a transaction whose partitions were added and records "
        "written; unset: abort right after the sends, which may leave nothing on the brokers to abort")
    txn_commit_delay_ms: int | None = Field(
        None, ge=1, description="txn: before each commit, wait for the transaction's sends to be acknowledged "
        "(flush) and then hold the transaction open this long, as a slow application between its writes and its "
        "commit (a client-pause with during = \"transaction\" freezes a producer then); unset: commit at once")
    txn_mixed_share: float = Field(0.3, ge=0, le=1,
                                   description="txn: share that poll and send in one transaction (offsets in it)")
    txn_socket_timeout_ms: int | None = Field(
        None, ge=100, description="txn: the producer's socket.timeout.ms, the timeout of its requests (EndTxn, "
        "AddPartitionsToTxn, and Produce too: librdkafka caps a Produce's wait by it, request.timeout.ms being the "
        "broker's ack timeout), after which librdkafka sends them again; unset: librdkafka's 60 s")
    txn_isolation: list[Literal["read_committed", "read_uncommitted"]] = Field(
        ["read_committed", "read_uncommitted"],
        description="txn: one standalone consumer per isolation level")

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) else v

    @model_validator(mode="after")
    def _known_client(self) -> WorkloadConfig:
        check_client(self.client, self.client_version)
        if self.client_rack and (self.client != "librdkafka" or self.client_version is not None):
            raise ValueError("client_rack records each consumer's fetch source from librdkafka's statistics, "
                             "which only the in-process client hands over: remove client_rack, or "
                             "client/client_version")
        return self

    @model_validator(mode="after")
    def _group_consumer_options(self) -> WorkloadConfig:
        if self.partition_eof and self.client == "java":
            raise ValueError('partition_eof = true asks for librdkafka\'s end-of-partition events, which the Java '
                             'client does not have: remove partition_eof, or use client = "librdkafka"')
        for name in ("partition_eof", "consumer_reopen_s"):
            if getattr(self, name) and self.consumer_mode != "subscribe":
                raise ValueError(f'{name} applies to group consumers (their committed offsets are what it '
                                 f'exercises): set consumer_mode = "subscribe", or remove {name}')
        return self

    @model_validator(mode="after")
    def _latest_needs_assign(self) -> WorkloadConfig:
        if self.auto_offset_reset == "latest" and self.consumer_mode == "subscribe":
            raise ValueError("auto_offset_reset = \"latest\" with consumer_mode = \"subscribe\": the new group "
                             "would start at the end and leave the run's first records unread; use "
                             "consumer_mode = \"assign\" or auto_offset_reset = \"earliest\"")
        return self

    @model_validator(mode="after")
    def _idempotence_needs_acks_all(self) -> WorkloadConfig:
        if self.idempotence and self.acks != "all":
            raise ValueError(f"idempotence = true needs acks = \"all\" (Kafka's rule); got acks = \"{self.acks}\"")
        return self
