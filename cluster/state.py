"""Reading partition state from a live cluster: leader, epoch, replicas, ISR, ELR, last-known ELR, controller.

kafka-python ≥ 3.0 is used here because its DescribeTopicPartitions (KIP-966) returns ELR and the leader epoch,
which confluent-kafka's admin client does not; its DescribeQuorum gives the active controller.

Every broker answers DescribeTopicPartitions from its own metadata cache, and a broker cut off from the controllers
keeps serving the view it had when it was cut off (an isolated follower still lists itself in the ISR). A client
sticks to one connection, so a reader that happened to pick that broker would see the stale view for as long as
the fault lasts. The reader therefore asks every broker at once and keeps, per partition, the view at the highest
leader epoch that the most brokers share.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from typing import Any

# kafka-python 3.0 reads each of its protocol schemas through importlib.resources' legacy read_text when it is
# imported: two DeprecationWarnings per schema (over 200) in the output of every user's suite that loads the pytest
# plugin, about code neither they nor kafka-chaos can change. Only those two messages are silenced, only here.
with warnings.catch_warnings():
    warnings.filterwarnings("ignore", r"(open|read)_text is deprecated", DeprecationWarning)
    from kafka import errors
    from kafka.admin import KafkaAdminClient
    from kafka.protocol.admin import (
        DescribeQuorumRequest,
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
    )
    from kafka.protocol.metadata import MetadataRequest

# kafka-python logs every refused connection and failed metadata refresh at WARNING/ERROR; under a nemesis those
# are the expected state of affairs, and the harness reports what matters itself.
logging.getLogger("kafka").setLevel(logging.CRITICAL)


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
                # a restarted broker must come back into the list of brokers asked, within seconds
                metadata_max_age_ms=2000,
                reconnect_backoff_max_ms=1000,
            )
        return self._admin

    def _call(self, fn: str, *args: Any, attempts: int = 3) -> Any:
        """Retry with a fresh client: a paused or isolated broker times out, and a new client picks its
        target among the known brokers at random."""
        with self._lock:
            for attempt in range(attempts):
                try:
                    return getattr(self, fn)(*args)
                except Exception:
                    self.close()
                    if attempt == attempts - 1:
                        raise
        raise AssertionError("unreachable")

    def _describe_on_every_broker(self, topic: str) -> dict[int, list[PartitionState]]:
        """DescribeTopicPartitions sent to each known broker concurrently; brokers that fail or time out are left
        out. kafka-python's public call always goes to one connection, so this uses its connection manager's
        `send(request, node_id=...)` — the one way it offers to address a given broker."""
        admin = self._client()
        manager = admin._manager
        node_ids = sorted(b.node_id for b in manager.cluster.brokers())
        if not node_ids:  # no metadata yet: one public call fetches it
            admin.describe_cluster()
            node_ids = sorted(b.node_id for b in manager.cluster.brokers())

        def describe_topic_partitions() -> Any:
            return DescribeTopicPartitionsRequest(topics=[DescribeTopicPartitionsRequest.TopicRequest(name=topic)],
                                                  response_partition_limit=2000, cursor=None)

        def metadata() -> Any:
            return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                   allow_auto_topic_creation=False)

        async def ask_all() -> dict[int, Any]:
            # One deadline for all: a dead broker's connection attempt must not hold up the live brokers' answers.
            deadline = time.monotonic() + self._timeout_ms / 1000

            async def ask(nodes: Iterable[int], request: Callable[[], Any]) -> tuple[dict[int, Any], list[int]]:
                pending = {node: manager.send(request(), node_id=node, request_timeout_ms=self._timeout_ms)
                           for node in nodes}
                answers: dict[int, Any] = {}
                older: list[int] = []
                for node, future in pending.items():
                    remaining_ms = max(0, int((deadline - time.monotonic()) * 1000))
                    try:
                        answers[node] = await manager.wait_for(future, remaining_ms)
                    except errors.IncompatibleBrokerVersion:
                        older.append(node)
                    except Exception:
                        pass
                return answers, older

            answers, older = await ask(node_ids, describe_topic_partitions)
            if older:  # Kafka before 3.8 has no DescribeTopicPartitions (KIP-966): Metadata, which has no ELR
                answers.update((await ask(older, metadata))[0])
            return answers

        answers = manager.run(ask_all)
        views = {node: _states_of(response) for node, response in answers.items()}
        views = {node: states for node, states in views.items() if states}
        if not views:
            raise ConnectionError(f"no broker of {node_ids} described {topic}")
        return views

    def describe(self, topic: str, attempts: int = 3) -> list[PartitionState]:
        views: dict[int, list[PartitionState]] = self._call("_describe_on_every_broker", topic, attempts=attempts)
        return freshest(views.values())

    def quorum_leader(self) -> int | None:
        result = self._call("_describe_metadata_quorum")
        for topic in result.get("topics", []):
            for p in topic.get("partitions", []):
                leader = p.get("leader_id")
                return int(leader) if leader is not None and leader >= 0 else None
        return None

    def quorum(self) -> dict[str, Any] | None:
        """DescribeQuorum of the metadata log (KIP-595/KIP-853): see `quorum_of`."""
        return quorum_of(self._call("_describe_metadata_quorum"))

    def registrations(self) -> dict[str, list[int]] | None:
        """The brokers registered with the controller, fenced or not, as the answering broker's metadata has
        them: DescribeCluster v2 with `include_fenced_brokers` (KIP-1073, Kafka 4.0+); see `registrations_of`."""
        return registrations_of(self._call("_describe_cluster", attempts=1))

    def _describe_cluster(self) -> Any:
        return self._client().describe_cluster()

    # --- transaction coordinator (the `txn-coordinator` fault target) ---
    def txn_coordinator(self, transactional_id: str) -> int | None:
        return self._call("_find_txn_coordinator", transactional_id)  # type: ignore[no-any-return]

    def _find_txn_coordinator(self, transactional_id: str) -> int | None:
        """FindCoordinator(TRANSACTION) asked now, broker by broker until one answers: kafka-python's own
        lookup caches coordinators, and a fault needs the coordinator of this moment."""
        from kafka.protocol.metadata.find_coordinator import CoordinatorType, FindCoordinatorRequest

        admin = self._client()
        manager = admin._manager
        if not manager.cluster.brokers():
            admin.describe_cluster()
        node_ids = sorted(b.node_id for b in manager.cluster.brokers())
        request = FindCoordinatorRequest(key=transactional_id, key_type=int(CoordinatorType.TRANSACTION),
                                         coordinator_keys=[transactional_id])

        async def ask() -> int | None:
            for node in node_ids:
                try:
                    future = manager.send(request, node_id=node, request_timeout_ms=self._timeout_ms)
                    response = await manager.wait_for(future, self._timeout_ms)
                except Exception:
                    continue  # a dead or cut-off broker: ask the next
                found = [(c.error_code, c.node_id) for c in getattr(response, "coordinators", None) or []]
                found = found or [(response.error_code, response.node_id)]  # versions before 4 answer one key
                for error, node_id in found:
                    if not error and node_id >= 0:
                        return int(node_id)
            return None

        return manager.run(ask)  # type: ignore[no-any-return]
    # --- end transaction coordinator ---

    def _describe_metadata_quorum(self) -> Any:
        """DescribeQuorum of the metadata log, as kafka-python's dict. Sent here rather than through its
        describe_metadata_quorum, which reads each partition's error_message: a field older response versions do
        not have (Kafka 3.4 answers without it, and that call then fails on every version before it)."""
        topic = DescribeQuorumRequest.TopicData
        request = DescribeQuorumRequest(topics=[
            topic(topic_name="__cluster_metadata", partitions=[topic.PartitionData(partition_index=0)])])
        manager = self._client()._manager

        async def ask() -> Any:
            return await manager.send(request)

        response = manager.run(ask)
        if response.error_code:
            raise errors.for_code(response.error_code)(getattr(response, "error_message", None) or "")
        return response.to_dict()

    def close(self) -> None:
        if self._admin is not None:
            with contextlib.suppress(Exception):
                self._admin.close()
            self._admin = None


def _states_of(response: Any) -> list[PartitionState]:
    states: list[PartitionState] = []
    for t in response.topics:
        if t.error_code:
            continue
        for p in t.partitions:
            if p.error_code:
                continue
            leader = p.leader_id
            known = isinstance(response, DescribeTopicPartitionsResponse)  # a Metadata answer says nothing of ELR
            elr, lkelr = (p.eligible_leader_replicas, p.last_known_elr) if known else (None, None)
            states.append(
                PartitionState(
                    topic=t.name,
                    partition=p.partition_index,
                    leader=leader if leader is not None and leader >= 0 else None,
                    leader_epoch=p.leader_epoch,
                    replicas=tuple(p.replica_nodes),
                    isr=tuple(p.isr_nodes),
                    elr=(tuple(elr) if elr else ()) if known else None,
                    last_known_elr=(tuple(lkelr) if lkelr else ()) if known else None,
                )
            )
    return sorted(states, key=lambda s: s.partition)


def freshest(views: Iterable[list[PartitionState]]) -> list[PartitionState]:
    """Per partition, the state at the highest leader epoch that the most brokers report (first seen on a tie).

    A new leader always comes with a higher epoch, so a cut-off broker's old leader loses; an ISR change keeps the
    epoch, and then the brokers still in touch with the controllers outvote the cut-off minority."""
    by_partition: dict[int, list[PartitionState]] = {}
    for view in views:
        for state in view:
            by_partition.setdefault(state.partition, []).append(state)
    chosen: list[PartitionState] = []
    for partition in sorted(by_partition):
        candidates = by_partition[partition]
        top_epoch = max(s.leader_epoch if s.leader_epoch is not None else -1 for s in candidates)
        at_top = [s for s in candidates if (s.leader_epoch if s.leader_epoch is not None else -1) == top_epoch]
        chosen.append(Counter(at_top).most_common(1)[0][0])
    return chosen


_readers: dict[str, StateReader] = {}
_readers_lock = threading.Lock()


def _reader(bootstrap: str) -> StateReader:
    with _readers_lock:
        if bootstrap not in _readers:
            _readers[bootstrap] = StateReader(bootstrap)
        return _readers[bootstrap]


def describe_partitions(bootstrap: str, topic: str) -> list[PartitionState]:
    return _reader(bootstrap).describe(topic)


def quorum_of(response: Any) -> dict[str, Any] | None:
    """`{"leader", "epoch", "high_watermark", "voters": [{"id", "log_end_offset", "last_fetch_timestamp",
    "last_caught_up_timestamp"}]}` from a DescribeQuorum response (kafka-python's dict); None without one.
    A voter's lag is the high watermark minus its log end offset; timestamps are the leader's clock, ms (-1:
    unknown)."""
    for topic in (response or {}).get("topics", []):
        for p in topic.get("partitions", []):
            leader = p.get("leader_id")
            return {
                "leader": int(leader) if leader is not None and leader >= 0 else None,
                "epoch": p.get("leader_epoch"),
                "high_watermark": p.get("high_watermark"),
                "voters": [
                    {"id": v.get("replica_id"), "log_end_offset": v.get("log_end_offset"),
                     "last_fetch_timestamp": v.get("last_fetch_timestamp", -1),
                     "last_caught_up_timestamp": v.get("last_caught_up_timestamp", -1)}
                    for v in p.get("current_voters", [])
                ],
            }
    return None


def registrations_of(response: Any) -> dict[str, list[int]] | None:
    """`{"unfenced": [ids], "fenced": [ids]}` from a DescribeCluster response (kafka-python's dict); None without
    a broker list. A broker that has not registered (or whose registration the controller removed) is in neither."""
    brokers = (response or {}).get("brokers")
    if not isinstance(brokers, list):
        return None
    ids = [(int(b["broker_id"]), bool(b.get("is_fenced", False))) for b in brokers if "broker_id" in b]
    return {"unfenced": sorted(i for i, fenced in ids if not fenced),
            "fenced": sorted(i for i, fenced in ids if fenced)}


def quorum_leader(bootstrap: str) -> int | None:
    return _reader(bootstrap).quorum_leader()


def txn_coordinator(bootstrap: str, transactional_id: str) -> int | None:
    """The broker coordinating `transactional_id` now (None when no broker could say)."""
    return _reader(bootstrap).txn_coordinator(transactional_id)


def forget(bootstrap: str) -> None:
    """Close the cached reader of a cluster that is going away."""
    with _readers_lock:
        reader = _readers.pop(bootstrap, None)
    if reader:
        reader.close()
