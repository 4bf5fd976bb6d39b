"""Verdicts on reconciled results come from each run's own configuration and faults (harness.reconcile)."""

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.checker.results import NO_CLIENT_OPS, RunResults
from kafka_chaos.errors import ResultsError
from kafka_chaos.harness.reconcile import judge_reconciled

ISOLATION = {
    "end_time": 30_000_000_000,
    "windows": [
        {"f": "partition", "value": {"shape": "isolate"}, "nodes": [3], "start": 5_000_000_000,
         "end": 18_000_000_000, "heal": "heal", "index": 10, "error": None}
    ],
}


def run_dir(root: Path, name: str, acks: str, faults: dict[str, Any] | None) -> str:
    d = root / name
    d.mkdir()
    start = {"index": 0, "time": 0, "process": "harness", "type": "info", "f": "run-start",
             "value": {"name": name, "topic": {"replication_factor": 3, "min_insync_replicas": 2,
                                               "unclean_leader_election": False},
                       "workload": {"acks": acks}}}
    (d / "history.jsonl").write_text(json.dumps(start) + "\n")
    if faults is not None:
        RunResults.of({"faults": faults}).finish(complete=[True]).save(d)
    return str(d)


def lost(key: str, value: int) -> dict[str, Any]:
    return {"key": key, "value": value, "offset": value, "process": 1}


def reconciled(anomalies: dict[str, list[dict[str, Any]]]) -> RunResults:
    """What an engine returns: its instances listed, not yet judged."""
    counts = {name: len(instances) for name, instances in anomalies.items()}
    return RunResults.of({"anomaly_counts": counts, "anomalies": anomalies}).finish(complete=[True])


def test_lost_write_is_permitted_for_acks_1_with_leader_isolation(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "acks1", "1", ISOLATION)
    result = judge_reconciled(reconciled({"lost-write": [lost("t/0", 4)]}), [run])
    instance = result.anomalies["lost-write"][0]
    assert instance.verdict == "permitted" and "acks=1" in (instance.reason or "")
    assert result.violations == [] and result.valid is False  # Jepsen's validity still counts the loss


def test_lost_write_is_a_violation_for_acks_all(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "acksall", "all", ISOLATION)
    result = judge_reconciled(reconciled({"lost-write": [lost("t/0", 4)]}), [run])
    assert [(v.name, v.key, v.value) for v in result.violations] == [("lost-write", "t/0", 4)]


def test_several_runs_are_judged_each_by_its_own_configuration(tmp_path: Path) -> None:
    runs = [run_dir(tmp_path, "acks1", "1", ISOLATION), run_dir(tmp_path, "acksall", "all", ISOLATION)]
    result = judge_reconciled(reconciled({"lost-write": [lost("acks1/t/0", 4), lost("acksall/t/0", 7)]}), runs)
    verdicts = {i.key: i.verdict for i in result.anomalies["lost-write"]}
    assert verdicts == {"acks1/t/0": "permitted", "acksall/t/0": "violation"}
    assert [v.key for v in result.violations] == ["acksall/t/0"]


def test_a_duplicate_is_judged_by_the_send_duration_the_engine_filled(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "slow", "all", ISOLATION)
    start = json.loads((tmp_path / "slow" / "history.jsonl").read_text())
    start["value"]["workload"].update(idempotence=True, request_timeout_ms=5000)
    (tmp_path / "slow" / "history.jsonl").write_text(json.dumps(start) + "\n")
    slow = {"key": "t/0", "value": 7, "count": 2, "offsets": [3, 5], "send_ms": 6000}
    quick = {"key": "t/0", "value": 8, "count": 2, "offsets": [4, 6], "send_ms": 0}
    result = judge_reconciled(reconciled({"duplicate": [slow, quick]}), [run])
    assert [(i.value, i.verdict) for i in result.anomalies["duplicate"]] == [(7, "permitted"), (8, "violation")]


def test_a_damaged_results_json_is_refused_not_guessed(tmp_path: Path) -> None:
    """The faults come from results.json through RunResults.load; a damaged file is judged as no file (the
    reasons then say no faults were recorded), and loading it says what is wrong."""
    run = run_dir(tmp_path, "acks1", "1", ISOLATION)
    (Path(run) / "results.json").write_text('{"valid": true, "complete": tr')
    with pytest.raises(ResultsError, match="is damaged"):
        RunResults.load(Path(run))
    result = judge_reconciled(reconciled({"lost-write": [lost("t/0", 4)]}), [run])
    assert result.anomalies["lost-write"][0].verdict == "violation"  # acks=1 without a fault loses nothing


def test_the_terminal_table_counts_violations_known_defects_and_permitted_per_anomaly() -> None:
    from kafka_chaos.harness.cli import verdict_rows

    results = RunResults.of({
        "anomalies": {"lost-write": [{"verdict": "violation"}, {"verdict": "permitted"}, {"verdict": "violation"},
                                     {"verdict": "known-defect", "defect": "KAFKA-17754"}],
                      "duplicate": [{"verdict": "permitted"}]},
        "conformance": {"anomalies": {"follower-kept-in-isr": [{"verdict": "violation"}]}},
    })
    assert verdict_rows(results) == [("duplicate", 1, 0, 0, 1), ("lost-write", 4, 2, 1, 1),
                                     ("follower-kept-in-isr (conformance)", 1, 1, 0, 0)]
    finished = results.finish()
    assert [(i.name, i.defect) for i in finished.known_defects] == [("lost-write", "KAFKA-17754")]
    assert len(finished.violations) == 3 and not finished.passed  # known defects apart from violations
    assert verdict_rows(RunResults.of({"anomalies": {}})) == []


def test_a_run_with_no_client_op_is_not_valid(tmp_path: Path) -> None:
    """As `kafka-chaos check` says of it: the engine read nothing of a run whose history holds no send, poll or
    txn (here a run-start alone), so the result is not valid and its violation names the run and why."""
    empty = run_dir(tmp_path, "empty", "all", None)
    result = judge_reconciled(reconciled({}), [empty])
    assert result.valid is False and result.stats["client_ops"] == {"empty": 0}
    assert [(v.name, v.key, v.reason) for v in result.violations] == [("empty-history", "empty", NO_CLIENT_OPS)]


def test_an_empty_run_among_several_is_named_and_a_run_with_ops_is_not(tmp_path: Path) -> None:
    empty = run_dir(tmp_path, "empty", "all", None)
    busy = run_dir(tmp_path, "busy", "all", None)
    with (Path(busy) / "history.jsonl").open("a") as fh:
        fh.write(json.dumps({"index": 1, "time": 1, "process": 0, "type": "invoke", "f": "poll",
                             "value": [["poll"]]}) + "\n")
    counted = run_dir(tmp_path, "counted", "all", None)  # what `check` counted wins over the history
    RunResults.of({"run": {"op_counts": {"send": {"ok": 2, "fail": 0, "info": 0}}}}).finish().save(Path(counted))
    result = judge_reconciled(reconciled({}), [empty, busy, counted])
    assert result.stats["client_ops"] == {"empty": 0, "counted": 2}
    assert [(v.name, v.key) for v in result.violations] == [("empty-history", "empty")] and not result.valid
    alone = judge_reconciled(reconciled({}), [busy])
    assert alone.valid is True and alone.violations == [] and "client_ops" not in alone.stats


def test_a_run_the_engine_read_records_of_is_not_empty(tmp_path: Path) -> None:
    """Spark's per-key counts say it read the run: its history (a run-start alone here) is not read for ops."""
    run = run_dir(tmp_path, "read", "all", None)
    result = RunResults.of({"keys": {"t/0": {"sends": 0, "poll_records": 3}}}).finish(complete=[True])
    assert judge_reconciled(result, [run]).valid is True
