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


@dataclass
class CorruptNode:
    node_id: int
    files: list[str] = field(default_factory=list)
    up: bool = True
    events: list[str] = field(default_factory=list)

    def disk_files(self, file_class: str, glob: str | None = None) -> list[str]:
        return self.files

    def kill(self) -> None:
        self.up = False
        self.events.append("kill")

    def start(self) -> None:
        self.up = True
        self.events.append("start")

    def running(self) -> bool:
        return self.up

    def corrupt_disk(self, file_class: str, bits: int, seed: int, glob: str | None = None) -> dict[str, Any]:
        assert not self.up, "bits are flipped at rest, with the node down"
        self.events.append("corrupt")
        return {"file": self.files[0], "flips": [{"offset": 100, "bit": 3}] * bits}


def test_corrupt_kills_flips_at_rest_and_its_heal_starts_the_node_again() -> None:
    from kafka_chaos.faults.kinds import CorruptFault

    cfg = FaultsConfig.model_validate({"schedule": [{"kind": "corrupt", "files": "index", "bits": 3}]})
    (planned,) = plan(cfg, 60, seed=0)
    assert planned.params == {"files": "index", "bits": 3, "glob": None}
    node = CorruptNode(1, files=["chaos-0/00000000000000000000.index"])
    fault = CorruptFault(SimpleNamespace(nodes={1: node}), planned.params, seed=9)
    value = fault.start([1])
    assert value["corrupted"]["1"]["file"] == "chaos-0/00000000000000000000.index"
    assert len(value["corrupted"]["1"]["flips"]) == 3 and node.events == ["kill", "corrupt"]
    fault.heal([1])
    assert node.events[-1] == "start" and node.up


def test_corrupt_of_a_file_class_the_node_lacks_fails_before_killing_anything() -> None:
    from kafka_chaos.errors import ClusterError
    from kafka_chaos.faults.kinds import CorruptFault

    nodes = {1: CorruptNode(1, files=["chaos-0/0.log"]), 2: CorruptNode(2)}
    with pytest.raises(ClusterError, match=r"node 2 has no metadata-log file to corrupt \(metadata-log: "
                                           r"__cluster_metadata-0/\*\.log\)"):
        CorruptFault(SimpleNamespace(nodes=nodes), {"files": "metadata-log", "bits": 1}).start([1, 2])
    assert nodes[1].events == [] and nodes[2].events == []


def test_an_unknown_file_class_is_a_schedule_error_naming_the_classes() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="'segment', 'index', 'checkpoint' or 'metadata-log'"):
        FaultsConfig.model_validate({"schedule": [{"kind": "corrupt", "files": "journal"}]})
