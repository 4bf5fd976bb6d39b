"""Producers whose records land out of order: `nonmonotonic-send`, `int-nonmonotonic-send`,
`int-send-skip`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np

from kafka_chaos.checker.anomalies._common import PositionBreaks, within_op_steps
from kafka_chaos.checker.context import FAIL, Context, deltas, op_key_order, sort_by

if TYPE_CHECKING:
    from kafka_chaos.checker.tables import Reset


def _offset(ctx: Context, row: int) -> int | None:
    s = ctx.sends
    return int(s.offset[row]) if s.has_offset[row] else None


def int_send_skip_nonmonotonic_cases(ctx: Context) -> dict[str, list[dict[str, Any]]]:
    """Inside one op, consecutive sends to a key that skip or go backwards (Jepsen's
    `int-send-skip+nonmonotonic-cases`).

    For each pair of successive values v1, v2 sent to one key by one op (any completed type, as in Jepsen),
    with positions i1, i2 in the version order, the delta is i2 - i1 (1 if either is unknown). delta < 1 is
    `int-nonmonotonic-send`: the producer sent v1 before v2, yet v2 sits at or before v1 in the log — the
    order of one producer's records to one partition was not kept. delta > 1 is `int-send-skip`: another
    producer's record landed between the two; that is normal for concurrent producers and for transactions,
    so `int-send-skip` is not bad by default.

    Instances: `key`, `process`, `values` [v1, v2], `offsets` (as acknowledged, null when unknown), `delta`,
    (`skipped`), `ops` [the op] and `times`.
    """
    s = ctx.sends
    out: dict[str, list[dict[str, Any]]] = {"int-send-skip": [], "int-nonmonotonic-send": []}
    for a, b, k, delta, skipped in within_op_steps(ctx, "sends", s):
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "process": int(s.process[b]),
            "values": [int(s.value[a]), int(s.value[b])],
            "offsets": [_offset(ctx, a), _offset(ctx, b)],
            "delta": delta,
        }
        if skipped is not None:
            inst["skipped"] = skipped
        inst["ops"] = [int(s.op[b])]
        inst["times"] = [int(s.time[b])]
        out["int-send-skip" if delta > 1 else "int-nonmonotonic-send"].append(inst)
    return out


def nonmonotonic_send_cases(ctx: Context, resets: Iterable[Reset] = ()) -> list[dict[str, Any]]:
    """Across successive ops of one process, a later send to a key lands at or before an earlier one
    (Jepsen's `nonmonotonic-send-cases`).

    Over each process's ok and info send ops in order, compare the first value an op sent to a key with the
    last value the process's previous op sent to that key; with positions i, i', delta = i' - i (1 if
    either is unknown), and delta < 1 is an anomaly: one producer's writes to a partition were reordered
    (e.g. retries of an earlier batch landing after a later one without idempotence). Failed sends are
    skipped: they did not happen. As in Jepsen there is no send-skip across ops: other producers write in
    between all the time; and an ok or info `assign` / `subscribe` of the process between the two ops that
    does not name the key ends the comparison (`resets`; Jepsen keeps `last-sends` of the named keys only).

    Instances: `key`, `process`, `values` [v, v'], `offsets` (as acknowledged), `delta`, `ops` [previous op,
    this op] and `times`.
    """
    s = ctx.sends
    # (op, key) groups in row order, then ordered by (process, key, op).
    rows = op_key_order(ctx, "sends")
    rows = rows[s.type[rows] != FAIL]
    if len(rows) < 2:
        return []
    op, key = s.op[rows], s.key[rows]
    new = np.ones(len(rows), dtype=bool)
    new[1:] = (op[1:] != op[:-1]) | (key[1:] != key[:-1])
    del op, key
    if bool(new.all()):  # one send per (op, key), as when every op sends one value: no groups to gather
        first = last = rows
    else:
        first = rows[new]
        last = rows[np.r_[np.flatnonzero(new)[1:] - 1, len(rows) - 1]]
    del new
    # Each group's facts are gathered in row order, where the gathers read memory in order; only the few
    # arrays compared along the (process, key, op) order are permuted (at 10^7 history lines each random
    # gather of a sends column cost about as much as the rest of the check).
    proc_key = s.process[first]  # a fresh gather: updated in place
    proc_key -= int(s.process.min())
    proc_key *= len(ctx.keys)
    proc_key += s.key[first]
    g = sort_by(proc_key, s.op[first])
    # Along g, a group follows the one before it unless it starts its (process, key): where each starts is
    # known from how many groups each has, without permuting proc_key.
    counts = np.bincount(proc_key)
    del proc_key
    follows = np.ones(len(first), dtype=bool)
    follows[(np.cumsum(counts) - counts)[counts > 0]] = False
    by_value = ctx.vo.by_value
    d = np.zeros(len(first), dtype=np.int64)
    i_first = by_value[s.pid[first]][g]
    i_last = i_first if last is first else by_value[s.pid[last]][g]
    deltas(i_last[:-1], i_first[1:], out=d[1:])
    del i_first, i_last
    out = []
    breaks = PositionBreaks(resets)
    for j in np.flatnonzero(follows & (d < 1)).tolist():
        a, b = int(last[g[j - 1]]), int(first[g[j]])
        if breaks.between(int(s.process[b]), ctx.keys[int(s.key[b])], int(s.op[a]), int(s.op[b])):
            continue
        out.append(
            {
                "key": ctx.keys[int(s.key[b])],
                "process": int(s.process[b]),
                "values": [int(s.value[a]), int(s.value[b])],
                "offsets": [_offset(ctx, a), _offset(ctx, b)],
                "delta": int(d[j]),
                "ops": [int(s.op[a]), int(s.op[b])],
                "times": [int(s.time[a]), int(s.time[b])],
            }
        )
    return out
