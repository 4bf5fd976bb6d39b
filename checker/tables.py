"""history.jsonl → the `sends` and `polls` tables (docs/architecture.md §3), and Parquet in and out.

One pass over the file, in the order events happened. Client ops are paired invoke → completion by process
(a process runs one op at a time). What each op contributes:

- `send` (and the send micro-ops of a `txn`): one `sends` row per micro-op, with the completion's type and,
  when the completion carries `[offset, value]`, the offset. The value is taken from the completion when it
  has one, else from the invoke (values are known at invoke time). An invoke that never completed (the run
  was cut short) is a send of type `info` with `complete_time` null: its outcome is unknown.
- `poll` (and the poll micro-ops of a `txn`): one `polls` row per record an `ok` op read at a known offset.
  Everything else a poll returned goes to `PollExtras.reads` (Jepsen reads it too, jepsen.tests.kafka): the
  records of `fail` and `info` polls (`version-orders` takes the log from *all* polls; `int-poll-skip+
  nonmonotonic-cases` and `poll-skip+nonmonotonic-cases` check them) and ok records whose offset is unknown
  (read, so neither lost nor unseen, but at no place in the log), each with its position among the op's
  records of its key. A key an op returned with no records is in `PollExtras.empty`; a poll's
  `rebalance_log` (`[{"keys": [...]}, ...]`) in `PollExtras.rebalanced`.
- `assign` / `subscribe`: a process with an `ok` subscribe is a subscribe-mode consumer (rebalances allowed);
  every ok or info one is a `Reset` in `PollExtras.resets` (Jepsen's positions restart there).
- `nemesis` events are kept as a small list for the report and the verdicts; `harness` events carry the
  resolved configuration (`run-start`) and whether the final drain read finished (`drain-complete`).
- Events of other processes, and Jepsen's `debug-topic-partitions`, are counted and otherwise ignored. A
  client op of another f or type, or a poll value of the wrong shape, is an error naming the line and what
  was expected there.

A run is *complete* only if its history ends with `drain-complete: true`; a last line cut mid-way (the
run was interrupted while writing) is dropped and makes the run incomplete too. A malformed line anywhere
else is an error: the file was damaged, not merely cut short.

Row order is part of the tables' contract: `sends` rows are sorted by `op_index` (the invoke's index), and
within one op keep micro-op order; `polls` rows are in history order and, within one op, in the order the
records were returned. The checker's in-op checks (`int-*`) read that order.
"""

from __future__ import annotations

import io
import json
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kafka_chaos.checker.ops_series import ops_series
from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA, OPS_SCHEMA, POLLS_SCHEMA, SENDS_SCHEMA, empty_table
from kafka_chaos.errors import HistoryError
from kafka_chaos.rundir import EXTRA_READS_FILE, HISTORY_FILE, OPS_FILE, POLLS_FILE, SENDS_FILE, STATE_FILE

CLIENT_OP_FS = ("send", "poll", "txn")
OP_TYPES = frozenset(("invoke", "ok", "fail", "info"))
UNCHECKED_CLIENT_FS = frozenset(("assign", "subscribe", "crash", "debug-topic-partitions"))
"""Client ops Jepsen's Kafka workload records that hold no record to check (assign/subscribe move a
consumer's partitions; `debug-topic-partitions` is Jepsen's diagnostic). Any other f is a mistake in the
history (a misspelt `send` would silently drop every write), so it is an error."""


class _Unexpected(ValueError):
    """A history event of the wrong shape: the message says what was expected there."""
SPILL_EVERY = 1 << 18
"""Lines between moves of the accumulated columns into Arrow (a power of two): bounds the parse's memory."""


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
    error: Any = None
    """The nemesis's error, when the fault (or heal) failed (it may still have done something)."""
    process: str = "nemesis"
    """`nemesis`, or `operator` for an operation's steps (recorded like faults)."""


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
    drain_start: int | None = None
    """When the final read began (the harness's `drain-start`): consumer lag is measured before it."""
    ignored: int = 0
    """Events from unknown processes, or with an unknown f, that were skipped."""
    unplaced_records: int = 0
    """Records ok polls returned without an offset: read, but at no known place in the log (PollExtras)."""
    isolation: dict[int, str] = field(default_factory=dict)
    """Each reader's isolation level, as its `assign` said (checker.anomalies.cycles.TxnHistory.isolation)."""
    ops: pa.Table = field(default_factory=lambda: empty_table(OPS_SCHEMA), repr=False)
    """OPS_SCHEMA: every completed client op, in history order (what the report draws, `ops.parquet`)."""
    fetch_from: tuple[dict[str, Any], ...] = ()
    """The harness's `fetch-from` events (which replica a rack-aware consumer reads from), with their `time`."""
    unfinished: dict[str, int] = field(default_factory=dict)
    """Invokes never completed, by f: those pending at the end and those a process's next invoke replaced."""

    @property
    def has_transactions(self) -> bool:
        """The history holds `txn` ops: only then does the cycle search need a second pass over the file."""
        return "txn" in self.op_counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "drain_complete": self.drain_complete,
            "drain_start": self.drain_start,
            "truncated": self.truncated,
            "events": self.events,
            "end_time": self.end_time,
            "subscribe_processes": sorted(self.subscribe_processes),
            "op_counts": self.op_counts,
            "ignored": self.ignored,
            "unplaced_records": self.unplaced_records,
        }


@dataclass(frozen=True)
class Reset:
    """An ok or info `assign` / `subscribe` of a process (its completion's history index): Jepsen's
    `poll-skip+nonmonotonic-cases-per-process` and `nonmonotonic-send-cases` keep, from there on, only the
    positions of the keys it names. `names` are what its value lists: keys (`assign`, Jepsen's `subscribe`)
    or topics (kafka-chaos's `subscribe`); a key is kept when it or its topic is named."""

    process: int
    index: int
    names: frozenset[str]

    def keeps(self, key: str) -> bool:
        return key in self.names or key.rpartition("/")[0] in self.names


@dataclass(frozen=True)
class PollExtras:
    """What Jepsen's rules read from a general history besides the two tables. Empty for kafka-chaos's own
    queue workload, whose polls are ok, with offsets, and which assigns once per process."""

    reads: pa.Table = field(default_factory=lambda: empty_table(EXTRA_READS_SCHEMA))
    """EXTRA_READS_SCHEMA: records of fail and info polls, and records of ok polls at unknown offsets."""
    resets: tuple[Reset, ...] = ()
    rebalanced: dict[int, frozenset[str]] = field(default_factory=dict)
    """Poll (or txn) op index → the keys its `rebalance_log` names."""
    empty: tuple[tuple[int, int, str, str], ...] = ()
    """(process, op index, key, type) of each key a poll returned with no records."""

    def __bool__(self) -> bool:
        return bool(self.reads.num_rows or self.resets or self.rebalanced or self.empty)


def _names(value: Any) -> frozenset[str]:
    """The keys (or topics) an assign / subscribe value names: a list, or `{"keys": [...], ...}`."""
    if isinstance(value, dict):
        value = value.get("keys")
    return frozenset(str(x) for x in value) if isinstance(value, list) else frozenset()


@dataclass(frozen=True)
class HistoryTables:
    """The result of reading a history: the two tables (SENDS_SCHEMA, POLLS_SCHEMA) and the rest."""

    sends: pa.Table
    polls: pa.Table
    meta: HistoryMeta
    extras: PollExtras = field(default_factory=PollExtras)
    """What else Jepsen's rules read (fail / info polls, unknown offsets, resets, rebalances)."""


def _ints(xs: list[Any], what: str) -> pa.Array:
    """An int64 column from a list of Python ints (None → null), through numpy: pa.array on a list of
    ints is ~50x slower."""
    n = len(xs)
    try:
        try:
            return pa.array(np.fromiter(xs, dtype=np.int64, count=n))
        except TypeError:  # nulls
            mask = np.fromiter((x is None for x in xs), dtype=bool, count=n)
            vals = np.fromiter((0 if x is None else x for x in xs), dtype=np.int64, count=n)
            return pa.array(vals, mask=mask)
    except (TypeError, ValueError, OverflowError) as e:
        raise HistoryError(f"history holds a {what} that is not a 64-bit integer ({e})") from None


def _strings(xs: list[Any]) -> pa.Array:
    try:
        return pa.array(xs, pa.string())
    except (pa.ArrowTypeError, pa.ArrowInvalid):
        return pa.array([str(x) for x in xs], pa.string())


class _Columns:
    """Columns accumulated as plain lists while the history is read (the fastest way in CPython): per op
    (repeated over its rows at the end) and per row."""

    def __init__(self) -> None:
        self.n: list[int] = []  # rows of each op
        self.process: list[int] = []
        self.op: list[int] = []
        self.type: list[str] = []
        self.time: list[int] = []  # invoke time (sends) or completion time (polls)
        self.complete: list[int | None] = []  # sends only
        self.key: list[Any] = []
        self.value: list[Any] = []
        self.offset: list[Any] = []
        self.chunks: list[pa.Table] = []


    def _lists(self) -> list[list[Any]]:
        return [self.n, self.process, self.op, self.type, self.time, self.complete, self.key, self.value,
                self.offset]  # fmt: skip

    def spill(self, build: Callable[[], pa.Table]) -> None:
        """Move what the lists hold into an Arrow chunk and empty them in place (the parse loop holds their
        bound `append`s): Arrow columns take a fraction of the memory of lists of Python objects."""
        if self.n:
            self.chunks.append(build())
            for xs in self._lists():
                xs.clear()

    def table(self, build: Callable[[], pa.Table]) -> pa.Table:
        self.spill(build)
        if not self.chunks:
            return build()
        return pa.concat_tables(self.chunks).combine_chunks() if len(self.chunks) > 1 else self.chunks[0]

    def sends_table(self) -> pa.Table:
        counts = np.asarray(self.n, dtype=np.int64)
        complete = _ints(self.complete, "time")
        comp = np.repeat(pc.fill_null(complete, 0).to_numpy(zero_copy_only=False), counts)
        comp_mask = np.repeat(np.asarray(complete.is_null().to_numpy(zero_copy_only=False)), counts)
        types = pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(self.type), dtype=np.int32), counts)), _strings(self.type)
        ).cast(pa.string())
        cols = [
            _ints(self.value, "value"),
            _strings(self.key),
            _ints(self.offset, "offset"),
            pa.array(np.repeat(_ints(self.process, "process").to_numpy(), counts)),
            pa.array(np.repeat(_ints(self.op, "index").to_numpy(), counts)),
            types,
            pa.array(np.repeat(_ints(self.time, "time").to_numpy(), counts)),
            pa.array(comp, mask=comp_mask),
        ]
        return pa.Table.from_arrays(cols, schema=SENDS_SCHEMA)

    def polls_table(self) -> pa.Table:
        counts = np.asarray(self.n, dtype=np.int64)
        keys = pa.DictionaryArray.from_arrays(
            pa.array(np.repeat(np.arange(len(self.key), dtype=np.int32), counts)), _strings(self.key)
        ).cast(pa.string())
        cols = [
            _ints(self.value, "value"),
            keys,
            _ints(self.offset, "offset"),
            pa.array(np.repeat(_ints(self.process, "process").to_numpy(), counts)),
            pa.array(np.repeat(_ints(self.op, "index").to_numpy(), counts)),
            pa.repeat(pa.scalar("ok", pa.string()), len(self.value)),
            pa.array(np.repeat(_ints(self.time, "time").to_numpy(), counts)),
        ]
        return pa.Table.from_arrays(cols, schema=POLLS_SCHEMA)


class _Ops:
    """Every completed client op (OPS_SCHEMA), accumulated as lists and moved into Arrow with the columns."""

    def __init__(self) -> None:
        self.kinds: dict[tuple[Any, Any], int] = {}  # (f, type) → its code, in first-seen order
        self.kind: list[int] = []
        self.index: list[int] = []
        self.time: list[int] = []
        self.invoke_index: list[int | None] = []
        self.invoke_time: list[int | None] = []
        self.chunks: list[pa.Table] = []

    def spill(self) -> None:
        if not self.kind:
            return
        names = list(self.kinds)
        code = pa.array(np.fromiter(self.kind, dtype=np.int32, count=len(self.kind)))
        cols = [
            _ints(self.index, "index"),
            pa.DictionaryArray.from_arrays(code, _strings([f for f, _ in names])).cast(pa.string()),
            pa.DictionaryArray.from_arrays(code, _strings([t for _, t in names])).cast(pa.string()),
            _ints(self.time, "time"),
            _ints(self.invoke_index, "index"),
            _ints(self.invoke_time, "time"),
        ]
        self.chunks.append(pa.Table.from_arrays(cols, schema=OPS_SCHEMA))
        for xs in (self.kind, self.index, self.time, self.invoke_index, self.invoke_time):
            xs.clear()

    def table(self) -> pa.Table:
        self.spill()
        if not self.chunks:
            return empty_table(OPS_SCHEMA)
        return pa.concat_tables(self.chunks)  # chunked: only written to Parquet, so no copy into one chunk


def history_to_tables(path: Path | str) -> HistoryTables:
    """Read `history.jsonl` (or a run directory holding one) into the sends and polls tables.

    Raises HistoryError when the file is missing, unreadable, or damaged before its last line.
    """
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    try:
        with path.open("rb", buffering=1 << 20) as fh:
            return parse_lines(fh, source=str(path))
    except FileNotFoundError:
        raise HistoryError(
            f"no history at {path}: pass a run directory (results/<run>/) that holds {HISTORY_FILE}, "
            "as written by `kafka-chaos run`"
        ) from None
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}; check the path and permissions") from e


def parse_history(data: bytes, *, source: str = HISTORY_FILE) -> HistoryTables:
    """`history_to_tables` on the bytes of a history file."""
    return parse_lines(io.BytesIO(data), source=source)


def parse_lines(lines: Iterable[bytes], *, source: str) -> HistoryTables:
    """One pass over the lines (each with its newline, except perhaps the last). Also what a run's recorder
    feeds as it writes (checker.stored_tables.TableBuilder).

    The loop is written for CPython's speed (local names, no per-record method calls): it is the one
    part of checking a run that cannot be vectorised.
    """
    loads = _LOADS
    spill_mask = SPILL_EVERY - 1
    truncated = False
    sends, polls, ops = _Columns(), _Columns(), _Ops()
    kinds = ops.kinds
    o_kind, o_index, o_time, o_inv, o_inv_time = (ops.kind.append, ops.index.append, ops.time.append,
                                                  ops.invoke_index.append, ops.invoke_time.append)
    fetch_from: list[dict[str, Any]] = []
    abandoned: list[str] = []
    s_n, s_proc, s_op, s_type, s_time, s_comp = (
        sends.n.append,
        sends.process.append,
        sends.op.append,
        sends.type.append,
        sends.time.append,
        sends.complete.append,
    )
    s_key, s_val, s_off = sends.key.append, sends.value.append, sends.offset.append
    p_n, p_proc, p_op, p_time, p_key = (
        polls.n.append,
        polls.process.append,
        polls.op.append,
        polls.time.append,
        polls.key.append,
    )
    p_vals, p_offs = polls.value.extend, polls.offset.extend
    ok_poll_times: list[int] = []
    pending: dict[int, dict[str, Any]] = {}
    counts: dict[tuple[Any, Any], int] = {}
    subscribers: set[int] = set()
    isolation: dict[int, str] = {}
    nemesis: list[NemesisEvent] = []
    run_start: dict[str, Any] | None = None
    drain: bool | None = None
    drain_start: int | None = None
    ignored = dropped = blank = lineno = t = 0
    send_types: list[str] = []
    send_type = send_types.append

    extra_rows: list[tuple[Any, ...]] = []  # EXTRA_READS_SCHEMA rows
    extra_add = extra_rows.append
    empty_reads: list[tuple[int, int, str, str]] = []
    rebalanced: dict[int, frozenset[str]] = {}
    resets: list[Reset] = []

    def add_polls(value: Any, proc: int, index: int, t: int, typ: str = "ok") -> int:
        """The records a poll (or txn) completion returned; returns how many ok records had no offset."""
        unplaced = 0
        ok = typ == "ok"
        if type(value) is not list:
            if not ok:
                return 0  # a failed or indefinite poll that returned nothing
            raise _Unexpected(f"value {_short(value)}: an ok poll's value is a list of micro-ops "
                              '[["poll", {key: [[offset, value], ...]}], ...]')
        per_key: dict[str, int] = {}  # records of each key so far in this op (Jepsen's op-reads concatenates)
        for mop in value:
            if type(mop) is not list or not mop or mop[0] != "poll":
                continue  # a txn's sends (or a mistake there that the send path names)
            if len(mop) < 2 or type(mop[1]) is not dict:
                if not ok:
                    continue  # the invoke's [["poll"]], repeated by a poll that returned nothing
                raise _Unexpected(f"micro-op {_short(mop)}: a completed poll micro-op is "
                                  '["poll", {key: [[offset, value], ...]}]')
            for k, pairs in mop[1].items():
                base = per_key.get(k, 0)
                per_key[k] = base
                if not pairs:
                    continue
                try:
                    offs, vals = zip(*pairs, strict=True)
                except (ValueError, TypeError):
                    raise _Unexpected(f"records {_short(pairs)} of key {k!r}: a poll returns, per key, a list "
                                      "of [offset, value] pairs") from None
                per_key[k] = base + len(offs)
                if not ok or None in offs:  # Jepsen's rules read these too (PollExtras)
                    keep = []
                    for i, (off, val) in enumerate(zip(offs, vals, strict=True)):
                        if ok and off is not None:
                            keep.append(i)
                        else:
                            extra_add((val, k, off, proc, index, typ, t, base + i))
                    unplaced += len(offs) - len(keep) if ok else 0
                    if not keep:
                        continue
                    offs, vals = tuple(offs[i] for i in keep), tuple(vals[i] for i in keep)
                p_n(len(offs))
                p_proc(proc)
                p_op(index)
                p_time(t)
                p_key(k)
                p_offs(offs)
                p_vals(vals)
        for k, n in per_key.items():
            if not n:
                empty_reads.append((proc, index, k, typ))
        if ok:
            ok_poll_times.append(t)
        return unplaced

    def add_rebalances(o: dict[str, Any], index: int) -> None:
        """Jepsen's `:rebalance-log`: `[{"keys": [...]}, ...]` on a poll's completion."""
        log = o.get("rebalance_log", o.get("rebalance-log"))
        if type(log) is list:
            keys = frozenset(str(k) for r in log if type(r) is dict and type(r.get("keys")) is list
                             for k in r["keys"])
            if keys:
                rebalanced[index] = keys

    def read_polls(o: dict[str, Any], proc: int, t: int, typ: str, lineno: int) -> int:
        """What a poll's or txn's completion read (its records, its rebalance log); returns the ok records
        without an offset."""
        index = o.get("index", lineno - 1)
        unplaced = add_polls(o.get("value") if typ != "ok" else o["value"], proc, index, t, typ)
        if "rebalance_log" in o or "rebalance-log" in o:
            add_rebalances(o, index)
        return unplaced

    try:
        for lineno, line in enumerate(lines, 1):
            try:
                o = loads(line)
            except ValueError:
                if not line.strip():
                    blank += 1
                    continue
                if line.endswith(b"\n"):
                    raise
                truncated = True  # the last line, cut mid-way: drop it
                break
            if not lineno & spill_mask:
                sends.spill(sends.sends_table)
                polls.spill(polls.polls_table)
                ops.spill()
            proc = o["process"]
            t = o["time"]  # events are in time order: the last t is the end
            if type(proc) is int:
                typ = o["type"]
                if typ == "invoke":
                    if proc in pending:  # its previous op never completed (the report counts it)
                        abandoned.append(str(pending[proc].get("f")))
                    pending[proc] = o
                    continue
                if typ not in OP_TYPES:
                    raise _Unexpected(f"type {typ!r}: a client op's type is one of invoke, ok, fail, info")
                f = o["f"]
                inv = pending.pop(proc, None)
                kind = kinds.get((f, typ))
                if kind is None:
                    kind = kinds[(f, typ)] = len(kinds)
                o_kind(kind)
                o_index(o.get("index", lineno - 1))
                o_time(t)
                if inv is None:
                    o_inv(None)
                    o_inv_time(None)
                else:
                    o_inv(inv.get("index", lineno - 1))
                    o_inv_time(inv["time"])
                if f == "send":
                    send_type(typ)  # counted at the end: cheaper than a dict update per op
                else:
                    ck = (f, typ)
                    counts[ck] = counts.get(ck, 0) + 1
                if f == "poll":
                    dropped += read_polls(o, proc, t, typ, lineno)
                elif f == "send" or f == "txn":
                    value = o.get("value")
                    if type(value) is not list or not value:
                        value = inv.get("value") if inv is not None else None
                    if value:
                        n = 0
                        for mop in value:
                            if mop[0] == "send":
                                x = mop[2]
                                if type(x) is list:
                                    s_off(x[0])
                                    s_val(x[1])
                                else:
                                    s_off(None)
                                    s_val(x)
                                s_key(mop[1])
                                n += 1
                        if n:
                            s_n(n)
                            s_proc(proc)
                            s_type(typ)
                            s_comp(t)
                            if inv is None:
                                s_op(o.get("index", lineno - 1))
                                s_time(t)
                            else:
                                s_op(inv.get("index", lineno - 1))
                                s_time(inv["time"])
                    if f == "txn":
                        dropped += read_polls(o, proc, t, typ, lineno)
                elif f == "subscribe" or f == "assign":
                    if typ == "ok" and f == "subscribe":
                        subscribers.add(proc)
                    if typ == "ok" or typ == "info":
                        v = o.get("value")
                        if v is None and inv is not None:
                            v = inv.get("value")
                        resets.append(Reset(proc, o.get("index", lineno - 1), _names(v)))
                    if f == "assign":
                        for e in (inv, o):  # the invoke says the level; a completion may repeat it
                            v = e.get("value") if e is not None else None
                            if type(v) is dict and "isolation" in v:
                                isolation[proc] = str(v["isolation"])
                elif f in UNCHECKED_CLIENT_FS:
                    ignored += f == "debug-topic-partitions"
                else:
                    raise _Unexpected(
                        f"f {f!r}: a client op is one of send, poll, txn, assign, subscribe, crash or "
                        "debug-topic-partitions (Jepsen's Kafka workload)"
                    )
            elif proc in ("nemesis", "operator"):  # operations are recorded like faults
                nemesis.append(
                    NemesisEvent(
                        index=o.get("index", lineno - 1),
                        time=t,
                        type=o.get("type", "info"),
                        f=str(o.get("f")),
                        value=o.get("value"),
                        error=o.get("error"),
                        process=proc,
                    )
                )
            elif proc == "harness":
                f = o.get("f")
                if f == "drain-complete":
                    drain = o.get("value") is True
                elif f == "drain-start":
                    drain_start = t
                elif f == "fetch-from" and isinstance(o.get("value"), dict):
                    fetch_from.append({**o["value"], "time": t})
                    ignored += 1  # kept for the report only: the checks do not read it
                elif f == "run-start":
                    v = o.get("value")
                    run_start = v if isinstance(v, dict) else {"value": v}
                else:
                    ignored += 1
            else:
                ignored += 1

        # Ops still pending when the history ended: their outcome is unknown.
        for proc, inv in pending.items():
            f = inv.get("f")
            v = inv.get("value")
            if f == "assign" and type(v) is dict and "isolation" in v:
                isolation[proc] = str(v["isolation"])
            ck = (f, "info")
            counts[ck] = counts.get(ck, 0) + 1
            ck = (f, "unfinished")
            counts[ck] = counts.get(ck, 0) + 1
            if (f == "send" or f == "txn") and inv.get("value"):
                n = 0
                for mop in inv["value"]:
                    if mop[0] == "send":
                        s_off(None)
                        s_val(mop[2])
                        s_key(mop[1])
                        n += 1
                if n:
                    s_n(n)
                    s_proc(proc)
                    s_type("info")
                    s_comp(None)
                    s_op(inv.get("index", 0))
                    s_time(inv["time"])
    except (ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
        raise _damaged(source, lineno, e) from None

    for typ, n in Counter(send_types).items():
        counts[("send", typ)] = counts.get(("send", typ), 0) + n
    op_counts: dict[str, dict[str, int]] = {}
    for (f, typ), n in counts.items():
        op_counts.setdefault(str(f), {"ok": 0, "fail": 0, "info": 0})[str(typ)] = n
    meta = HistoryMeta(
        complete=drain is True and not truncated,
        drain_complete=drain,
        drain_start=drain_start,
        truncated=truncated,
        events=lineno - blank - (1 if truncated else 0),
        end_time=max([t, *(inv["time"] for inv in pending.values())]),
        run_start=run_start,
        subscribe_processes=frozenset(subscribers),
        nemesis=tuple(nemesis),
        op_counts=op_counts,
        ok_poll_times=np.asarray(ok_poll_times, dtype=np.int64),
        ignored=ignored,
        unplaced_records=dropped,
        isolation=isolation,
        ops=ops.table(),
        fetch_from=tuple(fetch_from),
        unfinished=dict(Counter([*abandoned, *(str(inv.get("f")) for inv in pending.values())])),
    )
    sends_table = sends.table(sends.sends_table)
    ops = sends_table.column("op_index").to_numpy()
    if len(ops) > 1 and bool(np.any(ops[1:] < ops[:-1])):  # ops complete out of invoke order
        sends_table = sends_table.take(pa.array(np.argsort(ops, kind="stable")))
    extras = PollExtras(
        reads=pa.Table.from_pylist(
            [dict(zip(EXTRA_READS_SCHEMA.names, r, strict=True)) for r in extra_rows], schema=EXTRA_READS_SCHEMA
        ) if extra_rows else empty_table(EXTRA_READS_SCHEMA),
        resets=tuple(resets),
        rebalanced=rebalanced,
        empty=tuple(empty_reads),
    )
    return HistoryTables(sends=sends_table, polls=polls.table(polls.polls_table), meta=meta, extras=extras)


def _short(value: Any, limit: int = 80) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _damaged(source: str, lineno: int, e: Exception) -> HistoryError:
    if isinstance(e, _Unexpected):
        return HistoryError(f"{source}, line {lineno}: {e}. Fix or remove that event, then check again.")
    return HistoryError(
        f"{source}, line {lineno}: not a valid history event ({type(e).__name__}: {e}). Only the "
        "last line of an interrupted run may be incomplete; this file is damaged earlier. Re-run the "
        "scenario, or cut the file before that line to check what precedes it."
    )


OPS_SUMMARY_KEY = b"kafka-chaos.history"
"""`ops.parquet`'s metadata key: history_summary as JSON."""


def write_tables(tables: HistoryTables, run_dir: Path | str) -> tuple[Path, Path, Path]:
    """Write `sends.parquet`, `polls.parquet`, `extra_reads.parquet` (`PollExtras.reads`, empty for kafka-chaos's
    own workloads) and `ops.parquet` (with history_summary in its metadata) into `run_dir`; return the first
    three's paths. The extra reads are written so that a reader of the tables (spark/) finds every record
    Jepsen's rules read without the history; the resets, rebalances and empty reads of `PollExtras` are not (only
    the checks spark/ leaves to the checker read them). `ops` is what the report draws (report.data)."""
    run_dir = Path(run_dir)
    paths = run_dir / SENDS_FILE, run_dir / POLLS_FILE, run_dir / EXTRA_READS_FILE
    for table, path in zip((tables.sends, tables.polls, tables.extras.reads), paths, strict=True):
        pq.write_table(table, path)
    summary = json.dumps(history_summary(tables.meta, run_dir / HISTORY_FILE), default=str).encode()
    ops = tables.meta.ops
    pq.write_table(ops.replace_schema_metadata({**(ops.schema.metadata or {}), OPS_SUMMARY_KEY: summary}),
                   run_dir / OPS_FILE)
    return paths


def history_summary(meta: HistoryMeta, history: Path) -> dict[str, Any]:
    """What the report reads of a history besides its ops (report.data.HistoryScan), and which file it came
    from (size and mtime: a history rewritten since is read again)."""
    st = history.stat() if history.is_file() else None
    return {
        "history": {"size": st.st_size, "mtime_ns": st.st_mtime_ns} if st else None,
        "events": meta.events,
        "end_time": meta.end_time,
        "truncated": meta.truncated,
        "run_start": meta.run_start,
        "drain_complete": meta.drain_complete,
        "drain_start": meta.drain_start,
        "nemesis": [{"index": e.index, "time": e.time, "type": e.type, "f": e.f, "value": e.value, "error": e.error}
                    for e in meta.nemesis if e.process == "nemesis"],
        "fetch_from": list(meta.fetch_from),
        "unfinished": meta.unfinished,
        "series": ops_series(meta.ops),
    }


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


def read_extra_reads(run_dir: Path | str) -> pa.Table | None:
    """`extra_reads.parquet` from `run_dir` (EXTRA_READS_SCHEMA), or None when the tables were written without
    it (before it existed): then only the history has those records."""
    path = Path(run_dir) / EXTRA_READS_FILE
    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
    except OSError as e:
        raise HistoryError(f"cannot read {path} ({e}); run `kafka-chaos check {run_dir}` to write it again") from None
    return table.select(EXTRA_READS_SCHEMA.names).cast(EXTRA_READS_SCHEMA)


def read_state_samples(run_dir: Path | str) -> list[dict[str, Any]] | None:
    """The observer's samples (`state.jsonl`, docs/architecture.md §3), or None if the run has none.

    Lenient, as the samples are evidence on the side: a line that is not a JSON object (a cut last line,
    say) is skipped.
    """
    path = Path(run_dir) / STATE_FILE
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}") from e
    samples: list[dict[str, Any]] = []
    with fh:
        for line in fh:
            try:
                o = _LOADS(line)
            except ValueError:
                continue
            if isinstance(o, dict):
                samples.append(o)
    return samples
