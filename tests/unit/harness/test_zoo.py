"""The known-bug zoo as data: every file in scenarios/bugs/ validates, bad files are named before any container
starts, and a zoo run records per side what showed, into zoo.json, index.html and the markdown table."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.scenario import Scenario
from kafka_chaos.harness.zoo import BUGS_DIR, load_bug, load_zoo, markdown, run_zoo

GOOD = """
id = "X-1"
title = "a bug"
links = ["https://example.invalid/X-1"]
attempts = 2
[affected]
kafka_version = "4.0.1"
[fixed]
kafka_version = "4.3.1"
overrides = {"workload.rate" = 50}
[symptom]
anomalies = ["lost-write"]
[scenario]
seed = 5
duration_s = 10
[scenario.cluster]
nodes = 3
"""


def _write(tmp_path: Path, text: str, name: str = "x.toml") -> Path:
    d = tmp_path / "bugs"
    d.mkdir(exist_ok=True)
    (d / name).write_text(text)
    return d


def test_every_zoo_file_of_the_project_validates() -> None:
    bugs = load_zoo()
    assert bugs and len({b.bug.id for b in bugs}) == len(bugs)
    for b in bugs:
        for side in ("affected", "fixed"):
            s = b.scenario(side, 0)
            assert s.cluster.kafka_version == b.bug.side(side).kafka_version
        assert b.bug.affected.kafka_version != b.bug.fixed.kafka_version


def test_each_side_runs_its_version_with_its_overrides_and_a_seed_per_attempt(tmp_path: Path) -> None:
    (b,) = load_zoo(directory=_write(tmp_path, GOOD))
    affected, fixed = b.scenario("affected", 0), b.scenario("fixed", 1)
    assert (affected.cluster.kafka_version, affected.seed, affected.workload.rate) == ("4.0.1", 5, 200)
    assert (fixed.cluster.kafka_version, fixed.seed, fixed.workload.rate) == ("4.3.1", 6, 50)


@pytest.mark.parametrize(("change", "says"), [
    (("attempts = 2", "attempts = 2\ncolour = 'red'"), "colour"),
    (('anomalies = ["lost-write"]', 'anomalies = ["lost-writes"]'), "no anomaly named ['lost-writes']"),
    (("nodes = 3", "nodes = 3\nbogus = 1"), "bogus"),
    (('overrides = {"workload.rate" = 50}', 'overrides = {"topic.replication_factor" = 5}'), "fixed side"),
    (('title = "a bug"', 'title = "a bug'), "not valid TOML"),
])
def test_a_bad_zoo_file_is_named_with_its_field(tmp_path: Path, change: tuple[str, str], says: str) -> None:
    d = _write(tmp_path, GOOD.replace(*change))
    with pytest.raises(ScenarioError, match=None) as err:
        load_zoo(directory=d)
    assert says in str(err.value) and "x.toml" in str(err.value)


def test_an_unknown_id_and_an_empty_folder_say_what_there_is(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match=r"no zoo file has the id \['nope'\]; the zoo has \['X-1'\]"):
        load_zoo(["nope"], _write(tmp_path, GOOD))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScenarioError, match="no zoo files"):
        load_zoo(directory=tmp_path / "empty")


def test_the_cli_refuses_a_bad_zoo_file_with_exit_2_and_no_traceback(tmp_path: Path) -> None:
    d = _write(tmp_path, GOOD.replace('anomalies = ["lost-write"]', 'anomalies = ["two-controllers"]'))
    proc = subprocess.run([sys.executable, "-m", "kafka_chaos.harness.cli", "zoo", "--bugs", str(d), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True)
    assert proc.returncode == 2, proc.stderr
    assert "two-controllers" in proc.stderr and "Traceback" not in proc.stderr
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_zoo_run_counts_per_side_and_writes_its_table(tmp_path: Path) -> None:
    (b,) = load_zoo(directory=_write(tmp_path, GOOD))
    ran: list[tuple[str, int]] = []

    def runner(s: Scenario, out: Path) -> tuple[Path, dict[str, Any]]:
        ran.append((str(s.cluster.kafka_version), s.seed))
        run_dir = out / s.name
        run_dir.mkdir(parents=True)
        lost = s.cluster.kafka_version == "4.0.1" and s.seed == 5  # the first affected attempt only
        insts = [{"key": "k", "verdict": "permitted"}] * 2 if lost else []
        return run_dir, {"anomalies": {"lost-write": insts}, "violations": [], "complete": True}

    doc = tmp_path / "bug-zoo.md"
    state = run_zoo([b], out=tmp_path / "out", runner=runner, doc=doc)
    assert ran == [("4.0.1", 5), ("4.0.1", 6), ("4.3.1", 5), ("4.3.1", 6)]
    e = state["bugs"]["X-1"]
    assert (e["affected"]["reproduced"], e["affected"]["attempts"]) == (1, 2)
    assert (e["fixed"]["reproduced"], e["fixed"]["attempts"]) == (0, 2)
    assert e["affected"]["runs"][0]["shown"] == {"lost-write": 2}
    assert e["affected"]["runs"][0]["verdicts"] == {"permitted": 2}
    table = doc.read_text()
    assert "| 4.0.1: reproduced 1/2 (lost-write ×2) | 4.3.1: clean 2/2 |" in table
    assert json.loads((tmp_path / "out" / "zoo" / "zoo.json").read_text()) == state
    page = (tmp_path / "out" / "zoo" / "index.html").read_text()
    assert "X-1" in page and "zoo-X-1-affected-0/report.html" in page
    # a later run of another bug keeps this one's row
    other = load_bug(_write(tmp_path, GOOD.replace('"X-1"', '"X-2"'), "y.toml") / "y.toml")
    state = run_zoo([other], out=tmp_path / "out", runner=runner, sides=("fixed",))
    assert set(state["bugs"]) == {"X-1", "X-2"} and "affected" not in state["bugs"]["X-2"]
    assert "not run" in markdown(state)


def test_the_project_zoo_folder_is_where_the_cli_looks() -> None:
    assert (Path(__file__).parents[3] / BUGS_DIR).is_dir()


def test_two_raft_leaders_counts_overlaps_long_enough_and_ends_a_leader_at_its_kill(tmp_path: Path) -> None:
    from kafka_chaos.harness.zoo import Symptom, shown

    events = [{"time_s": 1, "node": 1, "kind": "raft-state", "state": "Leader", "epoch": 1},
              {"time_s": 10, "node": 2, "kind": "raft-state", "state": "Leader", "epoch": 2},
              {"time_s": 14, "node": 1, "kind": "raft-state", "state": "Follower", "epoch": 2}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    symptom = Symptom(observables=["two-raft-leaders"], min_overlap_s=3)
    assert shown(symptom, {}, tmp_path) == ({"two-raft-leaders": 1}, {})
    assert shown(Symptom(observables=["two-raft-leaders"], min_overlap_s=5), {}, tmp_path) == ({}, {})
    killed = {"faults": {"windows": [{"f": "kill", "nodes": [1], "start": int(11e9), "end": None}]}}
    assert shown(symptom, killed, tmp_path) == ({}, {})  # node 1 died a second after node 2 won
    with pytest.raises(ValueError, match="anomalies, observables, or both"):
        Symptom()


def test_epoch_checkpoint_unreadable_counts_the_brokers_log_events(tmp_path: Path) -> None:
    from kafka_chaos.harness.zoo import Symptom, shown

    events = [{"time_s": 44.2, "node": 2, "kind": "epoch-checkpoint-unreadable", "partition": "chaos-1"},
              {"time_s": 44.3, "node": 2, "kind": "epoch-checkpoint-unreadable", "partition": "chaos-4"},
              {"time_s": 45.0, "node": 2, "kind": "server-started"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    symptom = Symptom(observables=["epoch-checkpoint-unreadable"])
    assert shown(symptom, {}, tmp_path) == ({"epoch-checkpoint-unreadable": 2}, {})
    (tmp_path / "events.jsonl").write_text(json.dumps(events[2]) + "\n")
    assert shown(symptom, {}, tmp_path) == ({}, {})
