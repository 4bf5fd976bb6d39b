"""RunResults (checker.results): the one finishing step (`finish`: valid, violations, complete) and the only
reader and writer of results.json (`load`, `save`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checker_histories import History, K

from kafka_chaos.checker import check_run
from kafka_chaos.checker.results import RunResults
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
