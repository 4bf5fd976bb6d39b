"""kafka-chaos checker: Jepsen's Kafka anomalies over a run's history, with Kafka's verdicts.

    from kafka_chaos.checker import check_run
    result = check_run(Path("results/<run>"))        # history.jsonl → parquet + results.json: a RunResults
    result.valid, result.violations                  # RunResults.load(run_dir) reads a checked run's again

Lower level: `history_to_tables(path)` → HistoryTables (sends, polls, meta, extras); `analyse(sends, polls,
extras=..., ...)` → Analysis (`.results()`: its RunResults). See docs/architecture.md §3–§4.
"""

from kafka_chaos.checker.analysis import ANOMALY_NAMES, Analysis, analyse
from kafka_chaos.checker.check import check_run
from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.tables import (
    HistoryMeta,
    HistoryTables,
    PollExtras,
    history_to_tables,
    read_state_samples,
    read_tables,
    write_tables,
)
from kafka_chaos.errors import HistoryError
from kafka_chaos.faults.windows import FaultWindow, FaultWindows, faults_from_history

__all__ = [
    "ANOMALY_NAMES",
    "Analysis",
    "FaultWindow",
    "FaultWindows",
    "HistoryError",
    "HistoryMeta",
    "HistoryTables",
    "PollExtras",
    "RunResults",
    "analyse",
    "check_run",
    "faults_from_history",
    "history_to_tables",
    "read_state_samples",
    "read_tables",
    "write_tables",
]
