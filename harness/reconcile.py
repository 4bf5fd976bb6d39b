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
from kafka_chaos.checker.history_reader import CLIENT_OP_FS
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
    checker would.

    A run the engine read no record of, whose history held no client op (as its results.json counted them, or
    as its local history.jsonl shows), is named in `stats.client_ops` with 0: `finish` then makes the result
    not valid, with an `empty-history` violation, as `kafka-chaos check` does."""
    raw = result.to_json_dict()
    runs = {Path(d.removeprefix("file://")).name: Path(d.removeprefix("file://")) for d in run_dirs}
    prefixed = len(run_dirs) > 1
    judge = load_judge()
    client_ops: dict[str, int] = {}
    for run, run_dir in runs.items():
        checked = _checked(run_dir)
        mine = {
            name: [i for i in instances if not prefixed or str(i.get("key", "")).startswith(f"{run}/")]
            for name, instances in raw.get("anomalies", {}).items()
        }
        if not any(mine.values()) and not _read_records(raw, run, prefixed):
            n = _client_ops(checked, run_dir)
            if n is not None:
                client_ops[run] = n
        read_by_spark = (result.histories or {}).get(run) or {}
        run_start = _run_start(run_dir) or read_by_spark.get("run_start")
        faults = (checked.faults if checked is not None else None) or read_by_spark.get("faults")
        _reader_isolation(run_dir, mine.get("G1a", []), read_by_spark)
        config, faults = verdict_inputs(run_start, faults, read_state_samples(run_dir))
        apply_verdicts(mine, config=config, faults=faults, judge=judge, complete=result.complete)
    if client_ops:
        raw.setdefault("stats", {})["client_ops"] = client_ops
    return RunResults.model_validate(raw).finish()


def _read_records(raw: dict[str, Any], run: str, prefixed: bool) -> bool:
    """The engine read records of `run`: Spark's per-key counts, or the pandas engine's per-run statistics."""
    for key, stat in (raw.get("keys") or {}).items():
        if (not prefixed or str(key).startswith(f"{run}/")) and isinstance(stat, dict) and (
                stat.get("sends") or stat.get("poll_records")):
            return True
    per_run = ((raw.get("stats") or {}).get("per_run") or {}).get(run)
    return isinstance(per_run, dict) and bool(per_run.get("client_ops"))


def _client_ops(checked: RunResults | None, run_dir: Path) -> int | None:
    """How many client ops (send, poll, txn) the run's history held, where that is known: as `kafka-chaos check`
    counted them in its results.json, else 0 when its local history holds none (a history with one is read
    only up to it, so its count stays unknown: what matters is whether it was empty). None: not known (no
    local history), and then nothing says the run was empty."""
    if checked is not None:
        n = checked.stats.get("client_ops")
        if isinstance(n, int) and not isinstance(n, bool):
            return n
        op_counts = (checked.run or {}).get("op_counts")
        if isinstance(op_counts, dict):
            return sum(int(c) for f, types in op_counts.items() if f in CLIENT_OP_FS and isinstance(types, dict)
                       for c in types.values() if isinstance(c, int))
    try:
        with (run_dir / HISTORY_FILE).open("rb") as fh:
            for line in fh:
                if b'"invoke"' not in line:
                    continue
                try:
                    event = orjson.loads(line)
                except orjson.JSONDecodeError:
                    continue
                if (isinstance(event, dict) and event.get("type") == "invoke" and event.get("f") in CLIENT_OP_FS
                        and isinstance(event.get("process"), int) and not isinstance(event.get("process"), bool)):
                    return None
    except OSError:
        return None
    return 0


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


def _checked(run_dir: Path) -> RunResults | None:
    """What `kafka-chaos check` recorded in the run's results.json: the fault windows, the client ops counted
    (None without one: a run Spark read from its history is judged by the windows Spark read there)."""
    try:
        return RunResults.load(run_dir / RESULTS_FILE)
    except ResultsError:
        return None
