"""The report's two ways to read a history agree (report.data): `scan_ops` from what `kafka-chaos check` wrote
(ops.parquet) and `scan_history` streaming history.jsonl, on every line of a history."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pyarrow.parquet as pq

from kafka_chaos.checker.tables import history_to_tables, write_tables
from kafka_chaos.report.data import HistoryScan, scan_history, scan_ops
from kafka_chaos.rundir import HISTORY_FILE, OPS_FILE

FIELDS = ("present", "events", "end_time", "cut_last_line", "run_start", "drain_complete", "drain_start",
          "nemesis", "fetch_from", "counts", "latency_percentiles", "unfinished", "lines", "partner")


def scans(text: str) -> tuple[HistoryScan, HistoryScan | None]:
    """(scan_history, scan_ops) of the history `text`, every line cited."""
    with tempfile.TemporaryDirectory(prefix="report-agreement-") as tmp:
        run_dir = Path(tmp)
        (run_dir / HISTORY_FILE).write_text(text)
        write_tables(history_to_tables(run_dir), run_dir)
        # row groups of 3 ops: the report reads a large run's ops.parquet in many chunks
        pq.write_table(pq.read_table(run_dir / OPS_FILE), run_dir / OPS_FILE, row_group_size=3)
        every = range(text.count("\n") + 1)
        return scan_history(run_dir / HISTORY_FILE, every), scan_ops(run_dir, every)


def assert_scans_agree(text: str) -> None:
    streamed, from_ops = scans(text)
    assert from_ops is not None, "ops.parquet was not read"
    for name in FIELDS:
        ours, theirs = getattr(from_ops, name), getattr(streamed, name)
        assert ours == theirs, f"{name}: {ours} != {theirs}"
