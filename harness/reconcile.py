"""`kafka-chaos reconcile`: either engine's reconciliation, then verdicts from each run's own configuration.

`spark/` finds anomalies and nothing more (docs/architecture.md §1 keeps it to the checker's schema and names), so the
verdicts — whether Kafka, configured as the run was, permits each anomaly — are given here, for both engines
alike, the way `checker.check.check_run` gives them: the configuration from the history's `run-start` event, the
fault windows from the run's `results.json` (written by `kafka-chaos check` / `run`), unclean elections from
the observer's `state.jsonl`. A run folder without them is judged as Kafka's defaults with no faults, and the
reasons say so. Spark's `duplicate` instances lack the checker's `send_ms`; it is looked up here in the run's
sends table for the few instances listed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kafka_chaos.checker.anomalies.cycles import DEFAULT_ISOLATION
from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT
from kafka_chaos.checker.tables import read_state_samples
from kafka_chaos.checker.verdicts import apply_verdicts, load_judge, verdict_inputs
from kafka_chaos.rundir import HISTORY_FILE, RECONCILE_FILE, RESULTS_FILE, RunDir


def reconcile(
    run_dirs: list[str], *, engine: str, master: str | None, out: Path | None = None,
    skip_malformed: bool = False,
) -> dict[str, Any]:
    from kafka_chaos.spark.job import reconcile_runs

    result = reconcile_runs(run_dirs, engine=engine, master=master, skip_malformed=skip_malformed)
    judge_reconciled(result, run_dirs)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / RECONCILE_FILE).write_text(json.dumps(result, indent=2, default=str) + "\n")
    return result


def judge_reconciled(result: dict[str, Any], run_dirs: list[str]) -> None:
    """Label every listed instance with its run's verdict and replace `violations` (in place).
    With several runs the engines prefix keys with `<run id>/`, which says whose configuration applies. A run
    read from its history alone (no results.json) is judged by what Spark read there (`histories`): its
    `run-start` and the fault windows of its nemesis events, as the checker would."""
    runs = {Path(d.removeprefix("file://")).name: Path(d.removeprefix("file://")) for d in run_dirs}
    prefixed = len(run_dirs) > 1
    judge = load_judge()
    violations: list[dict[str, Any]] = []
    for run, run_dir in runs.items():
        mine = {
            name: [i for i in instances if not prefixed or str(i.get("key", "")).startswith(f"{run}/")]
            for name, instances in result.get("anomalies", {}).items()
        }
        _fill_send_ms(run_dir, mine.get("duplicate", []), f"{run}/" if prefixed else "")
        read_by_spark = result.get("histories", {}).get(run) or {}
        run_start = _run_start(run_dir) or read_by_spark.get("run_start")
        faults = _faults(run_dir) or read_by_spark.get("faults")
        _reader_isolation(run_dir, mine.get("G1a", []), read_by_spark)
        config, faults = verdict_inputs(run_start, faults, read_state_samples(run_dir))
        violations += apply_verdicts(
            mine, config=config, faults=faults, judge=judge, complete=bool(result.get("complete", True))
        )
    result["violations"] = sorted(violations, key=lambda v: (v["name"], str(v.get("key")), v.get("value", -1)))
    # Jepsen's validity as check gives it, from each instance's `bad` (an aborted record read at
    # read_uncommitted is not); a kind with more instances than listed may hide bad ones, so it counts as bad
    listed = result.get("anomalies", {})
    hidden = any(ANOMALIES_BAD_BY_DEFAULT.get(name, True) and count > len(listed.get(name, []))
                 for name, count in result.get("anomaly_counts", {}).items())
    result["valid"] = not hidden and not any(i.get("bad") for instances in listed.values() for i in instances)


def _fill_send_ms(run_dir: Path, duplicates: list[dict[str, Any]], key_prefix: str) -> None:
    """The checker's `send_ms` (longest completed send of the value) for instances that lack it."""
    missing = [d for d in duplicates if "send_ms" not in d]
    if not missing:
        return
    try:
        sends = pq.read_table(
            RunDir(run_dir).sends,
            columns=["key", "value", "invoke_time", "complete_time"],
            filters=[("value", "in", sorted({int(d["value"]) for d in missing}))],
        )
    except (OSError, ValueError):
        return
    took = pc.subtract(sends["complete_time"], sends["invoke_time"]).to_pylist()
    longest: dict[tuple[str, int], int] = {}
    for key, value, ns in zip(sends["key"].to_pylist(), sends["value"].to_pylist(), took, strict=True):
        if ns is not None:
            longest[(key, value)] = max(longest.get((key, value), 0), ns)
    for d in missing:
        ns = longest.get((str(d["key"]).removeprefix(key_prefix), int(d["value"])))
        d["send_ms"] = ns // 1_000_000 if ns is not None else None


def _reader_isolation(run_dir: Path, g1a: list[dict[str, Any]], observed: dict[str, Any]) -> None:
    """The checker's `isolation` (the reader's level) and `writer_txn` on Spark's G1a instances, which the model's
    G1a verdict reads (an aborted record is Kafka's promise broken only for a read_committed reader).

    From what Spark observed in the history: the `assign` values that name a level, and the processes that ran
    `txn` ops (a writer among them wrote in a transaction: exact when a process runs one kind of op, as
    kafka-chaos's workloads do). A run Spark read from its tables observed neither; they are read here from
    the local history's `assign` and `txn` lines (only those lines are decoded)."""
    todo = [i for i in g1a if "isolation" not in i and isinstance(i.get("process"), int)]
    if not todo:
        return
    if "isolation" in observed:
        levels, txn_processes = dict(observed["isolation"]), {str(p) for p in observed.get("txn_processes", [])}
    else:
        levels, txn_processes = _readers_and_txn_processes(run_dir)
    for instance in todo:
        instance["isolation"] = levels.get(str(instance["process"]), DEFAULT_ISOLATION)
        instance["writer_txn"] = str(instance.get("writer_process")) in txn_processes


def _readers_and_txn_processes(run_dir: Path) -> tuple[dict[str, str], set[str]]:
    levels: dict[str, str] = {}
    txn_processes: set[str] = set()
    try:
        with (run_dir / HISTORY_FILE).open("rb") as fh:
            for line in fh:
                assign = b'"assign"' in line and b'"isolation"' in line
                if not assign and b'"txn"' not in line:
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(event, dict):
                    continue
                value = event.get("value")
                if event.get("f") == "txn":
                    txn_processes.add(str(event.get("process")))
                elif isinstance(value, dict) and isinstance(value.get("isolation"), str):
                    levels[str(event.get("process"))] = value["isolation"]
    except OSError:
        pass
    return levels, txn_processes


def _run_start(run_dir: Path) -> dict[str, Any] | None:
    """The resolved scenario: the value of the history's first event when that is `run-start`."""
    try:
        with (run_dir / HISTORY_FILE).open("rb") as fh:
            first = orjson.loads(fh.readline())
    except (OSError, orjson.JSONDecodeError):
        return None
    value = first.get("value") if isinstance(first, dict) and first.get("f") == "run-start" else None
    return value if isinstance(value, dict) else None


def _faults(run_dir: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((run_dir / RESULTS_FILE).read_text())
    except (OSError, ValueError):
        return None
    faults = data.get("faults") if isinstance(data, dict) else None
    return faults if isinstance(faults, dict) else None
