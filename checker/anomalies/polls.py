"""Consumers that skip or go backwards: `int-poll-skip`, `int-nonmonotonic-poll`, `poll-skip`,
`nonmonotonic-poll`."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from kafka_chaos.checker.anomalies._common import MAX_LISTED, PositionBreaks, within_op_steps
from kafka_chaos.checker.context import (
    OK,
    Context,
    deltas,
    in_op_key_order,
    op_key_order,
    segment_starts,
    segmented_cummax,
    sort_by,
)

if TYPE_CHECKING:
    from kafka_chaos.checker.tables import Reset


def _offset(ctx: Context, row: int) -> int | None:
    p = ctx.polls
    return int(p.offset[row]) if p.has_offset[row] else None


def int_poll_skip_nonmonotonic_cases(
    ctx: Context, rebalanced: Mapping[int, frozenset[str]] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Inside one poll, consecutive records of a key that skip or go backwards (Jepsen's
    `int-poll-skip+nonmonotonic-cases`).

    One poll returns, for each key, a run of records that should be consecutive in the key's log. For each
    pair of successive values v1, v2 of a key in one op, with positions i1, i2 in the version order, the
    delta is i2 - i1 (1 if either position is unknown: no claim). delta > 1 is `int-poll-skip` (the poll
    jumped over values we know exist, listed in `skipped`); delta < 1 is `int-nonmonotonic-poll` (the poll
    went backwards, or repeated a value). As in Jepsen, every poll counts, whatever its type (a failed or
    indefinite poll's records are checked too), records at unknown offsets included (a value whose position
    is unknown breaks the chain: its neighbours are not compared); keys named in the op's `rebalance_log`
    (`rebalanced`: op index → keys) are exempt (Jepsen's `int-poll-skip+nonmonotonic-cases-per-key`).

    Instances: `key`, `process`, `values` [v1, v2], `offsets` (as read), `delta`, (`skipped`: at most
    MAX_LISTED values), `ops` [the poll] and `times`.
    """
    p = ctx.polls
    out: dict[str, list[dict[str, Any]]] = {"int-poll-skip": [], "int-nonmonotonic-poll": []}
    for a, b, k, delta, skipped in within_op_steps(ctx, "polls", p):
        if rebalanced and ctx.keys[k] in rebalanced.get(int(p.op[b]), ()):
            continue
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "process": int(p.process[b]),
            "values": [int(p.value[a]), int(p.value[b])],
            "offsets": [_offset(ctx, a), _offset(ctx, b)],
            "delta": delta,
        }
        if skipped is not None:
            inst["skipped"] = skipped
        inst["ops"] = [int(p.op[b])]
        inst["times"] = [int(p.time[b])]
        out["int-poll-skip" if delta > 1 else "int-nonmonotonic-poll"].append(inst)
    return out


def poll_skip_nonmonotonic_cases(
    ctx: Context,
    subscribe_processes: frozenset[int] = frozenset(),
    resets: Iterable[Reset] = (),
    empty: Iterable[tuple[int, int, str, str]] = (),
) -> dict[str, list[dict[str, Any]]]:
    """Between successive polls of one process, a key's position skips or goes backwards (Jepsen's
    `poll-skip+nonmonotonic-cases-per-process`).

    A consumer's position in a key advances record by record: the first value of a key in a poll should
    directly follow the last value of that key in the process's previous ok poll of that key. With v the
    last value read by that previous op, v' the first read by this one, and i, i' their positions, the delta
    is i' - i (1 if either is unknown). delta > 1 is `poll-skip` (values we know exist were never returned
    to this consumer, listed in `skipped`); delta < 1 is `nonmonotonic-poll` (the consumer went back, or read
    the same value again).

    As in Jepsen: every poll is compared, whatever its type, but only an ok one moves the position (a failed
    or indefinite poll leaves it where it was); an ok or info `assign` / `subscribe` keeps the positions of
    the keys it names only (`resets`; the others start afresh: no comparison with what came before); an ok
    poll that returned a key with no records (`empty`) leaves nothing to compare with, so the next poll of that
    key is not compared either.

    With manual `assign`, neither should ever happen. A `subscribe` consumer's partitions move on every
    rebalance and it resumes from the group's committed offset, so both are expected there: instances of
    processes in `subscribe_processes` carry `subscribe: true` and are not bad by default (Jepsen's
    `allowed-error-types` with `:sub-via :subscribe`).

    Instances: `key`, `process`, `subscribe`, `values` [v, v'], `offsets` (as read, null when unknown),
    `delta`, (`skipped`), `ops` [previous poll, this poll] and `times`.
    """
    p = ctx.polls
    out: dict[str, list[dict[str, Any]]] = {"poll-skip": [], "nonmonotonic-poll": []}
    if len(p) < 2:
        return out
    order = op_key_order(ctx, "polls")
    op, key = in_op_key_order(ctx, "polls", p.op), in_op_key_order(ctx, "polls", p.key)
    new = np.ones(len(order), dtype=bool)
    new[1:] = (op[1:] != op[:-1]) | (key[1:] != key[:-1])
    first = order[new]  # first row of each (op, key) group
    last = order[np.r_[np.flatnonzero(new)[1:] - 1, len(order) - 1]]  # last row of each group
    # Groups by (process, key, op); each compared with the last ok group before it of its (process, key).
    g_order = sort_by(p.process[first], p.key[first], p.op[first])
    first, last = first[g_order], last[g_order]
    proc, gkey = p.process[first], p.key[first]
    seg_start = segment_starts(proc) | segment_starts(gkey)
    ok_at = np.where(p.type[first] == OK, np.arange(len(first), dtype=np.int64), -1)
    upto = segmented_cummax(ok_at, np.cumsum(seg_start, dtype=np.int64))
    prev = np.full(len(first), -1, dtype=np.int64)
    prev[1:] = upto[:-1]
    prev[seg_start] = -1
    has = prev >= 0
    prev_last = last[np.maximum(prev, 0)]
    by_value = ctx.vo.by_value
    i_prev = by_value[p.pid[prev_last]]
    i_cur = by_value[p.pid[first]]
    d = deltas(i_prev, i_cur)
    breaks = PositionBreaks(resets, empty)
    for j in np.flatnonzero(has & ((d > 1) | (d < 1))).tolist():
        a, b = int(prev_last[j]), int(first[j])
        k = int(gkey[j])
        process = int(p.process[b])
        if breaks.between(process, ctx.keys[k], int(p.op[a]), int(p.op[b])):
            continue
        delta = int(d[j])
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "process": process,
            "subscribe": process in subscribe_processes,
            "values": [int(p.value[a]), int(p.value[b])],
            "offsets": [_offset(ctx, a), _offset(ctx, b)],
            "delta": delta,
        }
        if delta > 1:
            inst["skipped"] = ctx.vo.values_between(k, int(i_prev[j]), int(i_cur[j]), MAX_LISTED)
        inst["ops"] = [int(p.op[a]), int(p.op[b])]
        inst["times"] = [int(p.time[a]), int(p.time[b])]
        out["poll-skip" if delta > 1 else "nonmonotonic-poll"].append(inst)
    return out
