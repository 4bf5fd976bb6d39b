"""Spark's per-partition analysis (spark/kernel.py, the numpy code every Spark job runs) agrees with the checker on
a history (every checker unit history): the same counts and identifying fields of every anomaly
Spark computes, from the checker's own three tables; a history the checker refuses for a value nobody sent gives
the kernel's `#no-writer` row. No JVM: the job around the kernel has its own agreement tests (tests/unit/spark)."""

from __future__ import annotations

import sys
from pathlib import Path

from kafka_chaos.checker.tables import parse_history
from kafka_chaos.errors import HistoryError
from kafka_chaos.spark import kernel
from kafka_chaos.spark.job import _assemble

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "spark"))
from spark_helpers import checker_result, core, kernel_rows  # the spark tests' definition of what must agree

UNCAPPED = 10**6


def assert_spark_agrees(text: str) -> None:
    t = parse_history(text.encode())
    rows = kernel_rows(t, UNCAPPED)
    refused = [r for r in rows if r["kind"] == kernel.KIND_NO_WRITER]
    try:
        expected = checker_result(t)
    except HistoryError:
        assert refused, "the checker refused a value nobody sent; the kernel did not"
        return
    assert not refused, refused
    assert core(_assemble(rows, UNCAPPED)) == core(expected)
