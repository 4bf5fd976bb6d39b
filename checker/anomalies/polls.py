"""Consumers that skip or go backwards: `int-poll-skip`, `int-nonmonotonic-poll`, `poll-skip`,
`nonmonotonic-poll`."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafka_chaos.checker.anomalies._common import MAX_LISTED, within_op_steps
from kafka_chaos.checker.context import Context, deltas, op_key_order, sort_by


def int_poll_skip_nonmonotonic_cases(ctx: Context) -> dict[str, list[dict[str, Any]]]:
    """Inside one poll, consecutive records of a key that skip or go backwards (Jepsen's
    `int-poll-skip+nonmonotonic-cases`).

    One poll returns, for each key, a run of records that should be consecutive in the key's log. For each
    pair of successive values v1, v2 of a key in one op, with positions i1, i2 in the version order, the
    delta is i2 - i1 (1 if either position is unknown: no claim). delta > 1 is `int-poll-skip` (the poll
    jumped over values we know exist, listed in `skipped`); delta < 1 is `int-nonmonotonic-poll` (the poll
    went backwards, or repeated a value). Jepsen exempts keys rebalanced during the op; our polls carry no
    rebalance log, and a rebalance cannot happen inside one poll call.

    Instances: `key`, `process`, `values` [v1, v2], `offsets` (as read), `delta`, (`skipped`: at most
    MAX_LISTED values), `ops` [the poll] and `times`.
    """
    p = ctx.polls
    out: dict[str, list[dict[str, Any]]] = {"int-poll-skip": [], "int-nonmonotonic-poll": []}
    for a, b, k, delta, skipped in within_op_steps(ctx, "polls", p):
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "process": int(p.process[b]),
            "values": [int(p.value[a]), int(p.value[b])],
            "offsets": [int(p.offset[a]), int(p.offset[b])],
            "delta": delta,
        }
        if skipped is not None:
            inst["skipped"] = skipped
        inst["ops"] = [int(p.op[b])]
        inst["times"] = [int(p.time[b])]
        out["int-poll-skip" if delta > 1 else "int-nonmonotonic-poll"].append(inst)
    return out


def poll_skip_nonmonotonic_cases(
    ctx: Context, subscribe_processes: frozenset[int] = frozenset()
) -> dict[str, list[dict[str, Any]]]:
    """Between successive polls of one process, a key's position skips or goes backwards (Jepsen's
    `poll-skip+nonmonotonic-cases`).

    A consumer's position in a key advances record by record: the first value of a key in a poll should
    directly follow the last value of that key in the process's previous ok poll of that key. With v the
    last value read by the previous op, v' the first read by this one, and i, i' their positions, the delta
    is i' - i (1 if either is unknown). delta > 1 is `poll-skip` (values we know exist were never returned
    to this consumer, listed in `skipped`); delta < 1 is `nonmonotonic-poll` (the consumer went back, or read
    the same value again).

    With manual `assign`, neither should ever happen. A `subscribe` consumer's partitions move on every
    rebalance and it resumes from the group's committed offset, so both are expected there: instances of
    processes in `subscribe_processes` carry `subscribe: true` and are not bad by default.

    Only the two tables are read: an `assign` that drops and later re-adds a key is not seen, so a process
    that re-assigns and seeks must be a new process (as Jepsen's final polls crash the client first).

    Instances: `key`, `process`, `subscribe`, `values` [v, v'], `offsets` (as read), `delta`, (`skipped`),
    `ops` [previous poll, this poll] and `times`.
    """
    p = ctx.polls
    out: dict[str, list[dict[str, Any]]] = {"poll-skip": [], "nonmonotonic-poll": []}
    if len(p) < 2:
        return out
    order = op_key_order(ctx, "polls")
    op, key = p.op[order], p.key[order]
    new = np.ones(len(order), dtype=bool)
    new[1:] = (op[1:] != op[:-1]) | (key[1:] != key[:-1])
    first = order[new]  # first row of each (op, key) group
    last = order[np.r_[np.flatnonzero(new)[1:] - 1, len(order) - 1]]  # last row of each group
    # Groups by (process, key, op): each group's first row against the previous group's last row.
    g_order = sort_by(p.process[first], p.key[first], p.op[first])
    first, last = first[g_order], last[g_order]
    proc, gkey = p.process[first], p.key[first]
    follows = np.zeros(len(first), dtype=bool)
    follows[1:] = (proc[1:] == proc[:-1]) & (gkey[1:] == gkey[:-1])
    by_value = ctx.vo.by_value
    i_prev = by_value[p.pid[last]]
    i_cur = by_value[p.pid[first]]
    d = np.zeros(len(first), dtype=np.int64)
    d[1:] = deltas(i_prev[:-1], i_cur[1:])
    for j in np.flatnonzero(follows & ((d > 1) | (d < 1))).tolist():
        a, b = int(last[j - 1]), int(first[j])
        delta = int(d[j])
        k = int(gkey[j])
        process = int(p.process[b])
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "process": process,
            "subscribe": process in subscribe_processes,
            "values": [int(p.value[a]), int(p.value[b])],
            "offsets": [int(p.offset[a]), int(p.offset[b])],
            "delta": delta,
        }
        if delta > 1:
            inst["skipped"] = ctx.vo.values_between(k, int(i_prev[j - 1]), int(i_cur[j]), MAX_LISTED)
        inst["ops"] = [int(p.op[a]), int(p.op[b])]
        inst["times"] = [int(p.time[a]), int(p.time[b])]
        out["poll-skip" if delta > 1 else "nonmonotonic-poll"].append(inst)
    return out
