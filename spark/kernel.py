"""Per-partition analysis: every key of one shuffle partition, in numpy, with no Python loop over rows.

The Spark job (spark/job.py) sends each key's rows — every poll record and every send, as one narrow table — to one
partition, and runs `analyse_batches` there through `mapInArrow`. This module imports neither pyspark nor the
rest of kafka-chaos, so Spark can ship it to executors by value (a cluster needs numpy, pandas and pyarrow
— what PySpark's Arrow support needs anyway — not kafka-chaos), and tests can run it without a JVM.

Input rows (`INPUT_SCHEMA`): `key`, `value`, `offset` (null when unknown), `src` (0 a record of an ok poll,
1 ok send, 2 info send, 3 failed send, 4 a record of a fail or info poll), `op` (history index of the op: a
send's invoke, a poll's completion), `process`, `time` (when the op completed: a send's completion, null if it
never completed; a poll's completion) and `pos` (a send's place among its op's sends; a poll record's place
among its op's records, in the order returned — only the order within one op counts; -1 - place for the
Parquet path's extra reads, `_returned_first`). Marker rows (src 5, 6: `SRC_EMPTY`, `SRC_REBALANCED`) say
what else a poll op said of a key; they are set aside before the analysis.

Definitions (Jepsen's, jepsen.tests.kafka, on general histories as checker/ follows them; docs/architecture.md
§3, §4):

- *Read*: a value some ok poll returned, at a known offset or not. Records of fail / info polls are not reads.
- A send *must have committed* if it is ok, or info and some value its op sent was read.
  The *writer* of a (key, value) is the op that sent it and completed last (never completed: last of all;
  ties by op, then place in the op).
- **Version order** of a key: the log built from every poll record (ok, fail or info) and every committed
  send whose offset is known, each offset holding the set of values seen there. *Positions* are dense
  indexes over the offsets that hold something (offsets never observed are skipped). A record at an unknown
  offset has no place in it.
- **inconsistent-offsets**: an offset of a key holding two or more distinct values.
- **duplicate**: a value at more than one offset of a key.
- **lost-write**: Jepsen's `lost-write-cases`. Per key, the bound is the highest *first* position of any
  value read; a value never read, whose writer committed and whose *last* position is at or below that bound,
  should have been read and was not. A value whose offset is unknown has no position, so is never lost. A
  value below the bound that nobody sent (only a fail / info poll can put it there) gives a `#no-writer` row:
  the job stops, as the checker does (Jepsen's `:no-writer-of`).
- **unseen**: values of ok sends that no ok poll read (loss and delay look alike): one instance per key with
  `count` and the `values` (a value sent twice is one value).
- **G1a** (aborted read): an ok poll record (at a known offset or not) of a value that *any* failed op sent;
  one instance per record, naming the failed writer that completed last.
- **garbage-read**: a record of any poll (ok, fail or info; at a known offset or not) whose (key, value) no
  send carried, whatever the send's outcome: one instance per record.
- **precommitted-read**: a `txn` that polled a value one of its own sends wrote (checker.anomalies.txn
  `precommitted_read_cases`). The tables link a txn's sends (by invoke) to its polls (by completion) only
  through the op's process and completion time, so a poll row reads its own op's send when a send row of
  the same (key, value) has the poll's process and time. Both rows are in the key's partition, but the
  checker's one instance per op crosses keys (its first key, in the order the op first sent to each, with
  such a read): each partition emits one uncapped `precommitted-read` row per (op, key) with the op's first
  send position to that key and the chosen send's position (`indexes`), and the job keeps one per op.
  Txns that read their own uncommitted sends are few (a read_committed reader never sees them), so these
  rows are too.

- **Order anomalies** (checker.anomalies.polls and .sends, `_order_anomalies`): positions are Jepsen's
  `:by-value` (a value's last position where it is its offset's chosen, smallest, value) and the delta of two
  positions is 1 when either is unknown. Inside one op, successive records of a key (any poll type) with
  delta > 1 are `int-poll-skip`, < 1 `int-nonmonotonic-poll` (keys in the op's rebalance log exempt);
  successive sends to a key (any type) likewise `int-send-skip` / `int-nonmonotonic-send`. Between a
  process's successive polls of a key, the first record against the last of its previous *ok* poll: > 1
  `poll-skip`, < 1 `nonmonotonic-poll` (with `subscribe`), unless an ok poll returned the key empty
  (SRC_EMPTY marker rows) or an assign / subscribe not naming the key (`Reset`) came between; between a
  process's successive ok / info send ops to a key, delta < 1 is `nonmonotonic-send` (resets end it too).

G0 and G1c are not computed here: the job lists them in its `not_checked`.

Per partition: a hash factorisation of (key, value) for the per-value facts (read? who wrote it?), another
of the log's (key, offset) with only the distinct offsets sorted for positions, and linear numpy passes.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

SRC_POLL, SRC_OK, SRC_INFO, SRC_FAIL, SRC_POLL_OTHER = 0, 1, 2, 3, 4
SRC_EMPTY, SRC_REBALANCED = 5, 6
"""Marker rows, not records (their `value` is ignored): SRC_EMPTY, an ok poll op returned the key with no
records (`process`, `op`); SRC_REBALANCED, the key is named in the poll op's `rebalance_log` (`op`)."""

INPUT_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("src", pa.int8()),
        pa.field("op", pa.int64()),
        pa.field("process", pa.int64()),
        pa.field("time", pa.int64()),
        pa.field("pos", pa.int64()),
    ]
)

KIND_KEY = "#key"
"""The kind of a per-key statistics row (not an anomaly)."""
KIND_NO_WRITER = "#no-writer"
"""The kind of a row naming a key's must-read values nobody sent (`value`: the smallest, `count`): the job
stops there, as the checker does (Jepsen's `:no-writer-of`)."""
KIND_UNCERTAIN = "#uncertain"
"""The kind of a row listing info-send ops (`ops`) of one key whose commit this partition cannot decide."""

ORDER_KINDS = ("poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll", "nonmonotonic-send",
               "int-send-skip", "int-nonmonotonic-send")
"""The anomalies that follow a process's successive ops, or an op's successive records, in one key."""
KIND_GARBAGE = "garbage-read"
"""A poll's record of a (key, value) that no send carried, whatever its outcome (Elle's garbage)."""
ANOMALY_KINDS = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a", KIND_GARBAGE, *ORDER_KINDS)
"""The anomalies decided per key: instances capped per partition, exact counts in the `#key` rows."""
KIND_PRECOMMITTED = "precommitted-read"
"""Decided per op across keys (see the module doc): every candidate row is emitted, the job counts."""

KEY_STATS = (
    "sends",
    "sends_ok",
    "sends_info",
    "sends_fail",
    "poll_records",
    "values_read",
    "positions",
    "max_offset",
    *ANOMALY_KINDS,
)
"""Names of the per-key statistics, in the order of the `stats` list of a `#key` row. For `unseen` the
statistic is the number of unseen values (an instance is one key)."""

FINDINGS_SCHEMA = pa.schema(
    [
        pa.field("kind", pa.string()),
        pa.field("key", pa.string()),
        pa.field("value", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("index", pa.int64()),
        pa.field("bound", pa.int64()),
        pa.field("count", pa.int64()),
        pa.field("values", pa.list_(pa.int64())),
        pa.field("offsets", pa.list_(pa.int64())),
        pa.field("indexes", pa.list_(pa.int64())),
        pa.field("ops", pa.list_(pa.int64())),
        pa.field("processes", pa.list_(pa.int64())),
        pa.field("stats", pa.list_(pa.int64())),
        pa.field("process", pa.int64()),
        pa.field("subscribe", pa.bool_()),
        pa.field("delta", pa.int64()),
        pa.field("skipped", pa.list_(pa.int64())),
        pa.field("times", pa.list_(pa.int64())),
    ]
)
"""One row per anomaly instance (at most `cap` per kind and partition, smallest (key, value, offset) first)
and one `#key` row per key with `stats`."""

FINDINGS_DDL = (
    "kind string, key string, value bigint, offset bigint, index bigint, bound bigint, count bigint, "
    "values array<bigint>, offsets array<bigint>, indexes array<bigint>, ops array<bigint>, "
    "processes array<bigint>, stats array<bigint>, process bigint, subscribe boolean, delta bigint, "
    "skipped array<bigint>, times array<bigint>"
)

_I64 = npt.NDArray[np.int64]
_BOOL = npt.NDArray[np.bool_]
_NONE = np.iinfo(np.int64).max
MAX_LISTED = 1000
"""An instance's `skipped` lists at most this many values (checker.anomalies._common.MAX_LISTED)."""

Reset = tuple[int, int, Collection[str]]
"""An ok or info assign / subscribe: (process, history index of its completion, the keys or topics it names).
From there on the process keeps its position only in the keys it names (or whose topic it names)."""
Subscriber = tuple[int, int, int]
"""A subscribe-mode consumer: (process, first op, end op) — the op range of its run (a multi-run job shifts
each run's ops), where its poll-skip / nonmonotonic-poll instances carry `subscribe: true`."""


CHUNK_ROWS = 2_000_000
"""Keys of a partition are analysed in groups of about this many rows (a bigger key alone), so a Python
worker holds the partition's Arrow input (~30 bytes a row) plus one group's working set (~100 bytes a row)."""


def analyse_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    cap: int = 100,
    max_values: int = 1000,
    committed_info_ops: npt.NDArray[np.int64] | None = None,
    chunk_rows: int = CHUNK_ROWS,
    resets: Sequence[Reset] = (),
    subscribers: Sequence[Subscriber] = (),
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: gather one partition's batches and analyse them, whole keys at a time in groups of
    about `chunk_rows` rows; yield the findings."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    del collected
    for part in _key_groups(table, chunk_rows):
        found = analyse_table(part, cap=cap, max_values=max_values, committed_info_ops=committed_info_ops,
                              resets=resets, subscribers=subscribers)
        yield from found.to_batches()


def _key_groups(table: pa.Table, chunk_rows: int) -> Iterator[pa.Table]:
    """The table split into sub-tables of whole keys, about `chunk_rows` rows each (one if it is small)."""
    if table.num_rows <= chunk_rows:
        yield table
        return
    enc = pc.dictionary_encode(table.column("key")).combine_chunks()
    kid = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    sizes = np.bincount(kid, minlength=len(enc.dictionary))
    # Greedy packing in key order: a group closes once it holds chunk_rows rows.
    group_of_key = np.zeros(len(sizes), dtype=np.int64)
    filled, group = 0, 0
    for k, size in enumerate(sizes.tolist()):
        if filled and filled + size > chunk_rows:
            group, filled = group + 1, 0
        group_of_key[k] = group
        filled += size
    row_group = group_of_key[kid]
    order = np.argsort(row_group, kind="stable")
    bounds = np.searchsorted(row_group[order], np.arange(group + 2))
    for g in range(group + 1):
        rows = order[bounds[g] : bounds[g + 1]]
        if len(rows):
            yield table.take(pa.array(rows))


def _group_starts(*cols: npt.NDArray[Any]) -> _BOOL:
    """True where a run of equal (cols…) tuples starts, for arrays already sorted by those columns."""
    n = len(cols[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for c in cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def _np(col: pa.ChunkedArray, null: int | None = None) -> _I64:
    arr = col.combine_chunks()
    if null is not None and arr.null_count:
        arr = pc.fill_null(arr, null)
    return np.asarray(arr.to_numpy(zero_copy_only=False), dtype=np.int64)


def _codes(major: _I64, minor: _I64) -> tuple[_I64, int, int] | None:
    """One int64 per (major, minor) pair, ordered like the pairs: major * span + (minor - lo); None if it
    would overflow (then the caller sorts the pairs instead)."""
    if not len(minor):
        return np.zeros(0, dtype=np.int64), 1, 0
    lo, hi = int(minor.min()), int(minor.max())
    span = hi - lo + 1
    top = int(major.max()) + 1 if len(major) else 1
    if span >= 2**62 // max(top, 1):
        return None
    return major * np.int64(span) + (minor - np.int64(lo)), span, lo


def _dense(major: _I64, minor: _I64, *, ordered: bool) -> tuple[_I64, _I64, _I64]:
    """Dense ids of the distinct (major, minor) pairs: (id per element, major per id, minor per id).

    A hash factorisation (linear); with `ordered`, ids follow the pairs' order (only the distinct pairs are
    sorted, not the elements).
    """
    coded = _codes(major, minor)
    if coded is None:  # values too spread for one int64: sort the pairs
        order = np.lexsort((minor, major))
        new = _group_starts(major[order], minor[order])
        ids = np.empty(len(major), dtype=np.int64)
        ids[order] = np.cumsum(new) - 1
        firsts = order[new]
        return ids, major[firsts], minor[firsts]
    code, span, lo = coded
    ids, uniq = pd.factorize(code, sort=ordered)
    uniq = np.asarray(uniq, dtype=np.int64)
    return np.asarray(ids, dtype=np.int64), uniq // span, uniq % span + lo


def _member(values: _I64, wanted: _I64) -> _BOOL:
    """`np.isin` for a few wanted values among many: one binary search per value, not a pass per wanted."""
    if not len(wanted):
        return np.zeros(len(values), dtype=bool)
    w = np.unique(wanted)
    at = np.minimum(np.searchsorted(w, values), len(w) - 1)
    found: _BOOL = w[at] == values
    return found


def _rows_of(ids: _I64, wanted: _I64) -> dict[int, _I64]:
    """Rows of each wanted id (a few ids; one linear pass)."""
    if not len(wanted):
        return {}
    rows = np.flatnonzero(_member(ids, wanted))
    order = np.argsort(ids[rows], kind="stable")
    rows = rows[order]
    starts = np.flatnonzero(_group_starts(ids[rows]))
    ends = np.append(starts[1:], len(rows))
    return {int(ids[rows[s]]): rows[s:e] for s, e in zip(starts.tolist(), ends.tolist(), strict=True)}


def analyse_table(
    table: pa.Table,
    *,
    cap: int = 100,
    max_values: int = 1000,
    committed_info_ops: npt.NDArray[np.int64] | None = None,
    resets: Sequence[Reset] = (),
    subscribers: Sequence[Subscriber] = (),
) -> pa.Table:
    """Analyse every key in `table` (INPUT_SCHEMA columns and marker rows); return FINDINGS_SCHEMA rows.

    `resets`: every ok or info assign / subscribe (`Reset`); `subscribers`: the subscribe-mode consumers
    (`Subscriber`) — both for the order anomalies (`_order_anomalies`).

    Each key must be wholly inside `table`. Instances are capped at `cap` per kind (smallest key, value,
    offset first); per-key statistics carry the exact counts. An unseen instance lists at most `max_values`
    values (smallest first) and carries the exact `count`.

    Must-have-committed (Jepsen): an ok send, or an info send whose op had some value read by an ok poll.
    That op may have sent to keys in other partitions; `committed_info_ops` lists info ops known to have
    committed. An info send with an offset, whose own value was not read and whose op is not listed, is
    reported in a `#uncertain` row (its op) and treated as not committed: the job decides those ops with
    all the data and re-analyses the keys concerned.

    Cost: a hash factorisation of (key, value) over all rows, another of the log's (key, offset) (only
    the distinct offsets are sorted), a hash de-duplication of (offset, value) pairs; the rest is linear.
    """
    marks = pc.greater_equal(table.column("src"), pa.scalar(SRC_EMPTY, pa.int8()))
    markers = table.filter(marks)
    if markers.num_rows:
        table = table.filter(pc.invert(marks))
    n = table.num_rows
    if n == 0:
        return FINDINGS_SCHEMA.empty_table()
    enc = pc.dictionary_encode(table.column("key")).combine_chunks()
    key_names: list[str] = enc.dictionary.to_pylist()
    nkeys = len(key_names)
    # Keys are handled by rank of name, so that instances are chosen and emitted in key-name order.
    by_rank = np.argsort(np.array(key_names, dtype=object), kind="stable").astype(np.int64)  # rank → kid
    key_rank = np.empty(nkeys, dtype=np.int64)
    key_rank[by_rank] = np.arange(nkeys)
    names = [key_names[k] for k in by_rank.tolist()]  # by rank
    krank = key_rank[np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)]

    val = _np(table.column("value"))
    off_col = table.column("offset").combine_chunks()
    has_off = np.asarray(off_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    off = _np(table.column("offset"), -1)
    src = _np(table.column("src"))
    op = _np(table.column("op"), -1)
    process = _np(table.column("process"), -1)
    is_poll = src == SRC_POLL  # records of ok polls: read, whether or not their offset is known
    any_poll = is_poll | (src == SRC_POLL_OTHER)
    is_info = src == SRC_INFO
    done = _np(table.column("time"), _NONE)  # a send never completed counts as completing last
    pos = _np(table.column("pos"), 0)

    # ---- A. Per (key, value) pair: read? its writer (the send that completed last). ----------------------
    gid, g_rank, g_val = _dense(krank, val, ordered=False)
    ngroups = len(g_rank)
    read = np.bincount(gid[is_poll], minlength=ngroups) > 0
    send_rows = np.flatnonzero(~any_poll)
    writer_row = _last_writer(send_rows, gid, done, op, pos, ngroups)
    has_writer = writer_row >= 0
    failed_writer = _last_writer(np.flatnonzero(src == SRC_FAIL), gid, done, op, pos, ngroups)

    # Must-have-committed, per row: ok, or info whose op had a value read.
    committed = src == SRC_OK
    info_rows = np.flatnonzero(is_info)
    uncertain_rows = info_rows[:0]
    if len(info_rows):
        read_ops = np.unique(op[info_rows[read[gid[info_rows]]]])
        if committed_info_ops is not None and len(committed_info_ops):
            read_ops = np.union1d(read_ops, committed_info_ops)
        committed[info_rows] = _member(op[info_rows], read_ops)
        uncertain_rows = info_rows[has_off[info_rows] & ~committed[info_rows]]
    writer_committed = has_writer & committed[np.maximum(writer_row, 0)]

    # ---- B. The version order: log entries (every poll's records and committed sends, with an offset).
    # Positions are the ranks of the distinct (key, offset) pairs within their key. -------------------------
    log_rows = np.flatnonzero(has_off & (any_poll | committed))
    log_gid = gid[log_rows]
    o_id, o_rank, o_off = _dense(krank[log_rows], off[log_rows], ordered=True)  # sorted by (key, offset)
    n_off = len(o_rank)
    o_key_start = np.flatnonzero(_group_starts(o_rank))
    o_pos = np.arange(n_off, dtype=np.int64) - np.repeat(o_key_start, np.diff(np.append(o_key_start, n_off)))
    row_pos = o_pos[o_id]
    first_pos = np.full(ngroups, -1, dtype=np.int64)
    if len(log_rows):
        tmp = np.full(ngroups, _NONE, dtype=np.int64)
        np.minimum.at(tmp, log_gid, row_pos)
        first_pos = np.where(tmp == _NONE, -1, tmp)
    last_pos = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last_pos, log_gid, row_pos)
    # Distinct (offset, value) entries of the log.
    pair = np.asarray(pd.unique(o_id * np.int64(max(ngroups, 1)) + log_gid), dtype=np.int64)
    e_off, e_gid = pair // max(ngroups, 1), pair % max(ngroups, 1)
    values_at = np.bincount(e_off, minlength=n_off)
    offsets_of = np.bincount(e_gid, minlength=ngroups)

    # lost-write: per key, bound = the highest first position of a value read; values whose last position
    # is ≤ bound, never read, written by a committed send. A value read only at unknown offsets has no first
    # position (-1): it does not move the bound.
    bound = np.full(nkeys, -1, dtype=np.int64)
    np.maximum.at(bound, g_rank[read], first_pos[read])
    must_read = ~read & (last_pos >= 0) & (last_pos <= bound[g_rank])
    orphans = np.flatnonzero(must_read & ~has_writer)  # only a fail / info poll can put such a value there
    lost = must_read & writer_committed
    duplicate = offsets_of > 1
    inconsistent = values_at > 1
    # unseen: ok sends' values no ok poll read (a value sent twice is one value, named by its first ok send);
    # G1a: ok poll records of a value some failed op sent.
    unseen_rows = np.flatnonzero((src == SRC_OK) & ~read[gid])
    if len(unseen_rows):
        first_ok = unseen_rows[np.lexsort((pos[unseen_rows], op[unseen_rows], gid[unseen_rows]))]
        unseen_rows = first_ok[_group_starts(gid[first_ok])]
    g1a_rows = np.flatnonzero(is_poll & (failed_writer[gid] >= 0))
    garbage_rows = np.flatnonzero(any_poll & ~has_writer[gid])  # any poll type, at a known offset or not

    # The order anomalies: positions in Jepsen's `:by-index` (the smallest value of each offset), and
    # `:by-value` (a value's last position where it is so chosen).
    o_min = np.full(n_off, _NONE, dtype=np.int64)
    np.minimum.at(o_min, o_id, val[log_rows])
    chosen = val[log_rows] == o_min[o_id]
    by_value = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(by_value, log_gid[chosen], row_pos[chosen])
    del chosen
    time_ = _np(table.column("time"), -1)
    m_rank = _np(pc.index_in(markers.column("key").cast(pa.string()), value_set=pa.array(names, pa.string())), -1)
    m_src, m_op, m_process = _np(markers.column("src")), _np(markers.column("op"), -1), _np(
        markers.column("process"), -1)
    is_empty, is_rebalanced = (m_src == SRC_EMPTY) & (m_rank >= 0), (m_src == SRC_REBALANCED) & (m_rank >= 0)
    order_found = _order_anomalies(
        _Rows(krank=krank, gid=gid, val=val, off=off, has_off=has_off, src=src, op=op, process=process,
              pos=pos, time=time_),
        by_value=by_value, by_index=o_min, key_start=np.searchsorted(o_rank, np.arange(nkeys + 1)),
        empty=(m_rank[is_empty], m_process[is_empty], m_op[is_empty]),
        rebalanced=(m_rank[is_rebalanced], m_op[is_rebalanced]),
        resets=resets, subscribers=subscribers, names=names, cap=cap)

    # ---- Per-key statistics (exact counts), by key rank. ------------------------------------------------
    def per_key(ranks: _I64) -> _I64:
        return np.bincount(ranks, minlength=nkeys).astype(np.int64)

    max_offset = np.full(nkeys, -1, dtype=np.int64)
    if n_off:
        last_of_key = np.append(o_key_start[1:], n_off) - 1
        max_offset[o_rank[last_of_key]] = o_off[last_of_key]
    stats = {
        "sends": per_key(krank[~any_poll]),
        "sends_ok": per_key(krank[src == SRC_OK]),
        "sends_info": per_key(krank[is_info]),
        "sends_fail": per_key(krank[src == SRC_FAIL]),
        "poll_records": per_key(krank[is_poll & has_off]),
        "values_read": per_key(g_rank[read]),
        "positions": per_key(o_rank),
        "max_offset": max_offset,
        "lost-write": per_key(g_rank[lost]),
        "unseen": per_key(krank[unseen_rows]),
        "duplicate": per_key(g_rank[duplicate]),
        "inconsistent-offsets": per_key(o_rank[inconsistent]),
        "G1a": per_key(krank[g1a_rows]),
        KIND_GARBAGE: per_key(krank[garbage_rows]),
        **{kind: counts for kind, (counts, _) in order_found.items()},
    }

    # ---- Instances: the `cap` smallest of each kind (only these few are looked at row by row). ----------
    out: dict[str, list[Any]] = {f.name: [] for f in FINDINGS_SCHEMA}

    def emit(kind: str, key: str, **fields: Any) -> None:
        out["kind"].append(kind)
        out["key"].append(key)
        for name in FINDINGS_SCHEMA.names[2:]:
            out[name].append(fields.get(name))

    def smallest(groups: _I64) -> _I64:
        return groups[np.lexsort((g_val[groups], g_rank[groups]))][:cap]

    lost_g = smallest(np.flatnonzero(lost))
    dup_g = smallest(np.flatnonzero(duplicate))
    rows_of = _rows_of(gid, np.concatenate([lost_g, dup_g]))
    sent_or_placed = ~any_poll | has_off  # a duplicate's ops: its sends, and the polls that placed it

    for g in lost_g.tolist():
        w = int(writer_row[g])
        emit("lost-write", names[g_rank[g]], value=int(g_val[g]),
             offset=int(off[w]) if has_off[w] else None, index=int(first_pos[g]),
             bound=int(bound[g_rank[g]]), ops=[int(op[w])])

    if len(unseen_rows):
        u = unseen_rows[np.lexsort((op[unseen_rows], val[unseen_rows], krank[unseen_rows]))]
        u_start = np.flatnonzero(_group_starts(krank[u]))
        u_end = np.append(u_start[1:], len(u))
        for s, e in zip(u_start[:cap].tolist(), u_end[:cap].tolist(), strict=True):
            rows = u[s : min(e, s + max_values)]
            emit("unseen", names[krank[u[s]]], count=e - s, values=val[rows].tolist(), ops=op[rows].tolist())

    if len(dup_g):
        in_dup = _member(e_gid, dup_g)
        d_gid, d_off = e_gid[in_dup], e_off[in_dup]
        for g in dup_g.tolist():
            offs = np.sort(d_off[d_gid == g])
            emit("duplicate", names[g_rank[g]], value=int(g_val[g]), count=len(offs),
                 offsets=o_off[offs].tolist(), indexes=o_pos[offs].tolist(),
                 ops=sorted(set(op[rows_of[g][sent_or_placed[rows_of[g]]]].tolist())))

    inc = np.flatnonzero(inconsistent)[:cap]  # (key, offset) groups are sorted already
    if len(inc):
        in_inc = _member(e_off, inc)
        i_off, i_gid = e_off[in_inc], e_gid[in_inc]
        inc_rows = _rows_of(o_id, inc)
        for i in inc.tolist():
            emit("inconsistent-offsets", names[o_rank[i]], offset=int(o_off[i]), index=int(o_pos[i]),
                 values=sorted(g_val[i_gid[i_off == i]].tolist()), count=int(values_at[i]),
                 ops=sorted(set(op[log_rows[inc_rows[i]]].tolist())))

    if len(g1a_rows):
        r_sorted = g1a_rows[np.lexsort((op[g1a_rows], off[g1a_rows], val[g1a_rows], krank[g1a_rows]))]
        for r in r_sorted[:cap].tolist():
            w = int(failed_writer[gid[r]])
            emit("G1a", names[krank[r]], value=int(val[r]), offset=int(off[r]) if has_off[r] else None,
                 ops=[int(op[w]), int(op[r])], processes=[int(process[w]), int(process[r])])

    if len(garbage_rows):
        for r in garbage_rows[np.lexsort((pos[garbage_rows], op[garbage_rows], krank[garbage_rows]))][:cap].tolist():
            emit(KIND_GARBAGE, names[krank[r]], value=int(val[r]), offset=int(off[r]) if has_off[r] else None,
                 process=int(process[r]), ops=[int(op[r])], times=[int(time_[r])])

    for kind, (_, instances) in order_found.items():
        for inst in instances:
            emit(kind, names[inst.pop("rank")], **inst)

    if len(orphans):
        o_sorted = orphans[np.lexsort((g_val[orphans], g_rank[orphans]))]
        starts = np.flatnonzero(_group_starts(g_rank[o_sorted]))
        for a, b in zip(starts.tolist(), np.append(starts[1:], len(o_sorted)).tolist(), strict=True):
            g = int(o_sorted[a])
            emit(KIND_NO_WRITER, names[g_rank[g]], value=int(g_val[g]), count=b - a)

    for k_rank, p_value, p_offset, p_ops, order in _precommitted(table, src, gid, krank, val, off, has_off, op):
        emit(KIND_PRECOMMITTED, names[k_rank], value=p_value, offset=p_offset, ops=p_ops, indexes=order)

    if len(uncertain_rows):
        for k in np.unique(krank[uncertain_rows]).tolist():
            ops = np.unique(op[uncertain_rows[krank[uncertain_rows] == k]])
            emit(KIND_UNCERTAIN, names[k], ops=ops.tolist())

    stat_matrix = np.stack([stats[name] for name in KEY_STATS], axis=1)
    for k in range(nkeys):
        emit(KIND_KEY, names[k], stats=stat_matrix[k].tolist())

    return pa.Table.from_pydict(out, schema=FINDINGS_SCHEMA)


@dataclass(frozen=True)
class _Rows:
    """The columns of one group of keys, as numpy arrays (`analyse_table`'s)."""

    krank: _I64
    gid: _I64
    val: _I64
    off: _I64
    has_off: _BOOL
    src: _I64
    op: _I64
    process: _I64
    pos: _I64
    time: _I64


def _deltas(prev: _I64, cur: _I64) -> _I64:
    """Jepsen's delta between positions: their difference when both are known, else 1 (no claim)."""
    d: _I64 = cur - prev
    d[(prev < 0) | (cur < 0)] = 1
    return d


def _pairs_in(major: _I64, minor: _I64, wanted_major: _I64, wanted_minor: _I64) -> _BOOL:
    """Whether each (major, minor) pair is among the wanted pairs."""
    if not len(wanted_major) or not len(major):
        return np.zeros(len(major), dtype=bool)
    ids, _, _ = _dense(np.concatenate([major, wanted_major]), np.concatenate([minor, wanted_minor]),
                       ordered=False)
    return _member(ids[: len(major)], ids[len(major) :])


def _places(r: _Rows, rows: _I64) -> _I64:
    """Each poll record's place among its op's records of its key, in the order returned. `pos` orders them,
    except where the Parquet path's extra reads say their exact place (-1 - place): there the polls table's
    records fill the places left free, in table order (as checker.context does). Such ops are few."""
    place = r.pos[rows].copy()
    neg = place < 0
    if not bool(neg.any()):
        return place
    ids, _, _ = _dense(r.krank[rows], r.op[rows], ordered=False)
    touched = np.flatnonzero(_member(ids, ids[neg]))
    groups: dict[int, list[int]] = {}
    for i in touched[np.argsort(place[touched], kind="stable")].tolist():
        groups.setdefault(int(ids[i]), []).append(i)
    for members in groups.values():  # by place: the extra reads first, then the table's records in order
        taken = {-1 - int(place[i]) for i in members if place[i] < 0}
        filled, q = [], 0
        for i in members:
            if place[i] >= 0:
                while q in taken:
                    q += 1
                filled.append((i, q))
                q += 1
        for i in members:
            if place[i] < 0:
                place[i] = -1 - place[i]
        for i, q in filled:
            place[i] = q
    return place


def _empty_between(r: _Rows, a: _I64, b: _I64, e_rank: _I64, e_process: _I64, e_op: _I64) -> _BOOL:
    """Whether an ok poll of b's process returned b's key with no records strictly between ops a and b."""
    ne, nq = len(e_rank), len(b)
    if not ne or not nq:
        return np.zeros(nq, dtype=bool)
    ids, _, _ = _dense(np.concatenate([e_rank, r.krank[b]]), np.concatenate([e_process, r.process[b]]),
                       ordered=False)
    _, rank = np.unique(np.concatenate([e_op, r.op[a], r.op[b]]), return_inverse=True)
    rank = rank.astype(np.int64)
    width = np.int64(len(rank) + 1)
    codes = np.sort(ids[:ne] * width + rank[:ne])
    q = ids[ne:] * width
    lo = np.searchsorted(codes, q + rank[ne : ne + nq], side="right")
    hi = np.searchsorted(codes, q + rank[ne + nq :], side="left")
    found: _BOOL = hi > lo
    return found


def _order_anomalies(
    r: _Rows, *, by_value: _I64, by_index: _I64, key_start: _I64, empty: tuple[_I64, _I64, _I64],
    rebalanced: tuple[_I64, _I64], resets: Sequence[Reset], subscribers: Sequence[Subscriber], names: list[str],
    cap: int,
) -> dict[str, tuple[_I64, list[dict[str, Any]]]]:
    """poll-skip, nonmonotonic-poll, int-poll-skip, int-nonmonotonic-poll, nonmonotonic-send, int-send-skip and
    int-nonmonotonic-send, by the rules of checker.anomalies.polls and checker.anomalies.sends (Jepsen's): per
    kind, the exact count per key rank and the `cap` first instances (by key, then op).

    Every row of a key is in this partition, so each (process, key) sequence of ops and each op's records of
    a key are whole here: one sort of the poll records and one of the sends by (key, process, op, place), then
    linear passes. Positions are `:by-value`'s (`by_value`, per (key, value) group); `by_index` is the value
    at each position (a key's from `key_start`), for `skipped`. Between two polls of a process, an ok poll of
    the key with no records (`empty`: key rank, process, op) or a reset not naming the key ends the
    comparison; a key in an op's rebalance log (`rebalanced`: key rank, op) is exempt from the int-poll
    checks. Only the flagged pairs are looked at one by one."""
    out: dict[str, tuple[_I64, list[dict[str, Any]]]] = {}
    nkeys = len(names)
    polls = np.flatnonzero((r.src == SRC_POLL) | (r.src == SRC_POLL_OTHER))
    sends = np.flatnonzero((r.src != SRC_POLL) & (r.src != SRC_POLL_OTHER))
    reset_by_process: dict[int, list[tuple[int, Collection[str]]]] = {}
    for process, index, named in resets:
        reset_by_process.setdefault(int(process), []).append((int(index), named))

    def offset(row: int) -> int | None:
        return int(r.off[row]) if r.has_off[row] else None

    def reset_between(x: int, y: int) -> bool:
        """A reset of y's process strictly between ops x and y that does not name y's key (nor its topic)."""
        key = names[int(r.krank[y])]
        a, b = int(r.op[x]), int(r.op[y])
        return any(a < index < b and key not in named and key.rpartition("/")[0] not in named
                   for index, named in reset_by_process.get(int(r.process[y]), ()))

    def without_resets(a: _I64, b: _I64, d: _I64) -> tuple[_I64, _I64, _I64]:
        if not len(b) or not reset_by_process:
            return a, b, d
        keep = np.array([not reset_between(x, y) for x, y in zip(a.tolist(), b.tolist(), strict=True)], dtype=bool)
        return a[keep], b[keep], d[keep]

    def sorted_rows(rows: _I64, place: _I64) -> _I64:
        return rows[np.lexsort((place, r.op[rows], r.process[rows], r.krank[rows]))]

    def within(rows: _I64) -> tuple[_I64, _I64, _I64]:
        """Successive records of a key in one op whose positions are not consecutive: (row a, row b, delta)."""
        a, b = rows[:-1], rows[1:]
        same = (r.op[a] == r.op[b]) & (r.krank[a] == r.krank[b])
        d = _deltas(by_value[r.gid[a]], by_value[r.gid[b]])
        hit = np.flatnonzero(same & (d != 1))
        return a[hit], b[hit], d[hit]

    def groups(rows: _I64) -> tuple[_I64, _I64, _BOOL]:
        """First and last row of each (key, process, op) group of sorted rows, and where each (key, process)
        starts."""
        starts = np.flatnonzero(_group_starts(r.krank[rows], r.process[rows], r.op[rows]))
        first, last = rows[starts], rows[np.append(starts[1:], len(rows)) - 1]
        return first, last, _group_starts(r.krank[first], r.process[first])

    def finish(kind: str, a: _I64, b: _I64, d: _I64, *, between: bool, subscribe: bool = False) -> None:
        counts = np.bincount(r.krank[b], minlength=nkeys).astype(np.int64)
        found = []
        for j in np.lexsort((r.op[a], r.op[b], r.krank[b]))[:cap].tolist():
            x, y, delta = int(a[j]), int(b[j]), int(d[j])
            process, op_y = int(r.process[y]), int(r.op[y])
            inst: dict[str, Any] = {"rank": int(r.krank[y]), "process": process}
            if subscribe:
                inst["subscribe"] = any(p == process and lo <= op_y < hi for p, lo, hi in subscribers)
            inst.update(values=[int(r.val[x]), int(r.val[y])], offsets=[offset(x), offset(y)], delta=delta)
            if delta > 1:
                start, i1 = int(key_start[r.krank[y]]), int(by_value[r.gid[x]])
                i2 = int(by_value[r.gid[y]])
                inst["skipped"] = by_index[start + i1 + 1 : start + min(i2, i1 + 1 + MAX_LISTED)].tolist()
            rows = [x, y] if between else [y]
            inst["ops"] = [int(r.op[i]) for i in rows]
            times = [int(r.time[i]) for i in rows]
            inst["times"] = times if min(times) >= 0 else None  # a send never completed: its time is not here
            found.append(inst)
        out[kind] = counts, found

    nothing = polls[:0]
    # ---- Polls: inside one op (int-*), then between a process's successive polls of a key. ----------------
    p_rows = sorted_rows(polls, _places(r, polls))
    a, b, d = within(p_rows) if len(p_rows) > 1 else (nothing, nothing, nothing)
    if len(b) and len(rebalanced[0]):
        keep = ~_pairs_in(r.krank[b], r.op[b], *rebalanced)
        a, b, d = a[keep], b[keep], d[keep]
    skip = d > 1
    finish("int-poll-skip", a[skip], b[skip], d[skip], between=False)
    finish("int-nonmonotonic-poll", a[~skip], b[~skip], d[~skip], between=False)

    a, b, d = nothing, nothing, nothing
    if len(p_rows) > 1:
        first, last, seg = groups(p_rows)
        # Each (key, process, op) group against the last ok one before it of its (key, process): only an ok
        # poll moves the position.
        at = np.arange(len(first), dtype=np.int64)
        upto = np.maximum.accumulate(np.where(r.src[first] == SRC_POLL, at, -1))
        seg_start = np.maximum.accumulate(np.where(seg, at, 0))
        prev = np.full(len(first), -1, dtype=np.int64)
        prev[1:] = upto[:-1]
        j = np.flatnonzero(prev >= seg_start)
        a, b = last[prev[j]], first[j]
        d = _deltas(by_value[r.gid[a]], by_value[r.gid[b]])
        hit = d != 1
        a, b, d = a[hit], b[hit], d[hit]
    if len(b):
        e_rank, e_process, e_op = empty
        # A key an op returned records for in another of its poll micro-ops was not returned empty.
        real = ~_pairs_in(e_rank, e_op, r.krank[polls], r.op[polls])
        keep = ~_empty_between(r, a, b, e_rank[real], e_process[real], e_op[real])
        a, b, d = without_resets(a[keep], b[keep], d[keep])
    skip = d > 1
    finish("poll-skip", a[skip], b[skip], d[skip], between=True, subscribe=True)
    finish("nonmonotonic-poll", a[~skip], b[~skip], d[~skip], between=True, subscribe=True)

    # ---- Sends: inside one op (any type), then a process's successive ok / info sends to a key. -----------
    s_rows = sorted_rows(sends, r.pos[sends])
    a, b, d = within(s_rows) if len(s_rows) > 1 else (nothing, nothing, nothing)
    skip = d > 1
    finish("int-send-skip", a[skip], b[skip], d[skip], between=False)
    finish("int-nonmonotonic-send", a[~skip], b[~skip], d[~skip], between=False)

    s_rows = s_rows[r.src[s_rows] != SRC_FAIL]
    a, b, d = nothing, nothing, nothing
    if len(s_rows) > 1:
        first, last, seg = groups(s_rows)
        follows = np.flatnonzero(~seg)
        a, b = last[follows - 1], first[follows]
        d = _deltas(by_value[r.gid[a]], by_value[r.gid[b]])
        hit = d < 1
        a, b, d = without_resets(a[hit], b[hit], d[hit])
    finish("nonmonotonic-send", a, b, d, between=True)
    return out


def _last_writer(rows: _I64, gid: _I64, done: _I64, op: _I64, pos: _I64, ngroups: int) -> _I64:
    """Per (key, value) group, the row among `rows` (sends) of the op that wrote it and completed last (Jepsen's
    `writer-of`, checker.context: ties by op, then position in the op); -1 where none. Only values sent more
    than once are sorted."""
    writer = np.full(ngroups, -1, dtype=np.int64)
    if not len(rows):
        return writer
    g = gid[rows]
    writer[g] = rows
    multi = np.bincount(g, minlength=ngroups)[g] > 1
    if bool(multi.any()):
        rows, g = rows[multi], g[multi]
        order = np.lexsort((pos[rows], op[rows], done[rows], g))
        last = np.append(g[order][1:] != g[order][:-1], True)
        writer[g[order][last]] = rows[order][last]
    return writer


def _precommitted(
    table: pa.Table, src: _I64, gid: _I64, krank: _I64, val: _I64, off: _I64, has_off: _BOOL, op: _I64
) -> Iterator[tuple[int, int, int | None, list[int], list[int]]]:
    """Per (poll op, key), the record by which a txn read a value one of its own sends wrote: (key rank,
    value, offset as read, [the send's op, the poll's op], [the send op's first position in this key, the
    send's position]) — what the job picks one per op by.

    As checker.anomalies.txn.precommitted_read_cases: every poll's records count (ok, fail or info op); a
    record is matched to the first send row (by op, then position) of its (key, value) with its process and
    completion time; of a poll op's matches in a key, the send that comes first in its op, and the first
    record (in the order returned, `_returned_first`) that read it. Only rows whose completion time both a
    send and a poll have are looked at, so a queue workload (producers do not poll) costs a membership test.
    """
    is_poll = (src == SRC_POLL) | (src == SRC_POLL_OTHER)
    polls = np.flatnonzero(is_poll)
    done = table.column("time").combine_chunks().is_valid().to_numpy(zero_copy_only=False)
    timed = np.flatnonzero(~is_poll & np.asarray(done, dtype=bool))
    if not len(polls) or not len(timed):
        return
    time = _np(table.column("time"), -1)
    polls = polls[_member(time[polls], time[timed])]
    if not len(polls):
        return
    timed = timed[_member(time[timed], time[polls])]
    process = _np(table.column("process"), -1)
    pos = _np(table.column("pos"), 0)
    sends = pd.DataFrame({"g": gid[timed], "process": process[timed], "time": time[timed], "s": timed,
                          "s_op": op[timed], "s_pos": pos[timed]})
    sends = sends.sort_values(["s_op", "s_pos"], kind="stable").drop_duplicates(["g", "process", "time"])
    reads = pd.DataFrame({"g": gid[polls], "process": process[polls], "time": time[polls], "p": polls,
                          "p_op": op[polls], "k": krank[polls]})
    matched = reads.merge(sends, on=["g", "process", "time"])
    if matched.empty:
        return
    # Per (poll op, key): the send first in its op, then the first record that read it.
    matched = matched.sort_values(["p_op", "k", "s_op", "s_pos"], kind="stable")
    chosen = matched.drop_duplicates(["p_op", "k"])
    send_ops = chosen["s_op"].to_numpy(dtype=np.int64)
    of_ops = np.flatnonzero(~is_poll & _member(op, send_ops))
    first = (pd.DataFrame({"op": op[of_ops], "k": krank[of_ops], "pos": pos[of_ops]})
             .groupby(["op", "k"])["pos"].min().to_dict())
    readers = matched.groupby(["p_op", "k", "s"])["p"].agg(list).to_dict()
    for s_row, s_op, p_op, k in zip(chosen["s"].tolist(), chosen["s_op"].tolist(), chosen["p_op"].tolist(),
                                    chosen["k"].tolist(), strict=True):
        p_row = _returned_first(readers[(p_op, k, s_row)], op, krank, is_poll, pos)
        yield (int(k), int(val[p_row]), int(off[p_row]) if has_off[p_row] else None, [int(s_op), int(p_op)],
               [int(first[(s_op, k)]), int(pos[s_row])])


def _returned_first(rows: list[int], op: _I64, krank: _I64, is_poll: _BOOL, pos: _I64) -> int:
    """Of some records of one op and key, the one returned first.

    `pos` orders an op's records (from the history: their order in the op). Rows from the Parquet tables are
    ordered by their place in the polls table, except the extra reads (EXTRA_READS_SCHEMA), which say their
    exact place among the op's records of the key, stored as -1 - place: there, as in checker.context, the
    polls table's records fill the places the extra reads leave free, in table order. Only one op's records
    of one key are looked at, and only when it read its own value twice."""
    if len(rows) == 1 or min(pos[r] for r in rows) >= 0:
        return min(rows, key=lambda r: int(pos[r]))
    group = np.flatnonzero(is_poll & (op == op[rows[0]]) & (krank == krank[rows[0]]))
    taken = {-1 - int(pos[r]) for r in group if pos[r] < 0}
    place: dict[int, int] = {r: -1 - int(pos[r]) for r in group.tolist() if pos[r] < 0}
    free = (q for q in range(len(group) + len(taken) + 1) if q not in taken)
    for r in sorted((r for r in group.tolist() if pos[r] >= 0), key=lambda r: int(pos[r])):
        place[r] = next(free)
    return min(rows, key=lambda r: place[r])


def input_rows(sends: pa.Table, polls: pa.Table, extra_reads: pa.Table | None = None, *,
               key_prefix: str = "", rebalanced: dict[int, Collection[str]] | None = None,
               empty: Iterable[tuple[int, int, str, str]] = ()) -> pa.Table:
    """The kernel's input (INPUT_SCHEMA) from a run's sends and polls tables and its extra reads
    (EXTRA_READS_SCHEMA, if any), in pyarrow: what the Spark job's scan of the Parquet tables produces, for
    running the kernel on one machine (tests, small runs). With the history's rebalance logs (`rebalanced`:
    op → keys) and empty reads (`empty`: process, op, key, type), their marker rows (`marker_rows`)."""

    def col(table: pa.Table, name: str) -> pa.Array:
        return table.column(name).combine_chunks().cast(pa.int64())

    def keys(table: pa.Table) -> pa.Array:
        k = table.column("key").combine_chunks().cast(pa.string())
        return pc.binary_join_element_wise(key_prefix, k, "") if key_prefix else k

    def srcs(table: pa.Table, codes: dict[str, int], other: int) -> pa.Array:
        kinds = table.column("type").combine_chunks().cast(pa.string())
        src = np.full(table.num_rows, other, dtype=np.int8)
        for name, code in codes.items():
            src[np.asarray(pc.equal(kinds, name).to_numpy(zero_copy_only=False), dtype=bool)] = code
        return pa.array(src)

    def part(table: pa.Table, src: pa.Array, time: str, pos: pa.Array) -> pa.Table:
        return pa.table([keys(table), col(table, "value"), col(table, "offset"), src, col(table, "op_index"),
                         col(table, "process"), col(table, time), pos], schema=INPUT_SCHEMA)

    def order(n: int) -> pa.Array:  # rows are in op order, and in micro-op / return order within an op
        return pa.array(np.arange(n, dtype=np.int64))

    ok_polls = polls.filter(pc.equal(polls.column("type"), "ok"))
    parts = [
        part(sends, srcs(sends, {"ok": SRC_OK, "fail": SRC_FAIL}, SRC_INFO), "complete_time", order(sends.num_rows)),
        part(ok_polls, srcs(ok_polls, {}, SRC_POLL), "time", order(ok_polls.num_rows)),
    ]
    if extra_reads is not None and extra_reads.num_rows:
        exact = pc.subtract(pa.scalar(-1, pa.int64()), col(extra_reads, "pos"))  # _returned_first
        parts.append(part(extra_reads, srcs(extra_reads, {"ok": SRC_POLL}, SRC_POLL_OTHER), "time", exact))
    markers = marker_rows(rebalanced or {}, empty, key_prefix=key_prefix)
    if markers.num_rows:
        parts.append(markers)
    return pa.concat_tables(parts)


def marker_rows(rebalanced: dict[int, Collection[str]], empty: Iterable[tuple[int, int, str, str]], *,
                key_prefix: str = "", op_shift: int = 0) -> pa.Table:
    """The marker rows (INPUT_SCHEMA) of a run's rebalance logs (op → keys) and of the keys ok polls returned
    with no records ((process, op, key, type); other types are left out: only an ok poll moves a position)."""
    rows: dict[str, list[Any]] = {name: [] for name in INPUT_SCHEMA.names}

    def add(key: str, src: int, op: int, process: int | None) -> None:
        for name, x in zip(INPUT_SCHEMA.names, (key_prefix + key, 0, None, src, op + op_shift, process, None, 0),
                           strict=True):
            rows[name].append(x)

    for op, keys in rebalanced.items():
        for key in sorted(keys):
            add(key, SRC_REBALANCED, op, None)
    for process, op, key, typ in empty:
        if typ == "ok":
            add(key, SRC_EMPTY, op, process)
    return pa.table(rows, schema=INPUT_SCHEMA)
