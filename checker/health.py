"""The cluster's health over a run, from the observer's samples (docs/architecture.md §3): how many partitions
were under-replicated, under min.insync.replicas and offline at each sample, and for how long the run's topic
was below min ISR (writes with acks=all refused) or offline (no leader: nothing readable or writable).

This is availability, not safety: the verdict says how long, the report plots the counts under the fault and
operation bands.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any


def health_series(samples: Sequence[dict[str, Any]], min_insync: int) -> list[dict[str, Any]]:
    """One point per sample time: counts of under-replicated, under-min-ISR and offline partitions, the active
    controller. A partition whose state could not be read at that time (null fields) is counted as unknown."""
    by_time: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for s in samples:
        by_time[int(s["time"])].append(s)
    series = []
    for time in sorted(by_time):
        point: dict[str, Any] = {"time": time, "partitions": 0, "under_replicated": 0, "under_min_isr": 0, "offline": 0,
                 "unknown": 0, "controller": None}
        for s in by_time[time]:
            point["partitions"] += 1
            point["controller"] = s.get("controller", point["controller"])
            replicas, isr = s.get("replicas"), s.get("isr")
            if replicas is None or isr is None:
                point["unknown"] += 1
                continue
            if s.get("leader") is None:
                point["offline"] += 1
            if len(isr) < len(replicas):
                point["under_replicated"] += 1
            if len(isr) < min_insync:
                point["under_min_isr"] += 1
        series.append(point)
    return series


def _seconds_where(series: Sequence[dict[str, Any]], field: str, end_time: int | None) -> float:
    """Seconds during which `field` was above zero: each sample holds until the next one (or the run's end)."""
    total = 0
    for here, nxt in zip(series, [*series[1:], None], strict=True):
        until = nxt["time"] if nxt is not None else (end_time if end_time is not None else here["time"])
        if here[field] > 0:
            total += max(0, until - here["time"])
    return total / 1e9


def health_summary(samples: Sequence[dict[str, Any]] | None, min_insync: int,
                   end_time: int | None = None) -> dict[str, Any] | None:
    """results.json's `health`: the series and the seconds spent under-replicated, under min ISR and offline."""
    if not samples:
        return None
    series = health_series(samples, min_insync)
    return {
        "min_insync_replicas": min_insync,
        "under_replicated_s": round(_seconds_where(series, "under_replicated", end_time), 3),
        "under_min_isr_s": round(_seconds_where(series, "under_min_isr", end_time), 3),
        "offline_s": round(_seconds_where(series, "offline", end_time), 3),
        "controllers": sorted({p["controller"] for p in series if p["controller"] is not None}),
        "series": series,
    }
