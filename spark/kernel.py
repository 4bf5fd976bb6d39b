"""Per-partition analysis: every key of one shuffle partition, in numpy, with no Python loop over rows.

The Spark job (spark/job.py) sends each key's rows — ok polls and every send, as one narrow table — to one
partition, and runs `analyse_batches` there through `mapInArrow`. This module imports neither pyspark nor the
rest of kafka-chaos, so Spark can ship it to executors by value (a cluster needs numpy and pyarrow, not
kafka-chaos), and tests can run it without a JVM.

Input rows (`INPUT_SCHEMA`): `key`, `value`, `offset` (null when unknown), `src` (0 ok poll, 1 ok send,
2 info send, 3 failed send), `op` (history index of the op).

Definitions (Jepsen's, jepsen.tests.kafka; DESIGN.md §4):

- **Version order** of a key: the log built from every ok poll and every ok send whose offset is known, each
  offset holding the set of values seen there. *Positions* are dense indexes over the offsets that hold
  something (offsets never observed are skipped).
- **inconsistent-offsets**: an offset of a key holding two or more distinct values.
- **duplicate**: a value at more than one offset of a key.
- **lost-write**: Jepsen's `lost-write-cases`. Per key, the bound is the highest *first* position of any value
  read by an ok poll; an ok-send value never read by an ok poll whose *last* position is at or below that
  bound should have been read, and was not. A value whose offset is unknown has no position, so is never lost.
- **unseen**: ok-send values never read by an ok poll (loss and delay look alike): one instance per key with
  `count` and the `values`.
- **G1a** (aborted read): a value read by an ok poll whose send failed.

Everything is computed with two sorts per partition: rows by (key, value, src) for the per-value facts
(read? sent ok? failed?), and log entries by (key, offset, value) for positions, both vectorised.
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
        pa.field("ops", pa.list_(pa.int64())),
        pa.field("stats", pa.list_(pa.int64())),
    ]
)
"""One row per anomaly instance (at most `cap` per kind and partition, smallest (key, value, offset) first)
and one `#key` row per key with `stats`."""

FINDINGS_DDL = (
    "kind string, key string, value bigint, offset bigint, index bigint, bound bigint, count bigint, "
    "values array<bigint>, offsets array<bigint>, ops array<bigint>, stats array<bigint>"
)

_I64 = npt.NDArray[np.int64]
_BOOL = npt.NDArray[np.bool_]
_NONE = np.iinfo(np.int64).max


def analyse_batches(
    batches: Iterable[pa.RecordBatch], *, cap: int = 100, max_values: int = 1000
) -> Iterator[pa.RecordBatch]:
    """`mapInArrow` body: gather one partition's batches, analyse them, yield the findings."""
    collected = [b for b in batches if b.num_rows]
    if not collected:
        return
    table = pa.Table.from_batches(collected)
    yield from analyse_table(table, cap=cap, max_values=max_values).to_batches()


def _group_starts(*cols: npt.NDArray[Any]) -> _BOOL:
    """True where a run of equal (cols…) tuples starts, for arrays already sorted by those columns."""
    n = len(cols[0])
    new = np.zeros(n, dtype=bool)
    if n:
        new[0] = True
        for c in cols:
            new[1:] |= c[1:] != c[:-1]
    return new


def analyse_table(table: pa.Table, *, cap: int = 100, max_values: int = 1000) -> pa.Table:
    """Analyse every key in `table` (INPUT_SCHEMA columns); return FINDINGS_SCHEMA rows.

    Each key must be wholly inside `table`. Instances are capped at `cap` per kind (smallest key, value,
    offset first); per-key statistics carry the exact counts. An unseen instance lists at most `max_values`
    values (smallest first) and carries the exact `count`.
    """
    n = table.num_rows
    if n == 0:
        return FINDINGS_SCHEMA.empty_table()
    enc = pc.dictionary_encode(table.column("key")).combine_chunks()
    key_names: list[str] = enc.dictionary.to_pylist()
    kid = enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)
    nkeys = len(key_names)
    # Rank of each key by its name, so that instances are chosen and emitted in key-name order.
    key_rank = np.empty(nkeys, dtype=np.int64)
    key_rank[np.argsort(np.array(key_names, dtype=object), kind="stable")] = np.arange(nkeys)

    val = table.column("value").combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    off_col = table.column("offset").combine_chunks()
    has_off: _BOOL = off_col.is_valid().to_numpy(zero_copy_only=False)
    off = pc.fill_null(off_col, -1).to_numpy(zero_copy_only=False).astype(np.int64, copy=False)
    src = table.column("src").combine_chunks().to_numpy(zero_copy_only=False).astype(np.int64)
    op = pc.fill_null(table.column("op").combine_chunks(), -1).to_numpy(zero_copy_only=False)
    op = op.astype(np.int64, copy=False)

    # ---- A. Per (key, value): was it read, how was it sent. Rows sorted by (key rank, value, src). -------
    order_a = np.lexsort((src, val, key_rank[kid]))
    kid_a, val_a, src_a = kid[order_a], val[order_a], src[order_a]
    new_a = _group_starts(kid_a, val_a)
    gstart = np.flatnonzero(new_a)
    gend = np.append(gstart[1:], n)
    ngroups = len(gstart)
    gid_a = np.cumsum(new_a) - 1
    g_kid, g_val = kid_a[gstart], val_a[gstart]
    reads_per_g = np.bincount(gid_a[src_a == SRC_POLL], minlength=ngroups)
    read = reads_per_g > 0
    ok_send = np.bincount(gid_a[src_a == SRC_OK], minlength=ngroups) > 0
    fail_send = np.bincount(gid_a[src_a == SRC_FAIL], minlength=ngroups) > 0
    gid = np.empty(n, dtype=np.int64)
    gid[order_a] = gid_a

    # ---- B. The version order: log entries (ok polls, ok sends with an offset) by (key, offset, value). --
    in_log = has_off & ((src == SRC_POLL) | (src == SRC_OK))
    log_rows = np.flatnonzero(in_log)
    order_b = log_rows[np.lexsort((gid[log_rows], off[log_rows], kid[log_rows]))]
    kid_b, off_b, gid_b = kid[order_b], off[order_b], gid[order_b]
    new_triple = _group_starts(kid_b, off_b, gid_b)
    t_rows = np.flatnonzero(new_triple)  # first row of each distinct (key, offset, value)
    t_kid, t_off, t_gid = kid_b[t_rows], off_b[t_rows], gid_b[t_rows]
    new_offset = _group_starts(t_kid, t_off)
    pos_global = np.cumsum(new_offset) - 1
    new_kid = _group_starts(t_kid)
    t_pos = pos_global - np.maximum.accumulate(np.where(new_kid, pos_global, 0))
    first_pos = np.full(ngroups, _NONE, dtype=np.int64)
    np.minimum.at(first_pos, t_gid, t_pos)
    last_pos = np.full(ngroups, -1, dtype=np.int64)
    np.maximum.at(last_pos, t_gid, t_pos)
    offsets_per_g = np.bincount(t_gid, minlength=ngroups)

    # Highest first position read, per key (-1: nothing read, nothing can be lost).
    bound = np.full(nkeys, -1, dtype=np.int64)
    read_pos = read & (first_pos != _NONE)
    np.maximum.at(bound, g_kid[read_pos], first_pos[read_pos])

    lost = ok_send & ~read & (last_pos >= 0) & (last_pos <= bound[g_kid])
    unseen = ok_send & ~read
    g1a = read & fail_send
    duplicate = offsets_per_g > 1

    # inconsistent-offsets: (key, offset) runs of distinct triples longer than one.
    o_start = np.flatnonzero(new_offset)
    o_end = np.append(o_start[1:], len(t_rows))
    o_inconsistent = (o_end - o_start) > 1

    # ---- Per-key statistics (exact counts). -----------------------------------------------------------
    def per_key(weights_kid: _I64) -> _I64:
        return np.bincount(weights_kid, minlength=nkeys).astype(np.int64)

    stats = {
        "sends": per_key(kid[src != SRC_POLL]),
        "sends_ok": per_key(kid[src == SRC_OK]),
        "sends_info": per_key(kid[src == SRC_INFO]),
        "sends_fail": per_key(kid[src == SRC_FAIL]),
        "poll_records": per_key(kid[src == SRC_POLL]),
        "values_read": per_key(g_kid[read]),
        "positions": per_key(t_kid[new_offset]),
        "max_offset": _max_per_key(nkeys, kid[in_log], off[in_log]),
        "lost-write": per_key(g_kid[lost]),
        "unseen": per_key(g_kid[unseen]),
        "duplicate": per_key(g_kid[duplicate]),
        "inconsistent-offsets": per_key(t_kid[o_start[o_inconsistent]]),
        "G1a": per_key(g_kid[g1a]),
    }

    out: dict[str, list[Any]] = {f.name: [] for f in FINDINGS_SCHEMA}

    def emit(kind: str, key: str, **fields: Any) -> None:
        out["kind"].append(kind)
        out["key"].append(key)
        for name in FINDINGS_SCHEMA.names[2:]:
            out[name].append(fields.get(name))

    # Groups are in (key name, value) order already, so the first `cap` of a mask are the smallest.
    def ops_of(groups: _I64, srcs: tuple[int, ...]) -> list[list[int]]:
        result = []
        for s, e in zip(gstart[groups].tolist(), gend[groups].tolist(), strict=True):
            rows = order_a[s:e]
            rows = rows[np.isin(src[rows], srcs)]
            result.append(sorted(set(op[rows].tolist())))
        return result

    # lost-write: key, value, offset, index (its position), bound (highest position read), ops (the send).
    lost_g = np.flatnonzero(lost)[:cap]
    lost_off = _send_offsets(lost_g, gstart, gend, order_a, src, off)
    for g, o, ops in zip(lost_g.tolist(), lost_off, ops_of(lost_g, (SRC_OK,)), strict=True):
        emit("lost-write", key_names[g_kid[g]], value=int(g_val[g]), offset=o, index=int(last_pos[g]),
             bound=int(bound[g_kid[g]]), ops=ops)

    # unseen: one instance per key, values smallest first (capped at max_values), exact count.
    unseen_g = np.flatnonzero(unseen)
    if len(unseen_g):
        u_kid = g_kid[unseen_g]
        u_new = _group_starts(u_kid)
        u_start = np.flatnonzero(u_new)[:cap]
        u_counts = np.diff(np.append(np.flatnonzero(u_new), len(unseen_g)))
        for s, c in zip(u_start.tolist(), u_counts.tolist(), strict=False):
            gs = unseen_g[s : s + min(c, max_values)]
            emit("unseen", key_names[u_kid[s]], count=int(c), values=g_val[gs].tolist())

    # duplicate: key, value, count (offsets), offsets ascending, ops (every op that saw or sent it there).
    dup_g = np.flatnonzero(duplicate)[:cap]
    if len(dup_g):
        in_dup = np.isin(t_gid, dup_g)
        d_gid, d_off = t_gid[in_dup], t_off[in_dup]
        d_order = np.lexsort((d_off, d_gid))
        d_gid, d_off = d_gid[d_order], d_off[d_order]
        d_start = np.flatnonzero(_group_starts(d_gid))
        d_end = np.append(d_start[1:], len(d_gid))
        for g, s, e, ops in zip(dup_g.tolist(), d_start.tolist(), d_end.tolist(),
                                ops_of(dup_g, (SRC_POLL, SRC_OK)), strict=True):
            emit("duplicate", key_names[g_kid[g]], value=int(g_val[g]), count=e - s,
                 offsets=d_off[s:e].tolist(), ops=ops)

    # inconsistent-offsets: key, offset, index (its position), values ascending, ops at that offset.
    inc = np.flatnonzero(o_inconsistent)
    if len(inc):
        inc_kid = t_kid[o_start[inc]]
        inc_off = t_off[o_start[inc]]
        inc = inc[np.lexsort((inc_off, key_rank[inc_kid]))][:cap]
        # Rows of order_b for the offset run: from the run's first triple to the next run's first triple.
        b_start = t_rows[o_start[inc]]
        b_end = np.append(t_rows, len(order_b))[o_end[inc]]
        for i, bs, be in zip(inc.tolist(), b_start.tolist(), b_end.tolist(), strict=True):
            s, e = o_start[i], o_end[i]
            emit("inconsistent-offsets", key_names[t_kid[s]], offset=int(t_off[s]), index=int(t_pos[s]),
                 values=g_val[t_gid[s:e]].tolist(), count=int(e - s),
                 ops=sorted(set(op[order_b[bs:be]].tolist())))

    # G1a: key, value, ops (the failed send and every ok poll that read it).
    g1a_g = np.flatnonzero(g1a)[:cap]
    for g, ops in zip(g1a_g.tolist(), ops_of(g1a_g, (SRC_POLL, SRC_FAIL)), strict=True):
        emit("G1a", key_names[g_kid[g]], value=int(g_val[g]), count=int(reads_per_g[g]), ops=ops)

    stat_matrix = np.stack([stats[name] for name in KEY_STATS], axis=1)
    for k in np.argsort(key_rank).tolist():
        emit(KIND_KEY, key_names[k], stats=stat_matrix[k].tolist())

    return pa.Table.from_pydict(out, schema=FINDINGS_SCHEMA)


def _max_per_key(nkeys: int, kids: _I64, values: _I64) -> _I64:
    result = np.full(nkeys, -1, dtype=np.int64)
    np.maximum.at(result, kids, values)
    return result


def _send_offsets(
    groups: _I64, gstart: _I64, gend: _I64, order_a: _I64, src: _I64, off: _I64
) -> list[int | None]:
    """The ok-send offset of each (key, value) group (all lost-write values have one)."""
    result: list[int | None] = []
    for s, e in zip(gstart[groups].tolist(), gend[groups].tolist(), strict=True):
        rows = order_a[s:e]
        sent = rows[src[rows] == SRC_OK]
        result.append(int(off[sent[0]]) if len(sent) else None)
    return result
