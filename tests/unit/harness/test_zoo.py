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
from kafka_chaos.harness.zoo import BUGS_DIR, ZOO_DOC, load_bug, load_zoo, markdown, run_zoo, write_doc

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
        # the sides differ by Kafka's version, or (a client's bug) by the client or its release
        assert b.bug.affected.label(b.bug.client) != b.bug.fixed.label(b.bug.client)


def test_a_client_bugs_sides_run_its_client_releases_on_one_kafka(tmp_path: Path) -> None:
    text = GOOD.replace('kafka_version = "4.0.1"', 'kafka_version = "3.8.1"\nclient_version = "2.1.0"').replace(
        'kafka_version = "4.3.1"', 'kafka_version = "3.8.1"\nclient_version = "2.1.1"')
    (b,) = load_zoo(directory=_write(tmp_path, text))
    affected, fixed = b.scenario("affected", 0), b.scenario("fixed", 0)
    assert (affected.workload.client, affected.workload.client_version) == ("librdkafka", "2.1.0")
    assert (fixed.workload.client, fixed.workload.client_version) == ("librdkafka", "2.1.1")
    assert b.bug.affected.label(b.bug.client) == "librdkafka 2.1.0 on Kafka 3.8.1"
    assert b.bug.fixed.label(b.bug.client) == "librdkafka 2.1.1 on Kafka 3.8.1"
    (tmp_path / "plain").mkdir()
    (plain,) = load_zoo(directory=_write(tmp_path / "plain", GOOD))
    assert plain.scenario("affected", 0).workload.client_version is None
    assert plain.bug.affected.label(plain.bug.client) == "4.0.1"


def test_sides_that_differ_by_the_clusters_transaction_version_say_it(tmp_path: Path) -> None:
    text = GOOD.replace('kafka_version = "4.0.1"', 'kafka_version = "4.3.1"\nclient = "java"\nclient_version = "4.1.0"'
                        '\noverrides = {"cluster.transaction_version" = 1}', 1)
    (b,) = load_zoo(directory=_write(tmp_path, text))
    assert b.scenario("affected", 0).cluster.transaction_version == 1
    assert b.scenario("fixed", 0).cluster.transaction_version is None
    assert b.bug.affected.label(b.bug.client) == "java 4.1.0 on Kafka 4.3.1, transaction.version=1"


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
    assert all(isinstance(r["wall_s"], float) for side in ("affected", "fixed") for r in e[side]["runs"])
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


def _lost_on_4_0_1(s: Scenario, out: Path) -> tuple[Path, dict[str, Any]]:
    run_dir = out / s.name
    run_dir.mkdir(parents=True)
    lost = [{"key": "k", "verdict": "violation"}] if s.cluster.kafka_version == "4.0.1" else []
    return run_dir, {"anomalies": {"lost-write": lost}}


def test_the_table_keeps_the_last_result_of_bugs_not_run_now_and_says_which_never_ran(tmp_path: Path) -> None:
    d = _write(tmp_path, GOOD)
    for i in (2, 3):
        _write(tmp_path, GOOD.replace('"X-1"', f'"X-{i}"'), f"x{i}.toml")
    every = load_zoo(directory=d)
    by_id = {b.bug.id: b for b in every}
    doc = tmp_path / "docs" / "bug-zoo.md"
    doc.parent.mkdir()
    run_zoo([by_id["X-1"]], out=tmp_path / "one", runner=_lost_on_4_0_1, doc=doc, catalogue=every)
    # another bug, one side only, into a fresh results folder: X-1's row and X-2's fixed side survive
    run_zoo([by_id["X-2"]], out=tmp_path / "two", runner=_lost_on_4_0_1, doc=doc, catalogue=every,
            sides=("affected",), attempts=1)
    run_zoo([by_id["X-2"]], out=tmp_path / "three", runner=_lost_on_4_0_1, doc=doc, catalogue=every,
            sides=("fixed",), attempts=1)
    rows = {line.split("]")[0].lstrip("| ["): line for line in doc.read_text().splitlines() if line.startswith("| [")}
    assert set(rows) == {"X-1", "X-2", "X-3"}
    assert "| 4.0.1: reproduced 2/2 (lost-write ×2) | 4.3.1: clean 2/2 |" in rows["X-1"]
    assert "| 4.0.1: reproduced 1/1 (lost-write ×1) | 4.3.1: clean 1/1 |" in rows["X-2"]
    assert "| not run | not run |" in rows["X-3"]
    sidecar = json.loads(doc.with_suffix(".json").read_text())["bugs"]
    assert sidecar["X-1"]["affected"] == {"version": "4.0.1", "attempts": 2, "reproduced": 2,
                                          "shown": {"lost-write": 2}}
    assert set(sidecar) == {"X-1", "X-2"}
    # a table rewritten with nothing run shows the same rows: the sidecar, not the run folders, holds them
    before = doc.read_text()
    write_doc(doc, every, {})
    assert doc.read_text() == before


def test_the_project_table_is_the_one_its_sidecar_and_zoo_files_make(tmp_path: Path) -> None:
    root = Path(__file__).parents[3]
    doc = tmp_path / "bug-zoo.md"
    doc.with_suffix(".json").write_text((root / ZOO_DOC.with_suffix(".json")).read_text())
    write_doc(doc, load_zoo(directory=root / BUGS_DIR), {})
    assert doc.read_text() == (root / ZOO_DOC).read_text()


def _runs(*shown: bool, wall: float | None = 100.0) -> list[dict[str, Any]]:
    return [{"reproduced": s, "wall_s": wall} for s in shown]


def test_trials_end_at_each_first_reproduction_or_at_the_cap() -> None:
    from kafka_chaos.harness.zoo import Trial, trials

    runs = _runs(True, False, True, False, False, False)
    assert trials(runs) == [Trial(1, 100.0, True), Trial(2, 200.0, True), Trial(3, 300.0, False)]
    assert trials(runs, max_runs=2) == [Trial(1, 100.0, True), Trial(2, 200.0, True), Trial(2, 200.0, False),
                                        Trial(1, 100.0, False)]
    assert trials(_runs(False, True, wall=None)) == [Trial(2, None, True)]
    assert trials([]) == []


def test_time_to_first_reproduction_per_bug_and_the_ten_minute_goal() -> None:
    from kafka_chaos.harness.zoo import reproductions

    state = {"bugs": {
        "fast": {"affected": {"version": "1", "runs": _runs(True, False, True)}},
        "slow": {"affected": {"version": "2", "runs": _runs(False, False, False, False, False, False, True)}},
        "flaky": {"affected": {"version": "3", "runs": _runs(True, False, False)}},
        "fixed-only": {"fixed": {"version": "4", "runs": _runs(False)}},
    }}
    by = {r.bug: r for r in reproductions(state, max_runs=2)}
    assert (by["fast"].mean_runs, by["fast"].mean_wall_s, by["fast"].under_goal) == (1.5, 150.0, True)
    assert (len(by["flaky"].reproduced), len(by["flaky"].trials), by["flaky"].under_goal) == (1, 2, False)
    assert (by["fixed-only"].trials, by["fixed-only"].mean_runs, by["fixed-only"].under_goal) == ([], None, False)
    (slow,) = reproductions(state, ["slow"])  # no cap: one trial of seven runs, 700 s
    assert (slow.mean_runs, slow.mean_wall_s, slow.under_goal) == (7.0, 700.0, False)
    assert [r.bug for r in reproductions(state, ["nope"])] == ["nope"] and not reproductions(state, ["nope"])[0].trials


def test_the_bench_prints_the_table_from_a_zoo_json_without_running_anything(tmp_path: Path) -> None:
    (tmp_path / "zoo").mkdir()
    state = {"bugs": {"B-1": {"affected": {"version": "3.6.2", "runs": _runs(False, True, wall=61.0)}}}}
    (tmp_path / "zoo" / "zoo.json").write_text(json.dumps(state))
    root = Path(__file__).parents[3]
    proc = subprocess.run([sys.executable, str(root / "bench" / "zoo_reproduction.py"), "--from-results",
                           str(tmp_path)], capture_output=True, text=True, cwd=root, env={"COLUMNS": "200",
                           "PYTHONPATH": str(root), "PATH": "", "PYTHONIOENCODING": "utf-8"})
    assert proc.returncode == 0, proc.stderr
    (row,) = [line for line in proc.stdout.splitlines() if "B-1" in line]
    assert [c.strip() for c in row.strip("│ ").split("│")] == ["B-1", "3.6.2", "1/1", "2.0", "122", "yes"]


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


def test_truncated_below_hw_counts_the_replicas_log_events(tmp_path: Path) -> None:
    from kafka_chaos.harness.zoo import Symptom, shown

    events = [{"time_s": 21.0, "node": 1, "kind": "truncation", "partition": "chaos-0"},
              {"time_s": 21.1, "node": 1, "kind": "truncated-below-hw", "partition": "chaos-0"},
              {"time_s": 21.1, "node": 1, "kind": "truncated-below-hw", "partition": "chaos-3"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    assert shown(Symptom(observables=["truncated-below-hw"]), {}, tmp_path) == ({"truncated-below-hw": 2}, {})
    # each observable counts its own kind only
    both = Symptom(observables=["truncated-below-hw", "epoch-checkpoint-unreadable"])
    assert shown(both, {}, tmp_path) == ({"truncated-below-hw": 2}, {})
    (tmp_path / "events.jsonl").write_text(json.dumps(events[0]) + "\n")
    assert shown(Symptom(observables=["truncated-below-hw"]), {}, tmp_path) == ({}, {})
