"""history.jsonl → the `sends` and `polls` tables (DESIGN.md §3), and Parquet in and out.

One pass over the file, in the order events happened. Client ops are paired invoke → completion by process
(a process runs one op at a time). What each op contributes:

- `send` (and the send micro-ops of a `txn`): one `sends` row per micro-op, with the completion's type and,
  when the completion carries `[offset, value]`, the offset. The value is taken from the completion when it
  has one, else from the invoke (values are known at invoke time). An invoke that never completed (the run
  was cut short) is a send of type `info` with `complete_time` null: its outcome is unknown.
- `poll` (and the poll micro-ops of a `txn`): one `polls` row per record read, for `ok` ops only (a failed or
  indefinite poll returned nothing we can trust).
- `assign` / `subscribe`: a process with an `ok` subscribe is a subscribe-mode consumer (rebalances allowed).
- `nemesis` events are kept as a small list for the report and the verdicts; `harness` events carry the
  resolved configuration (`run-start`) and whether the final drain read finished (`drain-complete`).
- Anything else (unknown processes or fs) is counted and otherwise ignored.

A run is *complete* only if its history ends with `drain-complete: true`; a last line cut mid-way (the
run was interrupted while writing) is dropped and makes the run incomplete too. A malformed line anywhere
else is an error: the file was damaged, not merely cut short.

Row order is part of the tables' contract: `sends` rows are sorted by `op_index` (the invoke's index), and
within one op keep micro-op order; `polls` rows are in history order and, within one op, in the order the
records were returned. The checker's in-op checks (`int-*`) read that order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from checker.errors import HistoryError
from checker.schema import POLLS_SCHEMA, SENDS_SCHEMA

HISTORY_FILE = "history.jsonl"
SENDS_FILE = "sends.parquet"
POLLS_FILE = "polls.parquet"

CLIENT_OP_FS = ("send", "poll", "txn")


def _pick_loads() -> tuple[Callable[[bytes], Any], str]:
    """The fastest JSON decoder at hand: orjson, else the ujson decoder pandas ships, else the stdlib."""
    try:
        import orjson

        return orjson.loads, "orjson"
    except ImportError:
        pass
    try:  # pandas' vendored ujson: private, so probe it before trusting it
        from pandas._libs._ujson import ujson_loads

        probe = b'{"a": [1, null, "x", [2, -9007199254740993]], "b": {"c/1": true}}'
        if ujson_loads(probe) == json.loads(probe):
            return ujson_loads, "pandas-ujson"
    except Exception:
        pass
    return json.loads, "json"


_LOADS, JSON_DECODER = _pick_loads()


@dataclass(frozen=True)
class NemesisEvent:
    """One nemesis event as recorded: `invoke` when a fault (or heal) was asked for, `info` once it took
    effect."""

    index: int
    time: int
    type: str
    f: str
    value: Any


@dataclass(frozen=True)
class HistoryMeta:
    """What the history says besides the two tables."""

    complete: bool
    """True only if the history ends with `drain-complete: true` and no line was cut."""
    drain_complete: bool | None
    """The value of the harness's final `drain-complete` event, None if there was none."""
    truncated: bool
    """The last line was cut mid-way and was dropped."""
    events: int
    """Events read (lines, not counting a cut last line)."""
    end_time: int
    """The largest `time` in the history (ns since the run started)."""
    run_start: dict[str, Any] | None
    """The value of the optional first `run-start` event: the resolved scenario / configuration."""
    subscribe_processes: frozenset[int]
    """Client processes that subscribed (group-managed assignment) with an ok `subscribe`."""
    nemesis: tuple[NemesisEvent, ...]
    op_counts: dict[str, dict[str, int]]
    """Completed client ops per f and type (`ok`, `fail`, `info`); ops never completed count as `info` and
    also under `unfinished`."""
    ok_poll_times: npt.NDArray[np.int64] = field(repr=False)
    """Completion times of every ok op that polled, including polls that returned nothing."""
    ignored: int = 0
    """Events from unknown processes, or with an unknown f, that were skipped."""
    dropped_records: int = 0
    """Poll records without an offset (the schema needs one); should be 0."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "drain_complete": self.drain_complete,
            "truncated": self.truncated,
            "events": self.events,
            "end_time": self.end_time,
            "subscribe_processes": sorted(self.subscribe_processes),
            "op_counts": self.op_counts,
            "ignored": self.ignored,
            "dropped_records": self.dropped_records,
        }


@dataclass(frozen=True)
class HistoryTables:
    """The result of reading a history: the two tables (SENDS_SCHEMA, POLLS_SCHEMA) and the rest."""

    sends: pa.Table
    polls: pa.Table
    meta: HistoryMeta


class _Builder:
    """Accumulates columns as plain lists while the history is read (the fastest way in CPython)."""

    def __init__(self) -> None:
        # sends: one entry per send micro-op
        self.s_value: list[Any] = []
        self.s_key: list[Any] = []
        self.s_offset: list[Any] = []
        self.s_process: list[int] = []
        self.s_op: list[int] = []
        self.s_type: list[str] = []
        self.s_invoke: list[int] = []
        self.s_complete: list[int | None] = []
        # polls: per (op, key) chunk, then per record
        self.c_key: list[str] = []
        self.c_n: list[int] = []
        self.c_process: list[int] = []
        self.c_op: list[int] = []
        self.c_time: list[int] = []
        self.p_offset: list[Any] = []
        self.p_value: list[Any] = []
        self.ok_poll_times: list[int] = []
        self.dropped = 0

    def add_sends(
        self, mops: Any, process: int, op: int, typ: str, invoke_time: int, complete_time: int | None
    ) -> None:
        for mop in mops:
            if mop[0] != "send":
                continue
            k = mop[1]
            x = mop[2]
            if type(x) is list:
                off, v = x[0], x[1]
            else:
                off, v = None, x
            self.s_value.append(v)
            self.s_key.append(k if type(k) is str else str(k))
            self.s_offset.append(off)
            self.s_process.append(process)
            self.s_op.append(op)
            self.s_type.append(typ)
            self.s_invoke.append(invoke_time)
            self.s_complete.append(complete_time)

    def add_polls(self, mops: Any, process: int, op: int, time: int) -> None:
        for mop in mops:
            if mop[0] != "poll" or len(mop) < 2 or not isinstance(mop[1], dict):
                continue
            for k, pairs in mop[1].items():
                if not pairs:
                    continue
                offs, vals = zip(*pairs, strict=True)
                if None in offs:  # a record without an offset cannot be placed in the log
                    keep = [i for i, o in enumerate(offs) if o is not None]
                    self.dropped += len(offs) - len(keep)
                    offs = tuple(offs[i] for i in keep)
                    vals = tuple(vals[i] for i in keep)
                    if not keep:
                        continue
                self.c_key.append(k)
                self.c_n.append(len(offs))
                self.c_process.append(process)
                self.c_op.append(op)
                self.c_time.append(time)
                self.p_offset.extend(offs)
                self.p_value.extend(vals)

    def sends_table(self) -> pa.Table:
        cols = [
            pa.array(self.s_value, pa.int64()),
            pa.array(self.s_key, pa.string()),
            pa.array(self.s_offset, pa.int64()),
            pa.array(self.s_process, pa.int64()),
            pa.array(self.s_op, pa.int64()),
            pa.array(self.s_type, pa.string()),
            pa.array(self.s_invoke, pa.int64()),
            pa.array(self.s_complete, pa.int64()),
        ]
        table = pa.Table.from_arrays(cols, schema=SENDS_SCHEMA)
        ops = np.asarray(self.s_op, dtype=np.int64)
        if len(ops) > 1 and bool(np.any(ops[1:] < ops[:-1])):
            table = table.take(pa.array(np.argsort(ops, kind="stable")))
        return table

    def polls_table(self) -> pa.Table:
        counts = np.asarray(self.c_n, dtype=np.int64)

        def rep(xs: list[int]) -> pa.Array:
            return pa.array(np.repeat(np.asarray(xs, dtype=np.int64), counts), pa.int64())

        keys = pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(self.c_key), dtype=np.int32), counts)),
            pa.array(self.c_key, pa.string()),
        ).cast(pa.string())
        cols = [
            pa.array(self.p_value, pa.int64()),
            keys,
            pa.array(self.p_offset, pa.int64()),
            rep(self.c_process),
            rep(self.c_op),
            pa.repeat(pa.scalar("ok", pa.string()), len(self.p_value)),
            rep(self.c_time),
        ]
        return pa.Table.from_arrays(cols, schema=POLLS_SCHEMA)


def history_to_tables(path: Path | str) -> HistoryTables:
    """Read `history.jsonl` (or a run directory holding one) into the sends and polls tables.

    Raises HistoryError when the file is missing, unreadable, or damaged before its last line.
    """
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise HistoryError(
            f"no history at {path}: pass a run directory (results/<run>/) that holds {HISTORY_FILE}, "
            "as written by `kafka-chaos run`"
        ) from None
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}; check the path and permissions") from e
    return parse_history(data, source=str(path))


def parse_history(data: bytes, *, source: str = HISTORY_FILE) -> HistoryTables:
    """`history_to_tables` on the bytes of a history file."""
    loads = _LOADS
    lines = data.split(b"\n")
    tail = lines.pop()  # b"" when the file ends with a newline, else a last line with no newline
    truncated = False
    if tail.strip():
        try:
            loads(tail)
            lines.append(tail)  # complete JSON, just no final newline
        except ValueError:
            truncated = True

    b = _Builder()
    pending: dict[int, dict[str, Any]] = {}
    counts: dict[str, dict[str, int]] = {}
    subscribers: set[int] = set()
    nemesis: list[NemesisEvent] = []
    run_start: dict[str, Any] | None = None
    drain: bool | None = None
    ignored = 0
    events = 0
    end_time = 0
    lineno = 0
    add_sends = b.add_sends
    add_polls = b.add_polls
    ok_poll_times = b.ok_poll_times

    try:
        for lineno, line in enumerate(lines, 1):
            if not line or line.isspace():
                continue
            o = loads(line)
            events += 1
            proc = o["process"]
            t = o["time"]
            if t > end_time:
                end_time = t
            if type(proc) is int:
                typ = o["type"]
                f = o.get("f")
                if typ == "invoke":
                    pending[proc] = o
                    continue
                inv = pending.pop(proc, None)
                index = o.get("index", lineno - 1)
                op_index = index if inv is None else inv.get("index", index)
                by_type = counts.get(f)
                if by_type is None:
                    by_type = counts[f] = {"ok": 0, "fail": 0, "info": 0}
                by_type[typ] = by_type.get(typ, 0) + 1
                if f == "send" or f == "txn":
                    value = o.get("value")
                    if type(value) is not list or not value:
                        value = inv.get("value") if inv is not None else None
                    if value:
                        add_sends(value, proc, op_index, typ, t if inv is None else inv["time"], t)
                    if f == "txn" and typ == "ok":
                        add_polls(o.get("value") or (), proc, index, t)
                        ok_poll_times.append(t)
                elif f == "poll":
                    if typ == "ok":
                        add_polls(o.get("value") or (), proc, index, t)
                        ok_poll_times.append(t)
                elif f == "subscribe":
                    if typ == "ok":
                        subscribers.add(proc)
                elif f not in ("assign", "crash"):
                    ignored += 1
            elif proc == "nemesis":
                nemesis.append(
                    NemesisEvent(
                        index=o.get("index", lineno - 1),
                        time=t,
                        type=o.get("type", "info"),
                        f=str(o.get("f")),
                        value=o.get("value"),
                    )
                )
            elif proc == "harness":
                f = o.get("f")
                if f == "drain-complete":
                    drain = o.get("value") is True
                elif f == "run-start":
                    v = o.get("value")
                    run_start = v if isinstance(v, dict) else {"value": v}
                else:
                    ignored += 1
            else:
                ignored += 1
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise HistoryError(
            f"{source}, line {lineno}: not a valid history event ({type(e).__name__}: {e}). Only the "
            "last line of an interrupted run may be incomplete; this file is damaged earlier. Re-run the "
            "scenario, or cut the file before that line to check what precedes it."
        ) from None

    # Ops still pending when the history ended: their outcome is unknown.
    for proc, inv in pending.items():
        f = str(inv.get("f"))
        by_type = counts.setdefault(f, {"ok": 0, "fail": 0, "info": 0})
        by_type["info"] = by_type.get("info", 0) + 1
        by_type["unfinished"] = by_type.get("unfinished", 0) + 1
        if f in ("send", "txn") and inv.get("value"):
            try:
                add_sends(inv["value"], proc, inv.get("index", 0), "info", inv["time"], None)
            except (KeyError, TypeError, IndexError) as e:
                raise HistoryError(f"{source}: malformed invoke of process {proc}: {e}") from None

    sends = b.sends_table()
    polls = b.polls_table()
    meta = HistoryMeta(
        complete=drain is True and not truncated,
        drain_complete=drain,
        truncated=truncated,
        events=events,
        end_time=end_time,
        run_start=run_start,
        subscribe_processes=frozenset(subscribers),
        nemesis=tuple(nemesis),
        op_counts={str(k): v for k, v in counts.items()},
        ok_poll_times=np.asarray(ok_poll_times, dtype=np.int64),
        ignored=ignored,
        dropped_records=b.dropped,
    )
    return HistoryTables(sends=sends, polls=polls, meta=meta)


def write_tables(tables: HistoryTables, run_dir: Path | str) -> tuple[Path, Path]:
    """Write `sends.parquet` and `polls.parquet` into `run_dir`; return their paths."""
    run_dir = Path(run_dir)
    sends_path, polls_path = run_dir / SENDS_FILE, run_dir / POLLS_FILE
    pq.write_table(tables.sends, sends_path)
    pq.write_table(tables.polls, polls_path)
    return sends_path, polls_path


def read_tables(run_dir: Path | str) -> tuple[pa.Table, pa.Table]:
    """Read `sends.parquet` and `polls.parquet` from `run_dir`, cast to the shared schemas."""
    run_dir = Path(run_dir)
    try:
        sends = pq.read_table(run_dir / SENDS_FILE)
        polls = pq.read_table(run_dir / POLLS_FILE)
    except (FileNotFoundError, OSError) as e:
        raise HistoryError(
            f"cannot read the tables in {run_dir} ({e}); run `kafka-chaos check {run_dir}` to derive them "
            f"from {HISTORY_FILE}"
        ) from None
    return sends.select(SENDS_SCHEMA.names).cast(SENDS_SCHEMA), polls.select(POLLS_SCHEMA.names).cast(
        POLLS_SCHEMA
    )
