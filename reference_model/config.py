"""The run's configuration, resolved once: what the model, the checker and the report read of a scenario.

A run's resolved scenario (the history's run-start, `scenario.resolved.toml`) becomes one :class:`RunConfig`:
the producer's guarantees, the topic's replication, the feature flags (ELR's default per version from
kafka_chaos.versions), who is who in the cluster (kafka_chaos.node_ids) and the timeouts on Kafka's recovery
path. The durability verdicts, the availability bounds and the conformance checks all take it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos import node_ids, versions
from kafka_chaos.reference_model.model import Acks
from kafka_chaos.reference_model.request_faults import transaction_version_2

__all__ = ["CLIENT_DEFAULTS_MS", "KAFKA_DEFAULTS", "RunConfig", "Timeouts"]

# Kafka's own defaults (KafkaConfig / KRaftConfigs / QuorumConfig, Kafka 4.x), and librdkafka's client ones.
KAFKA_DEFAULTS: dict[str, str] = {
    "broker.session.timeout.ms": "9000",
    "broker.heartbeat.interval.ms": "2000",
    "replica.lag.time.max.ms": "30000",
    "controller.quorum.fetch.timeout.ms": "2000",
    "controller.quorum.election.timeout.ms": "1000",
    "controller.quorum.election.backoff.max.ms": "1000",
}
CLIENT_DEFAULTS_MS = {
    "request_timeout_ms": 30000,
    "delivery_timeout_ms": 120000,
    "retry_backoff_max_ms": 1000,
    "reconnect_backoff_max_ms": 10000,
    "metadata_refresh_ms": 1000,  # what workloads.producer sets (topic.metadata.refresh.interval.ms)
}


@dataclass(frozen=True)
class Timeouts:
    """The timeouts on the recovery path, in seconds."""

    session_s: float = 9.0
    heartbeat_s: float = 2.0
    replica_lag_s: float = 30.0
    fetch_timeout_s: float = 2.0
    election_timeout_s: float = 1.0
    election_backoff_s: float = 1.0
    request_timeout_s: float = 30.0
    delivery_timeout_s: float = 120.0
    retry_backoff_s: float = 1.0
    reconnect_backoff_s: float = 10.0
    metadata_refresh_s: float = 1.0
    startup_s: float = 30.0
    """A restarted node's JVM start, log recovery and registration: a host allowance, not a Kafka setting."""
    slack_s: float = 3.0
    """The host's share: scheduling on two cores, container start, the heal's own duration."""

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> Timeouts:
        """From a run's resolved configuration (the history's run-start: `kafka_settings` and `workload`)."""
        config = config or {}
        ks = {**KAFKA_DEFAULTS, **{str(k): str(v) for k, v in (config.get("kafka_settings") or {}).items()}}
        w = config.get("workload") or {}

        def ms(name: str) -> float:
            try:
                return float(ks[name]) / 1000
            except (KeyError, ValueError):
                return float(KAFKA_DEFAULTS[name]) / 1000

        def client(name: str) -> float:
            v = w.get(name, CLIENT_DEFAULTS_MS[name]) if isinstance(w, Mapping) else CLIENT_DEFAULTS_MS[name]
            return float(v) / 1000

        return cls(
            session_s=ms("broker.session.timeout.ms"),
            heartbeat_s=ms("broker.heartbeat.interval.ms"),
            replica_lag_s=ms("replica.lag.time.max.ms"),
            fetch_timeout_s=ms("controller.quorum.fetch.timeout.ms"),
            election_timeout_s=ms("controller.quorum.election.timeout.ms"),
            election_backoff_s=ms("controller.quorum.election.backoff.max.ms"),
            request_timeout_s=min(client("request_timeout_ms"), client("delivery_timeout_ms")),
            delivery_timeout_s=client("delivery_timeout_ms"),
            retry_backoff_s=CLIENT_DEFAULTS_MS["retry_backoff_max_ms"] / 1000,
            reconnect_backoff_s=CLIENT_DEFAULTS_MS["reconnect_backoff_max_ms"] / 1000,
            metadata_refresh_s=CLIENT_DEFAULTS_MS["metadata_refresh_ms"] / 1000,
        )

    @property
    def failover_s(self) -> float:
        """A new quorum leader after the old one went silent (KIP-595 fetch timeout, election, back-off;
        doubled election for KIP-996's pre-vote round)."""
        return self.fetch_timeout_s + 2 * self.election_timeout_s + self.election_backoff_s

    @property
    def client_s(self) -> float:
        """A producer's way off a dead leader: the stuck request, a back-off, a metadata refresh."""
        return self.request_timeout_s + self.retry_backoff_s + self.metadata_refresh_s


def _section(d: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = d.get(name)
    return value if isinstance(value, Mapping) else {}


def _first(*candidates: Any) -> Any:
    return next((c for c in candidates if c is not None), None)


def _as_bool(value: Any, default: bool) -> bool:
    if value is None:
        return default
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value)


def _as_int(value: Any, default: int) -> int:
    try:
        return int(value) if value is not None else default
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True, slots=True)
class RunConfig:
    """A run's configuration as the model and the checker read it. Defaults are Kafka's own (producer
    ``acks=all`` with idempotence since 3.0, retries until the delivery timeout, topic RF 1 from
    ``default.replication.factor``, ``min.insync.replicas=1``, unclean election off, ELR off) on three
    combined nodes."""

    acks: Acks = "all"
    idempotence: bool = True
    retries: int | None = None
    rf: int = 1
    min_insync: int = 1
    unclean: bool = False
    elr: bool = False
    kafka_version: str | None = None
    elr_explicit: bool = False
    """ELR was set by the scenario (`[cluster] elr`, `eligible.leader.replicas.version`), not the version's
    default."""
    request_timeout_ms: int = 30000
    """The producer's request.timeout.ms (librdkafka's default 30 s)."""
    flush_every_message: bool = False
    """flush.messages=1 (topic) or log.flush.interval.messages=1 (broker): every append fsynced."""
    transactional: bool = False
    """The producers write in transactions (`[workload] kind = "txn"`)."""
    client: str = "librdkafka"
    """The workload's client library (`[workload] client`)."""
    client_version: str | None = None
    """The client's release (`[workload] client_version`); None: the installed confluent-kafka, in process."""
    partition_eof: bool = False
    """The group consumers got librdkafka's end-of-partition events (`[workload] partition_eof`), which some of
    the client's known defects need (reference_model.client_defects)."""
    cluster_transaction_version: int | None = None
    """The transaction.version feature the cluster was formatted with (`[cluster] transaction_version`); None: the
    version's default (2 on a new 4.x cluster)."""
    brokers: tuple[int, ...] = node_ids.broker_ids(3)
    controllers: tuple[int, ...] = node_ids.controller_ids(3, 0)
    """The KRaft voters (the brokers themselves when the nodes are combined)."""
    timeouts: Timeouts = field(default_factory=lambda: Timeouts())
    """The timeouts on the recovery path, from `kafka_settings` and the workload's client settings."""

    @classmethod
    def from_scenario(cls, d: Mapping[str, Any]) -> RunConfig:
        """From a resolved scenario dict (``[topic] replication_factor, min_insync_replicas,
        unclean_leader_election, configs``, ``[workload] acks, idempotence, retries, request_timeout_ms, kind, client,
        client_version, partition_eof``, ``[cluster]
        kafka_version, elr, transaction_version``, top-level ``kafka_settings``). Lenient: missing keys take Kafka's
        defaults, and flat keys (``acks``, ``rf``, ``min_insync``…) are accepted too."""
        topic, workload, cluster = _section(d, "topic"), _section(d, "workload"), _section(d, "cluster")
        topic_configs = _section(topic, "configs")
        settings = _section(d, "kafka_settings")
        acks_raw = str(_first(workload.get("acks"), d.get("acks"), "all")).strip().lower()
        acks: Acks = "all" if acks_raw in ("all", "-1") else "0" if acks_raw == "0" else "1"
        # Kafka >= 3.2 turns idempotence on by default only where it is allowed (acks=all)
        idempotence = _as_bool(_first(workload.get("idempotence"), d.get("idempotence")), acks == "all")
        retries_raw = _first(workload.get("retries"), d.get("retries"))
        kafka_version = _first(cluster.get("kafka_version"), d.get("kafka_version"))
        nodes = _as_int(_first(cluster.get("nodes")), 3)
        elr_raw = _first(
            cluster.get("elr"),
            d.get("elr"),
            settings.get("eligible.leader.replicas.version"),
        )
        elr = bool(versions.elr_default(kafka_version)) if elr_raw is None else _as_bool(elr_raw, False)
        return cls(
            acks=acks,
            idempotence=idempotence,
            retries=_as_int(retries_raw, 0) if retries_raw is not None else None,
            rf=_as_int(_first(topic.get("replication_factor"), d.get("replication_factor"), d.get("rf")), 1),
            min_insync=_as_int(
                _first(
                    topic.get("min_insync_replicas"),
                    topic_configs.get("min.insync.replicas"),
                    d.get("min_insync_replicas"),
                    d.get("min_insync"),
                    settings.get("min.insync.replicas"),
                ),
                1,
            ),
            unclean=_as_bool(
                _first(
                    topic.get("unclean_leader_election"),
                    topic_configs.get("unclean.leader.election.enable"),
                    d.get("unclean_leader_election"),
                    d.get("unclean"),
                    settings.get("unclean.leader.election.enable"),
                ),
                False,
            ),
            elr=elr,
            elr_explicit=elr_raw is not None,
            brokers=node_ids.broker_ids(nodes),
            controllers=node_ids.controller_ids(nodes, _as_int(_first(cluster.get("controllers")), 0)),
            timeouts=Timeouts.from_config(d),
            kafka_version=str(kafka_version) if kafka_version is not None else None,
            request_timeout_ms=_as_int(_first(workload.get("request_timeout_ms"), d.get("request_timeout_ms")), 30000),
            flush_every_message=_as_int(_first(topic_configs.get("flush.messages"),
                                               _section(cluster, "broker_overrides").get("log.flush.interval.messages"),
                                               settings.get("log.flush.interval.messages")), 0) == 1,
            transactional=str(_first(workload.get("kind"), d.get("kind"), "queue")) == "txn",
            client=str(_first(workload.get("client"), "librdkafka")),
            client_version=str(workload["client_version"]) if workload.get("client_version") else None,
            partition_eof=_as_bool(workload.get("partition_eof"), False),
            cluster_transaction_version=(_as_int(cluster["transaction_version"], 2)
                                         if cluster.get("transaction_version") is not None else None),
        )

    @property
    def client_transaction_version(self) -> int:
        """The transaction protocol the client asks for: 2 from the Java client 4.0 on, 1 from librdkafka, which
        does not speak 2 (confluentinc/librdkafka#5423)."""
        return 2 if self.client == "java" and versions.at_least(self.client_version,
                                                                versions.TRANSACTION_V2_FROM) else 1

    @property
    def transaction_v2(self) -> bool:
        """Whether transactions run KIP-890's protocol version 2 (an epoch bump per transaction): a client that
        asks for it and a 4.0+ broker that finalized it, as a new cluster does unless `[cluster]
        transaction_version` formats it lower (request_faults.transaction_version_2)."""
        return transaction_version_2(self.kafka_version, self.client_transaction_version,
                                     self.cluster_transaction_version)

    @classmethod
    def coerce(cls, config: Any) -> tuple[RunConfig, bool]:
        """``config`` as a RunConfig, and whether it was known (None → Kafka's defaults, not known)."""
        if isinstance(config, RunConfig):
            return config, True
        if config is None:
            return cls(), False
        if isinstance(config, Mapping):
            return cls.from_scenario(config), True
        dump = getattr(config, "model_dump", None)  # a pydantic Scenario
        if callable(dump):
            data = dump()
            if isinstance(data, Mapping):
                return cls.from_scenario(data), True
        raise TypeError(f"cannot read a run configuration from {type(config).__name__}")


