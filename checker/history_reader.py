"""The one reader of `history.jsonl` (docs/architecture.md §3): one pass over the lines, one handler per event
kind, one invoke → completion pairing, and the one definition of a *complete* run.

Every reader of a history goes through `HistoryReader`: the checker's tables (`checker.tables.parse_lines`, also
fed line by line while a run writes, checker.stored_tables), the cycle search's transactions
(`checker.anomalies.cycles.read_txn_history`, which takes the pairs through a sink and builds no table) and the
report when a run stored no tables (`report.data.scan_history`). Spark reads histories with its own columns
(spark/history.py) but takes the names below from here.

Events go to one handler each:

- a client op's (integer `process`) `invoke` is held until its completion: a process runs one op at a time, so
  its next event is the completion (an invoke replaced by the process's next invoke never completed);
- each completion (`ok`, `fail`, `info`) is paired with the held invoke, recorded in the ops table, given to
  the sink, and handed to the handler of its `f` (`send`, `poll`, `txn`, `assign` / `subscribe`, the unchecked
  fs); any other `f` or `type` is an error naming the line;
- the nemesis's and the operator's events (FAULT_PROCESSES) are kept, in order, for the fault windows;
- the harness's events: `run-start` (the resolved scenario), `drain-start`, `drain-complete`, `fetch-from`;
- events of any other process are counted as ignored;
- at the end, invokes still held are ops whose outcome is unknown (`info`, never completed).

Record tables (sends, polls, extra reads) are built only when asked for (`records=True`, the checker's parse); a
pairing-only pass (`records=False`) reads just the pairs and the metadata. A last line cut mid-way (the run was
interrupted while writing) is dropped; any other malformed line is an error, unless `on_bad_line` is given
(the report's reading): then it is passed there and skipped.

A whole file (`HistoryReader.read_file`, what `kafka-chaos check` parses a history with when the run stored no
tables) is read by a typed decoder first (`read_typed`): blocks of lines decoded at once by msgspec into typed
envelopes, the pairing done on arrays, each op kind's values decoded in bulk into the columns, so that no dict and
no handler call is made per event. It reads what kafka-chaos and Jepsen's Kafka workload write (sends, polls,
assign / subscribe, faults, the harness's events); a history holding anything else (a txn, a rebalance log, records
of a failed poll or at an unknown offset, a blank or damaged line) goes to the handlers whole, which also word
every error. Both give the same result.

Row order is part of the tables' contract: `sends` rows are sorted by `op_index` (the invoke's index) and within
one op keep micro-op order; `polls` rows are in history order and, within one op, in the order the records were
returned. The checker's in-op checks (`int-*`) read that order.
"""

from __future__ import annotations

import gc
import json
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from itertools import chain, repeat
from operator import itemgetter
from typing import Any, BinaryIO, Literal

import msgspec
import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA, OPS_SCHEMA, POLLS_SCHEMA, SENDS_SCHEMA, empty_table
from kafka_chaos.errors import HistoryError

OP_TYPES = ("invoke", "ok", "fail", "info")
"""A client op's `type`: `invoke`, then one completion: `ok`, `fail` (certainly did not happen), `info` (unknown)."""
COMPLETION_TYPES = frozenset(OP_TYPES[1:])
CLIENT_OP_FS = ("send", "poll", "txn")
"""Client ops that hold records to check."""
UNCHECKED_CLIENT_FS = ("assign", "subscribe", "crash", "debug-topic-partitions")
"""Client ops Jepsen's Kafka workload records that hold no record to check (assign/subscribe move a
consumer's partitions; `debug-topic-partitions` is Jepsen's diagnostic). Any other f is a mistake in the
history (a misspelt `send` would silently drop every write), so it is an error."""
CLIENT_FS = CLIENT_OP_FS + UNCHECKED_CLIENT_FS
"""Every client op f the reader knows."""
FAULT_PROCESSES = ("nemesis", "operator")
"""Processes whose events are faults and operations (an operation's steps are recorded like faults)."""
HARNESS = "harness"
SIDE_PROCESSES = (*FAULT_PROCESSES, HARNESS)
"""The processes that are not clients."""
RUN_START, DRAIN_START, DRAIN_COMPLETE, FETCH_FROM = "run-start", "drain-start", "drain-complete", "fetch-from"
"""The harness's events the reader keeps."""
SPILL_EVERY = 1 << 18
"""Lines between moves of the accumulated columns into Arrow (a power of two): bounds the parse's memory."""


def is_complete(drain_complete: bool | None, *, truncated: bool, malformed: int = 0) -> bool:
    """The one definition of a *complete* run: its history ends with the harness's `drain-complete: true` (every
    final read finished), its last line was not cut (the run was not interrupted while writing) and no line is
    malformed."""
    return drain_complete is True and not truncated and not malformed


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


LOADS, JSON_DECODER = _pick_loads()

PairSink = Callable[[dict[str, Any] | None, dict[str, Any] | None], None]
"""Called with (invoke, completion) for every client op: the invoke is None for a completion without one, the
completion None for an invoke never completed (replaced by its process's next invoke, or pending at the end)."""


class _Unexpected(ValueError):
    """A history event of the wrong shape: the message says what was expected there."""


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
        """Move what the lists hold into an Arrow chunk and empty them in place (the handlers hold their
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
    """Every completed client op (OPS_SCHEMA), accumulated as lists and moved into Arrow with the columns. The
    (f, type) code of each op is kept even when the table is not wanted: the op counts come from it."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.kinds: dict[tuple[Any, Any], int] = {}  # (f, type) → its code, in first-seen order
        self.kind: list[int] = []
        self.index: list[int] = []
        self.time: list[int] = []
        self.invoke_index: list[int | None] = []
        self.invoke_time: list[int | None] = []
        self.chunks: list[pa.Table] = []
        self.counts = np.zeros(0, dtype=np.int64)  # ops per code, of the chunks spilled

    def spill(self) -> None:
        if not self.kind:
            return
        code = np.fromiter(self.kind, dtype=np.int32, count=len(self.kind))
        if self.keep:
            self.add(code, _ints(self.index, "index"), _ints(self.time, "time"), _ints(self.invoke_index, "index"),
                     _ints(self.invoke_time, "time"))
        else:
            self.add(code)
        for xs in (self.kind, self.index, self.time, self.invoke_index, self.invoke_time):
            xs.clear()

    def add(self, code: npt.NDArray[np.int32], *columns: pa.Array) -> None:
        """Ops as columns (kind codes; index, time, invoke_index, invoke_time when the table is kept), after
        those already held."""
        seen = np.bincount(code, minlength=len(self.kinds))
        seen[: len(self.counts)] += self.counts
        self.counts = seen
        if self.keep:
            names = list(self.kinds)
            index, time, invoke_index, invoke_time = columns
            cols = [
                index,
                pa.DictionaryArray.from_arrays(pa.array(code), _strings([f for f, _ in names])).cast(pa.string()),
                pa.DictionaryArray.from_arrays(pa.array(code), _strings([t for _, t in names])).cast(pa.string()),
                time,
                invoke_index,
                invoke_time,
            ]
            self.chunks.append(pa.Table.from_arrays(cols, schema=OPS_SCHEMA))

    def table(self) -> pa.Table:
        self.spill()
        if not self.chunks:
            return empty_table(OPS_SCHEMA)
        return pa.concat_tables(self.chunks)  # chunked: only written to Parquet, so no copy into one chunk

    def per_kind(self) -> dict[tuple[Any, Any], int]:
        self.spill()
        return {k: int(n) for k, n in zip(self.kinds, self.counts.tolist(), strict=False) if n}


@dataclass
class HistoryRead:
    """What one pass of `HistoryReader` found (checker.tables.parse_lines turns it into HistoryTables)."""

    truncated: bool = False
    """The last line was cut mid-way and was dropped."""
    events: int = 0
    """Events read (lines, not counting blank, skipped or cut lines)."""
    end_time: int = 0
    """The largest `time` in the history (ns since the run started)."""
    drain_complete: bool | None = None
    drain_start: int | None = None
    run_start: dict[str, Any] | None = None
    fault_events: list[tuple[int, int, str, str, Any, Any, str]] = field(default_factory=list)
    """The nemesis's and operator's events: (index, time, type, f, value, error, process), in history order."""
    fetch_from: list[dict[str, Any]] = field(default_factory=list)
    op_counts: dict[str, dict[str, int]] = field(default_factory=dict)
    unfinished: dict[str, int] = field(default_factory=dict)
    subscribe_processes: set[int] = field(default_factory=set)
    isolation: dict[int, str] = field(default_factory=dict)
    ignored: int = 0
    unplaced_records: int = 0
    ok_poll_times: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    ops: pa.Table = field(default_factory=lambda: empty_table(OPS_SCHEMA))
    sends: pa.Table = field(default_factory=lambda: empty_table(SENDS_SCHEMA))
    polls: pa.Table = field(default_factory=lambda: empty_table(POLLS_SCHEMA))
    extra_reads: pa.Table = field(default_factory=lambda: empty_table(EXTRA_READS_SCHEMA))
    resets: list[tuple[int, int, frozenset[str]]] = field(default_factory=list)
    """(process, completion index, names) of each ok or info assign / subscribe (checker.tables.Reset)."""
    rebalanced: dict[int, frozenset[str]] = field(default_factory=dict)
    empty_reads: list[tuple[int, int, str, str]] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    """Malformed lines skipped (1-based), only with `on_bad_line`."""

    @property
    def complete(self) -> bool:
        return is_complete(self.drain_complete, truncated=self.truncated, malformed=len(self.bad_lines))


def _names(value: Any) -> frozenset[str]:
    """The keys (or topics) an assign / subscribe value names: a list, or `{"keys": [...], ...}`."""
    if isinstance(value, dict):
        value = value.get("keys")
    return frozenset(str(x) for x in value) if isinstance(value, list) else frozenset()


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


def _membership(out: HistoryRead, f: str, typ: str, proc: int, index: int, value: Any, inv_value: Any) -> None:
    """An `assign` / `subscribe` completion (`inv_value`: its invoke's value, None without one): a subscribe-mode
    consumer, a reset of its positions, its isolation."""
    if typ == "ok" and f == "subscribe":
        out.subscribe_processes.add(proc)
    if typ == "ok" or typ == "info":
        out.resets.append((proc, index, _names(inv_value if value is None else value)))
    if f == "assign":
        for v in (inv_value, value):  # the invoke says the level; a completion may repeat it
            if type(v) is dict and "isolation" in v:
                out.isolation[proc] = str(v["isolation"])


def _harness(out: HistoryRead, f: Any, value: Any, t: int) -> int:
    """A harness event; returns 1 when the checks do not read it (counted as ignored)."""
    if f == DRAIN_COMPLETE:
        out.drain_complete = value is True
    elif f == DRAIN_START:
        out.drain_start = t
    elif f == FETCH_FROM and isinstance(value, dict):
        out.fetch_from.append({**value, "time": t})
        return 1  # kept for the report only
    elif f == RUN_START:
        out.run_start = value if isinstance(value, dict) else {"value": value}
    else:
        return 1
    return 0


def _finish(out: HistoryRead, ops: _Ops, sends: _Columns | None, polls: _Columns, kinds_unfinished: dict[Any, int],
            unfinished: list[str], ok_poll_times: list[int]) -> None:
    """The end of a pass: op counts, the unfinished, and the tables (`sends` None: no record tables)."""
    counts = ops.per_kind()
    for f, n in kinds_unfinished.items():
        counts[(f, "info")] = counts.get((f, "info"), 0) + n
        counts[(f, "unfinished")] = n
    op_counts = out.op_counts
    for (f, typ), n in counts.items():
        op_counts.setdefault(str(f), {"ok": 0, "fail": 0, "info": 0})[str(typ)] = n
    out.unfinished = dict(Counter(unfinished))
    out.ok_poll_times = np.asarray(ok_poll_times, dtype=np.int64)
    out.ops = ops.table()
    if sends is not None:
        sends_table = sends.table(sends.sends_table)
        op_col = sends_table.column("op_index").to_numpy()
        if len(op_col) > 1 and bool(np.any(op_col[1:] < op_col[:-1])):  # ops complete out of invoke order
            sends_table = sends_table.take(pa.array(np.argsort(op_col, kind="stable")))
        out.sends = sends_table
        out.polls = polls.table(polls.polls_table)


_ERRORS = (ValueError, KeyError, TypeError, IndexError, AttributeError)
"""What a damaged event raises in a handler."""


_OpHandler = Callable[[dict[str, Any], dict[str, Any] | None, int, str, int, int, int], None]
"""A client op's handler: (completion, its invoke or None, process, type, time, index, the invoke's index)."""


def _event(line: bytes) -> Any:
    """A line decoded and its envelope checked (what a lenient pass skips rather than fails on later, when the
    columns are built)."""
    o = LOADS(line)
    if (type(o) is not dict or "process" not in o or type(o.get("time")) is not int
            or type(o.get("index", 0)) is not int):
        raise ValueError("not a history event: an object with a process, an integer time and an integer index")
    return o


def _same(event: Any) -> Any:
    return event


# -- the typed decoder: the same pass, columns built without a Python object (nor a handler call) per event


class _Fallback(Exception):
    """Something the typed decoder does not read exactly as the handlers do (a txn, a rebalance log, records of a
    failed poll or at unknown offsets, a blank or damaged line...): the handlers read the whole history instead,
    and say what is wrong if anything is."""


_NULL = msgspec.Raw(b"null")


class _Event(msgspec.Struct, gc=False):
    """One event as the typed decoder reads it: the envelope typed, the value kept as its JSON text and decoded
    afterwards, in bulk, by the shape its op's f gives it."""

    time: int
    process: int | str
    type: str | msgspec.UnsetType = msgspec.UNSET
    f: str | msgspec.UnsetType = msgspec.UNSET
    index: int | msgspec.UnsetType = msgspec.UNSET
    value: msgspec.Raw = _NULL
    error: msgspec.Raw = _NULL


_EVENTS = msgspec.json.Decoder(_Event)
_SEND_VALUES = msgspec.json.Decoder(list[list[tuple[Literal["send"], str | int, int | tuple[int | None, int]]] | None])
"""Send values, of invokes (`["send", key, value]`) and of completions (`["send", key, [offset, value]]`)."""
_POLL_VALUES = msgspec.json.Decoder(list[list[tuple[Literal["poll"], dict[str, list[tuple[int, int]]]]]])
"""Ok polls whose every record has its offset."""
_NO_RECORDS = msgspec.json.Decoder(list[list[tuple[Literal["poll"]]] | None])
"""Failed and indefinite polls that returned nothing."""
_TYPE = {t: i for i, t in enumerate(OP_TYPES)}
_SEND, _POLL, _TXN, _ASSIGN, _SUBSCRIBE, _CRASH, _DEBUG = range(len(CLIENT_FS))
_F = {f: i for i, f in enumerate(CLIENT_FS)}
_FAST_MISSES = (_Fallback, ValueError, KeyError, TypeError, IndexError, OverflowError, HistoryError, pa.ArrowException)
"""What sends a history from the typed decoder to the handlers (msgspec's errors are ValueErrors)."""
CHUNK_BYTES = 1 << 22
"""Bytes the typed decoder reads at a time (then to the end of the line): bounds its memory."""


def _chunks(fh: BinaryIO, size: int = CHUNK_BYTES) -> Iterator[bytes]:
    """The file in blocks of whole lines, of about `size` bytes (the last may lack its newline)."""
    while block := fh.read(size):
        if not block.endswith(b"\n"):
            block += fh.readline()
        yield block


def _joined(raws: Iterable[msgspec.Raw]) -> bytes:
    return b"[" + b",".join(raws) + b"]"


def _unset(x: Any) -> Any:
    return None if x is msgspec.UNSET else x


class _TypedPass:
    """`HistoryReader.read_file`'s pass: the events of a block decoded at once into typed envelopes, the pairing
    done on arrays, each op kind's values decoded in bulk and moved into the reader's columns (_Columns, _Ops),
    which then build the tables as the handlers' pass does. Anything it does not read exactly as the handlers
    do raises _Fallback."""

    def __init__(self, records: bool, keep_ops: bool) -> None:
        self.out = HistoryRead()
        self.records = records
        self.sends, self.polls, self.ops = _Columns(), _Columns(), _Ops(keep_ops)
        self.pending: dict[int, tuple[_Event, int]] = {}  # process → its invoke, index default (line - 1)
        self.kind_of = np.full(len(CLIENT_FS) * len(OP_TYPES), -1, dtype=np.int64)  # f * 4 + type → ops' code
        self.abandoned: list[str] = []
        self.ok_poll_times: list[int] = []
        self.ignored = self.lines = self.last_time = 0

    def read(self, blocks: Iterable[bytes]) -> HistoryRead:
        for data in blocks:
            if b"rebalance" in data:  # a poll's rebalance log: the handlers read it
                raise _Fallback("rebalance log")
            if not data.endswith(b"\n"):  # the last line, without its newline: whole, or cut
                cut = data.rfind(b"\n") + 1
                try:
                    LOADS(data[cut:])
                except ValueError:
                    if not data[cut:].strip():
                        raise _Fallback("blank last line") from None
                    self.out.truncated = True
                    data = data[:cut]
            n = data.count(b"\n") + (not data.endswith(b"\n"))
            if not data:
                continue
            events = _EVENTS.decode_lines(data)
            if len(events) != n:  # blank lines, which decode_lines skips
                raise _Fallback("blank lines")
            self.block(events)
            self.lines += n
        return self.end()

    def block(self, events: list[_Event]) -> None:
        base = self.lines  # events[i] is on line base + i + 1
        procs: list[Any] = [e.process for e in events]
        try:  # Arrow, not numpy: numpy would read a process named "12" as the number
            proc: npt.NDArray[np.int64] | None = pa.array(procs, pa.int64()).to_numpy()
            side = []
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # side processes are named
            proc = None
            side = [i for i, p in enumerate(procs) if type(p) is str]
        if side:
            for i in side:
                self.side(events[i], base + i)
            keep = np.ones(len(events), dtype=bool)
            keep[side] = False
            at = np.flatnonzero(keep)
            client = [events[i] for i in at.tolist()]
            proc = np.fromiter([procs[i] for i in at.tolist()], dtype=np.int64, count=len(at))
        else:
            at, client = np.arange(len(events)), events
        self.last_time = events[-1].time
        if client and proc is not None:
            self.clients(client, proc, at + base)
        if self.records:
            self.sends.spill(self.sends.sends_table)
            self.polls.spill(self.polls.polls_table)
        self.ops.spill()

    def side(self, e: _Event, line0: int) -> None:
        """A nemesis, operator, harness or other process's event."""
        if e.process in FAULT_PROCESSES:
            self.out.fault_events.append((line0 if e.index is msgspec.UNSET else e.index, e.time,
                                          "info" if e.type is msgspec.UNSET else e.type, str(_unset(e.f)),
                                          LOADS(bytes(e.value)), LOADS(bytes(e.error)), e.process))
        elif e.process == HARNESS:
            self.ignored += _harness(self.out, _unset(e.f), LOADS(bytes(e.value)), e.time)
        else:
            self.ignored += 1

    def clients(self, client: list[_Event], procs: npt.NDArray[np.int64], line0: npt.NDArray[np.int64]) -> None:
        """Client events, in history order, with their processes and `index` defaults (their line - 1)."""
        carried = self.pending  # invokes pending from earlier blocks go first, as if on their own lines
        c = len(carried)
        evs = [e for e, _ in carried.values()] + client
        n = len(evs)
        proc = np.concatenate([np.fromiter(carried, dtype=np.int64, count=c), procs])
        lines = np.concatenate([np.fromiter((i for _, i in carried.values()), dtype=np.int64, count=c), line0])
        types: list[Any] = [e.type for e in evs]
        typ = np.fromiter(map(_TYPE.__getitem__, types), dtype=np.int64, count=n)
        fs: list[Any] = [e.f for e in evs]
        fc = np.fromiter(map(_F.get, fs, repeat(-1)), dtype=np.int64, count=n)
        times = np.fromiter([e.time for e in evs], dtype=np.int64, count=n)
        idx_l: list[Any] = [e.index for e in evs]
        unindexed = None
        if msgspec.UNSET in idx_l:
            unindexed = np.fromiter([i is msgspec.UNSET for i in idx_l], dtype=bool, count=n)
            idx_l = [d if i is msgspec.UNSET else i for i, d in zip(idx_l, lines.tolist(), strict=True)]
        idx = np.fromiter(idx_l, dtype=np.int64, count=n)
        is_inv = typ == 0
        done = np.flatnonzero(~is_inv)
        if bool(np.any(fc[done] < 0)) or bool(np.any(fc == _TXN)):
            raise _Fallback("an unknown f, or a txn")

        # the pairing: each event's previous event of its process, an invoke or not
        order = np.argsort(proc, kind="stable")
        first = np.ones(n, dtype=bool)
        first[1:] = proc[order[1:]] != proc[order[:-1]]
        prev = np.full(n, -1, dtype=np.int64)
        prev[order[1:]] = order[:-1]
        prev[order[first]] = -1
        inv_of = np.where((prev >= 0) & is_inv[np.maximum(prev, 0)], prev, -1)  # a completion's invoke
        for j in np.flatnonzero(is_inv & (inv_of >= 0)).tolist():  # an invoke replaced by its process's next
            self.abandoned.append(str(_unset(fs[inv_of[j]])))
        last = order[np.r_[first[1:], True]]
        kept: dict[int, int] = {}
        inserted: list[tuple[int, int, int]] = []
        for j in last[is_inv[last]].tolist():
            s = j
            while inv_of[s] >= 0:
                s = int(inv_of[s])
            if s < c:  # still pending since an earlier block: its place in the pending order stays
                kept[int(proc[j])] = j
            else:
                inserted.append((s, int(proc[j]), j))
        pending = {p: (evs[kept[p]], int(lines[kept[p]])) for p in carried if p in kept}
        for _, p, j in sorted(inserted):
            pending[p] = (evs[j], int(lines[j]))
        self.pending = pending

        # the completed ops
        inv = inv_of[done]
        has = inv >= 0
        index = idx[done]
        inv_index = np.where(has, idx[inv], index)
        if unindexed is not None:  # as the handlers read it: an invoke's index defaults to its completion's line
            inv_index = np.where(has & unindexed[inv], lines[done], inv_index)
        t_done = times[done]
        f_done, typ_done = fc[done], typ[done]
        code = f_done * len(OP_TYPES) + typ_done
        ops = self.ops
        seen, at = np.unique(code, return_index=True)
        for k in seen[np.argsort(at)].tolist():
            if self.kind_of[k] < 0:
                f, t = divmod(k, len(OP_TYPES))
                self.kind_of[k] = ops.kinds.setdefault((CLIENT_FS[f], OP_TYPES[t]), len(ops.kinds))
        ops.spill()
        kind = self.kind_of[code].astype(np.int32)
        if ops.keep:
            ops.add(kind, pa.array(index), pa.array(t_done), pa.array(inv_index, mask=~has),
                    pa.array(times[inv], mask=~has))
        else:
            ops.add(kind)
        self.ignored += int(np.count_nonzero(f_done == _DEBUG))
        for k in np.flatnonzero((f_done == _ASSIGN) | (f_done == _SUBSCRIBE)).tolist():
            j, i = int(done[k]), int(inv[k])
            _membership(self.out, CLIENT_FS[f_done[k]], OP_TYPES[typ[j]], int(proc[j]), int(index[k]),
                        LOADS(bytes(evs[j].value)), LOADS(bytes(evs[i].value)) if i >= 0 else None)
        if not self.records:
            return
        s = np.flatnonzero(f_done == _SEND)
        if s.size:
            sent: list[Any] = _SEND_VALUES.decode(_joined([evs[j].value for j in done[s].tolist()]))
            s_inv = inv[s].tolist()
            for k in [k for k, v in enumerate(sent) if not v]:  # values are known at invoke time
                v = _SEND_VALUES.decode(_joined([evs[s_inv[k]].value]))[0] if s_inv[k] >= 0 else None
                sent[k] = v or []
            self.add_sends(sent, proc[done[s]], typ_done[s], inv_index[s],
                           np.where(has[s], times[inv[s]], t_done[s]), t_done[s])
        polls = (f_done == _POLL) & (typ_done == _TYPE["ok"])
        failed = np.flatnonzero((f_done == _POLL) & ~polls)
        if failed.size:
            _NO_RECORDS.decode(_joined([evs[j].value for j in done[failed].tolist()]))
        read = np.flatnonzero(polls)
        if read.size:
            polled: list[Any] = _POLL_VALUES.decode(_joined([evs[j].value for j in done[read].tolist()]))
            self.add_polls(polled, proc[done[read]], index[read], t_done[read])

    def add_sends(self, values: list[list[Any]], procs: npt.NDArray[np.int64], types: npt.NDArray[np.int64],
                  ops: npt.NDArray[np.int64], invoked: npt.NDArray[np.int64],
                  done: npt.NDArray[np.int64] | None) -> None:
        """The send micro-ops of ops (each value a list of `["send", key, value or [offset, value]]`), as the
        sends table's rows; `done` None: ops never completed."""
        counts = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        mops = list(chain.from_iterable(values))
        if not mops:
            return
        xs = list(map(itemgetter(2), mops))
        shapes = set(map(type, xs))
        if shapes == {tuple}:  # [offset, value]
            offsets: list[Any] = list(map(itemgetter(0), xs))
            vals: list[Any] = list(map(itemgetter(1), xs))
        elif shapes == {int}:
            offsets, vals = [None] * len(xs), xs
        else:
            offsets = [x[0] if x.__class__ is tuple else None for x in xs]
            vals = [x[1] if x.__class__ is tuple else x for x in xs]
        rows = len(xs)
        cols = [
            pa.array(vals, pa.int64()),  # from a list of ints, faster than numpy (and nulls, in offsets)
            _strings(list(map(itemgetter(1), mops))),
            pa.array(offsets, pa.int64()),
            pa.array(np.repeat(procs, counts)),
            pa.array(np.repeat(ops, counts)),
            pa.DictionaryArray.from_arrays(pa.array(np.repeat(types, counts).astype(np.int32)),
                                           pa.array(OP_TYPES)).cast(pa.string()),
            pa.array(np.repeat(invoked, counts)),
            pa.nulls(rows, pa.int64()) if done is None else pa.array(np.repeat(done, counts)),
        ]
        self.sends.chunks.append(pa.Table.from_arrays(cols, schema=SENDS_SCHEMA))

    def add_polls(self, values: list[list[Any]], procs: npt.NDArray[np.int64], indexes: npt.NDArray[np.int64],
                  times: npt.NDArray[np.int64]) -> None:
        """The records of ok polls (each value a list of `["poll", {key: [[offset, value], ...]}]`), as the polls
        table's rows, one group per key a micro-op returned records of."""
        self.ok_poll_times.extend(times.tolist())
        per_op = np.fromiter(map(len, values), dtype=np.int64, count=len(values))
        dicts: list[dict[str, list[tuple[int, int]]]] = list(map(itemgetter(1), chain.from_iterable(values)))
        keys_per = np.fromiter(map(len, dicts), dtype=np.int64, count=len(dicts))
        group_op = np.repeat(np.repeat(np.arange(len(values)), per_op), keys_per)
        items = list(chain.from_iterable(map(dict.items, dicts)))
        if not items:
            return
        pairs = list(map(itemgetter(1), items))
        sizes = np.fromiter(map(len, pairs), dtype=np.int64, count=len(pairs))
        keys: list[str] = list(map(itemgetter(0), items))
        if not sizes.all():  # keys returned with no record: an empty read, unless the op read the key elsewhere
            self.empty_reads(keys, sizes, group_op, procs, indexes)
            kept = np.flatnonzero(sizes)
            keys, sizes, group_op = [keys[k] for k in kept.tolist()], sizes[kept], group_op[kept]
        flat = np.fromiter(chain.from_iterable(chain.from_iterable(pairs)), dtype=np.int64,
                           count=2 * int(sizes.sum())).reshape(-1, 2)
        rows = len(flat)
        cols = [
            pa.array(flat[:, 1]),
            pa.DictionaryArray.from_arrays(pa.array(np.repeat(np.arange(len(keys), dtype=np.int32), sizes)),
                                           _strings(keys)).cast(pa.string()),
            pa.array(flat[:, 0]),
            pa.array(np.repeat(procs[group_op], sizes)),
            pa.array(np.repeat(indexes[group_op], sizes)),
            pa.repeat(pa.scalar("ok", pa.string()), rows),
            pa.array(np.repeat(times[group_op], sizes)),
        ]
        self.polls.chunks.append(pa.Table.from_arrays(cols, schema=POLLS_SCHEMA))

    def empty_reads(self, keys: list[str], sizes: npt.NDArray[np.int64], group_op: npt.NDArray[np.int64],
                    procs: npt.NDArray[np.int64], indexes: npt.NDArray[np.int64]) -> None:
        """The keys ok polls returned with no record (and no record elsewhere in the op), in history order."""
        records: dict[int, dict[str, int]] = {}  # op → key → records, keys in the order the op returned them
        for op in np.unique(group_op[sizes == 0]).tolist():
            records[op] = {}
        for k, (op, n) in enumerate(zip(group_op.tolist(), sizes.tolist(), strict=True)):
            if op in records:
                records[op][keys[k]] = records[op].get(keys[k], 0) + n
        self.out.empty_reads.extend((int(procs[op]), int(indexes[op]), k, "ok") for op, per_key in records.items()
                                    for k, n in per_key.items() if not n)

    def end(self) -> HistoryRead:
        out, pending = self.out, self.pending
        kinds_unfinished: dict[Any, int] = {}
        for proc, (inv, _) in pending.items():  # invokes never completed: their outcome is unknown
            f = _unset(inv.f)
            kinds_unfinished[f] = kinds_unfinished.get(f, 0) + 1
            v = LOADS(bytes(inv.value))
            if f == "assign" and type(v) is dict and "isolation" in v:
                out.isolation[proc] = str(v["isolation"])
            if self.records and f == "send" and v:
                self.add_sends([_SEND_VALUES.decode(_joined([inv.value]))[0] or []], np.array([proc]),
                               np.array([_TYPE["info"]]), np.array([0 if inv.index is msgspec.UNSET else inv.index]),
                               np.array([inv.time]), None)
        out.end_time = max([self.last_time, *(inv.time for inv, _ in pending.values())])
        out.ignored = self.ignored
        out.events = self.lines
        _finish(out, self.ops, self.sends if self.records else None, self.polls, kinds_unfinished,
                [*self.abandoned, *(str(_unset(inv.f)) for inv, _ in pending.values())], self.ok_poll_times)
        return out


def read_typed(fh: BinaryIO, *, records: bool = True, ops: bool = True, block: int = CHUNK_BYTES) -> HistoryRead | None:
    """HistoryReader(records=records, ops=ops).read over a whole file through the typed decoder, in blocks of about
    `block` bytes; None (the file back where it was) when the history holds what only the handlers read: a txn, a
    rebalance log, records of a failed poll or at an unknown offset, a blank or damaged line. What kafka-chaos and
    Jepsen's Kafka workload write otherwise (sends, polls, assign / subscribe, faults, the harness's events) it
    reads."""
    start = fh.tell()
    collecting = gc.isenabled()
    gc.disable()  # millions of small acyclic objects: each collection would walk them all, for nothing
    try:
        return _TypedPass(records, ops).read(_chunks(fh, block))
    except _FAST_MISSES:
        fh.seek(start)
        return None
    finally:
        if collecting:
            gc.enable()


class HistoryReader:
    """One pass over history lines (see the module docstring).

    `records`: build the sends, polls and extra-reads tables (else only the pairs and the metadata are read);
    `ops`: build the ops table (OPS_SCHEMA); `sink`: given every pair (PairSink); `on_bad_line`: called with the
    line number and the error of each malformed line, which is then skipped (without it, such a line is a
    HistoryError, except a cut last line). Only a pass without record tables may skip lines: a send or poll
    value found wrong mid-way could leave part of its rows behind.
    """

    def __init__(self, *, records: bool = True, ops: bool = True, sink: PairSink | None = None,
                 on_bad_line: Callable[[int, HistoryError], None] | None = None) -> None:
        if records and on_bad_line is not None:
            raise ValueError("on_bad_line needs records=False: the record tables are built from every line")
        self.records = records
        self.ops = ops
        self.sink = sink
        self.on_bad_line = on_bad_line

    def read(self, lines: Iterable[bytes], *, source: str) -> HistoryRead:
        """One pass over the lines (each with its newline, except perhaps the last)."""
        return self._read(lines, source, LOADS if self.on_bad_line is None else _event)

    def read_file(self, fh: BinaryIO, *, source: str) -> HistoryRead:
        """`read` over a whole file: through the typed decoder (read_typed) when the history is of the shapes it
        knows, else (and to say what is wrong with a damaged file) through the handlers. Same result."""
        if self.sink is None and self.on_bad_line is None:
            found = read_typed(fh, records=self.records, ops=self.ops)
            if found is not None:
                return found
        return self.read(fh, source=source)

    def read_events(self, events: Iterable[dict[str, Any]], *, source: str = "history") -> HistoryRead:
        """The same pass over events already decoded (a history built in memory)."""
        return self._read(events, source, _same)

    def _read(self, lines: Iterable[Any], source: str, loads: Callable[[Any], Any]) -> HistoryRead:
        """The pass. The handlers are closures over plain lists and their bound `append`s, written for CPython's
        speed (local names, no per-record method calls): reading the history is the one part of checking a run
        that cannot be vectorised."""
        out = HistoryRead()
        records, sink, on_bad_line = self.records, self.sink, self.on_bad_line
        sends, polls, ops = _Columns(), _Columns(), _Ops(self.ops)
        keep_ops = self.ops
        kinds = ops.kinds
        o_kind, o_index, o_time, o_inv, o_inv_time = (ops.kind.append, ops.index.append, ops.time.append,
                                                      ops.invoke_index.append, ops.invoke_time.append)
        s_n, s_proc, s_op, s_type, s_time, s_comp = (sends.n.append, sends.process.append, sends.op.append,
                                                     sends.type.append, sends.time.append, sends.complete.append)
        s_key, s_val, s_off = sends.key.append, sends.value.append, sends.offset.append
        p_n, p_proc, p_op, p_time, p_key = (polls.n.append, polls.process.append, polls.op.append,
                                            polls.time.append, polls.key.append)
        p_vals, p_offs = polls.value.extend, polls.offset.extend
        ok_poll_times: list[int] = []
        pending: dict[int, dict[str, Any]] = {}
        abandoned: list[str] = []
        kinds_unfinished: dict[Any, int] = {}  # f → invokes pending at the end
        fault_events = out.fault_events
        rebalanced, empty_reads = out.rebalanced, out.empty_reads
        extra_rows: list[tuple[Any, ...]] = []  # EXTRA_READS_SCHEMA rows
        extra_add = extra_rows.append
        ignored = unplaced = blank = lineno = t = 0
        completion_types = COMPLETION_TYPES
        spill_mask = SPILL_EVERY - 1

        # -- client ops, by f: each gets the completion `o`, its invoke (or None), and what the pairing read
        def add_polls(value: Any, proc: int, index: int, t: int, typ: str) -> int:
            """The records a poll (or txn) completion returned; returns how many ok records had no offset."""
            n_unplaced = 0
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
                        raise _Unexpected(f"records {_short(pairs)} of key {k!r}: a poll returns, per key, a "
                                          "list of [offset, value] pairs") from None
                    per_key[k] = base + len(offs)
                    if not ok or None in offs:  # Jepsen's rules read these too (PollExtras)
                        keep = []
                        for i, (off, val) in enumerate(zip(offs, vals, strict=True)):
                            if ok and off is not None:
                                keep.append(i)
                            else:
                                extra_add((val, k, off, proc, index, typ, t, base + i))
                        n_unplaced += len(offs) - len(keep) if ok else 0
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
            return n_unplaced

        def read_polls(o: dict[str, Any], proc: int, t: int, typ: str, index: int) -> None:
            """What a poll's or txn's completion read: its records, its rebalance log (Jepsen's
            `:rebalance-log`, `[{"keys": [...]}, ...]`)."""
            nonlocal unplaced
            unplaced += add_polls(o.get("value") if typ != "ok" else o["value"], proc, index, t, typ)
            if "rebalance_log" not in o and "rebalance-log" not in o:
                return
            log = o.get("rebalance_log", o.get("rebalance-log"))
            if type(log) is list:
                keys = frozenset(str(k) for r in log if type(r) is dict and type(r.get("keys")) is list
                                 for k in r["keys"])
                if keys:
                    rebalanced[index] = keys

        def add_sends(value: list[Any], proc: int, typ: str, op: int, invoked: int, done: int | None) -> None:
            """The send micro-ops of one op: `[offset, value]` when the completion says, else the value."""
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
                s_comp(done)
                s_op(op)
                s_time(invoked)

        def on_send(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                    inv_index: int) -> None:
            value = o.get("value")
            if type(value) is not list or not value:  # values are known at invoke time
                value = inv.get("value") if inv is not None else None
            if value:
                add_sends(value, proc, typ, inv_index, t if inv is None else inv["time"], t)

        def on_poll(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                    inv_index: int) -> None:
            read_polls(o, proc, t, typ, index)

        def on_txn(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                   inv_index: int) -> None:
            on_send(o, inv, proc, typ, t, index, inv_index)
            read_polls(o, proc, t, typ, index)

        def on_membership(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                          inv_index: int) -> None:
            _membership(out, o["f"], typ, proc, index, o.get("value"), inv.get("value") if inv is not None else None)

        def on_debug(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                     inv_index: int) -> None:
            nonlocal ignored
            ignored += 1

        def on_unknown_f(o: dict[str, Any], inv: dict[str, Any] | None, proc: int, typ: str, t: int, index: int,
                         inv_index: int) -> None:
            raise _Unexpected(f"f {o['f']!r}: a client op is one of send, poll, txn, assign, subscribe, crash or "
                              "debug-topic-partitions (Jepsen's Kafka workload)")

        by_f: dict[Any, _OpHandler | None] = {  # None: nothing to do with the op beyond pairing it
            "send": on_send if records else None,
            "poll": on_poll if records else None,
            "txn": on_txn if records else None,
            "assign": on_membership,
            "subscribe": on_membership,
            "crash": None,
            "debug-topic-partitions": on_debug,
        }

        def on_unfinished(proc: int, inv: dict[str, Any]) -> None:
            """An invoke still pending when the history ended: its outcome is unknown."""
            f, v = inv.get("f"), inv.get("value")
            kinds_unfinished[f] = kinds_unfinished.get(f, 0) + 1
            if f == "assign" and type(v) is dict and "isolation" in v:
                out.isolation[proc] = str(v["isolation"])
            if records and (f == "send" or f == "txn") and v:
                add_sends(v, proc, "info", inv.get("index", 0), inv["time"], None)
            if sink is not None:
                sink(inv, None)

        # -- the other processes
        def on_fault_event(o: dict[str, Any], proc: str, t: int, index: int) -> None:
            fault_events.append((index, t, o.get("type", "info"), str(o.get("f")), o.get("value"), o.get("error"),
                                 proc))

        def on_harness(o: dict[str, Any], t: int) -> None:
            nonlocal ignored
            ignored += _harness(out, o.get("f"), o.get("value"), t)

        it = enumerate(lines, 1)
        while True:
            try:
                for lineno, line in it:
                    try:
                        o = loads(line)
                    except ValueError:
                        if not line.strip():
                            blank += 1
                            continue
                        if line.endswith(b"\n"):
                            raise
                        out.truncated = True  # the last line, cut mid-way: drop it
                        break
                    if not lineno & spill_mask:
                        if records:
                            sends.spill(sends.sends_table)
                            polls.spill(polls.polls_table)
                        ops.spill()
                    proc = o["process"]
                    t = o["time"]  # events are in time order: the last t is the end
                    if type(proc) is int:
                        typ = o["type"]
                        if typ == "invoke":
                            if proc in pending:  # its previous op never completed (the report counts it)
                                gone = pending[proc]
                                abandoned.append(str(gone.get("f")))
                                if sink is not None:
                                    sink(gone, None)
                            pending[proc] = o
                            continue
                        if typ not in completion_types:
                            raise _Unexpected(f"type {typ!r}: a client op's type is one of invoke, ok, fail, info")
                        f = o["f"]
                        handler = by_f.get(f, on_unknown_f)
                        if handler is on_unknown_f:  # before the pairing: a line skipped leaves it as it was
                            on_unknown_f(o, None, proc, typ, t, 0, 0)
                        inv = pending.pop(proc, None)
                        kind = kinds.get((f, typ))
                        if kind is None:
                            kind = kinds[(f, typ)] = len(kinds)
                        o_kind(kind)
                        index = o.get("index", lineno - 1)
                        inv_index = index if inv is None else inv.get("index", lineno - 1)
                        if keep_ops:
                            o_index(index)
                            o_time(t)
                            if inv is None:
                                o_inv(None)
                                o_inv_time(None)
                            else:
                                o_inv(inv_index)
                                o_inv_time(inv["time"])
                        if sink is not None:
                            sink(inv, o)
                        if handler is not None:
                            handler(o, inv, proc, typ, t, index, inv_index)
                    elif proc in FAULT_PROCESSES:
                        on_fault_event(o, proc, t, o.get("index", lineno - 1))
                    elif proc == HARNESS:
                        on_harness(o, t)
                    else:
                        ignored += 1
                break
            except _ERRORS as e:
                damaged = _damaged(source, lineno, e)
                if on_bad_line is None:
                    raise damaged from None
                out.bad_lines.append(lineno)
                on_bad_line(lineno, damaged)

        try:
            for proc, inv in pending.items():
                on_unfinished(proc, inv)
            out.end_time = max([t, *(inv["time"] for inv in pending.values())])
        except _ERRORS as e:
            raise _damaged(source, lineno, e) from None

        out.ignored = ignored
        out.unplaced_records = unplaced
        out.events = lineno - blank - len(out.bad_lines) - (1 if out.truncated else 0)
        _finish(out, ops, sends if records else None, polls, kinds_unfinished,
                [*abandoned, *(str(inv.get("f")) for inv in pending.values())], ok_poll_times)
        if extra_rows:
            out.extra_reads = pa.Table.from_pylist(
                [dict(zip(EXTRA_READS_SCHEMA.names, r, strict=True)) for r in extra_rows], schema=EXTRA_READS_SCHEMA)
        return out
