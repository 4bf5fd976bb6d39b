"""The pure parts of bench/client_drivers.py: reading ProducerPerformance's totals and the ratio table."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
from rich.console import Console

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))  # the benches run as scripts from there
from client_drivers import Row, parse_perf_summary, payload, render, round_order, table_rows

# ProducerPerformance's output: a periodic line every 5 s (no percentiles), then the totals once
OUTPUT = """\
136786 records sent, 27346.2 records/sec (2.61 MB/sec), 1450.3 ms avg latency, 2210.0 ms max latency.
100000 records sent, 27130.765047 records/sec (2.59 MB/sec), 2046.31 ms avg latency, 3051.00 ms max latency, \
2101 ms 50th, 2890 ms 95th, 3002 ms 99th, 3049 ms 99.9th.
"""


def test_the_summary_is_the_closing_line_not_a_periodic_one() -> None:
    s = parse_perf_summary(OUTPUT)
    assert (s.records, s.records_per_s, s.mb_per_s, s.avg_latency_ms, s.max_latency_ms) == (
        100000, 27130.765047, 2.59, 2046.31, 3051.0)


def test_output_without_a_summary_is_an_error_showing_its_end() -> None:
    failed = "136786 records sent, 27346.2 records/sec (2.61 MB/sec), 1450.3 ms avg latency, 2210.0 ms max latency.\n" \
             "org.apache.kafka.common.errors.TimeoutException: Topic client-bench not present in metadata\n"
    with pytest.raises(ValueError, match="not present in metadata"):
        parse_perf_summary(failed)


def test_each_driver_gets_its_ratio_to_the_reference_and_whether_it_meets_its_target() -> None:
    reference = Row("ProducerPerformance", 20000.0)
    rows = table_rows(reference, [Row("in process", 25000.0, 1.0), Row("pinned", 15000.0, 0.8),
                                  Row("java", 16000.0, 0.8)])
    assert rows == [("ProducerPerformance", "20,000", "1.00", "", ""),
                    ("in process", "25,000", "1.25", "≥ 1.0", "yes"),
                    ("pinned", "15,000", "0.75", "≥ 0.8", "no"),
                    ("java", "16,000", "0.80", "≥ 0.8", "yes")]


def test_a_driver_that_did_not_run_shows_why_instead_of_figures() -> None:
    rows = table_rows(Row("ProducerPerformance", 20000.0), [Row("java", math.nan, 0.8, "no JDK on PATH")])
    assert rows[1] == ("java", "—", "—", "≥ 0.8", "no JDK on PATH")


def test_the_rendered_table_has_every_row() -> None:
    console = Console(width=120, record=True)
    console.print(render("t", Row("ProducerPerformance", 20000.0), [Row("pinned", 10000.0, 0.8)]))
    text = console.export_text()
    assert "20,000" in text and "0.50" in text and "≥ 0.8" in text


def test_the_payload_is_printable_and_of_the_size_asked() -> None:
    value = payload(100)
    assert len(value) == 100 and value.isalpha() and value.isupper() and value == payload(100)


def test_over_a_cycle_every_producer_runs_in_every_position_and_after_every_other_once() -> None:
    names = ["reference", "a", "b", "c"]
    orders = [round_order(names, r) for r in range(4)]
    assert orders[0] == ["reference", "a", "c", "b"]
    assert all(sorted(o) == sorted(names) for o in orders) and round_order(names, 4) == orders[0]
    for position in range(4):
        assert sorted(o[position] for o in orders) == sorted(names)
    follows = [(o[i], o[i + 1]) for o in orders for i in range(3)]
    assert len(follows) == len(set(follows)) == 12  # every ordered pair once
