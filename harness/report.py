"""The HTML report of one run: `results/<run>/report.html` (docs/architecture.md §2, §4; issue 7 part 1).

    from kafka_chaos.harness.report import write_report
    write_report(Path("results/<run>"))          # → results/<run>/report.html

One self-contained file (inline CSS and SVG, no script, nothing fetched), readable in a minute, top to
bottom: the verdict and the configuration; a timeline of fault bands over throughput, send latency, unseen
values and leader / ISR changes; one table per anomaly with the ops involved; model conformance; the node
logs. Every file is optional: the report says what is missing and draws what exists. Everything taken from
the run's files is HTML-escaped.

Inputs (all in the run directory):
- `history.jsonl`, streamed once: ops per second by f and outcome (from invoke → completion pairs by process),
  send latency percentiles per second, the nemesis events, and the lines of the ops that the anomaly tables
  cite. A last line cut mid-way (an interrupted run) is ignored.
- Fault bands: `results.json`'s `faults.windows` (what the verdicts used), else `checker.faults_from_history`
  on the nemesis events, so the report and the checker always pair faults and heals the same way.
- `state.jsonl`, streamed: leader, ISR and controller changes per key.
- `results.json` (the checker's output): verdict, anomalies, `stats.unseen_series`, conformance, `model`.
- `scenario.toml` (the resolved scenario), else the history's `run-start` event: the configuration line.
- `logs/*`: linked.

Reading is kept apart from drawing: `load_run` gathers a `RunData`, `render_html` turns it into the page.
"""

from __future__ import annotations

import html
import json
import math
import os
import tomllib
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

from kafka_chaos.errors import KafkaChaosError

__all__ = [
    "CONFORMANCE_NAMES",
    "DEFAULT_MAX_INSTANCES",
    "REPORT_FILE",
    "RunData",
    "load_run",
    "render_html",
    "render_report",
    "write_report",
]

REPORT_FILE = "report.html"
HISTORY_FILE = "history.jsonl"
STATE_FILE = "state.jsonl"
RESULTS_FILE = "results.json"
SCENARIO_FILE = "scenario.toml"
LOGS_DIR = "logs"

DEFAULT_MAX_INSTANCES = 20
MAX_OPS_SHOWN = 6
"""Ops listed (and looked up in the history) per anomaly instance."""
MAX_VALUES_SHOWN = 12
BUCKET_NS = 1_000_000_000
RAW_LINE_CHARS = 400

CONFORMANCE_NAMES = (
    "leader-outside-isr-elr",
    "leader-epoch-regression",
    "ack-below-min-isr",
    "vanished-read",
)
"""Observed behaviour the reference model forbids (docs/architecture.md §4, Conformance)."""

LINK_FAULTS = frozenset(
    {
        "latency",
        "bandwidth",
        "timeout",
        "reset_peer",
        "reset-peer",
        "slow_close",
        "slicer",
        "limit_data",
        "link-down",
        "down",
        "link",
        "toxic",
    }
)
"""Client-link faults (Toxiproxy), drawn in one colour."""


def _loads_fn() -> Callable[[bytes], Any]:
    try:
        import orjson

        return orjson.loads
    except ImportError:
        return json.loads


_loads = _loads_fn()


# -- reading -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class OpLine:
    """One history line the anomaly tables cite."""

    index: int
    line: int
    """1-based line number in history.jsonl."""
    time: int | None
    process: Any
    type: str
    f: str
    raw: str


@dataclass
class HistoryScan:
    present: bool = False
    events: int = 0
    end_time: int = 0
    bad_lines: list[int] = field(default_factory=list)
    """Malformed lines other than a cut last line (1-based)."""
    cut_last_line: bool = False
    run_start: dict[str, Any] | None = None
    drain_complete: bool | None = None
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    counts: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    """(f, type, second) → completed client ops."""
    latency: dict[int, list[int]] = field(default_factory=lambda: defaultdict(list))
    """second → send latencies (ns) of the sends that completed then."""
    unfinished: Counter[str] = field(default_factory=Counter)
    lines: dict[int, OpLine] = field(default_factory=dict)
    """Cited lines by history index."""
    partner: dict[int, int] = field(default_factory=dict)
    """History index of an op's invoke ↔ its completion, for the cited ops."""


def _raw(line: bytes) -> str:
    text = line.decode("utf-8", "replace").rstrip("\r\n")
    return text if len(text) <= RAW_LINE_CHARS else text[:RAW_LINE_CHARS] + " …"


def _op_line(ev: dict[str, Any], idx: int, lineno: int, line: bytes) -> OpLine:
    t = ev.get("time")
    return OpLine(
        index=idx,
        line=lineno,
        time=t if isinstance(t, int) else None,
        process=ev.get("process"),
        type=str(ev.get("type")),
        f=str(ev.get("f")),
        raw=_raw(line),
    )


def scan_history(path: Path, wanted: Iterable[int] = ()) -> HistoryScan:
    """Stream `history.jsonl` once (see the module docstring). `wanted`: history indexes to keep the lines of,
    with their invoke / completion partners."""
    scan = HistoryScan()
    if not path.is_file():
        return scan
    scan.present = True
    want = set(wanted)
    # process → (invoke time, f, index, line number, raw line) of its op in flight
    pending: dict[Any, tuple[int, str, int, int, bytes]] = {}
    counts = scan.counts
    latency = scan.latency
    bad: list[int] = []
    lineno = 0
    last_ok = True
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, 1):
            try:
                ev = _loads(line)
                if not isinstance(ev, dict):
                    raise ValueError("not an object")
            except ValueError:
                if line.strip():
                    bad.append(lineno)
                    last_ok = False
                continue
            last_ok = True
            scan.events += 1
            t = ev.get("time")
            if not isinstance(t, int):
                t = scan.end_time
            elif t > scan.end_time:
                scan.end_time = t
            proc = ev.get("process")
            typ = ev.get("type")
            f = ev.get("f")
            idx = ev.get("index")
            if not isinstance(idx, int):
                idx = lineno - 1
            if type(proc) is int:
                if typ == "invoke":
                    if proc in pending:  # its previous op never completed
                        scan.unfinished[pending[proc][1]] += 1
                    pending[proc] = (t, str(f), idx, lineno, line)
                    if idx in want:
                        scan.lines[idx] = _op_line(ev, idx, lineno, line)
                    continue
                inv = pending.pop(proc, None)
                fname = str(f) if f is not None else (inv[1] if inv else "?")
                sec = t // BUCKET_NS
                counts[(fname, str(typ), sec)] += 1
                if fname == "send" and inv is not None:
                    latency[sec].append(t - inv[0])
                if inv is not None and (idx in want or inv[2] in want):
                    scan.lines[idx] = _op_line(ev, idx, lineno, line)
                    scan.lines[inv[2]] = _op_line(_loads(inv[4]), inv[2], inv[3], inv[4])
                    scan.partner[idx] = inv[2]
                    scan.partner[inv[2]] = idx
                elif idx in want:
                    scan.lines[idx] = _op_line(ev, idx, lineno, line)
            elif proc == "nemesis":
                scan.nemesis.append(
                    {
                        "index": idx,
                        "time": t,
                        "type": str(typ),
                        "f": str(f),
                        "value": ev.get("value"),
                        "error": ev.get("error"),
                    }
                )
                if idx in want:
                    scan.lines[idx] = _op_line(ev, idx, lineno, line)
            elif proc == "harness":
                if f == "run-start" and isinstance(ev.get("value"), dict):
                    scan.run_start = ev["value"]
                elif f == "drain-complete":
                    scan.drain_complete = ev.get("value") is True
            elif idx in want:
                scan.lines[idx] = _op_line(ev, idx, lineno, line)
    for inv in pending.values():
        scan.unfinished[inv[1]] += 1
    if bad and not last_ok and bad[-1] == lineno:
        scan.cut_last_line = True
        bad.pop()
    scan.bad_lines = bad
    return scan


@dataclass(frozen=True)
class StateChange:
    time: int
    key: str
    kind: str
    """`leader`, `isr` or `controller`."""
    old: Any
    new: Any
    epoch: Any = None


@dataclass
class StateScan:
    present: bool = False
    samples: int = 0
    bad_lines: int = 0
    keys: list[str] = field(default_factory=list)
    changes: list[StateChange] = field(default_factory=list)
    end_time: int = 0


def _nodes_tuple(v: Any) -> tuple[Any, ...] | None:
    if isinstance(v, list):
        return tuple(sorted(v, key=str))
    return None


def scan_state(path: Path) -> StateScan:
    """Stream `state.jsonl`: per key, the samples where its leader or ISR differs from the previous sample,
    and controller changes (the first sample of a key is its starting point, not a change)."""
    scan = StateScan()
    if not path.is_file():
        return scan
    scan.present = True
    prev: dict[str, tuple[Any, tuple[Any, ...] | None]] = {}
    controller: Any = None
    seen_controller = False
    with path.open("rb") as fh:
        for line in fh:
            try:
                s = _loads(line)
                if not isinstance(s, dict):
                    raise ValueError("not an object")
            except ValueError:
                if line.strip():
                    scan.bad_lines += 1
                continue
            t = s.get("time")
            if not isinstance(t, int | float):
                continue
            t = int(t)
            scan.samples += 1
            scan.end_time = max(scan.end_time, t)
            if "controller" in s:
                c = s.get("controller")
                if c is not None:
                    if seen_controller and c != controller:
                        scan.changes.append(StateChange(t, "controller", "controller", controller, c))
                    controller, seen_controller = c, True
            key = s.get("key")
            if key is None:
                continue
            key = str(key)
            leader, isr = s.get("leader"), _nodes_tuple(s.get("isr"))
            before = prev.get(key)
            if before is None:
                scan.keys.append(key)
            else:
                if leader != before[0]:
                    scan.changes.append(
                        StateChange(t, key, "leader", before[0], leader, s.get("leader_epoch"))
                    )
                if isr != before[1] and isr is not None and before[1] is not None:
                    scan.changes.append(StateChange(t, key, "isr", list(before[1]), list(isr)))
            prev[key] = (leader, isr if isr is not None else (before[1] if before else None))
    scan.keys.sort(key=_key_order)
    scan.changes.sort(key=lambda c: c.time)
    return scan


def _key_order(key: str) -> tuple[str, int, str]:
    topic, _, part = key.rpartition("/")
    return (topic, int(part), "") if part.isdigit() else (key, -1, key)


@dataclass(frozen=True)
class FaultBand:
    f: str
    target: str
    """Short label of the targets (`n1,n2`, partition groups, …)."""
    value: Any
    start: int
    end: int | None
    """None: never healed within the history."""
    heal: str | None
    index: int
    """History index of the event that started it (-1 if unknown)."""
    error: Any = None
    """The nemesis's error if starting the fault failed (it may still have done something)."""


def _fault_nodes(value: Any) -> tuple[Any, ...]:
    if isinstance(value, dict):
        for k in ("nodes", "node", "targets", "target"):
            v = value.get(k)
            if isinstance(v, list) and all(isinstance(x, int | str) for x in v):
                return tuple(v)
            if isinstance(v, int) and not isinstance(v, bool):
                return (v,)
    elif isinstance(value, list) and all(isinstance(x, int) for x in value):
        return tuple(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    return ()


def _target_label(value: Any) -> str:
    """`n1,n2` for nodes, `[1]|[2,3]` for partition groups, plus a shape or link detail if given."""
    parts: list[str] = []
    if isinstance(value, dict):
        shape = value.get("shape")
        if isinstance(shape, str):
            parts.append(shape)
        groups = value.get("groups") or value.get("components")
        if isinstance(groups, list) and groups and all(isinstance(g, list) for g in groups):
            parts.append("|".join("[" + ",".join(str(n) for n in g) + "]" for g in groups))
    nodes = _fault_nodes(value)
    if nodes and not any(p.startswith("[") for p in parts):
        parts.append(",".join(f"n{n}" if isinstance(n, int) else str(n) for n in nodes))
    if isinstance(value, dict):
        for k in ("latency_ms", "latency", "rate", "bandwidth", "direction"):
            if k in value and isinstance(value[k], int | float | str) and not isinstance(value[k], bool):
                parts.append(f"{k}={value[k]}")
    if not parts and value not in (None, {}, [], True):
        parts.append(_short(value, 40))
    return " ".join(parts)


def _band(w: dict[str, Any]) -> FaultBand | None:
    start, end = w.get("start"), w.get("end")
    if not isinstance(start, int):
        return None
    heal = w.get("heal")
    index = w.get("index")
    return FaultBand(
        f=str(w.get("f")),
        target=_target_label(w.get("value") if w.get("value") is not None else w.get("nodes")),
        value=w.get("value"),
        start=start,
        end=end if isinstance(end, int) else None,
        heal=str(heal) if heal is not None else None,
        index=index if isinstance(index, int) else -1,
        error=w.get("error"),
    )


def fault_bands(
    events: Sequence[dict[str, Any]], end_time: int, results: dict[str, Any] | None = None
) -> list[FaultBand]:
    """The run's fault windows, paired exactly as the verdicts saw them: `results.json`'s `faults.windows`
    when the run was checked, else `checker.faults_from_history` on the history's nemesis events (which
    heal ends which fault is the checker's rule, kept in one place)."""
    windows = _dict(_dict(results).get("faults")).get("windows")
    if isinstance(windows, list):
        bands = [b for b in (_band(w) for w in windows if isinstance(w, dict)) if b is not None]
    else:
        from kafka_chaos.checker.faults import faults_from_history
        from kafka_chaos.checker.tables import NemesisEvent

        has_error = "error" in getattr(NemesisEvent, "__dataclass_fields__", {})
        nemesis = [
            NemesisEvent(
                e["index"],
                e["time"],
                str(e["type"]),
                e["f"],
                e["value"],
                *([e["error"]] if has_error else []),
            )
            for e in events
        ]
        summary = faults_from_history(nemesis, end_time=end_time)
        bands = [b for b in (_band(w.to_dict()) for w in summary.windows) if b is not None]
    bands.sort(key=lambda b: (b.start, b.index))
    return bands


@dataclass
class RunData:
    """Everything the page shows, read from a run directory."""

    run_dir: Path
    results: dict[str, Any] | None
    results_error: str | None
    config: dict[str, Any] | None
    config_source: str | None
    config_error: str | None
    history: HistoryScan
    state: StateScan
    faults: list[FaultBand]
    logs: list[tuple[str, int]]
    """(relative path, size in bytes) of the node logs."""
    files: list[tuple[str, int]]
    """(name, size) of the run's other files that exist."""
    max_instances: int

    @property
    def duration_ns(self) -> int:
        d = self.history.end_time
        stats = (self.results or {}).get("stats")
        if isinstance(stats, dict) and isinstance(stats.get("duration_ns"), int):
            d = max(d, stats["duration_ns"])
        if self.history.present:
            return d
        return max(d, self.state.end_time)


def _read_json(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    if not path.is_file():
        return None, None
    try:
        data = json.loads(path.read_bytes())
    except (OSError, ValueError) as e:
        return None, f"cannot read {path.name}: {e}"
    if not isinstance(data, dict):
        return None, f"{path.name} is not a JSON object"
    return data, None


def _instances(results: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
    """Every listed anomaly instance by name: `anomalies`, plus `conformance` if results carry it apart."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not results:
        return out
    anomalies = results.get("anomalies")
    if isinstance(anomalies, dict):
        for name, insts in anomalies.items():
            if isinstance(insts, list):
                out[str(name)] = [i for i in insts if isinstance(i, dict)]
    conf = results.get("conformance")
    if isinstance(conf, dict):
        src = _dict(conf.get("anomalies")) or conf
        for name, insts in src.items():
            if isinstance(insts, list):
                out.setdefault(str(name), [i for i in insts if isinstance(i, dict)])
    elif isinstance(conf, list):
        for inst in conf:
            if isinstance(inst, dict):
                out.setdefault(str(inst.get("name", "conformance")), []).append(inst)
    return out


def _shown(insts: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first n instances, violations first."""
    return sorted(insts, key=lambda i: i.get("verdict") != "violation")[:n]


def _cited_ops(results: dict[str, Any] | None, max_instances: int) -> set[int]:
    wanted: set[int] = set()
    for insts in _instances(results).values():
        for inst in _shown(insts, max_instances):
            ops = inst.get("ops")
            if isinstance(ops, list):
                wanted.update(o for o in ops[:MAX_OPS_SHOWN] if isinstance(o, int))
    return wanted


def load_run(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> RunData:
    """Read what the report needs from a run directory (any file may be missing)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise KafkaChaosError(f"no run directory at {run_dir}: pass a results/<run>/ directory")
    results, results_error = _read_json(run_dir / RESULTS_FILE)
    history = scan_history(run_dir / HISTORY_FILE, _cited_ops(results, max_instances))
    state = scan_state(run_dir / STATE_FILE)

    config: dict[str, Any] | None = None
    config_source = config_error = None
    scenario = run_dir / SCENARIO_FILE
    if scenario.is_file():
        try:
            config, config_source = tomllib.loads(scenario.read_text(errors="replace")), SCENARIO_FILE
        except (OSError, tomllib.TOMLDecodeError) as e:
            config_error = f"cannot read {SCENARIO_FILE}: {e}"
    if config is None and history.run_start is not None:
        config, config_source = history.run_start, "history run-start event"

    logs: list[tuple[str, int]] = []
    logs_dir = run_dir / LOGS_DIR
    if logs_dir.is_dir():
        for p in sorted(logs_dir.rglob("*"), key=lambda p: _key_order(p.stem)):
            if p.is_file():
                logs.append((p.relative_to(run_dir).as_posix(), p.stat().st_size))
    files = [
        (name, (run_dir / name).stat().st_size)
        for name in (
            SCENARIO_FILE,
            HISTORY_FILE,
            STATE_FILE,
            RESULTS_FILE,
            "sends.parquet",
            "polls.parquet",
            "junit.xml",
        )
        if (run_dir / name).is_file()
    ]
    end = max(history.end_time, state.end_time)
    return RunData(
        run_dir=run_dir,
        results=results,
        results_error=results_error,
        config=config,
        config_source=config_source,
        config_error=config_error,
        history=history,
        state=state,
        faults=fault_bands(history.nemesis, end, results),
        logs=logs,
        files=files,
        max_instances=max_instances,
    )


# -- small formatting helpers --------------------------------------------------------------------------------


def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def _short(v: Any, limit: int = 80) -> str:
    try:
        s = json.dumps(v, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        s = str(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def _list_short(v: Any, n: int = MAX_VALUES_SHOWN) -> str:
    if isinstance(v, list):
        head = ", ".join(_short(x, 30) for x in v[:n])
        return f"[{head}{f', … +{len(v) - n} more' if len(v) > n else ''}]"
    return _short(v)


def _secs(ns: Any) -> str:
    if not isinstance(ns, int | float) or isinstance(ns, bool):
        return "?"
    return f"{ns / 1e9:.3f}s"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _href(rel: str) -> str:
    return esc(quote(rel))


def _get(cfg: dict[str, Any] | None, *paths: str) -> Any:
    """The first of dotted `paths` present in cfg (None if none)."""
    for p in paths:
        cur: Any = cfg
        for part in p.split("."):
            if not isinstance(cur, dict) or part not in cur:
                cur = None
                break
            cur = cur[part]
        if cur is not None:
            return cur
    return None


def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _onoff(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)


# -- the timeline (inline SVG) -------------------------------------------------------------------------------

SVG_W = 1200
X0 = 92
X1 = SVG_W - 20
FAULT_COLORS = {
    "kill": "#d62728",
    "stop": "#8c1c13",
    "pause": "#9467bd",
    "partition": "#ff7f0e",
}
LINK_COLOR = "#17becf"
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
    if f in FAULT_COLORS:
        return FAULT_COLORS[f]
    if f in LINK_FAULTS:
        return LINK_COLOR
    return OTHER_COLOR


def _nice_step(span: float, target: int = 8) -> float:
    if span <= 0:
        return 1.0
    raw = span / target
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if raw <= m * mag:
            return float(m * mag)
    return float(10 * mag)


def _nice_max(v: float) -> float:
    if v <= 0:
        return 1.0
    step = _nice_step(v, 4)
    return float(math.ceil(v / step) * step)


def _fmt_num(v: float) -> str:
    if v >= 10_000:
        return f"{v / 1000:.0f}k"
    if v >= 1000:
        return f"{v / 1000:.1f}k"
    return f"{v:g}"


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


class Timeline:
    """x scale shared by every panel."""

    def __init__(self, duration_s: float) -> None:
        self.duration = max(duration_s, 1.0)

    def x(self, t_s: float) -> float:
        return X0 + (X1 - X0) * min(max(t_s, 0.0), self.duration) / self.duration

    def series_points(
        self, values: Sequence[float], y: Callable[[float], float], offset: float = 0.5, bucket_s: float = 1.0
    ) -> list[tuple[float, float]]:
        return [(self.x(i * bucket_s + offset * bucket_s), y(v)) for i, v in enumerate(values)]


def _y_axis(svg: Svg, top: float, h: float, ymax: float, label: str) -> Callable[[float], float]:
    def y(v: float) -> float:
        return top + h - h * min(max(v, 0.0), ymax) / ymax

    step = _nice_step(ymax, 3)
    v = 0.0
    while v <= ymax + 1e-9:
        yy = y(v)
        svg.line(X0, yy, X1, yy, "#e5e5e5")
        svg.text(X0 - 6, yy + 3.5, _fmt_num(v), cls="tick", anchor="end")
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
    ymax = _nice_max(max(max(v) for _, _, v, _ in series))

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


def _percentile(sorted_vals: list[int], q: float) -> int:
    k = max(0, min(len(sorted_vals) - 1, math.ceil(q * len(sorted_vals)) - 1))
    return sorted_vals[k]


def _latency_panel(data: RunData, tl: Timeline) -> Panel | None:
    lat = data.history.latency
    if not lat:
        return None
    p50: list[tuple[int, float]] = []
    p99: list[tuple[int, float]] = []
    mx: list[tuple[int, float]] = []
    for sec in sorted(lat):
        vals = sorted(lat[sec])
        p50.append((sec, _percentile(vals, 0.5) / 1e6))
        p99.append((sec, _percentile(vals, 0.99) / 1e6))
        mx.append((sec, vals[-1] / 1e6))
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
            svg.text(X0 - 6, yy + 3.5, _fmt_num(10.0**e), cls="tick", anchor="end")
        svg.text(24, top + h / 2, "ms (log scale)", cls="axis", anchor="middle", vertical=True)
        for pts, color, dash, label in (
            (mx, "#c7c7c7", "1 2", "max"),
            (p99, "#d62728", "", "p99"),
            (p50, "#1f77b4", "", "p50"),
        ):
            svg.polyline(
                [(tl.x(s + 0.5), y(v)) for s, v in pts], color, 1.5, dash, title=f"send latency {label}"
            )

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
        insts = _instances(data.results).get("unseen", [])
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

    ymax = _nice_max(max(max(v) if v else 0 for _, _, v, _ in series))

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
                what = f"ISR {_short(c.old)} → {_short(c.new)}"
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


def _instance_time(inst: dict[str, Any]) -> int | None:
    for k in ("times", "invoke_time", "time", "first_time"):
        v = inst.get(k)
        if isinstance(v, list):
            v = next((t for t in v if isinstance(t, int)), None)
        if isinstance(v, int) and not isinstance(v, bool):
            return v
    return None


def _anomaly_panel(data: RunData, tl: Timeline) -> Panel | None:
    """One marker per anomaly instance, at the time of its first op: red for violations."""
    marks: list[tuple[int, str, str, bool]] = []
    for name, insts in _instances(data.results).items():
        for inst in insts:
            t = _instance_time(inst)
            if t is not None:
                marks.append((t, name, str(inst.get("key", "")), inst.get("verdict") == "violation"))
    if not marks:
        return None
    marks.sort(key=lambda m: (m[3], m[0]))  # violations drawn last, on top
    if len(marks) > MAX_MARKS:
        marks = marks[-MAX_MARKS:]

    def draw(svg: Svg, top: float, h: float) -> None:
        svg.rect(X0, top + 1, X1 - X0, h - 2, "#f6f6f6")
        for t, name, key, violation in marks:
            x = tl.x(t / 1e9)
            color = "#b3261e" if violation else "#8a9aa5"
            verdict = "violation" if violation else "permitted"
            tip = esc(f"t={t / 1e9:.3f}s {name} {key}: {verdict}")
            y0, y1 = top + 3, top + h - 3
            svg.add(
                f'<path d="M{x - 5:.1f},{y0:.1f} L{x + 5:.1f},{y0:.1f} L{x:.1f},{y1:.1f} Z" '
                f'fill="{color}" fill-opacity="0.85"><title>{tip}</title></path>'
            )

    return Panel(
        "Anomaly instances, at their first op",
        18,
        draw,
        [("violation", "#b3261e", ""), ("permitted", "#8a9aa5", "")],
    )


def _label_lanes(bands: list[FaultBand], tl: Timeline) -> list[int]:
    """A label lane per band, so that labels do not overlap (at most 6 lanes)."""
    ends: list[float] = []
    lanes: list[int] = []
    for b in bands:
        x = tl.x(b.start / 1e9)
        width = 7.0 * len(_band_label(b)) + 10
        for i, e in enumerate(ends):
            if e <= x:
                ends[i] = x + width
                lanes.append(i)
                break
        else:
            if len(ends) < 6:
                ends.append(x + width)
                lanes.append(len(ends) - 1)
            else:
                i = min(range(len(ends)), key=lambda j: ends[j])
                ends[i] = x + width
                lanes.append(i)
    return lanes


def _band_label(b: FaultBand) -> str:
    return f"{b.f} {b.target}".strip()


def timeline_svg(data: RunData) -> str:
    """The run on one time axis: fault bands over throughput, latency, unseen and leader/ISR panels."""
    duration_s = data.duration_ns / 1e9
    tl = Timeline(duration_s)
    panels = [p for p in (_throughput_panel(data, tl), _latency_panel(data, tl)) if p is not None]
    panels += [_unseen_panel(data, tl), _state_panel(data, tl)]
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

    # fault bands behind everything
    for b, lane in zip(data.faults, lanes, strict=True):
        x1 = tl.x(b.start / 1e9)
        x2 = tl.x((b.end if b.end is not None else data.duration_ns) / 1e9)
        color = _fault_color(b.f)
        healed = f"healed by {b.heal} at {b.end / 1e9:.3f}s" if b.end is not None else "never healed"
        tip = (
            f"{_band_label(b)}: {b.start / 1e9:.3f}s → {healed} (history #{b.index}); "
            f"value {_short(b.value, 120)}" + (f"; error {_short(b.error, 120)}" if b.error else "")
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

    # time axis
    step = _nice_step(tl.duration, 12)
    t = 0.0
    while t <= tl.duration + 1e-9:
        x = tl.x(t)
        svg.line(x, fault_top, x, plot_bottom, "#000", 0.5, ' stroke-opacity="0.08"')
        svg.line(x, axis_y, x, axis_y + 5, "#555")
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

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:#1b1b1b;
 margin:0;background:#fafafa}
main{max-width:1240px;margin:0 auto;padding:16px 20px 60px}
h1{font-size:20px;margin:4px 0 10px}h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #ddd;
 padding-bottom:4px}h3{font-size:15px;margin:18px 0 6px}
.verdict{display:flex;align-items:center;gap:18px;padding:14px 18px;border-radius:8px;color:#fff;margin:8px 0}
.verdict .big{font-size:34px;font-weight:800;letter-spacing:1px}
.verdict.pass{background:#1e7d32}.verdict.fail{background:#b3261e}.verdict.unknown{background:#6b6b6b}
.verdict .sub{font-size:15px}
.config{font:13px/1.5 ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#fff;
 border:1px solid #ddd;padding:8px 12px;border-radius:6px}
.banner{padding:10px 14px;border-radius:6px;margin:10px 0;border:1px solid}
.banner.warn{background:#fff4d6;border-color:#e0b000}.banner.note{background:#eef3fb;border-color:#9db4dd}
.banner.ok{background:#e7f5e9;border-color:#8cc79a}
table{border-collapse:collapse;background:#fff;font-size:13px;margin:4px 0 8px}
th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f0f0f0}td.num,th.num{text-align:right}
.badge{display:inline-block;padding:0 6px;border-radius:3px;font-size:12px;font-weight:600;color:#fff}
.badge.violation{background:#b3261e}.badge.permitted{background:#5f7d8c}.badge.unknown{background:#999}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12px}
.ops{margin:0;padding:0;list-style:none}.ops li{white-space:nowrap}
pre{background:#fff;border:1px solid #ddd;padding:6px 8px;overflow-x:auto;font-size:12px;margin:4px 0}
details>summary{cursor:pointer;color:#1f4e9b}
.timeline-wrap{overflow-x:auto;background:#fff;border:1px solid #ddd;border-radius:6px}
svg.timeline text{font-family:system-ui,Arial,sans-serif}
svg.timeline .tick{font-size:11px;fill:#555}svg.timeline .axis{font-size:11px;fill:#555}
svg.timeline .ptitle{font-size:13px;font-weight:600;fill:#222}svg.timeline .legend{font-size:11.5px;fill:#333}
svg.timeline .flabel{font-size:11.5px;fill:#111;font-weight:600}svg.timeline .muted{font-size:12px;fill:#888}
.muted{color:#777}.grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(270px,1fr));gap:8px 18px;
 margin:10px 0}
.kv .k{display:block;font-size:11px;text-transform:uppercase;letter-spacing:.4px;color:#666}
a{color:#1f4e9b}
"""


def _config_line(data: RunData) -> str:
    cfg = data.config
    if cfg is None:
        return "configuration unknown (no scenario.toml and no run-start event in the history)"
    nodes = _get(cfg, "cluster.nodes", "nodes", "cluster.brokers")
    if isinstance(nodes, list):
        nodes = len(nodes)
    controllers = _get(cfg, "cluster.controllers", "controllers")
    if isinstance(controllers, list):
        controllers = len(controllers)
    idem = _get(cfg, "workload.idempotence", "workload.enable_idempotence", "idempotence")
    unclean = _get(cfg, "topic.unclean_leader_election", "unclean_leader_election", "topic.unclean")
    parts = [
        f"Kafka {_get(cfg, 'cluster.kafka_version', 'kafka_version', 'cluster.version', 'version') or '?'}",
        f"{nodes if nodes is not None else '?'} nodes"
        + (f" ({controllers} controllers)" if controllers is not None else ""),
        f"{_get(cfg, 'topic.partitions', 'partitions') or '?'} partitions",
        f"RF {_get(cfg, 'topic.replication_factor', 'replication_factor', 'topic.rf') or '?'}",
        f"min.insync {_get(cfg, 'topic.min_insync_replicas', 'min_insync_replicas', 'topic.min_isr') or '?'}",
        f"acks={_get(cfg, 'workload.acks', 'acks', 'producer.acks') or '?'}",
        f"idempotence {_onoff(idem)}",
        f"unclean {_onoff(unclean)}",
        f"ELR {_onoff(_get(cfg, 'cluster.elr', 'elr', 'cluster.eligible_leader_replicas'))}",
    ]
    extra = []
    for k, label in (("seed", "seed"), ("duration_s", "duration")):
        v = _get(cfg, k, f"run.{k}")
        if v is not None:
            extra.append(f"{label} {v}{'s' if k == 'duration_s' else ''}")
    return " · ".join(parts + extra)


def _verdict_html(data: RunData) -> str:
    r = data.results
    name = _get(data.config, "name") or data.run_dir.name
    out = [f'<h1>kafka-chaos run <span class="mono">{esc(data.run_dir.name)}</span></h1>']
    if r is None:
        out.append(
            '<div class="verdict unknown" id="verdict"><span class="big">NOT CHECKED</span>'
            f'<span class="sub">{esc(data.results_error or "no results.json")}: run '
            f"<code>kafka-chaos check {esc(data.run_dir)}</code> to get a verdict</span></div>"
        )
    else:
        violations = _list(r.get("violations"))
        failed = bool(violations)
        counts = _dict(r.get("anomaly_counts"))
        total = sum(v for v in counts.values() if isinstance(v, int) and not isinstance(v, bool))
        by_name = Counter(str(v.get("name", "?")) for v in violations if isinstance(v, dict))
        detail = ", ".join(f"{n} × {c}" for n, c in by_name.most_common())
        out.append(
            f'<div class="verdict {"fail" if failed else "pass"}" id="verdict">'
            f'<span class="big">{"FAIL" if failed else "PASS"}</span><span class="sub">'
            f"<b>{len(violations)} violation{'s' if len(violations) != 1 else ''}</b>"
            f"{(' (' + esc(detail) + ')') if detail else ''} · "
            f"{total} anomaly instance{'s' if total != 1 else ''}"
            f" · Jepsen valid: {esc(_short(r.get('valid')))} · scenario {esc(name)}</span></div>"
        )
    src = f' <span class="muted">(from {esc(data.config_source)})</span>' if data.config_source else ""
    out.append(f'<div class="config" id="config">{esc(_config_line(data))}{src}</div>')
    out.extend(_banners(data))
    return "\n".join(out)


def _banners(data: RunData) -> list[str]:
    out: list[str] = []
    r, h = data.results, data.history
    complete = r.get("complete") if r is not None else None
    if complete is None and h.present:
        complete = h.drain_complete is True and not h.cut_last_line
    if complete is False:
        why = []
        if h.present and h.drain_complete is not True:
            why.append("the history has no <code>drain-complete: true</code> event")
        if h.cut_last_line:
            why.append("its last line was cut mid-write (ignored)")
        out.append(
            '<div class="banner warn" id="incomplete"><b>Incomplete run.</b> The run was cut short or its '
            "final drain read did not finish"
            + (" (" + "; ".join(why) + ")" if why else "")
            + ", so acknowledged values that no read returned are expected to show as <i>unseen</i>: "
            "unseen alone does not mean loss here. <code>lost-write</code> and the other anomalies still "
            "hold.</div>"
        )
    elif complete is True:
        out.append('<div class="banner ok" id="complete">Complete run: the final drain read finished.</div>')
    missing = []
    if not h.present:
        missing.append("history.jsonl (no timeline data, no op details)")
    if not data.state.present:
        missing.append("state.jsonl (no leader/ISR marks)")
    if r is None:
        missing.append("results.json (not checked)" if data.results_error is None else data.results_error)
    if data.config is None:
        missing.append(data.config_error or "scenario.toml")
    elif data.config_error:
        missing.append(data.config_error + " (configuration taken from the history)")
    if missing:
        out.append(
            '<div class="banner note" id="missing"><b>Missing or unreadable:</b> '
            + "; ".join(esc(m) for m in missing)
            + ". The report shows what exists.</div>"
        )
    if h.bad_lines:
        lines = ", ".join(str(n) for n in h.bad_lines[:10]) + (" …" if len(h.bad_lines) > 10 else "")
        out.append(
            f'<div class="banner warn">history.jsonl has {len(h.bad_lines)} malformed line(s) '
            f"(skipped): {esc(lines)}.</div>"
        )
    return out


def _summary_html(data: RunData) -> str:
    h, r = data.history, data.results or {}
    items: list[tuple[str, str]] = [("duration", f"{data.duration_ns / 1e9:.1f} s")]
    if h.present:
        items.append(("history events", f"{h.events:,}"))
        for f in ("send", "poll", "txn"):
            by = {
                t: sum(n for (ff, tt, _), n in h.counts.items() if ff == f and tt == t)
                for t in ("ok", "fail", "info")
            }
            if any(by.values()):
                items.append((f"{f} ops", f"{by['ok']:,} ok · {by['fail']:,} fail · {by['info']:,} info"))
        if h.unfinished:
            items.append(("never completed", ", ".join(f"{n} {f}" for f, n in sorted(h.unfinished.items()))))
    stats = _dict(r.get("stats"))
    rec = _dict(stats.get("records"))
    if rec:
        sent = _dict(rec.get("sent"))
        items.append(
            (
                "records sent",
                f"{sent.get('ok', '?')} ok · {sent.get('fail', '?')} fail · {sent.get('info', '?')} info",
            )
        )
        items.append(("records read", f"{rec.get('polled', '?')} ({rec.get('distinct_read', '?')} distinct)"))
    lag = _dict(stats.get("realtime_lag"))
    if lag and lag.get("samples"):
        items.append(
            (
                "consumer lag",
                f"p50 {_secs(lag.get('p50_ns'))} · p99 {_secs(lag.get('p99_ns'))} · "
                f"max {_secs(lag.get('max_ns'))}",
            )
        )
    items.append(
        (
            "faults",
            f"{len(data.faults)}"
            + (f" ({', '.join(sorted({b.f for b in data.faults}))})" if data.faults else ""),
        )
    )
    if data.state.present:
        kinds = Counter(c.kind for c in data.state.changes)
        items.append(
            (
                "state changes",
                f"{kinds['leader']} leader · {kinds['isr']} ISR · {kinds['controller']} controller",
            )
        )
    cells = "".join(f'<div class="kv"><span class="k">{esc(k)}</span>{esc(v)}</div>' for k, v in items)
    return f'<div class="grid" id="summary">{cells}</div>'


def _op_cell(idx: int, data: RunData) -> str:
    line = data.history.lines.get(idx)
    if line is None:
        return f'<li><a href="{HISTORY_FILE}">#{idx}</a> <span class="muted">(not in history)</span></li>'
    inv = line if line.type == "invoke" else data.history.lines.get(data.history.partner.get(idx, -1))
    comp = data.history.lines.get(data.history.partner.get(idx, -1)) if line.type == "invoke" else line
    outcome = (
        f"{inv.type}→{comp.type}" if inv is not None and comp is not None and inv is not comp else line.type
    )
    return (
        f'<li><a href="#h{idx}" title="history.jsonl line {line.line}">#{idx}</a> '
        f"t={esc(_secs(line.time))} p={esc(line.process)} {esc(line.f)} {esc(outcome)}</li>"
    )


KNOWN_FIELDS = (
    "key",
    "value",
    "values",
    "count",
    "offset",
    "offsets",
    "ops",
    "times",
    "verdict",
    "reason",
    "name",
    "bad",
)


def _detail(name: str, v: Any) -> str:
    """An instance's extra field, times (`*_time`, ns since the run started) in seconds."""
    if name.endswith("_time") and isinstance(v, int) and not isinstance(v, bool):
        return _secs(v)
    return _short(v, 60)


def _instance_rows(insts: list[dict[str, Any]], data: RunData) -> str:
    rows = []
    for i, inst in enumerate(insts):
        vals = []
        if "value" in inst:
            vals.append(esc(_short(inst["value"], 40)))
        if "values" in inst:
            vals.append(esc(_list_short(inst["values"])))
        if isinstance(inst.get("count"), int):
            vals.append(f'<span class="muted">count {inst["count"]}</span>')
        offs = []
        if "offset" in inst:
            offs.append(esc(_short(inst["offset"], 40)))
        if "offsets" in inst:
            offs.append(esc(_list_short(inst["offsets"])))
        ops = _list(inst.get("ops"))
        op_items = "".join(_op_cell(o, data) for o in ops[:MAX_OPS_SHOWN] if isinstance(o, int))
        if len(ops) > MAX_OPS_SHOWN:
            op_items += f'<li class="muted">… +{len(ops) - MAX_OPS_SHOWN} more</li>'
        verdict = str(inst.get("verdict") or "unknown")
        vcls = verdict if verdict in ("violation", "permitted") else "unknown"
        other = {k: v for k, v in inst.items() if k not in KNOWN_FIELDS}
        other_html = "<br>".join(
            f'<span class="mono">{esc(k)}={esc(_detail(k, v))}</span>' for k, v in other.items()
        )
        excerpt = _excerpt([o for o in ops[:MAX_OPS_SHOWN] if isinstance(o, int)], data)
        rows.append(
            f'<tr class="anomaly-row"><td class="num">{i + 1}</td>'
            f'<td class="mono">{esc(inst.get("key", "—"))}</td>'
            f'<td class="mono">{"<br>".join(vals) or "—"}</td>'
            f'<td class="mono">{"<br>".join(offs) or "—"}</td>'
            f'<td><ul class="ops mono">{op_items or "—"}</ul>{excerpt}</td>'
            f'<td><span class="badge {vcls}">{esc(verdict)}</span></td><td>{esc(inst.get("reason", ""))}</td>'
            f"<td>{other_html}</td></tr>"
        )
    return "".join(rows)


def _excerpt(ops: list[int], data: RunData) -> str:
    idxs: set[int] = set()
    for o in ops:
        if o in data.history.lines:
            idxs.add(o)
            p = data.history.partner.get(o)
            if p is not None:
                idxs.add(p)
    if not idxs:
        return ""
    lines = sorted((data.history.lines[i] for i in idxs), key=lambda ln: ln.line)
    body = "\n".join(f"{ln.line:>8}  {ln.raw}" for ln in lines)
    return f"<details><summary>history lines</summary><pre>{esc(body)}</pre></details>"


INSTANCE_HEAD = (
    "<tr><th>#</th><th>key</th><th>value(s)</th><th>offset(s)</th><th>ops (index, time, process, f, "
    "outcome)</th><th>verdict</th><th>reason</th><th>details</th></tr>"
)


def _anomaly_sections(
    data: RunData,
    names: list[str],
    counts: dict[str, Any],
    insts: dict[str, list[dict[str, Any]]],
    violations: Counter[str],
) -> str:
    out = []
    for name in names:
        listed = insts.get(name, [])
        n = counts.get(name, len(listed))
        shown = _shown(listed, data.max_instances)
        vio = violations.get(name, 0)
        head = (
            f'<h3 id="a-{esc(name)}">{esc(name)} <span class="muted">— {esc(n)} instance(s), {vio} '
            f"violation(s){f'; showing {len(shown)}' if len(shown) < len(listed) else ''}</span></h3>"
        )
        if not shown:
            out.append(head + '<p class="muted">no instances listed in results.json</p>')
            continue
        out.append(
            f'{head}<table class="anomaly" data-anomaly="{esc(name)}">{INSTANCE_HEAD}'
            f"{_instance_rows(shown, data)}</table>"
        )
    return "\n".join(out)


def _anomalies_html(data: RunData) -> str:
    r = data.results
    if r is None:
        return '<h2 id="anomalies">Anomalies</h2><p class="muted">not available: no results.json.</p>'
    counts_raw = r.get("anomaly_counts")
    counts: dict[str, Any] = dict(counts_raw) if isinstance(counts_raw, dict) else {}
    insts = _instances(r)
    for name, listed in insts.items():
        counts.setdefault(name, len(listed))
    violations = Counter(str(v.get("name")) for v in _list(r.get("violations")) if isinstance(v, dict))
    order = list(counts)
    names = sorted(
        (n for n in order if n not in CONFORMANCE_NAMES and (counts.get(n) or insts.get(n))),
        key=lambda n: (-violations.get(n, 0), order.index(n)),
    )
    out = ['<h2 id="anomalies">Anomalies (Jepsen names, Kafka verdicts)</h2>']
    if not names:
        out.append('<p id="no-anomalies">No anomalies found.</p>')
        return "\n".join(out)
    rows = "".join(
        f'<tr><td><a href="#a-{esc(n)}">{esc(n)}</a></td><td class="num">{esc(counts.get(n, 0))}</td>'
        f'<td class="num">{violations.get(n, 0)}</td></tr>'
        for n in names
    )
    out.append(
        f'<table id="anomaly-counts"><tr><th>anomaly</th><th class="num">count</th>'
        f'<th class="num">violations</th></tr>{rows}</table>'
    )
    out.append(_anomaly_sections(data, names, counts, insts, violations))
    return "\n".join(out)


def _model_html(data: RunData) -> str:
    r = data.results
    out = ['<h2 id="conformance">Model conformance</h2>']
    if r is None:
        out.append('<p class="muted">not available: no results.json.</p>')
        return "\n".join(out)
    counts_raw = r.get("anomaly_counts")
    counts: dict[str, Any] = dict(counts_raw) if isinstance(counts_raw, dict) else {}
    insts = _instances(r)
    names = [
        n
        for n in dict.fromkeys([*CONFORMANCE_NAMES, *insts])
        if n in CONFORMANCE_NAMES
        or (
            isinstance(r.get("conformance"), dict | list)
            and n in insts
            and n not in (r.get("anomalies") or {})
        )
    ]
    found = [n for n in names if counts.get(n) or insts.get(n)]
    checked = "conformance" in r or any(n in counts for n in CONFORMANCE_NAMES)
    violations = Counter(str(v.get("name")) for v in _list(r.get("violations")) if isinstance(v, dict))
    if found:
        out.append(_anomaly_sections(data, found, counts, insts, violations))
    elif checked:
        out.append(
            "<p>Observed behaviour conforms to the reference model: none of "
            + ", ".join(f"<code>{esc(n)}</code>" for n in CONFORMANCE_NAMES)
            + ".</p>"
        )
    else:
        out.append(
            '<p class="muted">Conformance checks: not available (results.json carries none of '
            + ", ".join(f"<code>{esc(n)}</code>" for n in CONFORMANCE_NAMES)
            + ").</p>"
        )
    model = r.get("model")
    out.append("<h3>Expected (reference model) vs observed</h3>")
    if isinstance(model, dict) and model:
        pred, obs = model.get("prediction", model.get("expected")), model.get("observed")
        if isinstance(pred, dict) or isinstance(obs, dict):
            p = pred if isinstance(pred, dict) else {}
            o = obs if isinstance(obs, dict) else {}
            rows = []
            for k in dict.fromkeys([*p, *o]):
                pv, ov = p.get(k, "—"), o.get(k, "—")
                mismatch = k in p and k in o and pv != ov
                style = ' style="background:#fde8e6"' if mismatch else ""
                rows.append(
                    f'<tr{style}><td>{esc(k)}</td><td class="mono">{esc(_short(pv, 200))}</td>'
                    f'<td class="mono">{esc(_short(ov, 200))}</td></tr>'
                )
            out.append(
                f'<table id="model"><tr><th>aspect</th><th>model predicts</th><th>observed</th></tr>'
                f"{''.join(rows)}</table>"
            )
            rest = {k: v for k, v in model.items() if k not in ("prediction", "expected", "observed")}
        else:
            rest = model
        if rest:
            rows = [
                f'<tr><td>{esc(k)}</td><td class="mono">{esc(_short(v, 300))}</td></tr>'
                for k, v in rest.items()
            ]
            out.append(f"<table>{''.join(rows)}</table>")
    else:
        out.append('<p class="muted">not available: results.json has no <code>model</code> summary.</p>')
    return "\n".join(out)


def _faults_html(data: RunData) -> str:
    if not data.faults:
        return ""
    rows = "".join(
        f'<tr><td class="num">{b.start / 1e9:.3f}</td><td class="num">'
        f"{f'{b.end / 1e9:.3f}' if b.end is not None else 'never healed'}</td>"
        f'<td><span style="color:{_fault_color(b.f)}">■</span> {esc(b.f)}</td>'
        f'<td class="mono">{esc(b.target)}</td>'
        f'<td>{esc(b.heal or "—")}</td><td class="mono">{esc(_short(b.value, 100))}</td>'
        f'<td class="mono">{esc(_short(b.error, 100)) if b.error else ""}</td>'
        f'<td class="num">{b.index}</td></tr>'
        for b in data.faults
    )
    return (
        '<details id="fault-table"><summary>Fault schedule as it happened '
        f"({len(data.faults)} faults)</summary><table><tr><th>start s</th><th>end s</th><th>fault</th>"
        f"<th>targets</th><th>healed by</th><th>value</th><th>error</th><th>history #</th></tr>{rows}"
        "</table></details>"
    )


def _state_changes_html(data: RunData, limit: int = 200) -> str:
    ch = data.state.changes
    if not ch:
        return ""
    rows = "".join(
        f'<tr><td class="num">{c.time / 1e9:.3f}</td><td class="mono">{esc(c.key)}</td><td>{esc(c.kind)}</td>'
        f'<td class="mono">{esc(_short(c.old))} → {esc(_short(c.new))}</td>'
        f'<td class="num">{esc(c.epoch if c.epoch is not None else "")}</td></tr>'
        for c in ch[:limit]
    )
    more = f" (first {limit} of {len(ch)})" if len(ch) > limit else ""
    return (
        f'<details id="state-changes"><summary>Leader / ISR / controller changes{more}</summary><table>'
        f"<tr><th>time s</th><th>key</th><th>what</th><th>change</th><th>leader epoch</th></tr>{rows}"
        "</table></details>"
    )


def _files_html(data: RunData) -> str:
    out = ['<h2 id="logs">Node logs and files</h2>']
    if data.logs:
        items = "".join(
            f'<li><a class="log" href="{_href(rel)}">{esc(rel)}</a> '
            f'<span class="muted">{esc(_size(size))}</span></li>'
            for rel, size in data.logs
        )
        out.append(f"<ul>{items}</ul>")
    else:
        out.append('<p class="muted">No node logs (no logs/ folder in the run directory).</p>')
    if data.files:
        items = "".join(
            f'<li><a href="{_href(name)}">{esc(name)}</a> <span class="muted">{esc(_size(size))}</span></li>'
            for name, size in data.files
        )
        out.append(f"<ul>{items}</ul>")
    return "\n".join(out)


def _history_appendix(data: RunData) -> str:
    lines = sorted(data.history.lines.values(), key=lambda ln: ln.line)
    if not lines:
        return ""
    rows = "".join(
        f'<tr id="h{ln.index}"><td class="num">{ln.index}</td><td class="num">{ln.line}</td>'
        f'<td class="mono">{esc(ln.raw)}</td></tr>'
        for ln in lines
    )
    return (
        f'<h2 id="history">History lines cited above</h2><p class="muted">From <a href="{HISTORY_FILE}">'
        f"{HISTORY_FILE}</a> (line = index + 1 in a well-formed history).</p>"
        f"<table><tr><th>index</th><th>line</th><th>event</th></tr>{rows}</table>"
    )


def render_html(data: RunData) -> str:
    """The report page for the data of one run."""
    title = f"kafka-chaos — {data.run_dir.name}"
    r = data.results
    if r is not None:
        title = ("FAIL" if r.get("violations") else "PASS") + " · " + title
    body = [
        _verdict_html(data),
        _summary_html(data),
        '<h2 id="timeline">Timeline</h2>',
        '<p class="muted">Shaded bands: faults, from when each took effect to when its heal did (hover for '
        "details). Every panel shares the time axis (seconds since the run started).</p>",
        f'<div class="timeline-wrap">{timeline_svg(data)}</div>',
        _faults_html(data),
        _state_changes_html(data),
        _anomalies_html(data),
        _model_html(data),
        _files_html(data),
        _history_appendix(data),
    ]
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta http-equiv="Content-Security-Policy" content="default-src \'none\'; '
        "style-src 'unsafe-inline'; img-src data:\">"
        f"<title>{esc(title)}</title><style>{CSS}</style></head><body><main>\n"
        + "\n".join(b for b in body if b)
        + "\n</main></body></html>\n"
    )


def render_report(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> str:
    """The report page of a run directory, as a string."""
    return render_html(load_run(run_dir, max_instances=max_instances))


def write_report(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> Path:
    """Write `run_dir/report.html` (atomically) and return its path."""
    run_dir = Path(run_dir)
    page = render_report(run_dir, max_instances=max_instances)
    out = run_dir / REPORT_FILE
    tmp = run_dir / (REPORT_FILE + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        raise KafkaChaosError(f"cannot write {out}: {e.strerror or e}") from e
    return out
