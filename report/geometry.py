"""The timeline's geometry as pure functions: axis steps and limits, tick labels, label lanes, and series cut
at their gaps (a second with no sample is drawn as a gap, not as a line across it)."""

from __future__ import annotations

import math
from collections.abc import Sequence


def nice_step(span: float, target: int = 8) -> float:
    """A 1-2-5 step that cuts `span` into about `target` intervals."""
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def nice_max(v: float) -> float:
    """The axis top for a largest value `v`: the next multiple of a nice step."""
    if v <= 0:
        return 1.0
    step = nice_step(v, 4)
    return float(math.ceil(v / step) * step)


def fmt_num(v: float) -> str:
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:g}"


def label_lanes(starts: Sequence[float], widths: Sequence[float], max_lanes: int = 6) -> list[int]:
    """A lane per label so that labels starting at x `starts` with `widths` do not overlap; with more than
    `max_lanes` needed, a label goes to the lane that frees first."""
    ends: list[float] = []
    lanes: list[int] = []
    for x, width in zip(starts, widths, strict=True):
        for i, e in enumerate(ends):
            if e <= x:
                ends[i] = x + width
                lanes.append(i)
                break
        else:
            if len(ends) < max_lanes:
                ends.append(x + width)
                lanes.append(len(ends) - 1)
            else:
                i = min(range(len(ends)), key=lambda j: ends[j])
                ends[i] = x + width
                lanes.append(i)
    return lanes


def consecutive_runs(points: Sequence[tuple[int, float]], step: int = 1) -> list[list[tuple[int, float]]]:
    """Split (bucket, value) points, sorted by bucket, where a bucket is missing: one polyline per run."""
    runs: list[list[tuple[int, float]]] = []
    for bucket, value in points:
        if runs and bucket - runs[-1][-1][0] == step:
            runs[-1].append((bucket, value))
        else:
            runs.append([(bucket, value)])
    return runs
