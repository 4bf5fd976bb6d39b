"""Run statistics for the report: op counts, throughput, unavailability windows, realtime lag."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from checker.context import FAIL, I64, INFO, OK, Context

BUCKET_NS = 1_000_000_000


def op_counts_from_tables(ctx: Context) -> dict[str, dict[str, int]]:
    """ok / fail / info op counts when only the tables are known (polls that returned nothing are not in
    them, so `poll` counts only polls that read something)."""
    s = ctx.sends
    out: dict[str, dict[str, int]] = {}
    if len(s):
        _, first = np.unique(s.op, return_index=True)
        types = s.type[first]
        out["send"] = {
            "ok": int((types == OK).sum()),
            "fail": int((types == FAIL).sum()),
            "info": int((types == INFO).sum()),
        }
    if len(ctx.polls):
        out["poll"] = {"ok": len(np.unique(ctx.polls.op)), "fail": 0, "info": 0}
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
    t = np.unique(times)
    edges = np.concatenate([[0], t, [max(int(end_time), int(t[-1]) if len(t) else 0)]]).astype(np.int64)
    gaps = np.diff(edges)
    i = int(np.argmax(gaps))
    return {"start": int(edges[i]), "end": int(edges[i + 1]), "ns": int(gaps[i])}


def realtime_lag(ctx: Context) -> dict[str, Any]:
    """How far behind the log's end consumers were (Jepsen's `realtime-lag`, summarised).

    For every key and offset o, `expired[o]` is the earliest time at which some op proved an offset ≥ o
    existed (an ok/info send acknowledged at ≥ o, or a poll that read ≥ o). A process that has read up to
    offset o of a key (the highest so far) is, at time t, at least `t - expired[o + 1]` behind (0 if
    o + 1 was not known to exist yet). Computed at each ok poll's completion time, for the keys it read
    (Jepsen uses the poll's invoke time, which the tables do not hold, and also reports assigned keys that
    returned nothing).

    Returns `max_ns`, `mean_ns`, `p50_ns`, `p99_ns`, `samples`, and `worst` {time, process, key, lag_ns}.
    """
    s, p = ctx.sends, ctx.polls
    empty: dict[str, Any] = {"samples": 0, "max_ns": 0, "mean_ns": 0, "p50_ns": 0, "p99_ns": 0, "worst": None}
    if not len(p):
        return empty
    known = (s.type != FAIL) & s.has_offset & (s.complete_time >= 0)
    ek = np.concatenate([s.key[known], p.key])
    eo = np.concatenate([s.offset[known], p.offset])
    et = np.concatenate([s.complete_time[known], p.time])
    order = np.lexsort((eo, ek))
    ek, eo, et = ek[order], eo[order], et[order]
    # suffix minimum of time within each key: min time over offsets >= this one
    rev = pd.Series(et[::-1]).groupby(ek[::-1], sort=False).cummin().to_numpy()[::-1]

    # Per (op, key) of the polls: the process's highest offset read so far for that key.
    g = pd.DataFrame({"process": p.process, "key": p.key, "op": p.op, "offset": p.offset, "time": p.time})
    g = g.groupby(["process", "key", "op"], sort=True).agg(offset=("offset", "max"), time=("time", "first"))
    g = g.reset_index()
    g["seen"] = g.groupby(["process", "key"], sort=False)["offset"].cummax()
    keys = g["key"].to_numpy()
    want = g["seen"].to_numpy() + 1
    expired = np.full(len(g), -1, dtype=np.int64)
    bounds = np.searchsorted(ek, np.arange(len(ctx.keys) + 1))
    for k in np.unique(keys).tolist():
        lo, hi = int(bounds[k]), int(bounds[k + 1])
        m = keys == k
        pos = lo + np.searchsorted(eo[lo:hi], want[m], side="left")
        found = pos < hi
        e = np.full(int(m.sum()), -1, dtype=np.int64)
        e[found] = rev[pos[found]]
        expired[m] = e
    t = g["time"].to_numpy()
    lag = np.where(expired >= 0, np.maximum(t - expired, 0), 0).astype(np.int64)
    w = int(np.argmax(lag))
    return {
        "samples": len(lag),
        "max_ns": int(lag[w]),
        "mean_ns": int(lag.mean()),
        "p50_ns": int(np.percentile(lag, 50)),
        "p99_ns": int(np.percentile(lag, 99)),
        "worst": {
            "time": int(t[w]),
            "process": int(g["process"].iloc[w]),
            "key": ctx.keys[int(keys[w])],
            "lag_ns": int(lag[w]),
        },
    }


def run_stats(
    ctx: Context,
    *,
    end_time: int | None = None,
    op_counts: dict[str, dict[str, int]] | None = None,
    ok_poll_times: I64 | None = None,
) -> dict[str, Any]:
    """Everything the report shows besides anomalies."""
    s, p = ctx.sends, ctx.polls
    ok_send_t = s.complete_time[(s.type == OK) & (s.complete_time >= 0)]
    poll_t = ok_poll_times if ok_poll_times is not None else np.unique(p.time)
    if end_time is None:
        end_time = int(max([0, *(int(a.max()) for a in (s.time, p.time) if len(a))]))
    ok_send_ops = np.unique(s.op[(s.type == OK)]) if len(s) else s.op
    return {
        "ops": op_counts if op_counts is not None else op_counts_from_tables(ctx),
        "records": {
            "sent": {
                "ok": int((s.type == OK).sum()),
                "info": int((s.type == INFO).sum()),
                "fail": int((s.type == FAIL).sum()),
            },
            "polled": len(p),
            "distinct_read": int(ctx.read.sum()),
        },
        "keys": len(ctx.keys),
        "ok_send_ops": len(ok_send_ops),
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
        "realtime_lag": realtime_lag(ctx),
    }
