"""Symbolic fault targets, resolved against live metadata at the moment a fault fires (Jepsen's :one, :minority…).

faults/ knows clusters only through the small protocols below; kafka_chaos.cluster.KafkaCluster satisfies them.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import StringConstraints

SymbolicTarget = Literal["one", "leader", "follower", "spare", "controller", "minority", "majority", "all",
                         "previous", "txn-coordinator"]
RackTarget = Annotated[str, StringConstraints(pattern=r"^rack:[A-Za-z0-9_.-]+$")]  # every broker of one rack
Target = SymbolicTarget | RackTarget | list[int]


class Node(Protocol):
    @property
    def node_id(self) -> int: ...

    @property
    def is_broker(self) -> bool: ...
    def kill(self) -> None: ...
    def start(self) -> None: ...
    def stop(self, timeout_s: int = 30) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def drop_traffic(self, peers: Iterable[Any], direction: Literal["both", "in", "out"] = "both") -> None: ...
    def heal(self) -> None: ...
    def running(self) -> bool: ...
    @property
    def rack(self) -> str | None: ...
    @property
    def disk_mode(self) -> str | None: ...
    def lose_unsynced_writes(self, torn: str | None = None, torn_glob: str | None = None,
                             seed: int = 0) -> list[dict[str, Any]]: ...
    def fill_disk(self, free_mb: float) -> dict[str, int]: ...
    def disk_faults(self, **settings: Any) -> dict[str, Any]: ...
    def disk_files(self, file_class: str, glob: str | None = None) -> list[str]: ...
    def corrupt_disk(self, file_class: str, bits: int, seed: int, glob: str | None = None) -> dict[str, Any]: ...
    def free_disk(self) -> int: ...
    def replace_disk(self) -> dict[str, Any]: ...
    def format_disk(self, flags: str) -> dict[str, Any]: ...
    def log_offsets(self, topic: str) -> dict[str, dict[str, int | None]]: ...


class LeaderInfo(Protocol):
    @property
    def leader(self) -> int | None: ...
    @property
    def replicas(self) -> tuple[int, ...]: ...
    @property
    def isr(self) -> tuple[int, ...]: ...


class LiveCluster(Protocol):
    @property
    def nodes(self) -> Mapping[int, Node]: ...

    def partition_states(self, topic: str) -> Sequence[LeaderInfo]: ...
    def controller_id(self) -> int | None: ...


class TargetError(Exception):
    """A target that names no node (e.g. `leader` while the partition has none)."""


# --- txn-coordinator ---
def txn_workload_id(topic: str) -> str:
    """The transactional.id of the transactional workload's first producer thread on `topic`; the same
    formula as workloads.txn.transactional_id(topic, 0) (faults and workloads never import each other; a unit
    test holds the two together)."""
    return f"kafka-chaos-txn-{topic}-0"


def txn_coordinator(cluster: LiveCluster, topic: str) -> int:
    """The broker coordinating the workload's transactional.id, from metadata at the moment the fault fires."""
    finder = getattr(cluster, "txn_coordinator_id", None)
    if finder is None:
        raise TargetError("this cluster cannot look up a transaction coordinator")
    txn_id = txn_workload_id(topic)
    node = finder(txn_id)
    if node is None:
        raise TargetError(f"no broker named a coordinator for transactional.id {txn_id} (no transaction yet?)")
    return int(node)
# --- end txn-coordinator ---


def resolve(target: Target, cluster: LiveCluster, topic: str, rng: random.Random, *, brokers_only: bool = False,
            previous: list[int] | None = None) -> list[int]:
    """Node ids for `target`, now. `leader` is the leader of the topic's partition 0 (the first key) and
    `follower` one of its other replicas; `spare` a broker holding no replica of it (the one a reassignment to a
    higher replication factor adds, so that a fault can strike it before the reassignment starts); `previous` is
    the nodes of the fault before this one (to crash a node that an earlier fault isolated); `txn-coordinator` the
    coordinator of the transactional workload's transactional.id (`txn_workload_id`); `one`, `follower`, `spare`,
    `minority`, `majority` are drawn from the run's seeded random source, so a seed replays the same choices."""
    ids = sorted(n.node_id for n in cluster.nodes.values() if n.is_broker or not brokers_only)
    if isinstance(target, list):
        unknown = set(target) - set(ids)
        if unknown:
            raise TargetError(f"nodes {sorted(unknown)} do not exist; nodes are {ids}")
        return sorted(target)
    if target == "all":
        return ids
    if target.startswith("rack:"):
        rack = target.removeprefix("rack:")
        in_rack = sorted(n.node_id for n in cluster.nodes.values() if n.rack == rack)
        if not in_rack:
            raise TargetError(f"no broker is in rack {rack!r}")
        return in_rack
    if target == "one":
        return [rng.choice(ids)]
    if target == "previous":
        if not previous:
            raise TargetError("`previous` needs an earlier fault with nodes")
        return sorted(previous)
    if target in ("leader", "follower"):
        states = cluster.partition_states(topic)
        leader = states[0].leader if states else None
        if leader is None:
            raise TargetError(f"{topic}/0 has no leader right now")
        if target == "leader":
            return [leader]
        # prefer in-sync followers: a second `follower` fault then takes down a live one
        followers = sorted(r for r in states[0].isr if r != leader) or sorted(
            r for r in states[0].replicas if r != leader
        )
        if not followers:
            raise TargetError(f"{topic}/0 has no follower")
        return [rng.choice(followers)]
    if target == "spare":
        states = cluster.partition_states(topic)
        replicas = set(states[0].replicas) if states else set()
        brokers = sorted(n.node_id for n in cluster.nodes.values() if n.is_broker)
        spare = [b for b in brokers if b not in replicas]
        if not states or not spare:
            raise TargetError(f"every broker holds a replica of {topic}/0: no spare broker")
        return [rng.choice(spare)]
    if target == "txn-coordinator":
        return [txn_coordinator(cluster, topic)]
    if target == "controller":
        controller = cluster.controller_id()
        if controller is None:
            raise TargetError("no active controller right now")
        return [controller]
    shuffled = ids[:]
    rng.shuffle(shuffled)
    if target == "minority":
        return sorted(shuffled[: max(1, (len(ids) - 1) // 2)])
    if target == "majority":
        return sorted(shuffled[: len(ids) // 2 + 1])
    raise TargetError(f"unknown target {target!r}")
