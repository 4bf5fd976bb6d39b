"""RunResults (checker.results): the one finishing step (`finish`: valid, violations, complete) and the only
reader and writer of results.json (`load`, `save`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checker_histories import History, K

from kafka_chaos.checker import check_run
from kafka_chaos.checker.results import EMPTY_HISTORY, NO_CLIENT_OPS, RunResults
from kafka_chaos.errors import KafkaChaosError, ResultsError

LOST = {"key": "t/0", "value": 2, "offset": 1, "bad": True, "verdict": "violation", "reason": "acks=all"}
DUP = {"key": "t/0", "value": 5, "offsets": [3, 4], "bad": False, "verdict": "permitted", "reason": "retry"}
CONFORMANCE = {"key": "t/0", "verdict": "violation", "reason": "kept in the ISR"}


def sections(**more: Any) -> dict[str, Any]:
    return {"anomaly_counts": {"lost-write": 1, "duplicate": 1},
            "anomalies": {"lost-write": [dict(LOST)], "duplicate": [dict(DUP)]},
            "conformance": {"anomaly_counts": {"follower-kept-in-isr": 1},
                            "anomalies": {"follower-kept-in-isr": [dict(CONFORMANCE)]}}, **more}


def test_finish_computes_valid_violations_and_complete_from_the_verdicts() -> None:
    finding = {"name": "availability", "key": None, "bad": True, "verdict": "violation", "reason": "too long"}
    r = RunResults.of(sections()).finish(complete=[True, False], findings=[finding],
                                         checkers={"Mine": {"seen": 3, "violations": [{"key": "", "reason": "x"}]}})
    assert [(v.name, v.key) for v in r.violations] == [
        ("lost-write", "t/0"), ("follower-kept-in-isr", "t/0"), ("availability", None), ("Mine", "")]
    assert r.valid is False and r.complete is False and not r.passed
    assert r.checkers == {"Mine": {"seen": 3, "violations": [{"key": "", "reason": "x"}]}}
    again = r.finish()  # finishing twice lists nothing twice and keeps the completeness
    assert len(again.violations) == 4 and again.complete is False


def test_valid_is_jepsens_from_the_anomalies_alone() -> None:
    permitted = {**LOST, "bad": False, "verdict": "permitted"}
    r = RunResults.of(sections(anomalies={"lost-write": [permitted], "duplicate": [dict(DUP)]})).finish(
        complete=[True])
    assert r.valid is True  # a conformance violation counts among the violations, not against validity
    assert [v.name for v in r.violations] == ["follower-kept-in-isr"] and r.complete is True


def test_an_engine_s_unjudged_or_capped_instances_count_by_jepsens_policy() -> None:
    """Spark's instances before `reconcile` judges them carry no `bad`; an anomaly with more instances than
    listed may hide bad ones."""
    unjudged = RunResults.of({"anomaly_counts": {"lost-write": 1},
                              "anomalies": {"lost-write": [{"key": "t/0", "value": 2}]}}).finish(complete=[True])
    assert unjudged.valid is False and unjudged.violations == []
    capped = RunResults.of({"anomaly_counts": {"lost-write": 3},
                            "anomalies": {"lost-write": [{**LOST, "bad": False, "verdict": "permitted"}]}})
    assert capped.finish(complete=[True]).valid is False
    clean = RunResults.of({}).finish(complete=[])
    assert clean.valid is True and clean.complete is True and clean.violations == []


def test_check_runs_a_user_checker_before_writing_results_json_once(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    h = History()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.poll(1, {K: [(0, 1), (1, 2)]})
    h.drain()
    run = h.write(tmp_path / "run")
    saved: list[Path] = []
    save = RunResults.save

    def counted(self: RunResults, path: Path) -> Path:
        saved.append(path)
        return save(self, path)

    monkeypatch.setattr(RunResults, "save", counted)

    class NoTwo:
        def check(self, run_dir: Path) -> dict[str, Any]:
            self.saw_results = (run_dir / "results.json").exists()
            return {"records": 2, "violations": [{"name": "two-records", "key": K}]}

    mine = NoTwo()
    r = check_run(run, checkers=[mine])
    assert len(saved) == 1 and mine.saw_results is False
    assert r.anomaly_counts == {} and r.valid is True  # the user's finding is a violation, not an anomaly
    assert [(v.name, v.key) for v in r.violations] == [("two-records", K)]
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["checkers"]["NoTwo"]["records"] == 2 and on_disk["violations"][0]["name"] == "two-records"
    assert RunResults.load(run).to_json_dict() == r.to_json_dict()


def test_save_and_load_keep_the_file_format(tmp_path: Path) -> None:
    """A results.json as the checker wrote it before (and the report's tests still write) loads unchanged,
    finishes to the verdicts it holds and saves back to the same JSON."""
    old = {"valid": False, "complete": True, "anomaly_counts": {"lost-write": 1},
           "anomalies": {"lost-write": [{**LOST, "ops": [1, 9], "times": [5, 9]}]},
           "violations": [{"name": "lost-write", **LOST, "ops": [1, 9], "times": [5, 9]}],
           "stats": {"duration_ns": 3}, "faults": {"windows": []}, "availability": {"windows": []}}
    (tmp_path / "results.json").write_text(json.dumps(old))
    loaded = RunResults.load(tmp_path)
    assert loaded.to_json_dict() == old
    assert loaded.finish().to_json_dict() == old
    (tmp_path / "again").mkdir()
    loaded.save(tmp_path / "again")
    assert json.loads((tmp_path / "again" / "results.json").read_text()) == old
    assert not list((tmp_path / "again").glob("*.tmp"))


@pytest.mark.parametrize(("content", "says"), [
    (None, "the run was never checked"),
    ('{"valid": false, "compl', "is damaged"),
    ('{"valid": false, "complete": true, "anomaly_counts": {"lost-write": "many"}}',
     "does not fit the results model at anomaly_counts.lost-write"),
    ('["not", "an", "object"]', "does not fit the results model"),
])
def test_a_missing_or_damaged_file_is_one_clear_error(tmp_path: Path, content: str | None, says: str) -> None:
    if content is not None:
        (tmp_path / "results.json").write_text(content)
    with pytest.raises(ResultsError) as err:
        RunResults.load(tmp_path / "results.json")
    assert says in str(err.value) and "kafka-chaos check" in str(err.value)
    assert isinstance(err.value, KafkaChaosError) and err.value.exit_code == 2


def test_a_history_with_no_client_op_is_not_valid() -> None:
    """Jepsen's Kafka checker calls a history with no client op invalid (kafka_test.clj `empty-history-test`):
    `finish` says why in a violation of its own, first, so no verdict reads it as a pass; finishing again
    lists it once."""
    r = RunResults.of({"stats": {"client_ops": 0}}).finish(complete=[True])
    assert r.valid is False and not r.passed
    assert [(v.name, v.key, v.verdict, v.reason) for v in r.violations] == [
        (EMPTY_HISTORY, None, "violation", NO_CLIENT_OPS)]
    assert "no client operation in the history" in NO_CLIENT_OPS
    assert len(r.finish().violations) == 1 and len(r.finish(findings=[]).violations) == 1
    assert RunResults.of({"stats": {"client_ops": 3}}).finish(complete=[True]).valid is True
    assert RunResults.of({}).finish(complete=[True]).valid is True  # not counted: nothing says it was empty


def test_each_empty_run_of_several_is_named() -> None:
    r = RunResults.of({"stats": {"client_ops": {"a": 0, "b": 12, "c": 0}}}).finish(complete=[True])
    assert r.valid is False and [(v.name, v.key) for v in r.violations] == [(EMPTY_HISTORY, "a"), (EMPTY_HISTORY, "c")]
    assert RunResults.of({"stats": {"client_ops": {"b": 12}}}).finish(complete=[True]).valid is True


@pytest.mark.parametrize("events", [
    [],
    [("harness", "info", "run-start", {}), ("harness", "info", "drain-complete", True)],
    [(0, "invoke", "assign", ["chaos/0"]), (0, "ok", "assign", ["chaos/0"]), ("nemesis", "invoke", "kill", {}),
     ("nemesis", "info", "kill", {"nodes": [1]}), ("harness", "info", "drain-complete", True)],
], ids=["empty", "harness-only", "assign-and-faults-only"])
def test_check_of_a_history_with_no_client_op_fails_with_the_reason(
    tmp_path: Path, events: list[tuple[Any, str, str, Any]], monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import sys

    from kafka_chaos.harness.cli import main

    h = History()
    for process, type_, f, value in events:
        h.event(process, type_, f, value)
    run = h.write(tmp_path / "run")
    r = check_run(run, write=False)
    assert r.stats["client_ops"] == 0 and r.valid is False
    assert [(v.name, v.reason) for v in r.violations] == [(EMPTY_HISTORY, NO_CLIENT_OPS)]
    monkeypatch.setattr(sys, "argv", ["kafka-chaos", "check", str(run)])
    with pytest.raises(SystemExit) as done:
        main()
    out = " ".join(capsys.readouterr().out.split())
    assert done.value.code == 1 and "PASS" not in out and "FAIL" in out
    assert "no client operation in the history" in out


def test_one_client_op_is_enough_to_be_checked(tmp_path: Path) -> None:
    """A poll that returned nothing is a client op: the history is checked, and nothing is wrong in it."""
    h = History()
    h.poll(0, {})
    h.drain()
    r = check_run(h.write(tmp_path / "run"), write=False)
    assert r.stats["client_ops"] == 1 and r.valid is True and r.violations == []
