"""Campaigns: a matrix of scenarios run one after another, with an index, a summary and JUnit results.

    name = "durability"
    base = "../control.toml"           # scenario the matrix varies (relative to this file)
    duration_s = 20
    seeds = [1]
    [matrix]                           # dotted scenario fields → the values to try
    "workload.acks" = ["0", "1", "all"]
    "topic.min_insync_replicas" = [1, 2]
    [fault_sets.leader-kill]           # each fault set is one value of the `faults` axis
    model = "leader-down"              # the reference model's name for it (the prediction column)
    overrides = { "cluster.controllers" = 0 }
    schedule = [{ kind = "kill", target = "leader", at_s = 5, duration_s = 8 }]

Results: every run in its own results/<run>/ folder; results/campaigns/<id>/ holds `summary.json` (rewritten
after every run, so an interrupted campaign resumes where it stopped), `index.html` and `junit.xml`.
The campaign id is the name plus a hash of the file, so running the same file again resumes it.
With a shard (`--shard I/N`, harness/shard.py) only every N-th run is run, into <id>/shard-I-of-N/.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from kafka_chaos.checker.results import RunResults
from kafka_chaos.cluster import ClusterPool, spec_key
from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.run import cluster_spec, resolve_scenario, run_scenario
from kafka_chaos.harness.scenario import Scenario
from kafka_chaos.harness.shard import Shard, select, shard_record
from kafka_chaos.report import junit
from kafka_chaos.report.campaign import render_index
from kafka_chaos.rundir import JUNIT_FILE, RunDir


@dataclass(frozen=True)
class PlannedRun:
    index: int
    label: str
    axes: dict[str, Any]
    fault_set: str | None
    model_fault_set: str | None
    scenario: Scenario


@dataclass
class Campaign:
    name: str
    campaign_id: str
    runs: list[PlannedRun]
    source: Path
    shard: dict[str, Any] | None = None  # the shard's place in the whole plan (shard.shard_record)


def load_campaign(path: Path) -> Campaign:
    if not path.exists():
        raise ScenarioError(f"{path}: no such campaign file. Ready-made ones are in scenarios/campaigns/")
    text = path.read_bytes()
    try:
        spec = tomllib.loads(text.decode())
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML: {err}") from None
    allowed = {"name", "description", "base", "duration_s", "seeds", "matrix", "fault_sets"}
    unknown = set(spec) - allowed
    if unknown:
        raise ScenarioError(f"{path}: unknown fields {sorted(unknown)}; allowed: {sorted(allowed)}")
    name = str(spec.get("name", path.stem))
    base_path = (path.parent / spec["base"]) if "base" in spec else None
    base = resolve_scenario(base_path) if base_path else resolve_scenario({"name": name})
    matrix: dict[str, list[Any]] = spec.get("matrix", {})
    for axis, values in matrix.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"{path}: matrix.{axis} must be a non-empty list of values")
    fault_sets: dict[str, dict[str, Any]] = spec.get("fault_sets", {}) or {"none": {}}
    seeds = spec.get("seeds", [base.seed])
    axes = list(matrix)
    runs: list[PlannedRun] = []
    for combo in itertools.product(*(matrix[a] for a in axes), fault_sets.items(), seeds):
        *values, (fs_name, fs), seed = combo
        overrides: dict[str, Any] = dict(zip(axes, values, strict=True))
        overrides.update(fs.get("overrides", {}))
        overrides["faults"] = {"schedule": fs.get("schedule", []), **({"generator": fs["generator"]}
                                                                       if "generator" in fs else {})}
        overrides["seed"] = seed
        if "duration_s" in spec:
            overrides["duration_s"] = spec["duration_s"]
        # acks other than all cannot be idempotent (Kafka's rule): follow the acks axis
        acks = overrides.get("workload.acks", base.workload.acks)
        if str(acks) != "all":
            overrides.setdefault("workload.idempotence", False)
        label = ", ".join(f"{a.split('.')[-1]}={v}" for a, v in zip(axes, values, strict=True))
        label = f"{label}, faults={fs_name}, seed={seed}" if label else f"faults={fs_name}, seed={seed}"
        index = len(runs)
        try:
            scenario = base.with_overrides(name=f"{name}-{index:03d}", **overrides)
        except ScenarioError as err:
            raise ScenarioError(f"{path}: run {index} ({label}): {err}") from None
        runs.append(PlannedRun(index, label, dict(zip(axes, values, strict=True)), fs_name, fs.get("model"),
                               scenario))
    digest = hashlib.sha256(text).hexdigest()[:8]
    return Campaign(name, f"{name}-{digest}", runs, path)


def shard_of(campaign: Campaign, shard: Shard | None) -> Campaign:
    """The campaign cut down to one shard's runs, knowing the whole plan (the same campaign without a shard)."""
    if shard is None:
        return campaign
    plan = [f"{r.index} {r.label}: {_config_line(r.scenario)}" for r in campaign.runs]
    record = shard_record(shard, plan, [_pending(r) for r in campaign.runs])
    return Campaign(campaign.name, campaign.campaign_id, select(campaign.runs, shard), campaign.source, record)


def predict(run: PlannedRun) -> dict[str, Any] | None:
    """The reference model's prediction for this run's configuration and fault set."""
    if run.model_fault_set is None:
        return None
    from kafka_chaos.reference_model.config import RunConfig
    from kafka_chaos.reference_model.matrix import predict as model_predict

    cfg = RunConfig.from_scenario(run.scenario.model_dump())  # ELR: set, or the version's default
    p = model_predict(cfg.acks, cfg.min_insync, cfg.rf, cfg.unclean, run.model_fault_set, elr=cfg.elr)
    return {"loss_possible": bool(p.loss_possible), "writes_available": bool(p.writes_available)}


def measure(run_dir: Path, result: RunResults) -> dict[str, Any]:
    """What the run showed: were acknowledged writes lost? were writes acknowledged while a fault was active?"""
    lost = result.count("lost-write") > 0 or (result.complete and result.count("unseen") > 0)
    return {"lost": bool(lost), "writes_available_during_fault": _writes_during_faults(run_dir, result)}


def _writes_during_faults(run_dir: Path, result: RunResults) -> bool | None:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    windows = [w for w in (result.faults or {}).get("windows", []) if w.get("end") is not None]
    sends_path = RunDir(run_dir).sends
    if not windows or not sends_path.exists():
        return None
    sends = pq.read_table(sends_path, columns=["type", "complete_time"])
    ok = sends.filter(pc.equal(sends["type"], "ok"))["complete_time"].to_numpy(zero_copy_only=False)
    # the part of each fault window after the cluster had time to react (a leader election takes seconds)
    return any(((ok >= w["start"] + 5e9) & (ok <= w["end"])).any() for w in windows if w["end"] - w["start"] > 5e9)


def run_campaign(path: Path, *, out: Path = Path("results"), fresh: bool = False,
                 console: Console | None = None, pool: ClusterPool | None = None,
                 shrink: bool = False, shard: Shard | None = None) -> dict[str, Any]:
    console = console or Console()
    campaign = shard_of(load_campaign(path), shard)
    cdir = out / "campaigns" / campaign.campaign_id / (shard.dirname if shard else "")
    cdir.mkdir(parents=True, exist_ok=True)
    summary_path = cdir / "summary.json"
    done: dict[str, dict[str, Any]] = {}
    if summary_path.exists() and not fresh:
        done = {str(r["index"]): r for r in json.loads(summary_path.read_text())["runs"] if r.get("status") == "done"}
    own_pool = pool is None
    pool = pool or ClusterPool(keep=False)
    started = time.monotonic()
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(), console=console) as progress:
            task = progress.add_task(campaign.name, total=len(campaign.runs), completed=len(done))
            # runs that share a cluster spec run back to back, so each spec starts once
            order = sorted(campaign.runs, key=lambda r: (spec_key(cluster_spec(r.scenario)), r.index))
            for run in order:
                if str(run.index) in done:
                    continue
                progress.update(task, description=f"{campaign.name}: {run.label}")
                result = run_scenario(run.scenario, out=out, pool=pool)
                pool.heal_or_drop()
                checked = result.checked
                measured = measure(result.run_dir, checked)
                done[str(run.index)] = {
                    "index": run.index, "status": "done", "label": run.label, "axes": run.axes,
                    "fault_set": run.fault_set, "run_id": result.run_id,
                    "run_dir": str(result.run_dir.resolve()),
                    "passed": checked.passed, "valid": checked.valid, "complete": checked.complete,
                    "anomaly_counts": dict(checked.anomaly_counts),
                    "violations": [f"{v.name} {v.key}: {v.reason or ''}" for v in checked.violations[:20]],
                    "n_violations": len(checked.violations),
                    "prediction": predict(run), "measured": measured,
                    "config": _config_line(run.scenario),
                }
                if shrink and not result.passed:
                    pool.release()  # one cluster at a time: the shrink starts its own
                    done[str(run.index)].update(_shrink(result.run_dir, console))
                _write_outputs(campaign, cdir, done)
                progress.advance(task)
    finally:
        if own_pool:
            pool.release()
        _write_outputs(campaign, cdir, done)
    summary: dict[str, Any] = json.loads(summary_path.read_text())
    summary["elapsed_s"] = round(time.monotonic() - started, 1)
    return summary


def _shrink(run_dir: Path, console: Console) -> dict[str, Any]:
    """Shrink a violating run; the index links its shrink/index.html."""
    from kafka_chaos.errors import KafkaChaosError
    from kafka_chaos.harness.shrink import shrink_run

    try:
        r = shrink_run(run_dir, console=console)
    except KafkaChaosError as err:  # a shrink that cannot start must not end the campaign
        return {"shrink_error": str(err)}
    return {"shrink": str(r.index.resolve()), "shrink_minimal": str(r.minimal.resolve()),
            "shrink_reproduced": f"{r.reproduced} of {r.confirm_runs}"}


def _config_line(s: Scenario) -> str:
    return (f"kafka {s.cluster.kafka_version}, {s.cluster.nodes} brokers"
            + (f" + {s.cluster.controllers} controllers" if s.cluster.controllers else "")
            + f", RF={s.topic.replication_factor}, min.insync={s.topic.min_insync_replicas}, "
              f"acks={s.workload.acks}, idempotence={s.workload.idempotence}, "
              f"unclean={s.topic.unclean_leader_election}, "
              f"client={s.workload.client} {s.workload.client_version or '(in process)'}")


def _pending(r: PlannedRun) -> dict[str, Any]:
    return {"index": r.index, "status": "pending", "label": r.label, "fault_set": r.fault_set, "axes": r.axes}


def _write_outputs(campaign: Campaign, cdir: Path, done: dict[str, dict[str, Any]]) -> None:
    runs = [done.get(str(r.index), _pending(r)) for r in campaign.runs]
    summary = {"campaign": campaign.name, "campaign_id": campaign.campaign_id, "source": str(campaign.source),
               "total": len(runs), "done": sum(r["status"] == "done" for r in runs),
               "failed": sum(r["status"] == "done" and not r["passed"] for r in runs), "runs": runs,
               **({"shard": campaign.shard} if campaign.shard else {})}
    write_summary(cdir, summary)


def write_summary(cdir: Path, summary: dict[str, Any]) -> None:
    """summary.json (atomically: a resume reads it), index.html and junit.xml of a campaign, or of a merge."""
    cdir.mkdir(parents=True, exist_ok=True)
    runs = summary["runs"]
    tmp = cdir / "summary.json.tmp"
    tmp.write_text(json.dumps(summary, indent=2, default=str))
    tmp.replace(cdir / "summary.json")
    (cdir / "index.html").write_text(render_index(summary, cdir))
    _write_junit(cdir, runs)


def _write_junit(cdir: Path, runs: list[dict[str, Any]]) -> None:
    cases = [junit.Case(r["label"], "kafka-chaos.campaign",
                        skipped=f"shard {r['shard']} missing" if r.get("shard") else "not run yet")
             if r["status"] != "done" else
             junit.Case(r["label"], "kafka-chaos.campaign",
                        None if r["passed"] else "\n".join(r["violations"]), f"{r.get('n_violations', 0)} violations")
             for r in runs]
    junit.write_junit(cdir / JUNIT_FILE, "kafka-chaos campaign", cases)
