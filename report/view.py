"""The page's view model: what each section shows, as plain data the templates lay out (report/templates)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.checker.conformance import CONFORMANCE_NAMES
from kafka_chaos.checker.results import EMPTY_HISTORY
from kafka_chaos.faults.registry import colour
from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.expectations import Expectations, expectations
from kafka_chaos.report.causes import cause_line
from kafka_chaos.report.data import (
    MAX_OPS_SHOWN,
    RunData,
    as_dict,
    as_list,
    get_path,
    instances_by_name,
    list_short,
    on_off,
    secs,
    short,
    shown,
)
from kafka_chaos.report.timeline import instance_time
from kafka_chaos.versions import elr_default

KNOWN_FIELDS = ("key", "value", "values", "count", "offset", "offsets", "ops", "times", "verdict", "reason",
                "name", "bad")


def elr_label(cfg: dict[str, Any]) -> str:
    """The ELR feature as the cluster ran it, as the model reads it (reference_model.config.RunConfig): set by
    the scenario, or the version's default (KIP-966)."""
    run = RunConfig.from_scenario(cfg)
    if run.elr_explicit:
        return f"ELR {on_off(run.elr)}"
    if elr_default(run.kafka_version) is None:
        return "ELR ?"
    return f"ELR {on_off(run.elr)} (Kafka {run.kafka_version}'s default)"


def client_label(workload: dict[str, Any]) -> str:
    """The client the workload ran (workloads.drivers): a pinned release in worker processes, or the
    confluent-kafka installed with kafka-chaos, in process."""
    client, version = workload.get("client", "librdkafka"), workload.get("client_version")
    return f"client {client} {version}" if version else f"client {client} (in process)"


def config_line(data: RunData) -> str:
    """The resolved scenario (harness.scenario.Scenario's fields) in one line."""
    cfg = data.config
    if cfg is None:
        return "configuration unknown (no scenario.toml and no run-start event in the history)"
    cluster, topic, workload = as_dict(cfg.get("cluster")), as_dict(cfg.get("topic")), as_dict(cfg.get("workload"))
    controllers = cluster.get("controllers")
    parts = [
        f"Kafka {cluster.get('kafka_version', '?')}",
        f"{cluster.get('nodes', '?')} nodes" + (f" ({controllers} controllers)" if controllers else ""),
        f"{topic.get('partitions', '?')} partitions",
        f"RF {topic.get('replication_factor', '?')}",
        f"min.insync {topic.get('min_insync_replicas', '?')}",
        f"acks={workload.get('acks', '?')}",
        f"idempotence {on_off(workload.get('idempotence'))}",
        f"unclean {on_off(topic.get('unclean_leader_election'))}",
        elr_label(cfg),
        client_label(workload),
    ]
    if cluster.get("racks"):
        parts.append(f"racks {', '.join(map(str, cluster['racks']))}")
    if cluster.get("bootstrap_servers"):
        parts.append("external cluster")
    for key, label, unit in (("seed", "seed", ""), ("duration_s", "duration", "s")):
        if cfg.get(key) is not None:
            parts.append(f"{label} {cfg[key]}{unit}")
    return " · ".join(parts)


@dataclass
class RunVerdict:
    """The run's verdict as the page's banner shows it (not the model's per-instance `Verdict`)."""

    kind: str  # pass | fail | unknown
    violations: int = 0
    detail: str = ""
    anomalies: int = 0
    valid: str = ""
    known_defects: str = ""
    """Known defects of the version in use, by bug ("KAFKA-17754 × 2"): shown apart, they do not fail the run."""


def verdict(data: RunData) -> RunVerdict:
    r = data.results
    if r is None:
        return RunVerdict("unknown")
    violations = as_list(r.get("violations"))
    counts = as_dict(r.get("anomaly_counts"))
    by_name = Counter(str(v.get("name", "?")) for v in violations if isinstance(v, dict))
    # An empty history's violation is no anomaly: its reason is what the reader needs, not a count.
    empty = [f"{v['key']}: {v.get('reason')}" if v.get("key") else str(v.get("reason"))
             for v in violations if isinstance(v, dict) and v.get("name") == EMPTY_HISTORY]
    counted = [f"{n} × {c}" for n, c in by_name.most_common() if n != EMPTY_HISTORY]
    detail = "; ".join([*empty, *([", ".join(counted)] if counted else [])])
    return RunVerdict("fail" if violations else "pass", len(violations), detail,
                   sum(v for v in counts.values() if isinstance(v, int) and not isinstance(v, bool)),
                   short(r.get("valid")), _known_defects(r))


def _known_defects(r: dict[str, Any]) -> str:
    known = Counter(str(i.get("defect") or "?") for i in as_list(r.get("known_defects")) if isinstance(i, dict))
    return ", ".join(f"{d} × {c}" for d, c in known.most_common())


def completeness(data: RunData) -> dict[str, Any]:
    r, h = data.results, data.history
    complete = r.get("complete") if r is not None else None
    if complete is None and h.present:
        complete = h.complete
    missing = []
    if not h.present:
        missing.append("history.jsonl (no timeline data, no op details)")
    elif h.error:
        missing.append(f"history.jsonl could not be read: {h.error}")
    if not data.state.present:
        missing.append("state.jsonl (no leader/ISR marks)")
    if r is None:
        missing.append("results.json (not checked)" if data.results_error is None else data.results_error)
    if data.config is None:
        missing.append(data.config_error or "scenario.toml")
    elif data.config_error:
        missing.append(data.config_error + " (configuration taken from the history)")
    return {"complete": complete, "no_drain": h.present and h.drain_complete is not True,
            "cut": h.cut_last_line, "missing": missing, "bad_lines": h.bad_lines}


def summary(data: RunData) -> list[tuple[str, str]]:
    h, r = data.history, data.results or {}
    items: list[tuple[str, str]] = [("duration", f"{data.duration_ns / 1e9:.1f} s")]
    if h.present:
        items.append(("history events", f"{h.events:,}"))
        for f in ("send", "poll", "txn"):
            by = {t: sum(n for (ff, tt, _), n in h.counts.items() if ff == f and tt == t)
                  for t in ("ok", "fail", "info")}
            if any(by.values()):
                items.append((f"{f} ops", f"{by['ok']:,} ok · {by['fail']:,} fail · {by['info']:,} info"))
        if h.unfinished:
            items.append(("never completed", ", ".join(f"{n} {f}" for f, n in sorted(h.unfinished.items()))))
    stats = as_dict(r.get("stats"))
    rec = as_dict(stats.get("records"))
    if rec:
        sent = as_dict(rec.get("sent"))
        items.append(("records sent", f"{sent.get('ok', '?')} ok · {sent.get('fail', '?')} fail · "
                                      f"{sent.get('info', '?')} info"))
        items.append(("records read", f"{rec.get('polled', '?')} ({rec.get('distinct_read', '?')} distinct)"))
    lag = as_dict(stats.get("realtime_lag"))
    if lag and lag.get("samples"):
        items.append(("consumer lag", f"p50 {secs(lag.get('p50_ns'))} · p99 {secs(lag.get('p99_ns'))} · "
                                      f"max {secs(lag.get('max_ns'))}"))
    kinds = sorted({b.f for b in data.faults})
    items.append(("faults", f"{len(data.faults)}" + (f" ({', '.join(kinds)})" if kinds else "")))
    health = as_dict(r.get("health"))
    if health:
        items.append(("under min ISR / offline",
                      f"{health.get('under_min_isr_s', 0)} s / {health.get('offline_s', 0)} s"))
    if data.state.present:
        changes = Counter(c.kind for c in data.state.changes)
        items.append(("state changes", f"{changes['leader']} leader · {changes['isr']} ISR · "
                                       f"{changes['controller']} controller"))
    return items


@dataclass
class OpRef:
    index: int
    line: int | None = None
    time: str = ""
    process: str = ""
    f: str = ""
    outcome: str = ""


INSTANCE_VERDICTS = ("violation", "permitted", "known-defect")


@dataclass
class InstanceRow:
    number: int
    key: str
    values: list[str]
    offsets: list[str]
    ops: list[OpRef]
    more_ops: int
    verdict: str
    reason: str
    details: list[tuple[str, str]]
    excerpt: str | None
    faults_then: list[str] = field(default_factory=list)


@dataclass
class AnomalySection:
    name: str
    count: Any
    violations: int
    listed: int
    rows: list[InstanceRow]


def _op_ref(idx: int, data: RunData) -> OpRef:
    line = data.history.lines.get(idx)
    if line is None:
        return OpRef(idx)
    partner = data.history.lines.get(data.history.partner.get(idx, -1))
    inv, comp = (line, partner) if line.type == "invoke" else (partner, line)
    outcome = f"{inv.type}→{comp.type}" if inv is not None and comp is not None and inv is not comp else line.type
    return OpRef(idx, line.line, secs(line.time), str(line.process), line.f, outcome)


def _excerpt(ops: list[int], data: RunData) -> str | None:
    idxs: set[int] = set()
    for o in ops:
        if o in data.history.lines:
            idxs.add(o)
            p = data.history.partner.get(o)
            if p is not None:
                idxs.add(p)
    if not idxs:
        return None
    lines = sorted((data.history.lines[i] for i in idxs), key=lambda ln: ln.line)
    return "\n".join(f"{ln.line:>8}  {ln.raw}" for ln in lines)


def _detail(name: str, v: Any) -> str:
    """An instance's extra field, times (`*_time`, ns since the run started) in seconds."""
    if name.endswith("_time") and isinstance(v, int) and not isinstance(v, bool):
        return secs(v)
    return short(v, 60)


NEAR_NS = 5_000_000_000  # faults this close to an instance are shown with it: a loss shows after its cause


def _faults_then(inst: dict[str, Any], data: RunData) -> list[str]:
    """The faults and operations active from 5 s before the instance's first time to 5 s after its last."""
    times = [v for v in as_list(inst.get("times")) if isinstance(v, int) and not isinstance(v, bool)]
    first = instance_time(inst)
    if first is None:
        return []
    lo, hi = min([first, *times]) - NEAR_NS, max([first, *times]) + NEAR_NS
    return [f"{b.f} {b.target} ({b.start / 1e9:.1f}–{'…' if b.end is None else f'{b.end / 1e9:.1f}'} s)".strip()
            for b in data.faults if b.start <= hi and (b.end is None or lo <= b.end)]


def _row(i: int, inst: dict[str, Any], data: RunData) -> InstanceRow:
    values = ([short(inst["value"], 40)] if "value" in inst else []) + (
        [list_short(inst["values"])] if "values" in inst else [])
    offsets = ([short(inst["offset"], 40)] if "offset" in inst else []) + (
        [list_short(inst["offsets"])] if "offsets" in inst else [])
    ops = [o for o in as_list(inst.get("ops")) if isinstance(o, int)]
    verdict_ = str(inst.get("verdict") or "unknown")
    return InstanceRow(
        i + 1, str(inst.get("key", "—")), values, offsets, [_op_ref(o, data) for o in ops[:MAX_OPS_SHOWN]],
        max(0, len(ops) - MAX_OPS_SHOWN), verdict_ if verdict_ in INSTANCE_VERDICTS else "unknown",
        str(inst.get("reason", "")), [(k, _detail(k, v)) for k, v in inst.items() if k not in KNOWN_FIELDS],
        _excerpt(ops[:MAX_OPS_SHOWN], data), _faults_then(inst, data))


def anomaly_sections(data: RunData, names: list[str], counts: dict[str, Any],
                     insts: dict[str, list[dict[str, Any]]], violations: Counter[str]) -> list[AnomalySection]:
    out = []
    for name in names:
        listed = insts.get(name, [])
        rows = [_row(i, inst, data) for i, inst in enumerate(shown(listed, data.max_instances))]
        out.append(AnomalySection(name, counts.get(name, len(listed)), violations.get(name, 0), len(listed), rows))
    return out


def _violations(r: dict[str, Any]) -> Counter[str]:
    return Counter(str(v.get("name")) for v in as_list(r.get("violations")) if isinstance(v, dict))


def anomalies(data: RunData) -> dict[str, Any] | None:
    r = data.results
    if r is None:
        return None
    counts: dict[str, Any] = dict(as_dict(r.get("anomaly_counts")))
    insts = instances_by_name(r)
    for name, listed in insts.items():
        counts.setdefault(name, len(listed))
    violations = _violations(r)
    order = list(counts)
    names = sorted((n for n in order if n not in CONFORMANCE_NAMES and (counts.get(n) or insts.get(n))),
                   key=lambda n: (-violations.get(n, 0), order.index(n)))
    not_checked = as_dict(r.get("not_checked"))
    return {"names": names, "counts": counts, "violations": violations, "not_checked": not_checked,
            "sections": anomaly_sections(data, names, counts, insts, violations)}


def model(data: RunData) -> dict[str, Any] | None:
    r = data.results
    if r is None:
        return None
    counts: dict[str, Any] = dict(as_dict(r.get("anomaly_counts")))
    insts = instances_by_name(r)
    names = [n for n in dict.fromkeys([*CONFORMANCE_NAMES, *insts])
             if n in CONFORMANCE_NAMES or (isinstance(r.get("conformance"), dict | list) and n in insts
                                           and n not in (r.get("anomalies") or {}))]
    found = [n for n in names if counts.get(n) or insts.get(n)]
    checked = "conformance" in r or any(n in counts for n in CONFORMANCE_NAMES)
    expected: list[dict[str, Any]] = []
    rest: list[tuple[str, str]] = []
    m = r.get("model")
    if isinstance(m, dict) and m:
        pred, obs = m.get("prediction", m.get("expected")), m.get("observed")
        if isinstance(pred, dict) or isinstance(obs, dict):
            p, o = as_dict(pred), as_dict(obs)
            for k in dict.fromkeys([*p, *o]):
                expected.append({"aspect": k, "predicted": short(p.get(k, "—"), 200),
                                 "observed": short(o.get(k, "—"), 200),
                                 "mismatch": k in p and k in o and p[k] != o[k]})
            rest = [(k, short(v, 300)) for k, v in m.items() if k not in ("prediction", "expected", "observed")]
        else:
            rest = [(k, short(v, 300)) for k, v in m.items()]
    return {"found": anomaly_sections(data, found, counts, insts, _violations(r)), "checked": checked,
            "names": CONFORMANCE_NAMES, "expected": expected, "rest": rest, "has_model": bool(m)}


def fault_rows(data: RunData) -> list[dict[str, Any]]:
    return [{"start": f"{b.start / 1e9:.3f}", "end": f"{b.end / 1e9:.3f}" if b.end is not None else "never healed",
             "f": b.f, "colour": colour(b.f), "target": b.target, "heal": b.heal or "—", "value": short(b.value, 100),
             "error": short(b.error, 100) if b.error else "", "index": b.index} for b in data.faults]


def health(data: RunData) -> dict[str, Any] | None:
    h = as_dict((data.results or {}).get("health"))
    if not h:
        return None
    return {k: h.get(k) for k in ("min_insync_replicas", "under_replicated_s", "under_min_isr_s", "offline_s",
                                  "controllers")}


def fetch_sources(data: RunData) -> list[dict[str, Any]]:
    """Which replica served each rack-aware consumer's reads (KIP-392), from each change to the end of the run:
    `follower` when it was not the partition's leader."""
    return [{"time": f"{e['time'] / 1e9:.3f}", "process": e.get("process"), "key": e.get("key"),
             "broker": e.get("broker"), "leader": e.get("leader"),
             "follower": e.get("broker") != e.get("leader")} for e in data.history.fetch_from]


def availability(data: RunData) -> dict[str, Any] | None:
    a = as_dict((data.results or {}).get("availability"))
    if not a:
        return None
    windows = [{**w, "cause": cause_line(map(str, as_list(w.get("causes"))), list(map(str, as_list(w.get("faults")))))}
               for w in as_list(a.get("windows")) if isinstance(w, dict)]
    return {"share": a.get("share"), "windows": windows}


def expected(data: RunData) -> Expectations:
    """What the reference model expects of this configuration and these faults, beside what was measured: the
    checker's fault windows when results.json has them, else the history's fault bands."""
    windows = [w for w in as_list(as_dict((data.results or {}).get("faults")).get("windows")) if isinstance(w, dict)]
    if not windows:
        windows = [{"f": b.f, "nodes": as_list(as_dict(b.value).get("nodes")), "start": b.start, "end": b.end,
                    "value": b.value} for b in data.faults]
    return expectations(data.config, windows, data.results)


def crash(data: RunData) -> list[dict[str, Any]]:
    """"What the crash took": for each power loss, per node and partition, the log end (the offset after the
    last whole batch of its newest segment with data) before and after the disk lost its unsynced writes."""
    rows: list[dict[str, Any]] = []
    for band in data.faults:
        value = as_dict(band.value)
        if band.f != "power-loss" or not value.get("lost"):
            continue
        for node, lost in sorted(as_dict(value["lost"]).items()):
            lost = as_dict(lost)
            partitions = as_dict(lost.get("partitions"))
            base = {"time": f"{band.start / 1e9:.3f}", "node": node, "lose": value.get("lose", "—"),
                    "files": lost.get("files", 0), "bytes": lost.get("log_bytes", 0)}
            if not partitions:
                rows.append({**base, "partition": "—", "before": "—", "after": "—", "records": 0})
            for partition, ends in sorted(partitions.items()):
                ends = as_dict(ends)
                before, after = ends.get("end_offset_before"), ends.get("end_offset_after")
                records = (before or 0) - (after or 0) if isinstance(before, int) else 0
                rows.append({**base, "partition": partition, "before": "—" if before is None else before,
                             "after": "—" if after is None else after, "records": records})
    return rows


def page(data: RunData) -> dict[str, Any]:
    """Everything the templates need, by section."""
    v = verdict(data)
    title = f"kafka-chaos — {data.run_dir.name}"
    if v.kind != "unknown":
        title = ("FAIL" if v.kind == "fail" else "PASS") + " · " + title
    return {"title": title, "data": data, "name": get_path(data.config, "name") or data.run_dir.name,
            "verdict": v, "config_line": config_line(data), "completeness": completeness(data),
            "summary": summary(data), "anomalies": anomalies(data), "model": model(data), "expected": expected(data),
            "faults": fault_rows(data), "crash": crash(data), "health": health(data),
            "availability": availability(data), "fetch_sources": fetch_sources(data),
            "state_changes": data.state.changes[:200], "state_changes_total": len(data.state.changes),
            "history_lines": sorted(data.history.lines.values(), key=lambda ln: ln.line)}
