"""One run, end to end (docs/architecture.md §2): Jepsen's test map, assembled from parts (harness.testmap).

    scenario → cluster up → topic → observer + consumers + producers + nemesis → heal everything
             → final drain read → cluster down → checker → results.json, report.html, junit.xml

This module only wires parts; the parts hold the logic: kafka_chaos.cluster (the cluster), workloads (clients),
faults (the nemesis), cluster.observer (state samples), checker (analysis and verdicts), report (the page).
An interrupted run (Ctrl-C, SIGTERM, a crash) still removes its cluster, and keeps a history that
`kafka-chaos check` reads (and marks incomplete).
"""

from __future__ import annotations

import contextlib
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.stored_tables import TableBuilder
from kafka_chaos.cluster import ClusterPool, ClusterSpec, KafkaCluster, new_run_id
from kafka_chaos.cluster.engine import docker_client
from kafka_chaos.cluster.external import ExternalCluster
from kafka_chaos.cluster.images import kafka_image, require_image
from kafka_chaos.cluster.logs import client_log_file
from kafka_chaos.cluster.observer import Observer
from kafka_chaos.faults import plan
from kafka_chaos.faults.nemesis import ScheduledNemesis
from kafka_chaos.faults.operations import Operator
from kafka_chaos.harness.collector import fewer_collections
from kafka_chaos.harness.outputs import check_run_dir
from kafka_chaos.harness.replay import write_resolved
from kafka_chaos.harness.scenario import Scenario, load_scenario, parse_scenario, to_toml
from kafka_chaos.harness.testmap import Checker, Nemesis, Ongoing, RunContext, Workload
from kafka_chaos.history import History
from kafka_chaos.interrupts import STOPPING
from kafka_chaos.interrupts import reset as reset_interrupts
from kafka_chaos.rundir import RunDir
from kafka_chaos.workloads.drivers import client_record
from kafka_chaos.workloads.drivers import prepare as prepare_client
from kafka_chaos.workloads.queue import QueueWorkload


@dataclass(frozen=True)
class RunResult:
    run_id: str
    run_dir: Path
    scenario: Scenario
    checked: RunResults

    @cached_property
    def results(self) -> dict[str, Any]:
        """results.json's dict, for code that indexes it (a test's asserts); kafka-chaos reads `checked`."""
        return self.checked.to_json_dict()

    @property
    def passed(self) -> bool:
        return self.checked.passed

    def count(self, anomaly: str) -> int:
        return self.checked.count(anomaly)


def default_workload(s: Scenario) -> Workload:
    """The scenario's own workload: `[workload] kind` picks the queue (default) or the transactional one."""
    if s.workload.kind == "txn":
        from kafka_chaos.workloads.txn import TxnWorkload

        return TxnWorkload(s.workload)
    return QueueWorkload(s.workload)


def cluster_spec(s: Scenario) -> ClusterSpec:
    return s.cluster


def resolve_scenario(scenario: str | Path | dict[str, Any] | Scenario, seed: int | None = None,
                     **overrides: Any) -> Scenario:
    if isinstance(scenario, Scenario):
        resolved = scenario
    elif isinstance(scenario, dict):
        resolved = parse_scenario(scenario)
    else:
        resolved = load_scenario(Path(scenario))
    if seed is not None:
        overrides["seed"] = seed
    return resolved.with_overrides(**overrides) if overrides else resolved


def run_scenario_file(path: Path, *, seed: int | None = None, out: Path = Path("results"),
                      console: Console | None = None) -> RunResult:
    return run_scenario(path, seed=seed, out=out, console=console)


def run_scenario(
    scenario: str | Path | dict[str, Any] | Scenario,
    *,
    out: Path = Path("results"),
    seed: int | None = None,
    pool: ClusterPool | None = None,
    console: Console | None = None,
    workloads: Sequence[Workload] | None = None,
    nemesis: Nemesis | None = None,
    checkers: Sequence[Checker] = (),
    **overrides: Any,
) -> RunResult:
    """Run a scenario and check it: Jepsen's test map, with the scenario's own parts unless others are given.

    `workloads` replace the scenario's queue workload, `nemesis` its fault schedule; `checkers` run after the
    default checker and their violations count like its own. With `pool`, the pool's cluster for this spec is
    reused (a fresh topic per run).
    """
    s = resolve_scenario(scenario, seed, **overrides)
    reset_interrupts()  # a caller that went on after an earlier interrupt: this run waits as long as it should
    _require_operation_images(s)
    console = console or Console(quiet=True)
    _prepare_client(s, console)
    run_id = new_run_id(s.name, s.seed)
    run = RunDir(Path(out) / run_id)
    while run.path.exists():  # two runs of one scenario and seed in the same second
        run_id = f"{run_id}-{uuid.uuid4().hex[:4]}"
        run = RunDir(Path(out) / run_id)
    run.path.mkdir(parents=True)
    spec = s.cluster
    resolved = {**s.model_dump(exclude_none=True), "run_id": run_id, "kafka_settings": spec.settings()}
    run.scenario.write_text(to_toml(resolved))
    parts_workloads: list[Workload] = list(workloads) if workloads is not None else [default_workload(s)]
    parts_nemeses: list[Nemesis] = [nemesis if nemesis is not None else
                                    ScheduledNemesis(plan(s.faults, s.duration_s, s.seed))]
    if s.operations:
        parts_nemeses.append(Operator(s.operations))

    interrupted: BaseException | None = None
    try:
        with contextlib.ExitStack() as stack:
            stack.enter_context(fewer_collections())  # the clients allocate per record: harness/collector.py
            stack.enter_context(client_log_file(run.clients_log))  # entered first: kept until the cluster is gone
            tables = TableBuilder()  # the check's tables, built as the history is written
            stack.callback(tables.store, run.path)  # registered first, so it runs once the history is closed
            history = stack.enter_context(History(run.history, on_line=tables.feed))
            # clock_unix_ns: the history clock's wall-clock origin, to place the nodes' log lines (events.jsonl)
            history.record("harness", "info", "run-start",
                           {**resolved, "clock_unix_ns": time.time_ns() - history.now(),
                            "client": client_record(s.workload)})
            cluster: KafkaCluster | ExternalCluster
            if spec.bootstrap_servers:  # someone else's cluster: connect, start nothing, stop nothing
                cluster = stack.enter_context(ExternalCluster(spec.bootstrap_servers, spec.control))
                topic = f"{s.topic.name}-{uuid.uuid4().hex[:6]}"
            elif pool is not None:
                with console.status("cluster: starting or reusing…"):
                    cluster = pool.get(spec)
                topic = f"{s.topic.name}-{uuid.uuid4().hex[:6]}"
            else:
                cluster = KafkaCluster(spec, run_id=run_id)
                with console.status(f"cluster: starting {spec.nodes} nodes…"):
                    stack.enter_context(cluster)
                topic = s.topic.name
            stack.callback(_save_logs, cluster, run.logs)
            ctx = RunContext(s, cluster, topic, history, run, console)
            _execute(ctx, parts_workloads, parts_nemeses)
            _write_resolved(run.path, s, parts_nemeses[0], run_id, cluster)
    except KeyboardInterrupt as err:
        STOPPING.set()
        interrupted = err
    results = check_run_dir(run.path, console=console, checkers=checkers)
    if interrupted is not None:
        raise interrupted
    return RunResult(run_id, run.path, s, results)


def _save_logs(cluster: KafkaCluster | ExternalCluster, directory: Path) -> None:
    """The nodes' logs; once interrupted, as much as can be read (the message at exit is about the cluster)."""
    try:
        cluster.save_logs(directory)
    except Exception:
        if not STOPPING.is_set():
            raise


def _require_operation_images(s: Scenario) -> None:
    """An upgrade to a version without an image fails before any container starts, naming the build command."""
    versions = sorted({op.to_version for op in s.operations if op.to_version})
    if versions:
        client = docker_client()
        for version in versions:
            require_image(client, kafka_image(version))


def _prepare_client(s: Scenario, console: Console) -> None:
    """The scenario's client installed (first use) or found in its cache before any container starts: a client
    or version that cannot be had is bad input then, not a failed run."""
    with console.status(f"client: {s.workload.client} {s.workload.client_version or ''}…") as status:
        prepare_client(s.workload, lambda what: status.update(what))


def _write_resolved(run_dir: Path, s: Scenario, nemesis: Nemesis, run_id: str,
                    cluster: KafkaCluster | ExternalCluster) -> None:
    """scenario.resolved.toml: the fault plan with the node ids each fault hit, for replay and shrink.
    A nemesis of the caller's own has no plan to record; the scenario's schedule is written as planned."""
    planned = (nemesis.resolved_plan() if isinstance(nemesis, ScheduledNemesis)
               else plan(s.faults, s.duration_s, s.seed))
    try:
        image_id: str | None = (str(cluster.client.images.get(cluster.spec.image).id)
                                if isinstance(cluster, KafkaCluster) else None)
    except Exception:  # the id is a record for people; a run must not fail over it
        image_id = None
    write_resolved(run_dir, s, planned, run_id=run_id, image_id=image_id)


def _execute(ctx: RunContext, workloads: list[Workload], nemeses: list[Nemesis]) -> None:
    """Start every part, let the run last its duration, heal, stop the clients, read back."""
    s, cluster, history = ctx.scenario, ctx.cluster, ctx.history
    cluster.create_topic(ctx.topic, s.topic.partitions, s.topic.replication_factor, s.topic.kafka_configs())
    history.record("harness", "info", "topic", {"topic": ctx.topic, "keys": ctx.keys})
    if isinstance(cluster, KafkaCluster) and cluster.spec.volatile_disks:
        # a power loss takes what the run wrote and did not sync, not the cluster's setup (docs/architecture.md §5)
        settled = {str(node): files for node, files in cluster.settle_disks().items()}
        history.record("harness", "info", "disks-settled", {"dirty_files": settled})
    observer = Observer(cluster.bootstrap_servers(direct=True), ctx.topic, s.topic.partitions, ctx.run.state,
                        history.now)
    observer.start()
    try:
        _run_parts(ctx, workloads, nemeses)
        history.record("harness", "info", "drain-start", None)  # consumer lag is measured before it
        with ctx.console.status("final read…"):
            reads = [workload.final_read(ctx) for workload in workloads]
        history.record("harness", "info", "drain-complete", all(r.get("complete", True) for r in reads if r))
    finally:
        observer.stop()


def _run_parts(ctx: RunContext, workloads: list[Workload], nemeses: list[Nemesis]) -> None:
    """Start the parts, let the run last its duration, heal, stop the clients. Every part started is stopped,
    also when an interrupt comes while others start or stop (then without waiting long for any)."""
    s = ctx.scenario
    with contextlib.ExitStack() as stops:  # unwound in reverse: the nemeses heal first, then the clients stop
        try:
            for workload in workloads:
                workload.start(ctx)
                stops.callback(_stop_part, ctx, workload, "stopping clients…")
            for nemesis in nemeses:  # the fault schedule, then the operations
                nemesis.start(ctx)
                stops.callback(_stop_part, ctx, nemesis, "healing every fault…")
            with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[stats]}"),
                          TimeRemainingColumn(), console=ctx.console, transient=True) as progress:
                task = progress.add_task(s.name, total=s.duration_s, stats="")
                start = time.monotonic()
                while (elapsed := time.monotonic() - start) < s.duration_s:
                    progress.update(task, completed=elapsed, stats=" · ".join(w.progress() for w in workloads))
                    time.sleep(0.5)
                # An operation scheduled within the run still runs under load when an earlier one made it late
                # (on a slow machine each kafka-metadata-quorum.sh call is seconds of JVM start).
                ongoing = [n for n in nemeses if isinstance(n, Ongoing)]
                while any(n.busy() for n in ongoing):
                    progress.update(task, description=f"{s.name}: operations still under way",
                                    stats=" · ".join(w.progress() for w in workloads))
                    time.sleep(0.5)
        except KeyboardInterrupt:
            STOPPING.set()  # the cluster is about to go: every stop below waits briefly, keeping what the history has
            raise


def _stop_part(ctx: RunContext, part: Workload | Nemesis, status: str) -> None:
    try:
        with ctx.console.status(status):
            part.stop(ctx, interrupted=STOPPING.is_set())
    except KeyboardInterrupt:
        STOPPING.set()  # the remaining parts still stop, briefly
        raise
