"""`kafka-chaos reconcile`: either engine's reconciliation, then verdicts from each run's own configuration.

`spark/` finds anomalies and nothing more (docs/architecture.md §1 keeps it to the checker's schema and names), so the
verdicts — whether Kafka, configured as the run was, permits each anomaly — are given here, for both engines
alike, the way `checker.check.check_run` gives them: the configuration from the history's `run-start` event, the
fault windows from the run's `results.json` (written by `kafka-chaos check` / `run`), unclean elections from
the observer's `state.jsonl`. A run folder without them is judged as Kafka's defaults with no faults, and the
reasons say so. The verdicts given, the result is finished again (`RunResults.finish`), as every result is.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson

from kafka_chaos.checker.anomalies.cycles import DEFAULT_ISOLATION
from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.tables import read_state_samples
from kafka_chaos.checker.verdicts import apply_verdicts, load_judge, verdict_inputs
from kafka_chaos.errors import ResultsError
from kafka_chaos.rundir import HISTORY_FILE, RECONCILE_FILE, RESULTS_FILE


def reconcile(
    run_dirs: list[str], *, engine: str, master: str | None, out: Path | None = None,
    skip_malformed: bool = False,
) -> RunResults:
    from kafka_chaos.spark.job import reconcile_runs

    result = judge_reconciled(
        reconcile_runs(run_dirs, engine=engine, master=master, skip_malformed=skip_malformed), run_dirs)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        (out / RECONCILE_FILE).write_text(json.dumps(result.to_json_dict(), indent=2) + "\n")
    return result


def judge_reconciled(result: RunResults, run_dirs: list[str]) -> RunResults:
    """`result` with every listed instance labelled with its run's verdict, finished again (RunResults.finish:
    `violations` and `valid` from those verdicts). With several runs the engines prefix keys with `<run id>/`,
    which says whose configuration applies. A run read from its history alone (no results.json) is judged by
    what Spark read there (`histories`): its `run-start` and the fault windows of its nemesis events, as the
    checker would."""
    raw = result.to_json_dict()
    runs = {Path(d.removeprefix("file://")).name: Path(d.removeprefix("file://")) for d in run_dirs}
    prefixed = len(run_dirs) > 1
    judge = load_judge()
    for run, run_dir in runs.items():
        mine = {
            name: [i for i in instances if not prefixed or str(i.get("key", "")).startswith(f"{run}/")]
            for name, instances in raw.get("anomalies", {}).items()
        }
        read_by_spark = (result.histories or {}).get(run) or {}
        run_start = _run_start(run_dir) or read_by_spark.get("run_start")
        faults = _faults(run_dir) or read_by_spark.get("faults")
        _reader_isolation(run_dir, mine.get("G1a", []), read_by_spark)
        config, faults = verdict_inputs(run_start, faults, read_state_samples(run_dir))
        apply_verdicts(mine, config=config, faults=faults, judge=judge, complete=result.complete)
    return RunResults.model_validate(raw).finish()


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
    """The fault windows `kafka-chaos check` recorded in the run's results.json (None without one: a run Spark
    read from its history is judged by the windows Spark read there)."""
    try:
        return RunResults.load(run_dir / RESULTS_FILE).faults
    except ResultsError:
        return None
