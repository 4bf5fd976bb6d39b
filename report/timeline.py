"""The run on one time axis, as inline SVG: fault and operation bands over throughput, latency, unseen values,
partition health and leader/ISR changes. The geometry (scales, ticks, label lanes) is in report.geometry."""


import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.faults.registry import colour as registry_colour
from kafka_chaos.report.data import (
    BUCKET_NS,
    FaultBand,
    RunData,
    StateChange,
    as_dict,
    as_list,
    esc,
    instances_by_name,
    short,
)
from kafka_chaos.report.geometry import consecutive_runs, fmt_num, label_lanes, nice_max, nice_step

# -- the timeline (inline SVG) -------------------------------------------------------------------------------

SVG_W = 1200
X0 = 92
X1 = SVG_W - 20
OTHER_COLOR = "#7f7f7f"
SERIES_COLORS = {
    ("send", "ok"): "#2ca02c",
    ("send", "fail"): "#d62728",
    ("send", "info"): "#ff7f0e",
    ("poll", "ok"): "#1f77b4",
    ("poll", "fail"): "#e377c2",
    ("poll", "info"): "#bcbd22",
    ("txn", "ok"): "#17becf",
    ("txn", "fail"): "#8c564b",
    ("txn", "info"): "#7f7f7f",
}
KEY_COLORS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#bcbd22")


def _fault_color(f: str) -> str:
    return registry_colour(f)








class Svg:
    """A growing list of SVG elements; every text goes through `esc`."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def add(self, s: str) -> None:
        self.parts.append(s)

    def text(
        self,
        x: float,
        y: float,
        s: str,
        *,
        cls: str = "",
        anchor: str = "start",
        title: str = "",
        vertical: bool = False,
    ) -> None:
        t = f"<title>{esc(title)}</title>" if title else ""
        c = f' class="{cls}"' if cls else ""
        r = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if vertical else ""
        self.add(f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{c}{r}>{t}{esc(s)}</text>')

    def line(
        self,
        x1: float,
        y1: float,
        x2: float,
        y2: float,
        stroke: str,
        width: float = 1,
        extra: str = "",
        title: str = "",
    ) -> None:
        t = f"<title>{esc(title)}</title>" if title else ""
        self.add(
            f'<line x1="{x1:.1f}" y1="{y1:.1f}" x2="{x2:.1f}" y2="{y2:.1f}" stroke="{stroke}" '
            f'stroke-width="{width}"{extra}>{t}</line>'
        )

    def rect(
        self, x: float, y: float, w: float, h: float, fill: str, extra: str = "", title: str = ""
    ) -> None:
        t = f"<title>{esc(title)}</title>" if title else ""
        self.add(
            f'<rect x="{x:.1f}" y="{y:.1f}" width="{max(w, 0):.1f}" height="{max(h, 0):.1f}" fill="{fill}"'
            f"{extra}>{t}</rect>"
        )

    def polyline(
        self,
        pts: Sequence[tuple[float, float]],
        stroke: str,
        width: float = 1.5,
        dash: str = "",
        title: str = "",
    ) -> None:
        if not pts:
            return
        d = f' stroke-dasharray="{dash}"' if dash else ""
        t = f"<title>{esc(title)}</title>" if title else ""
        coords = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
        self.add(
            f'<polyline points="{coords}" fill="none" stroke="{stroke}" stroke-width="{width}"{d}>'
            f"{t}</polyline>"
        )


@dataclass
class Panel:
    title: str
    height: float
    draw: Callable[[Svg, float, float], None]
    """draw(svg, top, height) of the plot area."""
    legend: list[tuple[str, str, str]] = field(default_factory=list)
    """(label, color, dash)."""


PANEL_GAP = 34.0


STARTUP_W = 64.0
"""Width of the cluster start-up band at the left of the axis: start-up is not the run's subject."""


class Timeline:
    """x scale shared by every panel. Time before `start_s` (the cluster's start-up, before the workload's
    first op) is squeezed into a band of STARTUP_W pixels; the axis proper runs from the workload's start."""

    def __init__(self, duration_s: float, start_s: float = 0.0) -> None:
        self.duration = max(duration_s, 1.0)
        self.start = start_s if 0.0 < start_s < self.duration - 1.0 else 0.0
        self.x_start = X0 + STARTUP_W if self.start else float(X0)

    def x(self, t_s: float) -> float:
        t = min(max(t_s, 0.0), self.duration)
        if t < self.start:
            return X0 + STARTUP_W * t / self.start
        return self.x_start + (X1 - self.x_start) * (t - self.start) / (self.duration - self.start)

    def series_points(
        self, values: Sequence[float], y: Callable[[float], float], offset: float = 0.5, bucket_s: float = 1.0
    ) -> list[tuple[float, float]]:
        # buckets wholly inside start-up are left out: there is no workload to plot there
        return [(self.x(i * bucket_s + offset * bucket_s), y(v)) for i, v in enumerate(values)
                if (i + 1) * bucket_s > self.start]


def workload_start_s(data: RunData) -> float:
    """When the workload's first op happened (whole seconds: the history's per-second counts), or the first
    fault if one came earlier; 0 when neither is known (then the axis starts at the run's start)."""
    seconds = [b for (_f, _t, b) in data.history.counts]
    if not seconds:
        stats = as_dict((data.results or {}).get("stats"))
        tp = as_dict(stats.get("throughput"))
        for raw in tp.values():
            if isinstance(raw, list):
                seconds += [i for i, v in enumerate(raw) if isinstance(v, int | float) and v > 0][:1]
    starts = ([float(min(seconds))] if seconds else []) + [b.start / 1e9 for b in data.faults[:1]]
    return min(starts) if seconds else 0.0


def _y_axis(svg: Svg, top: float, h: float, ymax: float, label: str) -> Callable[[float], float]:
    def y(v: float) -> float:
        return top + h - h * min(max(v, 0.0), ymax) / ymax

    step = nice_step(ymax, 3)
    v = 0.0
    while v <= ymax + 1e-9:
        yy = y(v)
        svg.line(X0, yy, X1, yy, "#e5e5e5")
        svg.text(X0 - 6, yy + 3.5, fmt_num(v), cls="tick", anchor="end")
        v += step
    svg.text(24, top + h / 2, label, cls="axis", anchor="middle", vertical=True)
    return y


def _throughput_panel(data: RunData, tl: Timeline) -> Panel | None:
    counts = data.history.counts
    nb = int(data.duration_ns // BUCKET_NS) + 1
    series: list[tuple[str, str, list[float], str]] = []
    if counts:
        fs = sorted(
            {f for f, _, _ in counts if f in ("send", "poll", "txn")}, key=("send", "poll", "txn").index
        )
        for f in fs:
            for typ in ("ok", "fail", "info"):
                vals = [float(counts.get((f, typ, b), 0)) for b in range(nb)]
                if any(vals) or typ == "ok":
                    series.append(
                        (
                            f"{f} {typ}",
                            SERIES_COLORS.get((f, typ), OTHER_COLOR),
                            vals,
                            "" if typ == "ok" else ("4 2" if typ == "fail" else "1 2"),
                        )
                    )
    else:
        stats = (data.results or {}).get("stats") or {}
        tp = stats.get("throughput") if isinstance(stats, dict) else None
        if isinstance(tp, dict):
            for name, color in (("send_ok", "#2ca02c"), ("poll_ok", "#1f77b4")):
                raw = tp.get(name)
                if isinstance(raw, list):
                    series.append((name.replace("_", " "), color, [float(v) for v in raw], ""))
    if not series:
        return None
    ymax = nice_max(max(max(v) for _, _, v, _ in series))

    def draw(svg: Svg, top: float, h: float) -> None:
        y = _y_axis(svg, top, h, ymax, "ops/s")
        for label, color, vals, dash in series:
            svg.polyline(
                tl.series_points(vals, y), color, 1.6 if not dash else 1.3, dash, title=label + " per second"
            )

    return Panel(
        "Throughput: completed ops per second, by outcome",
        130,
        draw,
        [(label, color, dash) for label, color, _, dash in series],
    )


def _latency_panel(data: RunData, tl: Timeline) -> Panel | None:
    lat = data.history.latency_percentiles
    if not lat:
        return None
    p50: list[tuple[int, float]] = []
    p99: list[tuple[int, float]] = []
    mx: list[tuple[int, float]] = []
    for sec in sorted(lat):
        q50, q99, top = lat[sec]
        p50.append((sec, q50 / 1e6))
        p99.append((sec, q99 / 1e6))
        mx.append((sec, top / 1e6))
    lo_v = max(min(v for _, v in p50), 0.01)
    hi_v = max(max(v for _, v in mx), lo_v * 10)
    lo, hi = math.floor(math.log10(lo_v)), math.ceil(math.log10(hi_v))

    def draw(svg: Svg, top: float, h: float) -> None:
        def y(v: float) -> float:
            lv = math.log10(max(v, 10.0**lo))
            return top + h - h * (lv - lo) / (hi - lo)

        for e in range(lo, hi + 1):
            yy = y(10.0**e)
            svg.line(X0, yy, X1, yy, "#e5e5e5")
            svg.text(X0 - 6, yy + 3.5, fmt_num(10.0**e), cls="tick", anchor="end")
        svg.text(24, top + h / 2, "ms (log scale)", cls="axis", anchor="middle", vertical=True)
        for pts, color, dash, label in (
            (mx, "#c7c7c7", "1 2", "max"),
            (p99, "#d62728", "", "p99"),
            (p50, "#1f77b4", "", "p50"),
        ):
            for run in consecutive_runs(pts):  # a second without sends is a gap, not a line across it
                svg.polyline([(tl.x(s + 0.5), y(v)) for s, v in run], color, 1.5, dash,
                             title=f"send latency {label}")

    return Panel(
        "Send latency per second (invoke → completion)",
        110,
        draw,
        [("p50", "#1f77b4", ""), ("p99", "#d62728", ""), ("max", "#c7c7c7", "1 2")],
    )


def _unseen_panel(data: RunData, tl: Timeline) -> Panel:
    stats = (data.results or {}).get("stats")
    us = stats.get("unseen_series") if isinstance(stats, dict) else None
    series: list[tuple[str, str, list[float], float]] = []
    title = "Unseen: acknowledged values not read yet (total and the worst keys)"
    bucket_s = 1.0
    if isinstance(us, dict) and isinstance(us.get("total"), list):
        bucket_s = float(us.get("bucket_ns") or BUCKET_NS) / 1e9
        series.append(("total", "#111111", [float(v) for v in us["total"]], 2.0))
        by_key = us.get("by_key")
        if isinstance(by_key, dict):
            top = sorted(
                ((k, v) for k, v in by_key.items() if isinstance(v, list) and v),
                key=lambda kv: -max(kv[1]),
            )[: len(KEY_COLORS)]
            for i, (k, v) in enumerate(top):
                series.append((str(k), KEY_COLORS[i], [float(x) for x in v], 1.2))
    else:
        insts = instances_by_name(data.results).get("unseen", [])
        times = sorted(t for inst in insts for t in (inst.get("times") or []) if isinstance(t, int))
        if times:
            title = "Unseen at the end, by ack time (no unseen series in results.json)"
            nb = int(data.duration_ns // BUCKET_NS) + 1
            cum = [0.0] * nb
            for t in times:
                cum[min(t // BUCKET_NS, nb - 1)] += 1
            for j in range(1, nb):
                cum[j] += cum[j - 1]
            series.append(("total", "#111111", cum, 2.0))

    if not series:
        reason = (
            "results.json missing"
            if data.results is None
            else "no unseen values"
            if "unseen" not in (data.results.get("anomaly_counts") or {})
            else "no unseen series"
        )

        def empty(svg: Svg, top: float, h: float) -> None:
            svg.text(
                (X0 + X1) / 2, top + h / 2 + 4, f"not available ({reason})", cls="muted", anchor="middle"
            )

        return Panel(title, 36, empty)

    ymax = nice_max(max(max(v) if v else 0 for _, _, v, _ in series))

    def draw(svg: Svg, top: float, h: float) -> None:
        y = _y_axis(svg, top, h, ymax, "values")
        for label, color, vals, width in reversed(series):
            svg.polyline(
                tl.series_points(vals, y, offset=1.0, bucket_s=bucket_s),
                color,
                width,
                title=f"unseen {label}",
            )

    return Panel(title, 110, draw, [(label, color, "") for label, color, _, _ in series])


HEALTH_SERIES = (("under-replicated", "under_replicated", "#e0a000"), ("under min ISR", "under_min_isr", "#b3261e"),
                 ("offline", "offline", "#111111"))


def _health_panel(data: RunData, tl: Timeline) -> Panel | None:
    """Partition counts under-replicated, under min.insync.replicas and offline, from results.json's health
    series (checker.health): steps, each count holding until the next sample."""
    health = as_dict((data.results or {}).get("health"))
    points = [p for p in as_list(health.get("series")) if isinstance(p, dict) and isinstance(p.get("time"), int)]
    if not points:
        return None
    ymax = nice_max(max([1.0, *(float(p.get("partitions") or 0) for p in points)]))

    def draw(svg: Svg, top: float, h: float) -> None:
        y = _y_axis(svg, top, h, ymax, "partitions")
        for label, name, color in HEALTH_SERIES:
            steps: list[tuple[float, float]] = []
            for p in points:
                x = tl.x(p["time"] / 1e9)
                if steps:
                    steps.append((x, steps[-1][1]))
                steps.append((x, y(float(p.get(name) or 0))))
            svg.polyline(steps, color, 1.6, title=f"{label} partitions")

    return Panel(f"Partition health: counts per sample (min.insync.replicas {health.get('min_insync_replicas')})",
                 80, draw, [(label, color, "") for label, _, color in HEALTH_SERIES])


MAX_STATE_ROWS = 24


def _state_panel(data: RunData, tl: Timeline) -> Panel:
    st = data.state
    if not st.present:

        def missing(svg: Svg, top: float, h: float) -> None:
            svg.text(
                (X0 + X1) / 2, top + h / 2 + 4, "not available (no state.jsonl)", cls="muted", anchor="middle"
            )

        return Panel("Leader / ISR changes", 36, missing)
    outside = sum(1 for c in st.changes if not 0 <= c.time <= data.duration_ns * 1.05 + BUCKET_NS)
    per_key = len(st.keys) <= MAX_STATE_ROWS
    rows = [*(st.keys if per_key else ["all keys"])]
    if any(c.kind == "controller" for c in st.changes):
        rows.append("controller")
    row_h = 18.0
    height = max(row_h * len(rows), 24.0)

    def row_of(c: StateChange) -> int:
        if c.kind == "controller":
            return len(rows) - 1
        return rows.index(c.key) if per_key else 0

    def draw(svg: Svg, top: float, h: float) -> None:
        for i, name in enumerate(rows):
            yy = top + i * row_h
            svg.rect(X0, yy + 1, X1 - X0, row_h - 2, "#f6f6f6" if i % 2 == 0 else "#fbfbfb")
            svg.text(X0 - 6, yy + row_h / 2 + 3.5, name, cls="tick", anchor="end")
        if not st.changes:
            svg.text(
                (X0 + X1) / 2,
                top + h / 2 + 4,
                f"no changes in {st.samples} samples",
                cls="muted",
                anchor="middle",
            )
        for c in st.changes:
            yy = top + row_of(c) * row_h
            x = tl.x(c.time / 1e9)
            if c.kind == "isr":
                color, y1, y2, w = "#9a9a9a", yy + row_h / 2, yy + row_h - 2, 1.5
                what = f"ISR {short(c.old)} → {short(c.new)}"
            elif c.kind == "leader":
                color = "#d62728" if c.new is None else "#1f3a93"
                y1, y2, w = yy + 1, yy + row_h - 1, 2.0
                epoch = f" (epoch {c.epoch})" if c.epoch is not None else ""
                old = c.old if c.old is not None else "none"
                what = f"leader {old} → {c.new if c.new is not None else 'none'}{epoch}"
            else:
                color, y1, y2, w = "#9467bd", yy + 1, yy + row_h - 1, 2.0
                what = f"controller {c.old} → {c.new}"
            svg.line(x, y1, x, y2, color, w, title=f"t={c.time / 1e9:.3f}s {c.key}: {what}")

    return Panel(
        f"Leader / ISR changes from state.jsonl ({st.samples} samples, {len(st.keys)} keys)"
        + (f" — {outside} outside the run's time range" if outside else ""),
        height,
        draw,
        [
            ("leader change", "#1f3a93", ""),
            ("no leader", "#d62728", ""),
            ("ISR change", "#9a9a9a", ""),
            ("controller", "#9467bd", ""),
        ],
    )


MAX_MARKS = 2000


def instance_time(inst: dict[str, Any]) -> int | None:
    for k in ("times", "invoke_time", "time", "first_time"):
        v = inst.get(k)
        if isinstance(v, list):
            v = next((t for t in v if isinstance(t, int)), None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _anomaly_panel(data: RunData, tl: Timeline) -> Panel | None:
    """One marker per anomaly instance, at the time of its first op: red for violations, amber for known
    defects of the version in use."""
    marks: list[tuple[int, int, str, str, str]] = []
    for name, insts in instances_by_name(data.results).items():
        for inst in insts:
            t = instance_time(inst)
            if t is not None:
                verdict = str(inst.get("verdict"))
                verdict = verdict if verdict in VERDICT_COLOURS else "permitted"
                marks.append((VERDICT_LAYER[verdict], t, name, str(inst.get("key", "")), verdict))
    if not marks:
        return None
    marks.sort()  # violations drawn last, on top
    if len(marks) > MAX_MARKS:
        marks = marks[-MAX_MARKS:]

    def draw(svg: Svg, top: float, h: float) -> None:
        svg.rect(X0, top + 1, X1 - X0, h - 2, "#f6f6f6")
        for _, t, name, key, verdict in marks:
            x = tl.x(t / 1e9)
            tip = esc(f"t={t / 1e9:.3f}s {name} {key}: {verdict}")
            y0, y1 = top + 3, top + h - 3
            svg.add(
                f'<path d="M{x - 5:.1f},{y0:.1f} L{x + 5:.1f},{y0:.1f} L{x:.1f},{y1:.1f} Z" '
                f'fill="{VERDICT_COLOURS[verdict]}" fill-opacity="0.85"><title>{tip}</title></path>'
            )

    return Panel("Anomaly instances, at their first op", 18, draw,
                 [(verdict, colour, "") for verdict, colour in VERDICT_COLOURS.items()])


VERDICT_COLOURS = {"violation": "#b3261e", "known-defect": "#b26a00", "permitted": "#8a9aa5"}
VERDICT_LAYER = {"permitted": 0, "known-defect": 1, "violation": 2}


def _label_lanes(bands: list[FaultBand], tl: Timeline) -> list[int]:
    """A label lane per band, so that labels do not overlap (at most 6 lanes)."""
    return label_lanes([tl.x(b.start / 1e9) for b in bands], [7.0 * len(_band_label(b)) + 10 for b in bands])


def _band_label(b: FaultBand) -> str:
    return f"{b.f} {b.target}".strip()


def timeline_svg(data: RunData) -> str:
    """The run on one time axis: fault bands over throughput, latency, unseen and leader/ISR panels."""
    duration_s = data.duration_ns / 1e9
    tl = Timeline(duration_s, workload_start_s(data))
    panels = [p for p in (_throughput_panel(data, tl), _latency_panel(data, tl)) if p is not None]
    panels += [p for p in (_unseen_panel(data, tl), _health_panel(data, tl), _state_panel(data, tl)) if p is not None]
    marks = _anomaly_panel(data, tl)
    if marks is not None:
        panels.append(marks)
    lanes = _label_lanes(data.faults, tl)
    lane_h = 18.0
    n_lanes = (max(lanes) + 1) if lanes else 1
    svg = Svg()
    y = 8.0
    svg.text(X0, y + 10, "Faults" if data.faults else "Faults: none recorded", cls="ptitle")
    fault_top = y + 16
    y = fault_top + n_lanes * lane_h + 6
    layout: list[tuple[Panel, float]] = []
    for p in panels:
        layout.append((p, y + 18))
        y += 18 + p.height + PANEL_GAP
    plot_bottom = y - PANEL_GAP + 4
    axis_y = plot_bottom + 4
    total_h = axis_y + 30

    # availability windows (results' availability): where writes or reads stalled, with their causes
    for w in as_list(as_dict((data.results or {}).get("availability")).get("windows")):
        if not isinstance(w, dict) or not isinstance(w.get("start_s"), int | float):
            continue
        end_s = w.get("end_s")
        x1 = tl.x(float(w["start_s"]))
        x2 = tl.x(float(end_s)) if isinstance(end_s, int | float) else x1
        tip = (f"no successful {w.get('kind', '?')} on {w.get('key') or 'any key'} for {w.get('duration_s', '?')} s"
               + (f" ({w['finding']})" if w.get("finding") else "")
               + (": " + "; ".join(map(str, w.get("causes") or []))[:600] if w.get("causes") else ""))
        svg.rect(x1, plot_bottom - 10, max(x2 - x1, 2.0), 6, "#b3261e" if w.get("finding") else "#e0a000",
                 ' fill-opacity="0.7" class="availability-window"', title=tip)

    # the cluster's own events (node logs): a tick each on the time axis, the text on hover
    for e in data.cluster_events[:MAX_MARKS]:
        x = tl.x(float(e["time_s"]))
        svg.line(x, plot_bottom - 3, x, plot_bottom + 4, "#444444", 1.2, ' class="cluster-event"',
                 title=f"{float(e['time_s']):.2f}s node {e.get('node', '?')} {e.get('kind', '')}: {e.get('text', '')}")

    # the final drain: its own band, so its reads are not taken for the workload's
    if data.history.drain_start is not None:
        x1 = tl.x(data.history.drain_start / 1e9)
        tip = (f"final drain: every partition read from the start to its end, from "
               f"{data.history.drain_start / 1e9:.3f}s (faults healed, producers stopped)")
        svg.rect(x1, fault_top, max(tl.x(data.duration_ns / 1e9) - x1, 2.0), plot_bottom - fault_top, "#999999",
                 ' fill-opacity="0.10" class="drain-band"', title=tip)
        svg.text(x1 + 3, plot_bottom - 6, "final drain", cls="muted", title=tip)

    # fault bands behind everything
    for b, lane in zip(data.faults, lanes, strict=True):
        x1 = tl.x(b.start / 1e9)
        x2 = tl.x((b.end if b.end is not None else data.duration_ns) / 1e9)
        color = _fault_color(b.f)
        healed = f"healed by {b.heal} at {b.end / 1e9:.3f}s" if b.end is not None else "never healed"
        tip = (
            f"{_band_label(b)}: {b.start / 1e9:.3f}s → {healed} (history #{b.index}); "
            f"value {short(b.value, 120)}" + (f"; error {short(b.error, 120)}" if b.error else "")
        )
        svg.rect(
            x1,
            fault_top,
            max(x2 - x1, 2.0),
            plot_bottom - fault_top,
            color,
            ' fill-opacity="0.12"'
            + ("" if b.end is not None else ' stroke="' + color + '" stroke-dasharray="4 3"'),
            title=tip,
        )
        ly = fault_top + lane * lane_h
        label = _band_label(b)
        svg.rect(x1, ly + 1, max(x2 - x1, 2.0), lane_h - 3, color, ' fill-opacity="0.35"', title=tip)
        svg.text(
            x1 + 3,
            ly + lane_h - 6,
            label + ("" if b.end is not None else " (not healed)"),
            cls="flabel",
            title=tip,
        )

    for p, top in layout:
        svg.text(X0, top - 7, p.title, cls="ptitle")
        widths = [34 + 6.4 * len(label) for label, _, _ in p.legend]
        lx = max(X1 - sum(widths), X0 + 7.4 * len(p.title) + 16)
        for (label, color, dash), w in zip(p.legend, widths, strict=True):
            d = f' stroke-dasharray="{dash}"' if dash else ""
            svg.add(
                f'<line x1="{lx:.1f}" y1="{top - 10:.1f}" x2="{lx + 18:.1f}" y2="{top - 10:.1f}" '
                f'stroke="{color}" stroke-width="2.5"{d}/>'
            )
            svg.text(lx + 22, top - 6.5, label, cls="legend")
            lx += w
        p.draw(svg, top, p.height)
        svg.line(X0, top + p.height, X1, top + p.height, "#999")

    # the cluster's start-up: its own band, so the axis is the workload's
    if tl.start:
        tip = f"cluster start-up: 0–{tl.start:g} s, before the workload's first op (squeezed)"
        svg.rect(X0, fault_top, STARTUP_W, plot_bottom - fault_top, "#999999",
                 ' fill-opacity="0.18" class="startup-band"', title=tip)
        svg.text(X0 + STARTUP_W / 2, fault_top + 12, "start-up", cls="muted", anchor="middle", title=tip)
        svg.text(X0 + STARTUP_W / 2, axis_y + 17, f"0–{tl.start:g}s", cls="tick", anchor="middle", title=tip)
        svg.line(tl.x_start, fault_top, tl.x_start, axis_y + 5, "#555", 1.0, ' stroke-dasharray="3 3"')

    # time axis (run time, from the workload's start)
    step = nice_step(tl.duration - tl.start, 12)
    t = math.ceil(tl.start / step) * step
    while t <= tl.duration + 1e-9:
        x = tl.x(t)
        svg.line(x, fault_top, x, plot_bottom, "#000", 0.5, ' stroke-opacity="0.08"')
        svg.line(x, axis_y, x, axis_y + 5, "#555")
        if not tl.start or x - tl.x_start > 14 or t == tl.start:
            svg.text(x, axis_y + 17, f"{t:g}s", cls="tick", anchor="middle")
        t += step
    svg.line(X0, axis_y, X1, axis_y, "#555")
    return (
        f'<svg class="timeline" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {SVG_W} {total_h:.0f}" '
        f'width="{SVG_W}" height="{total_h:.0f}" role="img" aria-label="run timeline">'
        + "".join(svg.parts)
        + "</svg>"
    )


# -- the page ------------------------------------------------------------------------------------------------
