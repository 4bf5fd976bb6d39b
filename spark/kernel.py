"""Per-partition analysis: every key of one shuffle partition, in numpy, with no Python loop over rows.

The Spark job (spark/job.py) sends each key's rows — ok polls and every send, as one narrow table — to one
partition, and runs `analyse_batches` there through `mapInArrow`. This module imports neither pyspark nor the
rest of kafka-chaos, so Spark can ship it to executors by value (a cluster needs numpy and pyarrow, not
kafka-chaos), and tests can run it without a JVM.

Input rows (`INPUT_SCHEMA`): `key`, `value`, `offset` (null when unknown), `src` (0 ok poll, 1 ok send,
2 info send, 3 failed send), `op` (history index of the op).

Definitions (Jepsen's, jepsen.tests.kafka; DESIGN.md §4; the same as checker/ decides them):

- A send *must have committed* if it is ok, or info and some value its op sent was read by an ok poll.
  The *writer* of a (key, value) is its send with the latest op.
- **Version order** of a key: the log built from every ok poll record and every committed send whose
  offset is known, each offset holding the set of values seen there. *Positions* are dense indexes over the
  offsets that hold something (offsets never observed are skipped).
- **inconsistent-offsets**: an offset of a key holding two or more distinct values.
- **duplicate**: a value at more than one offset of a key.
- **lost-write**: Jepsen's `lost-write-cases`. Per key, the bound is the highest *first* position of any
  value read by an ok poll; a value never read, whose writer committed and whose *last* position is at or
  below that bound, should have been read and was not. A value whose offset is unknown has no position, so
  is never lost.
- **unseen**: ok sends whose value no ok poll read (loss and delay look alike): one instance per key with
  `count` and the `values`.
- **G1a** (aborted read): an ok poll record of a value whose writer failed; one instance per record.

Everything is computed with two sorts per partition: rows by (key, value, op) for the per-value facts
(read? who wrote it?), and log entries by (key, offset, value) for positions, both vectorised.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

SRC_POLL, SRC_OK, SRC_INFO, SRC_FAIL = 0, 1, 2, 3

INPUT_SCHEMA = pa.schema(
    [
        pa.field("key", pa.string()),
        pa.field("value", pa.int64()),
        pa.field("offset", pa.int64()),
        pa.field("src", pa.int8()),
        pa.field("op", pa.int64()),
    ]
)

KIND_KEY = "#key"
"""The kind of a per-key statistics row (not an anomaly)."""
KIND_UNCERTAIN = "#uncertain"
"""The kind of a row listing info-send ops (`ops`) of one key whose commit this partition cannot decide."""

ANOMALY_KINDS = ("lost-write", "unseen", "duplicate", "inconsistent-offsets", "G1a")

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
        pa.field("stats", pa.list_(pa.int64())),
    ]
)
"""One row per anomaly instance (at most `cap` per kind and partition, smallest (key, value, offset) first)
and one `#key` row per key with `stats`."""

FINDINGS_DDL = (
    "kind string, key string, value bigint, offset bigint, index bigint, bound bigint, count bigint, "
    "values array<bigint>, offsets array<bigint>, indexes array<bigint>, ops array<bigint>, "
    "stats array<bigint>"
)

_I64 = npt.NDArray[np.int64]
_BOOL = npt.NDArray[np.bool_]
_NONE = np.iinfo(np.int64).max


def analyse_batches(
    batches: Iterable[pa.RecordBatch],
    *,
    cap: int = 100,
    max_values: int = 1000,
    committed_info_ops: npt.NDArray[np.int64] | None = None,
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: gather one partition's batches, analyse them, yield the findings."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    found = analyse_table(table, cap=cap, max_values=max_values, committed_info_ops=committed_info_ops)
    yield from found.to_batches()


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


def analyse_table(
    table: pa.Table,
    *,
    cap: int = 100,
    max_values: int = 1000,
    committed_info_ops: npt.NDArray[np.int64] | None = None,
) -> pa.Table:
    """Analyse every key in `table` (INPUT_SCHEMA columns); return FINDINGS_SCHEMA rows.

    Each key must be wholly inside `table`. Instances are capped at `cap` per kind (smallest key, value,
    offset first); per-key statistics carry the exact counts. An unseen instance lists at most `max_values`
    values (smallest first) and carries the exact `count`.

    Must-have-committed (Jepsen): an ok send, or an info send whose op had some value read by an ok poll.
    That op may have sent to keys in other partitions; `committed_info_ops` lists info ops known to have
    committed. An info send with an offset, whose own value was not read and whose op is not listed, is
    reported in a `#uncertain` row (its op) and treated as not committed: the job decides those ops with
    all the data and re-analyses the keys concerned.
    """
    n = table.num_rows
    if n == 0:
        return FINDINGS_SCHEMA.empty_table()
    enc = pc.dictionary_encode(table.column("key")).combine_chunks()
    key_names: list[str] = enc.dictionary.to_pylist()
    kid = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
    nkeys = len(key_names)
    # Rank of each key by its name, so that instances are chosen and emitted in key-name order.
    key_rank = np.empty(nkeys, dtype=np.int64)
    key_rank[np.argsort(np.array(key_names, dtype=object), kind="stable")] = np.arange(nkeys)

    val = _np(table.column("value"))
    off_col = table.column("offset").combine_chunks()
    has_off = np.asarray(off_col.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    off = _np(table.column("offset"), -1)
    src = _np(table.column("src"))
    op = _np(table.column("op"), -1)
    is_poll = src == SRC_POLL

    # ---- A. Per (key, value) "pair": read? its writer (the send with the latest op). Sorted by key name,
    # value, op. -------------------------------------------------------------------------------------------
    order_a = np.lexsort((op, val, key_rank[kid]))
    kid_a, val_a, src_a = kid[order_a], val[order_a], src[order_a]
    new_a = _group_starts(kid_a, val_a)
    gstart = np.flatnonzero(new_a)
    gend = np.append(gstart[1:], n)
    ngroups = len(gstart)
    gid_a = np.cumsum(new_a) - 1
    g_kid, g_val = kid_a[gstart], val_a[gstart]
    read = np.bincount(gid_a[src_a == SRC_POLL], minlength=ngroups) > 0
    gid = np.empty(n, dtype=np.int64)
    gid[order_a] = gid_a
    send_a = np.flatnonzero(src_a != SRC_POLL)
    writer_pos = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(writer_pos, gid_a[send_a], send_a)
    writer_row = np.where(writer_pos >= 0, order_a[np.maximum(writer_pos, 0)], -1)
    writer_src = np.where(writer_row >= 0, src[np.maximum(writer_row, 0)], -1)

    # Must-have-committed, per row.
    is_info = src == SRC_INFO
    info_read_ops = np.unique(op[is_info & read[gid]])
    if committed_info_ops is not None and len(committed_info_ops):
        info_read_ops = np.union1d(info_read_ops, committed_info_ops)
    committed = (src == SRC_OK) | (is_info & np.isin(op, info_read_ops))
    uncertain = is_info & has_off & ~committed
    writer_committed = (writer_row >= 0) & committed[np.maximum(writer_row, 0)]

    # ---- B. The version order: log entries (ok polls, committed sends with an offset) by key, offset,
    # value. ----------------------------------------------------------------------------------------------
    in_log = has_off & (is_poll | committed)
    log_rows = np.flatnonzero(in_log)
    order_b = log_rows[np.lexsort((gid[log_rows], off[log_rows], kid[log_rows]))]
    kid_b, off_b, gid_b = kid[order_b], off[order_b], gid[order_b]
    t_rows = np.flatnonzero(_group_starts(kid_b, off_b, gid_b))  # first row of each distinct entry
    t_kid, t_off, t_gid = kid_b[t_rows], off_b[t_rows], gid_b[t_rows]
    new_offset = _group_starts(t_kid, t_off)
    pos_global = np.cumsum(new_offset) - 1
    t_pos = pos_global - np.maximum.accumulate(np.where(_group_starts(t_kid), pos_global, 0))
    first_pos = np.full(ngroups, _NONE, dtype=np.int64)
    np.minimum.at(first_pos, t_gid, t_pos)
    first_pos[first_pos == _NONE] = -1
    last_pos = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last_pos, t_gid, t_pos)
    offsets_per_g = np.bincount(t_gid, minlength=ngroups)

    # lost-write: per key, bound = the highest first position of a value read; values whose last position
    # is ≤ bound, never read, written by a committed send.
    bound = np.full(nkeys, -1, dtype=np.int64)
    np.maximum.at(bound, g_kid[read], first_pos[read])
    lost = writer_committed & ~read & (last_pos >= 0) & (last_pos <= bound[g_kid])
    duplicate = offsets_per_g > 1
    # unseen and G1a are per row: ok sends never read; ok poll records of a value whose writer failed.
    unseen_a = np.flatnonzero((src_a == SRC_OK) & ~read[gid_a])
    g1a_a = np.flatnonzero((src_a == SRC_POLL) & (writer_src[gid_a] == SRC_FAIL))
    o_start = np.flatnonzero(new_offset)
    o_end = np.append(o_start[1:], len(t_rows))
    o_inconsistent = (o_end - o_start) > 1

    # ---- Per-key statistics (exact counts). -------------------------------------------------------------
    def per_key(kids: _I64) -> _I64:
        return np.bincount(kids, minlength=nkeys).astype(np.int64)

    max_offset = np.full(nkeys, -1, dtype=np.int64)
    np.maximum.at(max_offset, kid[in_log], off[in_log])
    stats = {
        "sends": per_key(kid[~is_poll]),
        "sends_ok": per_key(kid[src == SRC_OK]),
        "sends_info": per_key(kid[is_info]),
        "sends_fail": per_key(kid[src == SRC_FAIL]),
        "poll_records": per_key(kid[is_poll]),
        "values_read": per_key(g_kid[read]),
        "positions": per_key(t_kid[new_offset]),
        "max_offset": max_offset,
        "lost-write": per_key(g_kid[lost]),
        "unseen": per_key(kid_a[unseen_a]),
        "duplicate": per_key(g_kid[duplicate]),
        "inconsistent-offsets": per_key(t_kid[o_start[o_inconsistent]]),
        "G1a": per_key(kid_a[g1a_a]),
    }

    out: dict[str, list[Any]] = {f.name: [] for f in FINDINGS_SCHEMA}

    def emit(kind: str, key: str, **fields: Any) -> None:
        out["kind"].append(kind)
        out["key"].append(key)
        for name in FINDINGS_SCHEMA.names[2:]:
            out[name].append(fields.get(name))

    op_a = op[order_a]

    def group_ops(g: int, keep: tuple[int, ...]) -> list[int]:
        s, e = int(gstart[g]), int(gend[g])
        rows = np.isin(src_a[s:e], keep)
        return sorted(set(op_a[s:e][rows].tolist()))

    # Pairs are in (key name, value) order already, so the first `cap` of a mask are the smallest.
    for g in np.flatnonzero(lost)[:cap].tolist():
        w = int(writer_row[g])
        emit("lost-write", key_names[g_kid[g]], value=int(g_val[g]),
             offset=int(off[w]) if has_off[w] else None, index=int(first_pos[g]),
             bound=int(bound[g_kid[g]]), ops=[int(op[w])])

    if len(unseen_a):
        u_kid = kid_a[unseen_a]
        u_start = np.flatnonzero(_group_starts(u_kid))
        u_end = np.append(u_start[1:], len(unseen_a))
        for s, e in zip(u_start[:cap].tolist(), u_end[:cap].tolist(), strict=True):
            rows = unseen_a[s : min(e, s + max_values)]
            emit("unseen", key_names[u_kid[s]], count=e - s, values=val_a[rows].tolist(),
                 ops=op_a[rows].tolist())

    dup_g = np.flatnonzero(duplicate)[:cap]
    if len(dup_g):
        in_dup = np.isin(t_gid, dup_g)
        d_gid, d_off, d_pos = t_gid[in_dup], t_off[in_dup], t_pos[in_dup]
        d_order = np.lexsort((d_off, d_gid))
        d_gid, d_off, d_pos = d_gid[d_order], d_off[d_order], d_pos[d_order]
        d_start = np.flatnonzero(_group_starts(d_gid))
        d_end = np.append(d_start[1:], len(d_gid))
        for g, s, e in zip(dup_g.tolist(), d_start.tolist(), d_end.tolist(), strict=True):
            emit("duplicate", key_names[g_kid[g]], value=int(g_val[g]), count=e - s,
                 offsets=d_off[s:e].tolist(), indexes=d_pos[s:e].tolist(),
                 ops=group_ops(g, (SRC_POLL, SRC_OK, SRC_INFO, SRC_FAIL)))

    inc = np.flatnonzero(o_inconsistent)
    if len(inc):
        inc_kid = t_kid[o_start[inc]]
        inc = inc[np.lexsort((t_off[o_start[inc]], key_rank[inc_kid]))][:cap]
        row_end = np.append(t_rows, len(order_b))
        for i in inc.tolist():
            s, e = int(o_start[i]), int(o_end[i])
            rows = order_b[t_rows[s] : row_end[e]]  # every log row at this (key, offset)
            emit("inconsistent-offsets", key_names[t_kid[s]], offset=int(t_off[s]), index=int(t_pos[s]),
                 values=sorted(g_val[t_gid[s:e]].tolist()), count=e - s, ops=sorted(set(op[rows].tolist())))

    if len(g1a_a):
        off_a = off[order_a]
        g1a_sorted = g1a_a[np.lexsort((op_a[g1a_a], off_a[g1a_a], val_a[g1a_a], key_rank[kid_a[g1a_a]]))]
        for r in g1a_sorted[:cap].tolist():
            w = int(writer_row[gid_a[r]])
            emit("G1a", key_names[kid_a[r]], value=int(val_a[r]), offset=int(off[order_a[r]]),
                 ops=[int(op[w]), int(op_a[r])])

    if uncertain.any():
        for k in np.unique(kid[uncertain]).tolist():
            emit(KIND_UNCERTAIN, key_names[k], ops=np.unique(op[uncertain & (kid == k)]).tolist())

    stat_matrix = np.stack([stats[name] for name in KEY_STATS], axis=1)
    for k in np.argsort(key_rank).tolist():
        emit(KIND_KEY, key_names[k], stats=stat_matrix[k].tolist())

    return pa.Table.from_pydict(out, schema=FINDINGS_SCHEMA)


def input_rows(sends: pa.Table, polls: pa.Table, *, key_prefix: str = "") -> pa.Table:
    """The kernel's input (INPUT_SCHEMA) from a run's sends and polls tables, in pyarrow: what the Spark
    job's scan produces, for running the kernel on one machine (tests, small runs)."""

    def col(table: pa.Table, name: str) -> pa.Array:
        return table.column(name).combine_chunks().cast(pa.int64())

    def keys(table: pa.Table) -> pa.Array:
        k = table.column("key").combine_chunks().cast(pa.string())
        return pc.binary_join_element_wise(key_prefix, k, "") if key_prefix else k

    kinds = sends.column("type").combine_chunks().cast(pa.string())
    src = np.full(sends.num_rows, SRC_INFO, dtype=np.int8)
    src[np.asarray(pc.equal(kinds, "ok").to_numpy(zero_copy_only=False), dtype=bool)] = SRC_OK
    src[np.asarray(pc.equal(kinds, "fail").to_numpy(zero_copy_only=False), dtype=bool)] = SRC_FAIL
    ok_polls = polls.filter(pc.equal(polls.column("type"), "ok"))
    part_sends = pa.table(
        [keys(sends), col(sends, "value"), col(sends, "offset"), pa.array(src), col(sends, "op_index")],
        schema=INPUT_SCHEMA,
    )
    part_polls = pa.table(
        [
            keys(ok_polls),
            col(ok_polls, "value"),
            col(ok_polls, "offset"),
            pa.array(np.full(ok_polls.num_rows, SRC_POLL, dtype=np.int8)),
            col(ok_polls, "op_index"),
        ],
        schema=INPUT_SCHEMA,
    )
    return pa.concat_tables([part_sends, part_polls])
