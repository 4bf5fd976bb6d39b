"""What the report reads from a run's folder (docs/architecture.md §2): results.json, the history, state.jsonl, the
resolved scenario, logs.

The history comes from `ops.parquet`, which a run stores with its tables (checker.stored_tables) and `kafka-chaos
check` writes after its one pass over history.jsonl (checker.tables.OPS_SCHEMA): the rest of HistoryScan and the
per-second series (checker.ops_series) are in its metadata, its index columns pair each line the anomaly tables
cite with its invoke or completion, and only those lines are read from history.jsonl, found by their index.
Without that file, or when history.jsonl changed since, the history reader (checker.history_reader) makes one
pass over history.jsonl instead (`scan_history`), skipping and listing malformed lines, and its result is read
the same way.

Every file is optional: `load_run` gathers what exists into a `RunData` and says what is missing.
"""

import html
import json
import tomllib
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from kafka_chaos.checker.history_reader import HARNESS, LOADS, HistoryReader, is_complete
from kafka_chaos.checker.ops_series import read_ops_series
from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.tables import OPS_SUMMARY_KEY, history_summary, tables_of
from kafka_chaos.errors import HistoryError, KafkaChaosError, ResultsError
from kafka_chaos.rundir import HISTORY_FILE, LOGS_DIR, OPS_FILE, RESULTS_FILE, SCENARIO_FILE, STATE_FILE, RunDir

DEFAULT_MAX_INSTANCES = 20
MAX_OPS_SHOWN = 6
"""Ops listed (and looked up in the history) per anomaly instance."""
MAX_VALUES_SHOWN = 12
BUCKET_NS = 1_000_000_000
RAW_LINE_CHARS = 400


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
    """Malformed lines other than a cut last line (1-based), skipped."""
    cut_last_line: bool = False
    run_start: dict[str, Any] | None = None
    drain_complete: bool | None = None
    drain_start: int | None = None
    """When the final read began (the harness's `drain-start`)."""
    nemesis: list[dict[str, Any]] = field(default_factory=list)
    fetch_from: list[dict[str, Any]] = field(default_factory=list)
    """Rack-aware consumers' `fetch-from` events (the replica each partition was fetched from), with `time`."""
    counts: Counter[tuple[str, str, int]] = field(default_factory=Counter)
    """(f, type, second) → completed client ops."""
    latency_percentiles: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    """second → (p50, p99, max) of the latencies (ns) of the sends that completed then (what the timeline draws)."""
    unfinished: Counter[str] = field(default_factory=Counter)
    lines: dict[int, OpLine] = field(default_factory=dict)
    """Cited lines by history index."""
    partner: dict[int, int] = field(default_factory=dict)
    """History index of an op's invoke ↔ its completion, for the cited ops."""
    error: str | None = None
    """Why the history could not be read, when it could not (then only `present` is set)."""

    @property
    def complete(self) -> bool:
        """The run is complete by the history reader's one definition (checker.history_reader.is_complete)."""
        return is_complete(self.drain_complete, truncated=self.cut_last_line, malformed=len(self.bad_lines))


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
    """One pass of the history reader over `history.jsonl` (no record tables; malformed lines skipped and listed),
    read as `scan_ops` reads `ops.parquet`. `wanted`: history indexes to keep the lines of, with their invoke /
    completion partners (none is kept when a cited line is not where its index says)."""
    if not path.is_file():
        return HistoryScan()
    reader = HistoryReader(records=False, on_bad_line=_skip)
    try:
        with path.open("rb", buffering=1 << 20) as fh:
            read = reader.read(fh, source=str(path))
    except (OSError, HistoryError) as e:
        return HistoryScan(present=True, error=str(e) if isinstance(e, HistoryError) else f"cannot read {path}: {e}")
    meta = tables_of(read).meta
    scan = _scan_of(history_summary(meta, path))
    scan.bad_lines = read.bad_lines
    want = set(wanted)
    if want:
        _cite(scan, path, meta.ops.select(["index", "invoke_index"]), want)
    return scan


def _skip(lineno: int, error: HistoryError) -> None:
    """The report draws what it can: a malformed line is listed (HistoryScan.bad_lines) and skipped."""


def scan_ops(run_dir: Path, wanted: Iterable[int] = ()) -> HistoryScan | None:
    """`scan_history`'s result from `ops.parquet` (see the module docstring), reading history.jsonl only for the
    lines `wanted` cites; None when the file is missing, unreadable, or older than history.jsonl, or when a cited
    line is not where its index says (a history whose indexes are not its line numbers)."""
    path, history = run_dir / OPS_FILE, run_dir / HISTORY_FILE
    try:
        # (ParquetFile, not pq.read_table: that imports pandas through pyarrow.dataset, ~0.4 s)
        ops_file = pq.ParquetFile(path)
        summary = json.loads((ops_file.schema_arrow.metadata or {})[OPS_SUMMARY_KEY])
        st = history.stat()
        if summary.get("history") != {"size": st.st_size, "mtime_ns": st.st_mtime_ns}:
            return None
        scan = _scan_of(summary)
    except (OSError, KeyError, ValueError, TypeError, pa.ArrowException):
        return None
    want = set(wanted)
    if want and not _cite(scan, history, ops_file.read(columns=["index", "invoke_index"]), want):
        return None
    return scan


def _scan_of(summary: dict[str, Any]) -> HistoryScan:
    """A HistoryScan from checker.tables.history_summary's dict (what `ops.parquet`'s metadata holds)."""
    counts, latency = read_ops_series(summary["series"])
    scan = HistoryScan(present=True, events=summary["events"], end_time=summary["end_time"],
                       cut_last_line=summary["truncated"], run_start=summary["run_start"],
                       drain_complete=summary["drain_complete"], drain_start=summary["drain_start"],
                       nemesis=summary["nemesis"], fetch_from=summary["fetch_from"],
                       unfinished=Counter(summary["unfinished"]))
    scan.counts.update(counts)
    if latency:
        scan.latency_percentiles = latency
    return scan


def _cite(scan: HistoryScan, history: Path, ops: pa.Table, want: set[int]) -> bool:
    """Pair each cited op with its invoke or completion (the ops' two index columns) and read those lines from
    history.jsonl, found by their index; False when one is not where its index says (then none is kept)."""
    index = ops.column("index").to_numpy()
    invoke = pc.fill_null(ops.column("invoke_index"), -1).to_numpy()
    cited = np.isin(index, list(want)) | np.isin(invoke, list(want))
    for done, inv in zip(index[cited].tolist(), invoke[cited].tolist(), strict=True):
        if inv >= 0:
            scan.partner[done], scan.partner[inv] = inv, done
    found = _lines_at(history, [i + 1 for i in sorted(want | set(scan.partner))])
    for lineno, line in found.items():
        try:
            ev = LOADS(line)
        except ValueError:
            continue
        if not isinstance(ev, dict) or ev.get("index", lineno - 1) != lineno - 1:
            scan.lines.clear()
            return False
        if ev.get("process") != HARNESS:  # the harness's events are not ops
            scan.lines[lineno - 1] = _op_line(ev, lineno - 1, lineno, line)
    return True


def _lines_at(path: Path, linenos: list[int]) -> dict[int, bytes]:
    """The lines at these (sorted, 1-based) numbers, found by counting newlines block by block, not by
    decoding the file."""
    out: dict[int, bytes] = {}
    i, line, carry = 0, 1, b""  # line: the number of the line that starts `carry`
    with path.open("rb") as fh:
        while i < len(linenos):
            block = fh.read(1 << 23)
            if not block:
                break
            data = carry + block
            n = data.count(b"\n")
            if linenos[i] >= line + n:
                carry = data[data.rfind(b"\n") + 1 :]
                line += n
                continue
            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
            starts = np.r_[0, ends + 1]
            while i < len(linenos) and linenos[i] < line + n:
                k = linenos[i] - line
                out[linenos[i]] = data[int(starts[k]) : int(ends[k]) + 1]
                i += 1
            carry = data[int(ends[-1]) + 1 :]
            line += n
    if i < len(linenos) and carry and linenos[i] == line:  # a last line without its newline
        out[line] = carry
    return out


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
                s = LOADS(line)
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
        api = value.get("api")  # request faults: which Kafka requests
        if isinstance(api, list) and api:
            parts.append("api=" + ",".join(str(a) for a in api))
        links = value.get("links")
        if isinstance(links, list) and links and all(isinstance(x, list) and len(x) >= 2 for x in links):
            # links between nodes (faults.node_links): each directed link once, whatever its listeners
            selector = value.get("selector")
            pairs = sorted({(a, b) for a, b, *_ in links}, key=str)
            parts.append((f"{selector}: " if isinstance(selector, str) else "")
                         + " ".join(f"{a}→{b}" for a, b in pairs))
    if not parts and value not in (None, {}, [], True):
        parts.append(short(value, 40))
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
    windows = as_dict(as_dict(results).get("faults")).get("windows")
    if isinstance(windows, list):
        bands = [b for b in (_band(w) for w in windows if isinstance(w, dict)) if b is not None]
    else:
        from kafka_chaos.checker.tables import NemesisEvent
        from kafka_chaos.faults.windows import faults_from_history

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
    cluster_events: list[dict[str, Any]] = field(default_factory=list)
    """The cluster's own events from its node logs (events.jsonl: time_s, node, kind, text)."""

    @property
    def duration_ns(self) -> int:
        d = self.history.end_time
        stats = (self.results or {}).get("stats")
        if isinstance(stats, dict) and isinstance(stats.get("duration_ns"), int):
            d = max(d, stats["duration_ns"])
        if self.history.present:
            return d
        return max(d, self.state.end_time)


def _read_results(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """results.json through RunResults.load: a file that is damaged or does not fit the model is reported as
    unreadable, saying why, rather than drawn from guesses; no file is no error (the run was not checked)."""
    if not path.is_file():
        return None, None
    try:
        return RunResults.load(path).to_json_dict(), None
    except ResultsError as e:
        return None, str(e).replace(str(path), path.name)


def instances_by_name(results: dict[str, Any] | None) -> dict[str, list[dict[str, Any]]]:
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
        src = as_dict(conf.get("anomalies")) or conf
        for name, insts in src.items():
            if isinstance(insts, list):
                out.setdefault(str(name), [i for i in insts if isinstance(i, dict)])
    elif isinstance(conf, list):
        for inst in conf:
            if isinstance(inst, dict):
                out.setdefault(str(inst.get("name", "conformance")), []).append(inst)
    return out


def shown(insts: list[dict[str, Any]], n: int) -> list[dict[str, Any]]:
    """The first n instances, violations first."""
    return sorted(insts, key=lambda i: i.get("verdict") != "violation")[:n]


def _cited_ops(results: dict[str, Any] | None, max_instances: int) -> set[int]:
    wanted: set[int] = set()
    for insts in instances_by_name(results).values():
        for inst in shown(insts, max_instances):
            ops = inst.get("ops")
            if isinstance(ops, list):
                wanted.update(o for o in ops[:MAX_OPS_SHOWN] if isinstance(o, int))
    return wanted


def load_run(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> RunData:
    """Read what the report needs from a run directory (any file may be missing)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise KafkaChaosError(f"no run directory at {run_dir}: pass a results/<run>/ directory")
    results, results_error = _read_results(run_dir / RESULTS_FILE)
    cited = _cited_ops(results, max_instances)
    history = scan_ops(run_dir, cited) or scan_history(run_dir / HISTORY_FILE, cited)
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
        cluster_events=read_cluster_events(RunDir(run_dir).events),
    )


def read_cluster_events(path: Path) -> list[dict[str, Any]]:
    """events.jsonl, leniently: a line that is not an event with a time is skipped (it is evidence on the side)."""
    if not path.is_file():
        return []
    out = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            e = json.loads(line)
        except ValueError:
            continue
        if isinstance(e, dict) and isinstance(e.get("time_s"), int | float):
            out.append(e)
    return out


# -- small formatting helpers --------------------------------------------------------------------------------



def esc(v: Any) -> str:
    return html.escape(str(v), quote=True)


def short(v: Any, limit: int = 80) -> str:
    try:
        s = json.dumps(v, separators=(",", ":"), default=str)
    except (TypeError, ValueError):
        s = str(v)
    return s if len(s) <= limit else s[: limit - 1] + "…"


def list_short(v: Any, n: int = MAX_VALUES_SHOWN) -> str:
    if isinstance(v, list):
        head = ", ".join(short(x, 30) for x in v[:n])
        return f"[{head}{f', … +{len(v) - n} more' if len(v) > n else ''}]"
    return short(v)


def secs(ns: Any) -> str:
    if not isinstance(ns, int | float) or isinstance(ns, bool):
        return "?"
    return f"{ns / 1e9:.3f}s"


def size_text(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def href(rel: str) -> str:
    return esc(quote(rel))


def get_path(cfg: dict[str, Any] | None, *paths: str) -> Any:
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


def as_dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def on_off(v: Any) -> str:
    if v is None:
        return "?"
    if isinstance(v, bool):
        return "on" if v else "off"
    return str(v)
