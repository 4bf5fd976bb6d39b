"""Run statistics for the report: op counts, throughput, unavailability windows, realtime lag."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafka_chaos.checker.context import (
    FAIL,
    I64,
    INFO,
    OK,
    Context,
    in_op_key_order,
    op_key_order,
    segment_starts,
    segmented_cummax,
    segmented_cummin_reverse,
    sort_by,
)
from kafka_chaos.checker.history_reader import CLIENT_OP_FS

BUCKET_NS = 1_000_000_000


def op_counts_from_tables(ctx: Context) -> dict[str, dict[str, int]]:
    """ok / fail / info op counts when only the tables are known (polls that returned nothing are not in
    them, so `poll` counts only polls that read something)."""
    s = ctx.sends
    out: dict[str, dict[str, int]] = {}
    if len(s):
        types = s.type[segment_starts(s.op)]  # rows are grouped by op
        out["send"] = {
            "ok": int((types == OK).sum()),
            "fail": int((types == FAIL).sum()),
            "info": int((types == INFO).sum()),
        }
    if len(ctx.placed):
        out["poll"] = {"ok": int(segment_starts(ctx.placed.op).sum()), "fail": 0, "info": 0}
    return out


def throughput(times: I64, end_time: int, bucket_ns: int = BUCKET_NS) -> list[int]:
    """Events per bucket, from 0 to end_time."""
    nb = int(end_time) // bucket_ns + 1
    if not len(times):
        return [0] * nb
    counts: list[int] = np.bincount(np.minimum(times // bucket_ns, nb - 1), minlength=nb).tolist()
    return counts


def longest_gap(times: I64, end_time: int) -> dict[str, int]:
    """The longest window in [0, end_time] with no event: its start, end and length (ns)."""
    t = np.sort(times, kind="stable")  # nearly sorted already: timsort is linear then
    edges = np.concatenate([[0], t, [max(int(end_time), int(t[-1]) if len(t) else 0)]]).astype(np.int64)
    gaps = np.diff(edges)
    i = int(np.argmax(gaps))
    return {"start": int(edges[i]), "end": int(edges[i + 1]), "ns": int(gaps[i])}


def realtime_lag(ctx: Context, until: int | None = None) -> dict[str, Any]:
    """How far behind the log's end consumers were (Jepsen's `realtime-lag`, summarised).

    For every key and offset o, `expired[o]` is the earliest time at which some op proved an offset ≥ o
    existed: an ok poll that read it, or an acknowledged send that must have committed (the version order's
    observations; Jepsen also counts unproven info sends with an offset). A process that has read up to
    offset o of a key (the highest so far) is, at time t, at least `t - expired[o + 1]` behind (0 if nothing
    past o was known yet). Computed at each ok poll's completion, for the keys it read (Jepsen uses the
    poll's invoke time, which the tables do not hold, and also reports assigned keys that returned nothing).

    Polls completed at or after `until` (the final drain's start) are left out: the drain reads the whole log
    once the faults are healed, and its reads say how long the run lasted, not how far consumers lagged.

    Returns `max_ns`, `mean_ns`, `p50_ns`, `p99_ns`, `samples`, and `worst` {time, process, key, lag_ns}.
    """
    vo, p = ctx.vo, ctx.placed
    empty: dict[str, Any] = {"samples": 0, "max_ns": 0, "mean_ns": 0, "p50_ns": 0, "p99_ns": 0, "worst": None}
    if not len(p):
        return empty
    # per log group: the earliest time anything at this offset or later in its key was seen
    expired_at = segmented_cummin_reverse(vo.g_first_seen, vo.g_key)

    # Per (op, key) of the polls: the highest offset read, then the process's highest so far.
    if p is ctx.polls:
        rows = op_key_order(ctx, "polls")
        op, key, offset = (in_op_key_order(ctx, "polls", c) for c in (p.op, p.key, p.offset))
    else:
        rows = sort_by(p.op, p.key).astype(np.int64)
        op, key, offset = p.op[rows], p.key[rows], p.offset[rows]
    first = np.flatnonzero(segment_starts(op) | segment_starts(key))
    g_off = np.maximum.reduceat(offset, first)
    g_key, g_op = key[first], op[first]
    del op, key, offset
    first_row = rows[first]  # gather the groups' first rows only, not whole columns
    g_proc, g_time = p.process[first_row], p.time[first_row]
    go = sort_by(g_proc, g_key, g_op)
    g_off, g_key, g_proc, g_time = g_off[go], g_key[go], g_proc[go], g_time[go]
    seg = np.cumsum(segment_starts(g_proc) | segment_starts(g_key), dtype=np.int64)
    want = segmented_cummax(g_off, seg) + 1

    # The first log group of the key at an offset >= want: groups are sorted by (key, offset).
    expired = np.full(len(want), -1, dtype=np.int64)
    by_key = sort_by(g_key)
    bounds = np.searchsorted(g_key[by_key], np.arange(len(ctx.keys) + 1))
    for k in range(len(ctx.keys)):
        sel = by_key[bounds[k] : bounds[k + 1]]
        if not len(sel):
            continue
        lo, hi = int(vo.key_start[k]), int(vo.key_start[k + 1])
        pos = lo + np.searchsorted(vo.g_offset[lo:hi], want[sel], side="left")
        found = pos < hi
        expired[sel[found]] = expired_at[pos[found]]
    lag = np.where(expired >= 0, np.maximum(g_time - expired, 0), 0).astype(np.int64)
    if until is not None:
        before = g_time < until
        lag, g_time, g_proc, g_key = lag[before], g_time[before], g_proc[before], g_key[before]
        if not len(lag):
            return empty
    w = int(np.argmax(lag))
    return {
        "samples": len(lag),
        "max_ns": int(lag[w]),
        "mean_ns": int(lag.mean()),
        "p50_ns": int(np.percentile(lag, 50)),
        "p99_ns": int(np.percentile(lag, 99)),
        "worst": {
            "time": int(g_time[w]),
            "process": int(g_proc[w]),
            "key": ctx.keys[int(g_key[w])],
            "lag_ns": int(lag[w]),
        },
    }


def run_stats(
    ctx: Context,
    *,
    end_time: int | None = None,
    op_counts: dict[str, dict[str, int]] | None = None,
    ok_poll_times: I64 | None = None,
    drain_start: int | None = None,
) -> dict[str, Any]:
    """Everything the report shows besides anomalies."""
    s, p = ctx.sends, ctx.placed
    ok = s.type == OK
    ok_send_t = s.complete_time[ok & (s.complete_time >= 0)]
    poll_t = ok_poll_times if ok_poll_times is not None else p.time[segment_starts(p.op)]
    if end_time is None:
        end_time = int(max([0, *(int(a.max()) for a in (s.time, p.time) if len(a))]))
    ok_send_ops = int(np.count_nonzero(segment_starts(s.op[ok])))
    ops = op_counts if op_counts is not None else op_counts_from_tables(ctx)
    client_ops = sum(n for f, types in ops.items() if f in CLIENT_OP_FS for n in types.values())
    return {
        "ops": ops,
        # From the tables alone an empty poll leaves no row, so zero there is unknown, not an empty history.
        **({"client_ops": client_ops} if op_counts is not None or client_ops else {}),
        "records": {
            "sent": {
                "ok": int(np.count_nonzero(ok)),
                "info": int(np.count_nonzero(s.type == INFO)),
                "fail": int(np.count_nonzero(s.type == FAIL)),
            },
            "polled": len(p),
            "distinct_read": int(np.count_nonzero(ctx.read)),
        },
        "keys": len(ctx.keys),
        "ok_send_ops": ok_send_ops,
        "duration_ns": int(end_time),
        "throughput": {
            "bucket_ns": BUCKET_NS,
            "send_ok": throughput(ok_send_t, end_time),
            "poll_records": throughput(p.time, end_time),
            "poll_ok": throughput(poll_t, end_time),
        },
        "longest_gap": {
            "send_ok": longest_gap(ok_send_t, end_time),
            "poll_ok": longest_gap(poll_t, end_time),
        },
        "realtime_lag": realtime_lag(ctx, until=drain_start),
    }
