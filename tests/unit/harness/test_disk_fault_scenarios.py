"""Disk faults in a scenario file: what validation refuses before any container starts, with the fix named."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.scenario import parse_scenario

VOLATILE = {"volatile_disks": "unsynced"}


def scenario(fault: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {"name": "x", "cluster": cluster, "faults": {"schedule": [fault]}}


@pytest.mark.parametrize("fault", [{"kind": "slow-disk", "delay_ms": 200}, {"kind": "disk-error", "ops": ["fsync"]},
                                   {"kind": "corrupt", "files": "index"}, {"kind": "disk-replace"}])
def test_a_disk_fault_needs_volatile_disks_and_says_how_to_get_them(fault: dict[str, Any]) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario(fault), "s.toml")
    assert f"{fault['kind']} needs the nodes' data on volatile disks" in str(err.value)
    assert 'set cluster.volatile_disks = "unsynced"' in str(err.value)
    assert parse_scenario(scenario(fault, **VOLATILE), "s.toml").faults.schedule[0].kind == fault["kind"]


@pytest.mark.parametrize("kind", ["slow-disk", "disk-replace"])
def test_a_disk_fault_against_an_external_cluster_is_refused_with_the_fix(kind: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario({"kind": kind}, bootstrap_servers="b:9092"), "s.toml")
    assert f"{kind} act on the disks kafka-chaos mounts" in str(err.value)
    assert "remove bootstrap_servers" in str(err.value)


@pytest.mark.parametrize(("target", "cluster", "why"), [
    ("controller", {"nodes": 3, "controllers": 1}, "the quorum has 1 controller,"),
    ("all", {"nodes": 5}, "target majority/all would wipe a majority"),
    ("majority", {"nodes": 3}, "target majority/all would wipe a majority"),
    ([101], {"nodes": 3, "controllers": 2}, "the quorum has 2 controllers,"),
])
def test_a_disk_replace_that_leaves_no_majority_with_the_metadata_log_is_refused(
        target: Any, cluster: dict[str, Any], why: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario({"kind": "disk-replace", "target": target}, **cluster, **VOLATILE), "s.toml")
    assert why in str(err.value) and "3 or more" in str(err.value)


@pytest.mark.parametrize(("target", "cluster"), [("follower", {"nodes": 3, "controllers": 1}),
                                                 ("controller", {"nodes": 3}), ("one", {"nodes": 5})])
def test_a_disk_replace_of_one_node_beside_a_majority_of_controllers_is_accepted(
        target: str, cluster: dict[str, Any]) -> None:
    s = parse_scenario(scenario({"kind": "disk-replace", "target": target}, **cluster, **VOLATILE), "s.toml")
    assert s.faults.schedule[0].kind == "disk-replace"


def test_an_unknown_file_class_names_the_classes_there_are() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario({"kind": "corrupt", "files": "journal"}, **VOLATILE), "s.toml")
    message = str(err.value)
    assert "faults.schedule.0.files" in message and "'journal'" in message
    assert "'segment', 'index', 'checkpoint' or 'metadata-log'" in message


def test_an_unknown_disk_operation_and_a_torn_kill_are_refused() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario({"kind": "disk-error", "ops": ["sync"]}, **VOLATILE), "s.toml")
    assert "'fsync', 'write' or 'read'" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario(scenario({"kind": "kill", "torn": "page"}, **VOLATILE), "s.toml")
    assert 'faults.schedule[0]: torn tears the last write of a power loss: it needs kind = "power-loss"' in str(
        err.value)
    torn = parse_scenario(scenario({"kind": "power-loss", "torn": "byte", "glob": "*.log"}, **VOLATILE), "s.toml")
    assert torn.faults.schedule[0].torn == "byte"


def test_a_bad_disk_fault_in_a_scenario_file_exits_2_before_any_cluster(tmp_path: Any) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[[faults.schedule]]\nkind = "slow-disk"\ndelay_ms = 200\n')
    proc = subprocess.run([sys.executable, "-m", "kafka_chaos.harness.cli", "run", str(path)], capture_output=True,
                          text=True)
    assert proc.returncode == 2
    assert "cluster.volatile_disks" in proc.stderr and "Traceback" not in proc.stderr
