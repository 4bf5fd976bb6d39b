"""Verdicts on reconciled results come from each run's own configuration and faults (harness.reconcile)."""

import json
from pathlib import Path
from typing import Any

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
        (d / "results.json").write_text(json.dumps({"faults": faults}))
    return str(d)


def lost(key: str, value: int) -> dict[str, Any]:
    return {"key": key, "value": value, "offset": value, "process": 1}


def test_lost_write_is_permitted_for_acks_1_with_leader_isolation(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "acks1", "1", ISOLATION)
    result: dict[str, Any] = {"complete": True, "anomalies": {"lost-write": [lost("t/0", 4)]}, "violations": []}
    judge_reconciled(result, [run])
    instance = result["anomalies"]["lost-write"][0]
    assert instance["verdict"] == "permitted" and "acks=1" in instance["reason"]
    assert result["violations"] == []


def test_lost_write_is_a_violation_for_acks_all(tmp_path: Path) -> None:
    run = run_dir(tmp_path, "acksall", "all", ISOLATION)
    result: dict[str, Any] = {"complete": True, "anomalies": {"lost-write": [lost("t/0", 4)]}, "violations": []}
    judge_reconciled(result, [run])
    assert [(v["name"], v["key"], v["value"]) for v in result["violations"]] == [("lost-write", "t/0", 4)]


def test_several_runs_are_judged_each_by_its_own_configuration(tmp_path: Path) -> None:
    runs = [run_dir(tmp_path, "acks1", "1", ISOLATION), run_dir(tmp_path, "acksall", "all", ISOLATION)]
    result: dict[str, Any] = {
        "complete": True,
        "anomalies": {"lost-write": [lost("acks1/t/0", 4), lost("acksall/t/0", 7)]},
        "violations": [],
    }
    judge_reconciled(result, runs)
    verdicts = {i["key"]: i["verdict"] for i in result["anomalies"]["lost-write"]}
    assert verdicts == {"acks1/t/0": "permitted", "acksall/t/0": "violation"}
    assert [v["key"] for v in result["violations"]] == ["acksall/t/0"]


def test_spark_duplicates_get_their_send_duration_from_the_sends_table(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    run = run_dir(tmp_path, "slow", "all", ISOLATION)
    start = json.loads((tmp_path / "slow" / "history.jsonl").read_text())
    start["value"]["workload"].update(idempotence=True, request_timeout_ms=5000)
    (tmp_path / "slow" / "history.jsonl").write_text(json.dumps(start) + "\n")
    pq.write_table(
        pa.table({"key": ["t/0", "t/0", "t/0"], "value": [7, 7, 8], "invoke_time": [0, 1, 2],
                  "complete_time": [6_000_000_000, None, 1_000_000]}),
        tmp_path / "slow" / "sends.parquet",
    )
    slow = {"key": "t/0", "value": 7, "count": 2, "offsets": [3, 5]}
    quick = {"key": "t/0", "value": 8, "count": 2, "offsets": [4, 6]}
    result: dict[str, Any] = {"complete": True, "anomalies": {"duplicate": [slow, quick]}, "violations": []}
    judge_reconciled(result, [run])
    assert (slow["send_ms"], slow["verdict"]) == (6000, "permitted")
    assert (quick["send_ms"], quick["verdict"]) == (0, "violation")


def test_the_terminal_table_counts_violations_and_permitted_per_anomaly() -> None:
    from kafka_chaos.harness.cli import verdict_rows

    results = {
        "anomalies": {"lost-write": [{"verdict": "violation"}, {"verdict": "permitted"}, {"verdict": "violation"}],
                      "duplicate": [{"verdict": "permitted"}]},
        "conformance": {"anomalies": {"follower-kept-in-isr": [{"verdict": "violation"}]}},
    }
    assert verdict_rows(results) == [("duplicate", 1, 0, 1), ("lost-write", 3, 2, 1),
                                     ("follower-kept-in-isr (conformance)", 1, 1, 0)]
    assert verdict_rows({"anomalies": {}}) == []
