"""The shared intermediate state of an analysis (Jepsen's `analysis` map), as numpy arrays.

Every anomaly function reads one `Context`. Nothing here loops over rows in Python. Its arrays are read-only:
columns are Arrow's buffers where they can be, and some arrays are shared or views (see `VersionOrders`).

Codes:
- keys are coded 0..K-1 in order of their names, so sorting by key code sorts by name;
- every (key, value) pair that occurs in either table gets a dense *pair id* 0..P-1 (`pid`), so per-value
  facts (read? who wrote it? its position in the log?) are plain arrays indexed by pid.

Jepsen's structures and their counterparts here:
- `op-reads`                 → `polls`: the polls table (ok records at known offsets) merged with what else
                                polls returned (`checker.tables.PollExtras.reads`: fail / info polls, unknown
                                offsets), each op's records of a key in the order returned
- `reads-by-type :ok`        → `read[pid]`: read by an ok poll (at a known offset or not)
- `writer-of`                → `writer[pid]`: the sends row that wrote the value (the last to complete, as in
                                Jepsen, whose `writer-of` walks completions in history order)
- `must-have-committed?`     → `committed[row]`: the send's op was ok, or was info and some value it sent
                                was read by an ok poll
- `version-orders`           → `VersionOrders` (see there)
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

OK, INFO, FAIL = 0, 1, 2
TYPE_CODES = {"ok": OK, "info": INFO, "fail": FAIL}
_BIG = np.iinfo(np.int64).max


def _np(col: pa.ChunkedArray | pa.Array, null: int | None = None) -> I64:
    """The column as int64 (nulls as `null`): Arrow's own buffer, read-only, when it is one chunk without nulls
    (`combine_chunks` copies even a single chunk, and at 10^7 history lines a copy is 35 MB per column)."""
    arr = _one_array(col)
    if null is not None and arr.null_count:
        arr = pc.fill_null(arr, null)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _one_array(col: pa.ChunkedArray | pa.Array) -> pa.Array:
    if isinstance(col, pa.ChunkedArray):
        return col.chunk(0) if col.num_chunks == 1 else col.combine_chunks()
    return col


def _type_codes(col: pa.ChunkedArray | pa.Array) -> I64:
    """TYPE_CODES of a type column, INFO for any other name. A dictionary-encoded column (the tables a run
    stored, checker.stored_tables) is coded through its few names, not row by row."""
    names = pa.array(list(TYPE_CODES), type=pa.string())
    codes = np.array([*TYPE_CODES.values()], dtype=np.int64)
    arr = _one_array(col)
    if pa.types.is_dictionary(arr.type):
        of_name = codes[pc.fill_null(pc.index_in(arr.dictionary, value_set=names), INFO).to_numpy()]
        return np.asarray(of_name[arr.indices.to_numpy(zero_copy_only=False)])
    idx = pc.fill_null(pc.index_in(arr.cast(pa.string()), value_set=names), INFO)
    return np.asarray(codes[idx.to_numpy(zero_copy_only=False)])


def dictionary_key_codes(arrays: list[pa.DictionaryArray]) -> tuple[list[str], list[I64]]:
    """`_key_codes` of dictionary-encoded columns: only the names some row holds count (a dictionary may hold
    more), each coded by its rank among them."""
    used = [np.asarray(a.dictionary.to_pylist(), dtype=object)[
        np.bincount(a.indices.to_numpy(zero_copy_only=False), minlength=len(a.dictionary)) > 0] for a in arrays]
    names = sorted({str(n) for u in used for n in u.tolist()})
    rank = {name: i for i, name in enumerate(names)}
    codes = []
    for a in arrays:
        lut = np.array([rank.get(n, -1) for n in a.dictionary.to_pylist()], dtype=np.int64)
        codes.append(np.asarray(lut[a.indices.to_numpy(zero_copy_only=False)]) if len(lut)
                     else np.zeros(len(a), dtype=np.int64))
    return names, codes


def _key_codes(first: pa.ChunkedArray | pa.Array, *rest: pa.ChunkedArray | pa.Array) -> tuple[list[str], list[I64]]:
    """The key names sorted, and each column's keys coded by their rank among them. Each column is coded on
    its own, not concatenated with the others (a copy of every string); the first column's names are looked
    up in the others (polls read the keys sends wrote), which is cheaper than encoding them too."""
    arrays = [_one_array(col) for col in (first, *rest)]
    if all(pa.types.is_dictionary(a.type) for a in arrays):
        return dictionary_key_codes(arrays)
    arrays = [a.cast(pa.string()) for a in arrays]
    encoded = pc.dictionary_encode(arrays[0])
    names = sorted(encoded.dictionary.to_pylist())
    value_set = pa.array(names, type=pa.string())
    indices = [encoded.indices]
    rank = {name: i for i, name in enumerate(names)}
    lut = np.array([rank[name] for name in encoded.dictionary.to_pylist()], dtype=np.int64)
    for arr in arrays[1:]:
        idx = pc.index_in(arr, value_set=value_set)
        if idx.null_count:  # names the first column does not have: code every column against all names
            names = sorted({*names, *(n for a in arrays for n in pc.unique(a).to_pylist())})
            value_set = pa.array(names, type=pa.string())
            lut = np.arange(len(names), dtype=np.int64)
            indices = [pc.index_in(a, value_set=value_set) for a in arrays]
            break
        indices.append(idx)
    codes = [np.asarray(lut[indices[0].to_numpy(zero_copy_only=False)]) if len(lut)
             else np.zeros(len(arrays[0]), dtype=np.int64)]
    codes += [np.asarray(idx.to_numpy(zero_copy_only=False), dtype=np.int64) for idx in indices[1:]]
    return names, codes


@dataclass(frozen=True, eq=False)
class SendCols:
    """The sends table as arrays; offsets and complete times are -1 where null."""

    value: I64
    key: I64
    offset: I64
    has_offset: BOOL
    process: I64
    op: I64
    type: I64
    invoke_time: I64
    complete_time: I64
    pid: I64
    time: I64
    """When the send's outcome was known: its completion, or its invoke if it never completed."""

    def __len__(self) -> int:
        return len(self.value)


@dataclass(frozen=True, eq=False)
class PollCols:
    """Every record polls returned, as arrays: the polls table's (ok, at known offsets) and the extra reads'
    (fail / info polls, unknown offsets). Offsets are -1 where unknown."""

    value: I64
    key: I64
    offset: I64
    process: I64
    op: I64
    time: I64
    pid: I64
    type: I64
    has_offset: BOOL

    def __len__(self) -> int:
        return len(self.value)

    def select(self, rows: BOOL) -> PollCols:
        return PollCols(**{name: getattr(self, name)[rows] for name in self.__dataclass_fields__})


@dataclass(frozen=True, eq=False)
class VersionOrders:
    """Jepsen's `version-orders`, for every key at once.

    The *log* of a key maps each offset to the set of values seen there, by any poll or by any send
    that must have committed and whose offset is known. Its *groups* are the distinct (key, offset) pairs
    holding something, sorted by key then offset; a group's *index* (position) is its rank among its key's
    groups, so offsets never observed are skipped: the dense positions Jepsen uses.

    Jepsen's `:by-index` takes `first` of each offset's set of values, an arbitrary one when an offset holds
    several (inconsistent offsets); here it is the smallest, so that the result is deterministic.
    `:by-value` maps a value to the *last* position at which it was so chosen (Jepsen builds it with
    `into {}`, where later entries win).

    Read-only, as every array of a Context: with one value at every offset `by_value` is `last_index` itself,
    and `g_nvalues` a view of a single 1.
    """

    g_key: I64
    g_offset: I64
    g_index: I64
    g_nvalues: I64
    g_value: I64
    """The value at each group in `:by-index` (the smallest when there are several)."""
    g_first_seen: I64
    """The earliest time some op showed the group's offset held something (a send's ack, a poll)."""
    key_start: I64
    """Groups of key k are `key_start[k]:key_start[k + 1]`."""
    by_value: I64
    """Per pid: its position in `:by-index`, -1 if none."""
    first_index: I64
    """Per pid: the first position at which the value appears in the log, -1 if never."""
    last_index: I64
    """Per pid: the last position at which the value appears in the log, -1 if never."""
    entries: Callable[[], tuple[I64, I64, I64]] = field(repr=False)
    """Builds (e_group, e_value, e_pid), which are built when first read: only log anomalies read them, and
    they are three columns as long as the log's observations (200 MB at 10^7 history lines)."""

    @cached_property
    def e_group(self) -> I64:
        """Every observation in the log (not distinct: a value sent and read is there twice) and its group."""
        return self._entries[0]

    @cached_property
    def e_value(self) -> I64:
        return self._entries[1]

    @cached_property
    def e_pid(self) -> I64:
        return self._entries[2]

    @cached_property
    def _entries(self) -> tuple[I64, I64, I64]:
        return self.entries()

    def values_between(self, key: int, i1: int, i2: int, limit: int) -> list[int]:
        """`:by-index` values strictly between positions i1 and i2 of `key`, at most `limit` of them."""
        start = int(self.key_start[key])
        lo, hi = start + i1 + 1, start + min(i2, i1 + 1 + limit)
        return [int(v) for v in self.g_value[lo:hi]]

    def offset_at(self, key: int, index: int) -> int:
        return int(self.g_offset[int(self.key_start[key]) + index])


@dataclass(frozen=True, eq=False)
class Context:
    """Everything the anomaly functions share."""

    keys: list[str]
    sends: SendCols
    polls: PollCols
    n_pairs: int
    pair_key: I64
    pair_value: I64
    read: BOOL
    first_read_time: I64
    """Per pid: the earliest completion time of an ok poll that read it (int64 max if never read)."""
    writer: I64
    """Per pid: the sends row that wrote it, -1 if none."""
    committed: BOOL
    """Per sends row: its op must have committed (Jepsen's `must-have-committed?`)."""
    vo: VersionOrders
    placed: PollCols
    """The records of ok polls at known offsets (the polls table): what the statistics read."""
    memo: dict[str, Any] = field(default_factory=dict)


def _sorted_if_needed(op: I64) -> npt.NDArray[np.intp] | None:
    if len(op) > 1 and bool(np.any(op[1:] < op[:-1])):
        return np.argsort(op, kind="stable")
    return None


def _with_extras(polls: pa.Table, extra: pa.Table) -> tuple[pa.Table, I64]:
    """The polls table and the extra reads (EXTRA_READS_SCHEMA) as one table, grouped by op and, within each
    op and key, in the order the records were returned; and the type code of each row. The polls table's rows
    of an (op, key) fill, in order, the positions the extra reads of that (op, key) leave free."""
    op = _np(polls.column("op_index"))
    key = np.unique(np.array(polls.column("key").to_pylist(), dtype=str), return_inverse=True)[1].astype(np.int64)
    # Each row's rank among its (op, key)'s rows: its position unless the extra reads take some before it.
    order = sort_by(op, key)
    starts = _starts(op[order], key[order])
    group_start = np.maximum.accumulate(np.where(starts, np.arange(len(order)), 0))
    pos = np.empty(len(order), dtype=np.int64)
    pos[order] = np.arange(len(order)) - group_start
    taken: dict[tuple[int, str], set[int]] = {}
    for o, k, q in zip(extra.column("op_index").to_pylist(), extra.column("key").to_pylist(),
                       extra.column("pos").to_pylist(), strict=True):
        taken.setdefault((o, k), set()).add(q)
    touched = np.flatnonzero(np.isin(op, np.fromiter((o for o, _ in taken), dtype=np.int64, count=len(taken))))
    keys = polls.column("key").take(pa.array(touched)).to_pylist()
    nxt: dict[tuple[int, str], int] = {}
    for r, k in zip(touched.tolist(), keys, strict=True):  # rows in op order: in order within each (op, key)
        g = (int(op[r]), k)
        q, used = nxt.get(g, 0), taken.get(g)
        while used is not None and q in used:
            q += 1
        pos[r] = q
        nxt[g] = q + 1
    cols = ["value", "key", "offset", "process", "op_index", "type", "time"]
    both = pa.concat_tables([polls.select(cols).cast(extra.select(cols).schema), extra.select(cols)])
    all_pos = np.concatenate([pos, _np(extra.column("pos"))])
    key_code = np.unique(np.array(both.column("key").to_pylist(), dtype=str), return_inverse=True)[1]
    order = np.lexsort((all_pos, key_code.astype(np.int64), _np(both.column("op_index"))))
    both = both.take(pa.array(order))
    return both, _type_codes(both.column("type"))


def prepare(sends: pa.Table, polls: pa.Table, extra_reads: pa.Table | None = None) -> Context:
    """Build the Context from the two tables (SENDS_SCHEMA, POLLS_SCHEMA) and the extra reads
    (EXTRA_READS_SCHEMA, `checker.tables.PollExtras.reads`), if any."""
    p_type: I64 | None = None
    if extra_reads is not None and extra_reads.num_rows:
        polls, p_type = _with_extras(polls, extra_reads)
    # Row order matters for the in-op checks; make sure rows are grouped by op (stable, so in-op order stays).
    s_op = _np(sends.column("op_index"))
    order = _sorted_if_needed(s_op)
    if order is not None:
        sends = sends.take(pa.array(order))
        s_op = s_op[order]
    p_op = _np(polls.column("op_index"))
    order = _sorted_if_needed(p_op)
    if order is not None:
        polls = polls.take(pa.array(order))
        p_op = p_op[order]
        if p_type is not None:
            p_type = p_type[order]

    # Keys, coded in name order.
    keys, (s_key, p_key) = _key_codes(sends.column("key"), polls.column("key"))
    nk = len(keys)

    s_val = _np(sends.column("value"))
    p_val = _np(polls.column("value"))
    (s_pid, p_pid), n_pairs, pair_key, pair_value = _pair_ids(s_val, s_key, p_val, p_key)

    s_off_col = _one_array(sends.column("offset"))
    invoke_time = _np(sends.column("invoke_time"))
    complete_time = _np(sends.column("complete_time"), -1)
    s = SendCols(
        value=s_val,
        key=s_key,
        offset=_np(s_off_col, -1),
        has_offset=np.asarray(s_off_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
        process=_np(sends.column("process")),
        op=s_op,
        type=_type_codes(sends.column("type")),
        invoke_time=invoke_time,
        complete_time=complete_time,
        pid=s_pid,
        time=np.where(complete_time >= 0, complete_time, invoke_time),
    )
    p_off_col = _one_array(polls.column("offset"))
    p = PollCols(
        value=p_val,
        key=p_key,
        offset=_np(p_off_col, -1),
        process=_np(polls.column("process")),
        op=p_op,
        time=_np(polls.column("time")),
        pid=p_pid,
        # Without extra reads every row is an ok poll's: a read-only view of one OK, not 8 bytes per row.
        type=p_type if p_type is not None else np.broadcast_to(np.full(1, OK, dtype=np.int64), (len(p_val),)),
        has_offset=np.asarray(p_off_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool),
    )
    all_placed = p_type is None
    placed = p if all_placed else p.select((p.type == OK) & p.has_offset)

    # Without extra reads every row is an ok poll's: no need to copy the columns through a mask.
    ok_pid, ok_time = (p.pid, p.time) if all_placed else (p.pid[p.type == OK], p.time[p.type == OK])
    read = np.zeros(n_pairs, dtype=bool)
    read[ok_pid] = True
    first_read_time = np.full(n_pairs, _BIG, dtype=np.int64)
    np.minimum.at(first_read_time, ok_pid, ok_time)
    del ok_pid, ok_time
    writer = _last_writer(s, n_pairs)

    # must-have-committed?: ok, or info with some send of the same op read by an ok poll.
    info = s.type == INFO
    committed = s.type == OK
    info_read = info & read[s.pid]
    if bool(info_read.any()):
        committed |= info & np.isin(s.op, s.op[info_read])

    vo = _version_orders(s, p, committed, nk, n_pairs)
    return Context(
        keys=keys,
        sends=s,
        polls=p,
        n_pairs=n_pairs,
        pair_key=pair_key,
        pair_value=pair_value,
        read=read,
        first_read_time=first_read_time,
        writer=writer,
        committed=committed,
        vo=vo,
        placed=placed,
    )


def _pair_ids(s_val: I64, s_key: I64, p_val: I64, p_key: I64) -> tuple[tuple[I64, I64], int, I64, I64]:
    """Pair ids of the sends' and the polls' (key, value) pairs: (their pids, the number of pairs, and the key and
    value of each pid).

    Values are meant to be unique per run, so usually a value's code already identifies its pair; and a run's
    values are usually exactly 0..n-1, where the code is the value itself: the value columns serve as the pid
    columns, without a copy."""
    parts = (s_val, p_val)
    n = len(s_val) + len(p_val)
    lo = min((int(x.min()) for x in parts if len(x)), default=0)
    hi = max((int(x.max()) for x in parts if len(x)), default=-1)
    codes: list[I64]
    if n and hi - lo < 4 * n + 1024:  # dense_codes' lookup table, one table for both columns
        present = np.zeros(hi - lo + 1, dtype=bool)
        for x in parts:
            present[x - lo if lo else x] = True
        if bool(present.all()):
            codes = [x - lo if lo else x for x in parts]
            n_values = hi - lo + 1
        else:
            table = np.cumsum(present, dtype=np.int64) - 1
            codes = [table[x - lo] for x in parts]
            n_values = int(table[-1]) + 1
            del table
        del present
    else:
        vcode, n_values = dense_codes(np.concatenate(parts))
        codes = [vcode[: len(s_val)], vcode[len(s_val) :]]
    keys = (s_key, p_key)
    key_of = np.full(n_values, -1, dtype=np.int64)
    for c, k in zip(codes, keys, strict=True):
        key_of[c] = k
    if all(bool(np.all(key_of[c] == k)) for c, k in zip(codes, keys, strict=True)):
        pids, n_pairs, pair_key = codes, n_values, key_of
    else:
        key_all, vcode = np.concatenate(keys), np.concatenate(codes)
        pid_all, n_pairs = dense_codes(key_all * np.int64(max(n_values, 1)) + vcode)
        pids = [pid_all[: len(s_val)], pid_all[len(s_val) :]]
        pair_key = np.zeros(n_pairs, dtype=np.int64)
        pair_key[pid_all] = key_all
        del key_all, vcode, pid_all
    if pids[0] is s_val and pids[1] is p_val:  # the values are their own pids: pair p is value p
        pair_value = np.arange(n_pairs, dtype=np.int64)
    else:
        pair_value = np.zeros(n_pairs, dtype=np.int64)
        for pid, x in zip(pids, parts, strict=True):
            pair_value[pid] = x
    return (pids[0], pids[1]), n_pairs, pair_key, pair_value


def _last_writer(s: SendCols, n_pairs: int, rows: I64 | None = None) -> I64:
    """Per pid, the sends row (among `rows`, default all) of the op that wrote it and completed last (Jepsen's
    `writer-of`: completions in history order, the later one wins); ops that never completed count as
    completing at the end. -1 where none."""
    writer = np.full(n_pairs, -1, dtype=np.int64)
    pid = s.pid if rows is None else s.pid[rows]
    rows = np.arange(len(s), dtype=np.int64) if rows is None else rows
    if not len(rows):
        return writer
    writer[pid] = rows  # a value sent once (the usual case) has its one writer
    # A row that is not its value's writer now shares the value with a later row.
    shadowed = writer[pid] != rows
    if bool(shadowed.any()):  # values sent more than once: the last completion wins
        is_multi = np.zeros(n_pairs, dtype=bool)
        is_multi[pid[shadowed]] = True
        multi = is_multi[pid]
        rows, pid = rows[multi], pid[multi]
        done = np.where(s.complete_time[rows] >= 0, s.complete_time[rows], _BIG)
        order = np.lexsort((rows, s.op[rows], done, pid))  # by pid, then completion, op and row
        last = np.r_[pid[order][1:] != pid[order][:-1], True]
        writer[pid[order][last]] = rows[order][last]
    return writer


def last_writer(ctx: Context, rows: I64) -> I64:
    """`_last_writer` among some sends rows (e.g. the failed ones)."""
    return _last_writer(ctx.sends, ctx.n_pairs, rows)


def dense_codes(x: I64) -> tuple[I64, int]:
    """Codes 0..n-1 for the distinct values of x (in no particular order), and n.

    Run values are small non-negative integers in practice, so a lookup table does it in O(n) without
    hashing; otherwise pandas' hash factorize.
    """
    if not len(x):
        return np.zeros(0, dtype=np.int64), 0
    lo, hi = int(x.min()), int(x.max())
    if hi - lo < 4 * len(x) + 1024:
        present = np.zeros(hi - lo + 1, dtype=bool)
        present[x - lo] = True
        table = np.cumsum(present, dtype=np.int64) - 1
        return table[x - lo], int(table[-1]) + 1
    import pandas as pd  # only for values spread too wide for a table; importing it costs ~0.5 s per check

    codes, uniques = pd.factorize(x)
    return codes.astype(np.int64), len(uniques)


def segment_starts(seg: I64) -> BOOL:
    """True at the first element of each run of equal values."""
    new = np.ones(len(seg), dtype=bool)
    if len(seg):
        new[1:] = seg[1:] != seg[:-1]
    return new


def segmented_cummax(x: I64, seg: I64) -> I64:
    """Running maximum of x that restarts wherever `seg` changes (x grouped by seg)."""
    if not len(x):
        return x.copy()
    bounds = _few_segments(seg)
    if bounds is not None:
        out_: I64 = np.empty_like(x)
        for a, b in itertools.pairwise(bounds):
            np.maximum.accumulate(x[a:b], out=out_[a:b])
        return out_
    run = np.cumsum(segment_starts(seg)) - 1
    lo, hi = int(x.min()), int(x.max())
    span = hi - lo + 1
    if span * (int(run[-1]) + 1) < 2**62:
        # Lift each later segment above every earlier one, so a plain running max restarts there.
        lifted = (x - lo) + run * span
        out: I64 = np.maximum.accumulate(lifted) - run * span + lo
        return out
    import pandas as pd

    return np.asarray(pd.Series(x).groupby(run).cummax().to_numpy(), dtype=np.int64)


def segmented_cummin_reverse(x: I64, seg: I64) -> I64:
    """Minimum of x over each element and every later one of its segment (suffix minimum per segment)."""
    bounds = _few_segments(seg) if len(x) else None
    if bounds is not None:
        out: I64 = np.empty_like(x)
        for a, b in itertools.pairwise(bounds):
            out[a:b] = np.minimum.accumulate(x[a:b][::-1])[::-1]
        return out
    r = x[::-1]
    return -segmented_cummax(-r, seg[::-1])[::-1]


def _few_segments(seg: I64) -> list[int] | None:
    """The bounds of seg's runs when they are few and long (a key's log groups, a process's polls of a key):
    then a plain running max or min per run is one pass, where lifting the segments apart takes several."""
    starts = np.flatnonzero(segment_starts(seg))
    if len(starts) * 4096 > len(seg):
        return None
    return [*starts.tolist(), len(seg)]


def _starts(*cols: I64) -> BOOL:
    """True where a run of equal tuples starts, for arrays sorted by those columns."""
    n = len(cols[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for c in cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def sort_by(*cols: I64) -> npt.NDArray[np.intp]:
    """Indices that sort rows by cols (the first most significant), stably: `np.lexsort(cols[::-1])`,
    several times faster.

    The columns are packed into one int64 key when their ranges allow (always, for real runs). A last column
    already in order (the ops of rows taken in op order) is left out: a stable sort keeps it in order within
    ties of the others. Keys far from sorted are sorted by a radix sort on 16-bit digits, which numpy does in
    O(n); keys nearly in order are first bucketed by a narrow leading column with a radix sort, so that data
    already nearly in order within those buckets (a key's offsets, a process's ops) costs timsort little.
    """
    n = len(cols[0])
    if n < 2:
        return np.arange(n, dtype=np.intp)
    if len(cols) > 1 and bool(np.all(cols[-1][1:] >= cols[-1][:-1])):
        cols = cols[:-1]
    spans = [int(c.max()) - int(c.min()) + 1 for c in cols]
    total = 1
    for span in spans:
        total *= span
    if total >= 2**62:
        return np.lexsort(cols[::-1])
    packed = cols[0] - cols[0].min()
    for c, span in zip(cols[1:], spans[1:], strict=True):
        packed = packed * span + (c - c.min())
    descents = int(np.count_nonzero(packed[1:] < packed[:-1]))
    if not descents:
        return np.arange(n, dtype=np.intp)
    if descents * 64 > n and total <= 2**48:
        return _radix_argsort(packed, total)
    if len(cols) > 1 and spans[0] < 2**15:
        buckets = np.argsort((cols[0] - cols[0].min()).astype(np.int16), kind="stable")
        return buckets[np.argsort(packed[buckets], kind="stable")]
    return np.argsort(packed, kind="stable")


def _radix_argsort(x: I64, total: int) -> npt.NDArray[np.intp]:
    """Stable argsort of 0 <= x < total (at most 2**48): least significant 16 bits first."""
    order: npt.NDArray[np.intp] = np.argsort((x & 0xFFFF).astype(np.uint16), kind="stable")
    shift = 16
    while (1 << shift) < total:
        digit = ((x[order] >> shift) & 0xFFFF).astype(np.uint16)
        order = order[np.argsort(digit, kind="stable")]
        shift += 16
    return order


def group_codes(k: I64, o: I64) -> tuple[I64, I64, I64]:
    """Number the distinct (k, o) pairs 0..G-1 in (k, o) order: (code of each row, key and o of each code).

    A Kafka key's offsets are dense, so (k, o) packs into a small range and a lookup table numbers it in
    O(n) without sorting; otherwise a sort does it.
    """
    (codes,), g_key, g_o = _group_codes_of([(k, o)])
    return codes.astype(np.int64, copy=False), g_key, g_o


def _group_codes_of(parts: list[tuple[I64, I64]]) -> tuple[list[npt.NDArray[np.signedinteger[Any]]], I64, I64]:
    """`group_codes` over the rows of several (k, o) arrays at once, without concatenating them: the codes of
    each part's rows (int32 when they fit: they index, and are half the memory), and the key and o of each
    code."""
    n = sum(len(k) for k, _ in parts)
    if n:
        nonempty = [(k, o) for k, o in parts if len(k)]
        o_min = min(int(o.min()) for _, o in nonempty)
        span = max(int(o.max()) for _, o in nonempty) - o_min + 1
        k_min = min(int(k.min()) for k, _ in nonempty)
        width = (max(int(k.max()) for k, _ in nonempty) - k_min + 1) * span
        if width < 4 * n + 1024:
            def packed(k: I64, o: I64) -> I64:  # in place where it can: each pass over the rows counts
                x: I64 = (k - k_min if k_min else k) * span
                x += o
                if o_min:
                    x -= o_min
                return x

            present = np.zeros(width, dtype=bool)
            for k, o in parts:
                present[packed(k, o)] = True
            table: npt.NDArray[np.signedinteger[Any]] = np.cumsum(
                present, dtype=np.int32 if width < 2**31 else np.int64)
            table -= 1
            uniq = np.flatnonzero(present).astype(np.int64, copy=False)
            del present
            g_key, g_o = np.divmod(uniq, span)
            del uniq
            g_key += k_min
            g_o += o_min
            return [table[packed(k, o)] for k, o in parts], g_key, g_o
    k = np.concatenate([k for k, _ in parts])
    o = np.concatenate([o for _, o in parts])
    order = sort_by(k, o)
    starts = _starts(k[order], o[order])
    codes = np.empty(n, dtype=np.int64)
    codes[order] = np.cumsum(starts) - 1
    first = order[starts]
    bounds = np.cumsum([0, *(len(k) for k, _ in parts)])
    return [codes[a:b] for a, b in itertools.pairwise(bounds.tolist())], k[first], o[first]


class _Observed:
    """The log's observations in one table: its rows that count (None: all of them, and then its columns are
    read as they are, not copied through a mask)."""

    def __init__(self, cols: SendCols | PollCols, rows: BOOL) -> None:
        self.cols = cols
        self.rows = None if bool(rows.all()) else rows
        self._taken: dict[int, I64] = {}

    def __getitem__(self, name: str) -> I64:
        col: I64 = getattr(self.cols, name)
        if self.rows is None:
            return col
        if name not in ("value", "pid"):
            return col[self.rows]
        # The value column usually serves as the pid column too (`_pair_ids`): copied through the mask once.
        taken = self._taken.get(id(col))
        if taken is None:
            taken = self._taken[id(col)] = col[self.rows]
        return taken


def _observations(s: SendCols, p: PollCols, committed: BOOL) -> tuple[_Observed, _Observed]:
    """Every committed send with an offset, and every poll's record at a known offset (ok, info and fail)."""
    return _Observed(s, committed & s.has_offset), _Observed(p, p.has_offset)


def _version_orders(s: SendCols, p: PollCols, committed: BOOL, nk: int, n_pairs: int) -> VersionOrders:
    """Jepsen's `version-orders`: the log from every poll (ok, info or fail: "pollers ... are *always* supposed
    to emit safe data") and every committed send with an offset.

    Without sorting the observations: groups (distinct key, offset) are numbered in log order by
    `group_codes`, and every per-group and per-value fact is a scatter-min / scatter-max. The sends' and the
    polls' observations are scattered one table after the other, each column taken when needed, rather than
    concatenated (at 10^7 history lines, five concatenated columns were 350 MB).
    """
    parts = _observations(s, p, committed)
    groups, g_key, g_offset = _group_codes_of([(part["key"], part["offset"]) for part in parts])
    ng = len(g_key)
    key_start = np.searchsorted(g_key, np.arange(nk + 1, dtype=np.int64)).astype(np.int64)
    g_index = np.arange(ng, dtype=np.int64) - key_start[g_key]

    g_value = np.full(ng, _BIG, dtype=np.int64)  # Jepsen's `first` of the offset's set: the smallest
    g_vmax = np.full(ng, -_BIG, dtype=np.int64)
    g_first_seen = np.full(ng, _BIG, dtype=np.int64)
    for group, part in zip(groups, parts, strict=True):
        v = part["value"]
        np.minimum.at(g_value, group, v)
        np.maximum.at(g_vmax, group, v)
        del v
        np.minimum.at(g_first_seen, group, part["time"])
    mixed = np.flatnonzero(g_value != g_vmax)
    del g_vmax
    if len(mixed):  # offsets holding several values (rare): count them exactly
        g_nvalues = np.ones(ng, dtype=np.int64)
        is_mixed = np.zeros(ng, dtype=bool)
        is_mixed[mixed] = True
        sel = [is_mixed[group] for group in groups]
        pairs = np.unique(np.stack([np.concatenate([g[r] for g, r in zip(groups, sel, strict=True)]),
                                    np.concatenate([pt["value"][r] for pt, r in zip(parts, sel, strict=True)])],
                                   axis=1), axis=0)
        g_nvalues[mixed] = np.bincount(pairs[:, 0], minlength=ng)[mixed]
    else:  # one value everywhere: a read-only view of a single 1, not 8 bytes per group
        g_nvalues = np.broadcast_to(np.ones(1, dtype=np.int64), (ng,))

    first_index = np.full(n_pairs, _BIG, dtype=np.int64)
    last_index = np.full(n_pairs, -1, dtype=np.int64)
    # With one value at every offset, every observation is its offset's `:by-index` value, and a value's
    # position in `:by-value` is its last one: the same array serves both.
    by_value = last_index if not len(mixed) else np.full(n_pairs, -1, dtype=np.int64)
    for group, part in zip(groups, parts, strict=True):
        e_index = g_index[group]
        pid = part["pid"]
        np.minimum.at(first_index, pid, e_index)
        np.maximum.at(last_index, pid, e_index)
        if len(mixed):
            chosen = part["value"] == g_value[group]
            np.maximum.at(by_value, pid[chosen], e_index[chosen])
            del chosen
        del e_index, pid
    first_index[first_index == _BIG] = -1
    del groups, parts

    def entries() -> tuple[I64, I64, I64]:
        parts = _observations(s, p, committed)
        group = np.concatenate(_group_codes_of([(part["key"], part["offset"]) for part in parts])[0])
        return (group.astype(np.int64, copy=False), np.concatenate([part["value"] for part in parts]),
                np.concatenate([part["pid"] for part in parts]))

    return VersionOrders(
        g_key=g_key,
        g_offset=g_offset,
        g_index=g_index,
        g_nvalues=g_nvalues,
        g_value=g_value,
        g_first_seen=g_first_seen,
        key_start=key_start,
        by_value=by_value,
        first_index=first_index,
        last_index=last_index,
        entries=entries,
    )


def op_key_order(ctx: Context, table: str) -> I64:
    """Rows of `table` ("sends" or "polls") grouped by (op, key), keeping row order inside each group.
    Memoised: several analyses need it."""
    name = f"op_key_order:{table}"
    order = ctx.memo.get(name)
    if order is None:
        cols = ctx.sends if table == "sends" else ctx.polls
        order = sort_by(cols.op, cols.key).astype(np.int64, copy=False)
        ctx.memo[name] = order
        ctx.memo[f"{name}:identity"] = bool(np.all(order[1:] > order[:-1])) if len(order) else True
    result: I64 = order
    return result


def in_op_key_order(ctx: Context, table: str, col: I64) -> I64:
    """`col[op_key_order(ctx, table)]`, or col itself when the rows are in that order already (they usually
    are: a gather of the whole column for nothing)."""
    order = op_key_order(ctx, table)
    if ctx.memo[f"op_key_order:{table}:identity"]:
        return col
    result: I64 = col[order]
    return result


def deltas(prev_index: I64, cur_index: I64, out: I64 | None = None) -> I64:
    """Jepsen's delta between two positions: their difference when both are known, else 1 (no claim).
    Written into `out` if given (an int64 array as long as the inputs)."""
    d: I64 = np.subtract(cur_index, prev_index, out=out, dtype=np.int64)
    d[(prev_index < 0) | (cur_index < 0)] = 1
    return d
