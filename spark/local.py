"""`--engine pandas`: the single-process checker (`checker.analyse`) over one or many runs' tables.

Each run is analysed on its own (op indexes are per run, and the checker's per-op checks need them apart),
then the results are merged in the Spark job's shape: with several runs, keys are prefixed `<run id>/`,
counts are summed, and instance lists are capped at `max_instances` per anomaly (counts stay exact).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from kafka_chaos.checker.results import RunResults
from kafka_chaos.errors import SparkReconcileError

__all__ = ["reconcile_local"]


def reconcile_local(paths: Sequence[str | Path], *, max_instances: int = 100) -> RunResults:
    """Run `checker.analyse` on each run directory's sends.parquet / polls.parquet (its history.jsonl when it
    has no tables) and merge the results."""
    from kafka_chaos.checker import HistoryError, analyse, read_tables
    from kafka_chaos.checker.tables import history_to_tables
    from kafka_chaos.rundir import RunDir

    if not paths:
        raise SparkReconcileError("No run directory given. Pass one or more RUN_DIRs (results/<run id>).")
    started = time.monotonic()
    prefixed = len(paths) > 1
    merged: dict[str, Any] = {
        "anomaly_counts": {},
        "anomalies": {},
        "stats": {"engine": "pandas", "runs": [], "per_run": {}},
    }
    complete = []
    for raw in paths:
        run_dir = Path(raw)
        run = run_dir.name
        try:
            if RunDir(run_dir).sends.exists() or not RunDir(run_dir).history.exists():
                sends, polls = read_tables(run_dir)
            else:
                tables = history_to_tables(run_dir)
                sends, polls = tables.sends, tables.polls
        except HistoryError as err:
            raise SparkReconcileError(str(err)) from None
        analysis = analyse(sends, polls)
        complete.append(analysis.complete)
        result = analysis.to_dict()
        merged["stats"]["runs"].append(run)
        merged["stats"]["per_run"][run] = result["stats"]
        for name, count in result["anomaly_counts"].items():
            merged["anomaly_counts"][name] = merged["anomaly_counts"].get(name, 0) + count
        for name, instances in result["anomalies"].items():
            merged["anomalies"].setdefault(name, []).extend(_prefix(i, run, prefixed) for i in instances)
        for name, why in result.get("not_checked", {}).items():
            merged.setdefault("not_checked", {}).setdefault(name, why)
    for instances in merged["anomalies"].values():
        instances.sort(key=lambda i: (i["key"], i.get("value", -1), i.get("offset", -1)))
        del instances[max_instances:]
    merged["stats"]["seconds"] = round(time.monotonic() - started, 3)
    return RunResults.of(merged).finish(complete=complete)


def _prefix(instance: dict[str, Any], run: str, prefixed: bool) -> dict[str, Any]:
    if prefixed and "key" in instance:
        return {**instance, "key": f"{run}/{instance['key']}"}
    return instance
