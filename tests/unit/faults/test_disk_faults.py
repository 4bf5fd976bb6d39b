# mypy: disable-error-code="arg-type"
# (the fakes implement only the part of the cluster protocol the disk faults use)
"""Disk fault kinds without a disk: their plan parameters, what they ask each node's disk, what they record."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_chaos.faults import FaultsConfig, plan
from kafka_chaos.faults.kinds import DiskFault
from kafka_chaos.faults.registry import KINDS, taking_down


@dataclass
class DiskNode:
    node_id: int
    up: bool = True
    asked: list[dict[str, Any]] = field(default_factory=list)
    starts: int = 0

    def disk_faults(self, **settings: Any) -> dict[str, Any]:
        self.asked.append(settings)
        return {"armed": settings}

    def running(self) -> bool:
        return self.up

    def start(self) -> None:
        self.up, self.starts = True, self.starts + 1


@dataclass
class DiskCluster:
    nodes: dict[int, DiskNode]


def test_disk_kinds_need_volatile_disks_and_do_not_count_as_nodes_down() -> None:
    for kind in ("slow-disk", "disk-error"):
        assert KINDS[kind].needs == {"volatile-disks"} and KINDS[kind].family == "disk"
    assert not {"slow-disk", "disk-error"} & taking_down()


def test_the_plan_carries_each_disk_kinds_options_and_round_trips_as_a_schedule() -> None:
    cfg = FaultsConfig.model_validate({"schedule": [
        {"kind": "slow-disk", "at_s": 1, "delay_ms": 200},
        {"kind": "disk-error", "at_s": 2, "ops": ["fsync"], "glob": "chaos-*/*"},
        {"kind": "disk-error", "at_s": 3},
    ]})
    p = plan(cfg, 60, seed=0)
    assert [x.params for x in p] == [{"delay_ms": 200}, {"ops": ["fsync"], "glob": "chaos-*/*"},
                                     {"ops": ["fsync", "write", "read"], "glob": None}]
    assert plan(FaultsConfig.from_plan(p), 60, seed=0) == p


def test_slow_disk_arms_every_target_and_its_heal_disarms_and_records_what_the_disk_did() -> None:
    cluster = DiskCluster({1: DiskNode(1), 2: DiskNode(2)})
    fault = DiskFault("slow-disk", cluster, {"delay_ms": 200})
    started = fault.start([1, 2])
    assert started["delay_ms"] == 200 and set(started["disks"]) == {"1", "2"}
    assert cluster.nodes[1].asked == [{"fsync_delay_ms": 200}]
    healed = fault.heal([1, 2])
    assert cluster.nodes[2].asked[-1] == {"fsync_delay_ms": 0, "eio": None}
    assert healed["started"] == [] and set(healed["disks"]) == {"1", "2"}


def test_disk_error_heal_starts_a_broker_that_stopped_on_its_failed_log_directory() -> None:
    cluster = DiskCluster({1: DiskNode(1), 2: DiskNode(2)})
    fault = DiskFault("disk-error", cluster, {"ops": ["write"], "glob": None})
    fault.start([1])
    assert cluster.nodes[1].asked == [{"eio": {"ops": ["write"], "glob": None}}]
    cluster.nodes[1].up = False  # Kafka halted it: its only log directory went offline
    assert fault.heal([1])["started"] == [1] and cluster.nodes[1].starts == 1


def test_an_unknown_disk_operation_is_a_schedule_error() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        FaultsConfig.model_validate({"schedule": [{"kind": "disk-error", "ops": ["rename"]}]})


@dataclass
class PowerNode:
    node_id: int
    disk_mode: str = "unsynced"
    asked: list[tuple[Any, ...]] = field(default_factory=list)

    def kill(self) -> None:
        pass

    def lose_unsynced_writes(self, torn: str | None = None, torn_glob: str | None = None,
                             seed: int = 0) -> list[dict[str, Any]]:
        self.asked.append((torn, torn_glob))
        return [{"path": "t-0/0.log", "size_before": 9000, "size_after": 8192, "blocks_restored": 0,
                 "torn_offset": 4096, "torn_length": 4904, "torn_kept": 4096}]


def test_a_torn_power_loss_is_planned_as_an_option_and_records_what_each_file_kept() -> None:
    from kafka_chaos.faults.kinds import PowerLossFault

    cfg = FaultsConfig.model_validate({"schedule": [{"kind": "power-loss", "torn": "page", "glob": "*.log"},
                                                    {"kind": "power-loss", "at_s": 1}]})
    torn, plain = plan(cfg, 60, seed=0)
    assert torn.params == {"torn": "page", "glob": "*.log"} and plain.params == {}
    node = PowerNode(2)
    value = PowerLossFault(SimpleNamespace(nodes={2: node}), torn="page", torn_glob="*.log", seed=5).start([2])
    assert node.asked == [("page", "*.log")]
    assert value["torn"] == "page"
    assert value["lost"]["2"]["torn_writes"] == [{"path": "t-0/0.log", "offset": 4096, "length": 4904, "kept": 4096}]
