"""Reading partition state from a live cluster: leader, epoch, replicas, ISR, ELR, last-known ELR, controller.

kafka-python ≥ 3.0 is used here because its DescribeTopicPartitions (KIP-966) returns ELR and the leader epoch,
which confluent-kafka's admin client does not; its DescribeQuorum gives the active controller.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import asdict, dataclass
from typing import Any

from kafka.admin import KafkaAdminClient


@dataclass(frozen=True)
class PartitionState:
    topic: str
    partition: int
    leader: int | None
    leader_epoch: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    elr: tuple[int, ...] | None
    last_known_elr: tuple[int, ...] | None

    @property
    def key(self) -> str:
        return f"{self.topic}/{self.partition}"

    def as_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("replicas", "isr", "elr", "last_known_elr"):
            d[k] = list(d[k]) if d[k] is not None else None
        return d


class StateReader:
    """A long-lived admin connection (creating one costs a bootstrap round trip). Thread-safe."""

    def __init__(self, bootstrap_servers: str, timeout_ms: int = 3000) -> None:
        self._bootstrap = bootstrap_servers
        self._timeout_ms = timeout_ms
        self._admin: KafkaAdminClient | None = None
        self._lock = threading.Lock()

    def _client(self) -> KafkaAdminClient:
        if self._admin is None:
            self._admin = KafkaAdminClient(
                bootstrap_servers=self._bootstrap.split(","),
                request_timeout_ms=self._timeout_ms,
                client_id="kafka-chaos-observer",
            )
        return self._admin

    def _call(self, fn: str, *args: Any, attempts: int = 3) -> Any:
        """Retry with a fresh client: a paused or isolated broker times out, and a new client picks its
        target among the known brokers at random."""
        with self._lock:
            for attempt in range(attempts):
                try:
                    return getattr(self._client(), fn)(*args)
                except Exception:
                    self.close()
                    if attempt == attempts - 1:
                        raise
        raise AssertionError("unreachable")

    def describe(self, topic: str, attempts: int = 3) -> list[PartitionState]:
        result = self._call("describe_topic_partitions", [topic], attempts=attempts)
        states: list[PartitionState] = []
        for t in result["topics"]:
            if t["error_code"]:
                continue
            for p in t["partitions"]:
                leader = p["leader_id"]
                elr, lkelr = p["eligible_leader_replicas"], p["last_known_elr"]
                states.append(
                    PartitionState(
                        topic=t["name"],
                        partition=p["partition_index"],
                        leader=leader if leader is not None and leader >= 0 else None,
                        leader_epoch=p["leader_epoch"],
                        replicas=tuple(p["replica_nodes"]),
                        isr=tuple(p["isr_nodes"]),
                        elr=tuple(elr) if elr is not None else (),
                        last_known_elr=tuple(lkelr) if lkelr is not None else (),
                    )
                )
        return sorted(states, key=lambda s: s.partition)

    def quorum_leader(self) -> int | None:
        result = self._call("describe_metadata_quorum")
        for topic in result.get("topics", []):
            for p in topic.get("partitions", []):
                leader = p.get("leader_id")
                return int(leader) if leader is not None and leader >= 0 else None
        return None

    def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None


_readers: dict[str, StateReader] = {}
_readers_lock = threading.Lock()


def _reader(bootstrap: str) -> StateReader:
    with _readers_lock:
        if bootstrap not in _readers:
            _readers[bootstrap] = StateReader(bootstrap)
        return _readers[bootstrap]


def describe_partitions(bootstrap: str, topic: str) -> list[PartitionState]:
    return _reader(bootstrap).describe(topic)


def quorum_leader(bootstrap: str) -> int | None:
    return _reader(bootstrap).quorum_leader()


def forget(bootstrap: str) -> None:
    """Close the cached reader of a cluster that is going away."""
    with _readers_lock:
        reader = _readers.pop(bootstrap, None)
    if reader:
        reader.close()
