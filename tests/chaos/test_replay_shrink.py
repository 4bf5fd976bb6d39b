"""Replay and shrink on real clusters. Assertions are on what the histories, resolved scenarios and
results show, never on wall-clock time."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.faults.schedule import plan
from kafka_chaos.harness.replay import RESOLVED_NAME, load_resolved, pin_nodes
from kafka_chaos.harness.run import RunResult, run_scenario
from kafka_chaos.harness.scenario import load_scenario
from kafka_chaos.harness.shrink import faults_of, shrink_run
from tests.chaos.conftest import SCENARIOS, events

pytestmark = pytest.mark.cluster

REPLAYED: dict[str, Any] = {
    "name": "replay", "seed": 11, "duration_s": 14,
    "topic": {"partitions": 1},
    "workload": {"producers": 1, "rate": 100},
    "faults": {"schedule": [
        {"kind": "pause", "target": "one", "at_s": 2, "duration_s": 2},
        {"kind": "partition", "shape": "isolate", "target": "leader", "at_s": 5, "duration_s": 3},
        {"kind": "pause", "target": "follower", "at_s": 10, "duration_s": 2},
    ]},
}


def fired(result: RunResult) -> list[tuple[str, list[int]]]:
    """(kind, nodes) of every fault start that took effect, in history order."""
    starts = {"pause", "partition"}
    return [(e["f"], e["value"]["nodes"]) for e in events(result)
            if e["process"] == "nemesis" and e["type"] == "info" and e["f"] in starts and "error" not in e]


def test_resolved_scenario_replayed_by_node_ids_hits_the_same_nodes_at_the_same_offsets(tmp_path: Path) -> None:
    first = run_scenario(REPLAYED, out=tmp_path)
    resolved = load_resolved(first.run_dir)
    recorded = plan(resolved.faults, resolved.duration_s, resolved.seed)
    assert [p.nodes for p in recorded] == [tuple(nodes) for _, nodes in fired(first)]
    # another seed would draw `one` and `follower` afresh; pinned to node ids it must not matter
    second = run_scenario(pin_nodes(resolved), out=tmp_path, seed=12)
    assert fired(second) == fired(first)
    replayed = plan(load_resolved(second.run_dir).faults, resolved.duration_s, 12)
    assert [(p.kind, p.at_s, p.duration_s, p.nodes) for p in replayed] == \
        [(p.kind, p.at_s, p.duration_s, p.nodes) for p in recorded]
    assert (second.run_dir / RESOLVED_NAME).exists()


@pytest.mark.nightly
def test_shrink_keeps_the_leader_isolation_that_loses_acks1_writes(tmp_path: Path) -> None:
    original = run_scenario(SCENARIOS / "shrink-demo.toml", out=tmp_path)
    assert original.count("lost-write") > 0, "the recorded run must show the anomaly to shrink"
    assert len(faults_of(load_resolved(original.run_dir))) == 5
    # durations and gaps are left out: they shrink the isolation to the edge of what loses writes (4 s of
    # isolation reproduced in 1 of 3 runs when measured), and this test needs a minimal.toml that reproduces
    r = shrink_run(original.run_dir, until="lost-write", budget_runs=10, attempts=1, confirm=3,
                   steps=("ddmin", "producers", "keys", "rate", "run"))
    minimal = load_scenario(r.minimal)
    kinds = [p.kind for p in faults_of(minimal)]
    assert len(kinds) <= 2 and "partition" in kinds
    assert r.runs_used <= 10
    confirm = json.loads((r.shrink_dir / "journal.json").read_text())["confirm"]
    assert len(confirm) == 3 and r.reproduced >= 1
    for t in confirm:  # each confirmation is a real run of minimal.toml; its results say what it showed
        counts = json.loads((Path(t["run_dir"]) / "results.json").read_text())["anomaly_counts"]
        assert (counts.get("lost-write", 0) > 0) == t["failed"]
    print(f"\nshrink figures: runs {r.runs_used}/{r.budget_runs}, wall {r.wall_s:g} s, "
          f"faults {r.size_before['faults']:g} -> {r.size_after['faults']:g}, size {r.size_before} -> "
          f"{r.size_after}, reproduced {r.reproduced} of {r.confirm_runs}")
