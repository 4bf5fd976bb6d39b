"""The shrinker against fake oracles: ddmin's promise, the K-attempts rule, the budget, resume, and
bad input. The real-cluster shrink is tests/chaos/test_shrink_real.py."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from kafka_chaos.errors import ShrinkError
from kafka_chaos.faults.schedule import FaultsConfig, FaultSpec, PlannedFault, plan
from kafka_chaos.harness.replay import load_resolved, write_resolved
from kafka_chaos.harness.scenario import Scenario, load_scenario, parse_scenario
from kafka_chaos.harness.shrink import Shrinker, TryResult, candidate_key, ddmin, faults_of

CULPRITS = {3, 7}
N = 10


def _scenario() -> Scenario:
    # fault i is told apart by its target [i], which no shrinking step changes
    faults = FaultsConfig(schedule=[FaultSpec(kind="pause", target=[i], at_s=2 + 2 * i, duration_s=4)
                                    for i in range(N)])
    return parse_scenario({"name": "ten", "seed": 1, "duration_s": 40, "faults": faults.model_dump()})


def _ids(planned: list[PlannedFault]) -> set[int]:
    return {p.target[0] for p in planned if isinstance(p.target, list)}


def _oracle_fails(s: Scenario) -> bool:
    return _ids(faults_of(s)) >= CULPRITS


def _run_dir(tmp_path: Path, *, counts: dict[str, int] | None = None, violations: bool = True) -> Path:
    run_dir = tmp_path / "run"
    run_dir.mkdir(parents=True)
    s = _scenario()
    write_resolved(run_dir, s, plan(s.faults, s.duration_s, s.seed), run_id="run", image_id="sha256:x")
    results = {"valid": not violations, "complete": True,
               "anomaly_counts": counts if counts is not None else {"lost-write": 3},
               "violations": [{"name": "lost-write"}] if violations else []}
    (run_dir / "results.json").write_text(json.dumps(results))
    return run_dir


class Runner:
    """A fake cluster: a run fails iff faults 3 and 7 are both present (optionally only on some tries)."""

    def __init__(self, flaky_every: int = 1, stop_after: int | None = None) -> None:
        self.calls = 0
        self.tries: Counter[str] = Counter()
        self.flaky_every, self.stop_after = flaky_every, stop_after

    def __call__(self, s: Scenario) -> TryResult:
        if self.stop_after is not None and self.calls >= self.stop_after:
            raise KeyboardInterrupt
        self.calls += 1
        key = candidate_key(s)
        self.tries[key] += 1
        failed = _oracle_fails(s) and self.tries[key] % self.flaky_every == 0
        return TryResult(failed, None, {"lost-write": 1} if failed else {})


def test_ddmin_finds_exactly_the_two_culprits_within_its_promised_calls():
    planned = plan(_scenario().faults, 40, 1)
    asked: list[frozenset[int]] = []

    def fails(subset: list[PlannedFault]) -> bool:
        asked.append(frozenset(_ids(subset)))
        return _ids(subset) >= CULPRITS

    minimal = ddmin(planned, fails)
    assert _ids(minimal) == CULPRITS
    assert len(asked) == len(set(asked)), "a subset was asked twice"
    assert len(asked) <= N * N + 3 * N  # ddmin's worst case (Zeller & Hildebrandt 2002)


def test_ddmin_with_one_culprit_needs_logarithmically_many_calls():
    calls = 0

    def fails(subset: list[int]) -> bool:
        nonlocal calls
        calls += 1
        return 5 in subset

    assert ddmin(list(range(16)), fails) == [5]
    assert calls <= 2 * 4  # two halves asked per level, log2(16) levels


def test_shrink_finds_the_culprits_then_shrinks_the_rest(tmp_path):
    run_dir = _run_dir(tmp_path)
    runner = Runner()
    r = Shrinker(run_dir, attempts=2, budget_runs=200, confirm=3, runner=runner).run()
    minimal = load_scenario(r.minimal)
    assert _ids(faults_of(minimal)) == CULPRITS
    assert r.size_before["faults"] == N and r.size_after["faults"] == 2
    assert minimal.workload.producers == 1 and minimal.topic.partitions == 1
    assert minimal.duration_s < 40 and all(p.duration_s < 4 for p in faults_of(minimal))
    assert (r.reproduced, r.confirm_runs) == (3, 3)
    assert r.runs_used == runner.calls and not r.budget_exhausted
    html = (run_dir / "shrink" / "index.html").read_text()
    assert "minimal.toml" in html and "ddmin" in html and "3 of 3" in html


def test_a_candidate_fails_if_any_of_its_k_tries_fails(tmp_path):
    # the culprits show the anomaly only on every second try of a candidate
    r = Shrinker(_run_dir(tmp_path / "a"), attempts=2, budget_runs=500, confirm=0,
                 runner=Runner(flaky_every=2)).run()
    assert r.size_after["faults"] == 2
    journal = json.loads((r.shrink_dir / "journal.json").read_text())
    for c in journal["candidates"]:
        assert len(c["tries"]) <= 2
        if c["result"] == "pass":
            assert len(c["tries"]) == 2  # a pass is only "did not fail in K tries"
    # with one try per candidate, no smaller candidate ever fails: nothing is removed
    r1 = Shrinker(_run_dir(tmp_path / "b"), attempts=1, budget_runs=500, confirm=0,
                  runner=Runner(flaky_every=2)).run()
    assert r1.size_after == r1.size_before


def test_budget_is_respected_confirmation_included(tmp_path):
    runner = Runner()
    r = Shrinker(_run_dir(tmp_path), attempts=2, budget_runs=6, confirm=2, runner=runner).run()
    assert runner.calls == r.runs_used <= 6
    assert r.budget_exhausted
    assert r.confirm_runs == 2  # the runs kept for confirmation were not spent by the search
    assert load_scenario(r.minimal).faults.schedule  # the smallest failing candidate so far


def test_resume_continues_where_it_stopped(tmp_path):
    whole = Shrinker(_run_dir(tmp_path / "whole"), attempts=2, budget_runs=200, confirm=2, runner=Runner()).run()

    run_dir = _run_dir(tmp_path / "cut")
    with pytest.raises(KeyboardInterrupt):
        Shrinker(run_dir, attempts=2, budget_runs=200, confirm=2, runner=Runner(stop_after=7)).run()
    journal = json.loads((run_dir / "shrink" / "journal.json").read_text())
    assert sum(len(c["tries"]) for c in journal["candidates"]) == 7
    second = Runner()
    resumed = Shrinker(run_dir, attempts=2, budget_runs=200, confirm=2, runner=second).run()
    assert second.calls == whole.runs_used - 7  # nothing that was answered is run again
    assert resumed.runs_used == whole.runs_used
    assert load_scenario(resumed.minimal).faults == load_scenario(whole.minimal).faults


@pytest.mark.parametrize(
    ("setup", "until", "says"),
    [
        ("passed", None, "no violation (it passed)"),
        ("passed", "lost-write", "no lost-write"),
        ("failed", "lost-writes", "is not an anomaly kafka-chaos knows"),
        ("no-resolved", None, "holds no scenario.resolved.toml"),
        ("missing", None, "is not a folder"),
        ("unchecked", None, "the run was never checked"),
        ("damaged", None, "is damaged"),
    ],
)
def test_bad_input_is_one_paragraph(tmp_path, setup, until, says):
    if setup == "missing":
        run_dir = tmp_path / "nope"
    elif setup == "passed":
        run_dir = _run_dir(tmp_path, counts={}, violations=False)
    else:
        run_dir = _run_dir(tmp_path)
        if setup == "no-resolved":
            (run_dir / "scenario.resolved.toml").unlink()
        elif setup == "unchecked":
            (run_dir / "results.json").unlink()
        elif setup == "damaged":
            (run_dir / "results.json").write_text('{"valid": tru')  # cut off as it was written
    with pytest.raises(ShrinkError) as err:
        Shrinker(run_dir, until=until, runner=Runner())
    assert says in str(err.value) and "\n" not in str(err.value)
    assert not (run_dir / "shrink").exists()


def test_cli_bad_input_exits_2_without_traceback(tmp_path):
    run_dir = _run_dir(tmp_path, counts={"lost-write": 0}, violations=False)
    proc = subprocess.run([sys.executable, "-m", "kafka_chaos.harness.cli", "shrink", str(run_dir), "--until",
                           "lost-write"], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "nothing to shrink" in proc.stderr and "Traceback" not in proc.stderr


def test_resolved_scenario_loads_from_the_folder(tmp_path):
    run_dir = _run_dir(tmp_path)
    assert load_resolved(run_dir).image_id == "sha256:x"


def test_campaign_index_links_a_violation_to_its_shrink(tmp_path):
    from kafka_chaos.report.campaign import render_index

    cdir = tmp_path / "campaigns" / "c"
    cdir.mkdir(parents=True)
    run = {"status": "done", "index": 0, "label": "acks=1", "config": "kafka", "anomaly_counts": {"lost-write": 2},
           "passed": False, "complete": True, "run_dir": str(tmp_path / "r0"),
           "shrink": str(tmp_path / "r0" / "shrink" / "index.html"), "shrink_reproduced": "2 of 3"}
    passing = {**run, "index": 1, "passed": True, "shrink": None}
    html = render_index({"campaign": "c", "campaign_id": "c-1", "done": 2, "total": 2, "failed": 1,
                         "runs": [run, passing]}, cdir)
    table = html[html.index('id="runs-by-verdict"'):]
    table = table[: table.index("</table>")]  # the runs, failures first (the page also lists them by configuration)
    assert table.count('href="../../r0/shrink/index.html">shrink</a> (reproduced 2 of 3)') == 1


def test_a_resume_with_a_larger_budget_finishes_the_search(tmp_path):
    run_dir = _run_dir(tmp_path)
    first = Shrinker(run_dir, attempts=2, budget_runs=6, confirm=2, runner=Runner()).run()
    assert first.budget_exhausted and first.runs_used == 6
    more = Runner()
    second = Shrinker(run_dir, attempts=2, budget_runs=200, confirm=2, runner=more).run()
    assert not second.budget_exhausted
    assert _ids(faults_of(load_scenario(second.minimal))) == CULPRITS
    assert (second.reproduced, second.confirm_runs) == (2, 2)  # confirmations of the new minimal
    assert second.runs_used == 6 + more.calls


def test_only_the_chosen_steps_run(tmp_path):
    r = Shrinker(_run_dir(tmp_path / "a"), attempts=1, budget_runs=200, confirm=0, runner=Runner(),
                 steps=("ddmin", "producers")).run()
    minimal = load_scenario(r.minimal)
    assert _ids(faults_of(minimal)) == CULPRITS and minimal.workload.producers == 1
    assert minimal.topic.partitions == 3 and minimal.duration_s == 40  # keys and run were not shrunk
    assert all(p.duration_s == 4 for p in faults_of(minimal))
    with pytest.raises(ShrinkError, match="unknown"):
        Shrinker(_run_dir(tmp_path / "b"), steps=("ddmin", "faster"), runner=Runner())


def test_cli_damaged_results_json_is_a_message_not_a_traceback(tmp_path):
    run_dir = _run_dir(tmp_path)
    (run_dir / "results.json").write_text('{"valid": false, "anomaly_co')
    proc = subprocess.run([sys.executable, "-m", "kafka_chaos.harness.cli", "shrink", str(run_dir)],
                          capture_output=True, text=True)
    assert proc.returncode == 2
    assert "results.json is damaged" in proc.stderr and "Traceback" not in proc.stderr
