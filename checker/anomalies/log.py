"""Anomalies of a key's log itself: `inconsistent-offsets` and `duplicate`."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from kafka_chaos.checker.anomalies._common import refs_by, with_ops
from kafka_chaos.checker.context import Context


def inconsistent_offsets_cases(ctx: Context) -> list[dict[str, Any]]:
    """One offset of a key holds two or more different values (Jepsen's `version-orders` `:errors`).

    Every poll (ok, info or fail: Jepsen's `version-orders` reads them all) and every send that must have
    committed tells us "offset o of key k holds value v". A
    Kafka partition is a log: an offset, once assigned, holds one record forever. If two observations
    disagree, the log diverged at that offset: a leader's log was truncated and the offset rewritten with
    another record (e.g. an unclean election, or acks=1 data lost on failover while consumers had already
    read it).

    Instance: `key`, `offset` (the Kafka offset), `index` (its dense position), `values` (sorted), and the
    `ops` that sent or read any of those values at that offset, with their `times`.
    """
    vo = ctx.vo
    bad = np.flatnonzero(vo.g_nvalues >= 2)
    if not len(bad):
        return []
    s, p = ctx.sends, ctx.polls
    is_bad = np.zeros(len(vo.g_key), dtype=bool)
    is_bad[bad] = True
    entry = is_bad[vo.e_group]
    values: dict[int, set[int]] = defaultdict(set)
    for g, v in zip(vo.e_group[entry].tolist(), vo.e_value[entry].tolist(), strict=True):
        values[g].add(v)

    # Which group does each committed send / poll row fall in? Only rows at a bad (key, offset) matter.
    where = {(int(vo.g_key[g]), int(vo.g_offset[g])): int(g) for g in bad}
    bad_offsets = vo.g_offset[bad]
    s_rows = np.flatnonzero(ctx.committed & s.has_offset & np.isin(s.offset, bad_offsets))
    p_rows = np.flatnonzero(p.has_offset & np.isin(p.offset, bad_offsets))
    group_of: list[int] = []
    ops: list[int] = []
    times: list[int] = []
    for rows, keys, offs, op, time in (
        (s_rows, s.key, s.offset, s.op, s.time),
        (p_rows, p.key, p.offset, p.op, p.time),
    ):
        for r in rows.tolist():
            g = where.get((int(keys[r]), int(offs[r])))
            if g is not None:
                group_of.append(g)
                ops.append(int(op[r]))
                times.append(int(time[r]))
    refs = refs_by(np.asarray(group_of), np.asarray(ops), np.asarray(times))
    out = []
    for g in bad.tolist():
        k = int(vo.g_key[g])
        out.append(
            with_ops(
                {
                    "key": ctx.keys[k],
                    "offset": int(vo.g_offset[g]),
                    "index": int(vo.g_index[g]),
                    "values": sorted(values[g]),
                },
                refs[g],
            )
        )
    return out


def duplicate_cases(ctx: Context) -> list[dict[str, Any]]:
    """One value appears at more than one offset of a key (Jepsen's `duplicate-cases`).

    Values are unique per run, and each send is one record; a value that polls (or acknowledged sends) place
    at two offsets was written twice: typically a producer retry after a lost acknowledgement without
    idempotence, or a log rewritten after a divergence.

    Instance: `key`, `value`, `count` (number of offsets), `offsets` (Kafka offsets, ascending), `indexes`
    (their dense positions), `send_ms` (the longest completed send of the value, invoke to completion, in ms;
    None when none completed: whether the client can have timed a request out), and the `ops` that sent or
    read the value at any of them, with `times`.
    """
    vo = ctx.vo
    # A value is at two offsets exactly when the first and last positions it is seen at differ (a value's
    # observations are all of its one key, so its positions order as its log groups do).
    dup = np.flatnonzero((vo.last_index >= 0) & (vo.first_index != vo.last_index))
    if not len(dup):
        return []
    is_dup = np.zeros(ctx.n_pairs, dtype=bool)
    is_dup[dup] = True
    entry = is_dup[vo.e_pid]
    groups: dict[int, set[int]] = defaultdict(set)
    for pid, g in zip(vo.e_pid[entry].tolist(), vo.e_group[entry].tolist(), strict=True):
        groups[pid].add(g)
    offsets = {pid: [int(vo.g_offset[g]) for g in sorted(gs)] for pid, gs in groups.items()}
    indexes = {pid: [int(vo.g_index[g]) for g in sorted(gs)] for pid, gs in groups.items()}
    s, p = ctx.sends, ctx.polls
    s_rows = is_dup[s.pid]
    p_rows = is_dup[p.pid] & p.has_offset
    send_ns: dict[int, int] = {}
    done = s_rows & (s.complete_time >= 0)
    for pid, took in zip(s.pid[done].tolist(), (s.complete_time[done] - s.invoke_time[done]).tolist(), strict=True):
        send_ns[pid] = max(send_ns.get(pid, 0), took)
    refs = refs_by(
        np.concatenate([s.pid[s_rows], p.pid[p_rows]]),
        np.concatenate([s.op[s_rows], p.op[p_rows]]),
        np.concatenate([s.time[s_rows], p.time[p_rows]]),
    )
    order = np.lexsort((ctx.pair_value[dup], ctx.pair_key[dup]))
    out = []
    for pid in dup[order].tolist():
        out.append(
            with_ops(
                {
                    "key": ctx.keys[int(ctx.pair_key[pid])],
                    "value": int(ctx.pair_value[pid]),
                    "count": len(offsets[pid]),
                    "offsets": offsets[pid],
                    "indexes": indexes[pid],
                    "send_ms": send_ns[pid] // 1_000_000 if pid in send_ns else None,
                },
                refs[pid],
            )
        )
    return out
