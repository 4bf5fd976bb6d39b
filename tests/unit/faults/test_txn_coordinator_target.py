"""The `txn-coordinator` target: the coordinator of the transactional workload's transactional.id, asked when
the fault fires."""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_chaos.faults import resolve
from kafka_chaos.faults.targets import TargetError, txn_workload_id
from kafka_chaos.workloads.txn import transactional_id


@dataclass
class Node:
    node_id: int
    is_broker: bool = True


@dataclass
class CoordinatedCluster:
    coordinators: dict[str, int | None]
    asked: list[str] = field(default_factory=list)
    nodes: dict[int, Node] = field(default_factory=lambda: {i: Node(i) for i in (1, 2, 3)})

    def partition_states(self, topic: str) -> list[object]:
        return []

    def controller_id(self) -> int | None:
        return None

    def txn_coordinator_id(self, txn_id: str) -> int | None:
        self.asked.append(txn_id)
        return self.coordinators.get(txn_id)


def test_the_target_names_the_workloads_transactional_id() -> None:
    assert txn_workload_id("chaos") == transactional_id("chaos", 0)


def test_txn_coordinator_resolves_at_fault_time() -> None:
    cluster: Any = CoordinatedCluster({transactional_id("t", 0): 2})  # a fake: only what resolve asks
    rng = random.Random(0)
    assert resolve("txn-coordinator", cluster, "t", rng) == [2]
    cluster.coordinators[transactional_id("t", 0)] = 3  # moved (e.g. its __transaction_state leader changed)
    assert resolve("txn-coordinator", cluster, "t", rng) == [3]
    assert cluster.asked == [transactional_id("t", 0)] * 2
    with pytest.raises(TargetError, match="no broker named a coordinator"):
        resolve("txn-coordinator", cluster.__class__({}), "t", rng)
