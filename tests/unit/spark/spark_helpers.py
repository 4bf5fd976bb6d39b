"""Helpers for spark/ tests: what both engines must agree on, and a tiny history builder."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT

FIELDS: dict[str, tuple[str, ...]] = {
    "lost-write": ("key", "value", "offset", "index", "max_read_index"),
    "unseen": ("key", "count", "values", "ops"),
    "duplicate": ("key", "value", "count", "offsets", "indexes", "ops"),
    "inconsistent-offsets": ("key", "offset", "index", "values", "ops"),
    "G1a": ("key", "value", "offset", "ops"),
    "precommitted-read": ("key", "value", "offset", "ops"),
    **{name: ("key", "process", "values", "offsets", "delta", "skipped", "ops")
       for name in ("int-poll-skip", "int-nonmonotonic-poll", "int-send-skip", "int-nonmonotonic-send",
                    "nonmonotonic-send")},
    **{name: ("key", "process", "subscribe", "values", "offsets", "delta", "skipped", "ops")
       for name in ("poll-skip", "nonmonotonic-poll")},
}
"""What must agree between the engines, per anomaly Spark computes."""
if "garbage-read" in ANOMALIES_BAD_BY_DEFAULT:  # compared wherever the checker finds it too
    FIELDS["garbage-read"] = ("key", "value", "offset", "process", "ops", "times")


def core(result: dict[str, Any]) -> dict[str, Any]:
    """The part of a result both engines must agree on: counts and identifying fields of the kinds Spark
    computes."""
    counts = {k: v for k, v in result["anomaly_counts"].items() if k in FIELDS}
    anomalies = {
        name: sorted(
            (json.dumps({f: inst.get(f) for f in fields}, sort_keys=True)
             for inst in result["anomalies"].get(name, [])),
        )
        for name, fields in FIELDS.items()
    }
    return {"anomaly_counts": counts, "anomalies": {k: v for k, v in anomalies.items() if v}}


def kernel_rows(t: Any, cap: int = 10**6) -> list[dict[str, Any]]:
    """The kernel's findings on a parsed history (checker.tables.HistoryTables): its three tables, and the
    rebalance logs, empty reads, resets and subscribe-mode consumers the job reads beside them."""
    from kafka_chaos.spark import kernel

    x = t.extras
    rows = kernel.input_rows(t.sends, t.polls, x.reads, rebalanced=dict(x.rebalanced), empty=x.empty)
    found = kernel.analyse_table(rows, cap=cap, max_values=cap,
                                 resets=[(r.process, r.index, r.names) for r in x.resets],
                                 subscribers=[(p, 0, 2**62) for p in t.meta.subscribe_processes])
    out: list[dict[str, Any]] = found.to_pylist()
    return out


def checker_result(t: Any) -> dict[str, Any]:
    """The checker's findings on the same parsed history, with what the kernel is given."""
    from kafka_chaos.checker import analyse

    out: dict[str, Any] = analyse(t.sends, t.polls, extras=t.extras,
                                  subscribe_processes=t.meta.subscribe_processes).to_dict()
    return out


class History:
    """A tiny history.jsonl builder (docs/architecture.md §3): dense indexes, times 1 µs apart."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def event(self, process: Any, type_: str, f: str, value: Any) -> int:
        i = len(self.events)
        self.events.append({"index": i, "time": (i + 1) * 1000, "process": process, "type": type_, "f": f,
                            "value": value})
        return i

    def send(self, p: int, records: list[tuple[str, int, int | None]], type_: str = "ok",
             offsets_on_info: bool = False) -> int:
        i = self.event(p, "invoke", "send", [["send", k, v] for k, v, _ in records])
        if type_ == "ok" or offsets_on_info:
            self.event(p, type_, "send", [["send", k, [o, v]] for k, v, o in records])
        else:
            self.event(p, type_, "send", [["send", k, v] for k, v, _ in records])
        return i

    def poll(self, p: int, records: dict[str, list[tuple[int, int]]]) -> int:
        self.event(p, "invoke", "poll", [["poll"]])
        result = {k: [list(r) for r in rs] for k, rs in records.items()}
        return self.event(p, "ok", "poll", [["poll", result]])

    def txn(self, p: int, invoke: list[Any], complete: list[Any], type_: str = "ok") -> tuple[int, int]:
        """A transaction (docs/architecture.md §3 `txn`): micro-ops as invoked and as completed."""
        return self.event(p, "invoke", "txn", invoke), self.event(p, type_, "txn", complete)

    def assign(self, p: int, value: Any) -> int:
        self.event(p, "invoke", "assign", value)
        return self.event(p, "ok", "assign", value)

    def tables(self) -> tuple[pa.Table, pa.Table]:
        from kafka_chaos.checker.tables import parse_history

        self.event("harness", "info", "drain-complete", True)
        data = "".join(json.dumps(e) + "\n" for e in self.events).encode()
        t = parse_history(data)
        return t.sends, t.polls


def write_run(run_dir: Path, sends: pa.Table, polls: pa.Table, extra_reads: pa.Table | None = None) -> Path:
    """The tables `kafka-chaos check` writes (checker.tables.write_tables), extra reads empty unless given."""
    from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA

    run_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(sends, run_dir / "sends.parquet")
    pq.write_table(polls, run_dir / "polls.parquet")
    pq.write_table(EXTRA_READS_SCHEMA.empty_table() if extra_reads is None else extra_reads,
                   run_dir / "extra_reads.parquet")
    return run_dir
