"""One run, end to end (DESIGN.md §2): the test map of Jepsen, wired.

    scenario → cluster up → topic → observer + consumers + producers + nemesis → heal everything
             → final drain read → cluster down → checker → results.json, report.html, junit.xml

This module only wires parts; the parts hold the logic: kafka_chaos.cluster (the cluster), workloads (clients),
faults (the nemesis), harness.observer (state samples), checker (analysis and verdicts), harness.report.
An interrupted run (Ctrl-C, SIGTERM, a crash) still removes its cluster, and keeps a history that
`kafka-chaos check` reads (and marks incomplete).
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape, quoteattr

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn

from kafka_chaos.cluster import ClusterPool, ClusterSpec, KafkaCluster, new_run_id
from kafka_chaos.cluster.observer import Observer
from kafka_chaos.faults import Nemesis, plan
from kafka_chaos.harness.history import History
from kafka_chaos.harness.scenario import Scenario, load_scenario, parse_scenario, to_toml
from kafka_chaos.workloads import ConsumerSettings, ConsumerWorkload, ProducerSettings, ProducerWorkload, final_drain


@dataclass(frozen=True)
class RunResult:
    run_id: str
    run_dir: Path
    scenario: Scenario
    results: dict[str, Any]

    @property
    def passed(self) -> bool:
        return not self.results["violations"]

    def count(self, anomaly: str) -> int:
        return int(self.results.get("anomaly_counts", {}).get(anomaly, 0))


def cluster_spec(s: Scenario) -> ClusterSpec:
    c = s.cluster
    return ClusterSpec(nodes=c.nodes, controllers=c.controllers, kafka_version=c.kafka_version,
                       official_image=c.official_image, toxiproxy=c.toxiproxy, elr=c.elr,
                       broker_overrides=dict(c.broker_overrides))


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
    **overrides: Any,
) -> RunResult:
    """Run a scenario and check it. With `pool`, reuse the pool's cluster for this spec (a fresh topic per run)."""
    s = resolve_scenario(scenario, seed, **overrides)
    console = console or Console(quiet=True)
    run_id = new_run_id(s.name, s.seed)
    run_dir = Path(out) / run_id
    while run_dir.exists():  # two runs of one scenario and seed in the same second
        run_id = f"{run_id}-{uuid.uuid4().hex[:4]}"
        run_dir = Path(out) / run_id
    run_dir.mkdir(parents=True)
    spec = cluster_spec(s)
    resolved = {**s.model_dump(exclude_none=True), "run_id": run_id, "kafka_settings": spec.settings()}
    (run_dir / "scenario.toml").write_text(to_toml(resolved))

    interrupted: BaseException | None = None
    try:
        with contextlib.ExitStack() as stack:
            history = stack.enter_context(History(run_dir / "history.jsonl"))
            history.record("harness", "info", "run-start", resolved)
            if pool is not None:
                with console.status("cluster: starting or reusing…"):
                    cluster = pool.get(spec)
                topic = f"{s.topic.name}-{uuid.uuid4().hex[:6]}"
            else:
                cluster = KafkaCluster(spec, run_id=run_id)
                with console.status(f"cluster: starting {spec.nodes} nodes…"):
                    stack.enter_context(cluster)
                topic = s.topic.name
            stack.callback(cluster.save_logs, run_dir / "logs")
            _execute(s, cluster, topic, history, run_dir, console)
    except KeyboardInterrupt as err:
        interrupted = err
    results = check_run_dir(run_dir, console=console)
    if interrupted is not None:
        raise interrupted
    return RunResult(run_id, run_dir, s, results)


def _execute(s: Scenario, cluster: KafkaCluster, topic: str, history: History, run_dir: Path,
             console: Console) -> None:
    w = s.workload
    cluster.create_topic(topic, s.topic.partitions, s.topic.replication_factor, s.topic.kafka_configs())
    history.record("harness", "info", "topic", {"topic": topic, "keys": [f"{topic}/{p}" for p in
                                                                      range(s.topic.partitions)]})
    bootstrap = cluster.bootstrap_servers()
    observer = Observer(cluster.bootstrap_servers(direct=True), topic, s.topic.partitions,
                        run_dir / "state.jsonl", history.now)
    consumer_settings = ConsumerSettings(bootstrap, topic, s.topic.partitions, mode=w.consumer_mode,
                                         max_records=w.poll_max_records, group_id=f"kafka-chaos-{topic}")
    consumers = [ConsumerWorkload(consumer_settings, history) for _ in range(w.consumers)]
    values = itertools.count()  # run-wide unique values; next() on itertools.count is atomic in CPython
    producers = [
        ProducerWorkload(
            ProducerSettings(bootstrap, topic, s.topic.partitions, acks=w.acks, idempotence=w.idempotence,
                             retries=w.retries, linger_ms=w.linger_ms, batch_size=w.batch_size,
                             record_size=w.record_size, rate=w.rate, in_flight=w.in_flight,
                             delivery_timeout_ms=w.delivery_timeout_ms, request_timeout_ms=w.request_timeout_ms),
            history, values, seed=s.seed * 1000 + i,
        )
        for i in range(w.producers)
    ]
    links = cluster.toxiproxy.links if cluster.toxiproxy else None
    nemesis = Nemesis(cluster, topic, plan(s.faults, s.duration_s, s.seed), history, s.seed, links=links)

    observer.start()
    for consumer in consumers:
        consumer.start()
    for producer in producers:
        producer.start()
    nemesis.start()
    interrupted = False
    try:
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.fields[stats]}"),
                      TimeRemainingColumn(), console=console, transient=True) as progress:
            task = progress.add_task(s.name, total=s.duration_s, stats="")
            start = time.monotonic()
            while (elapsed := time.monotonic() - start) < s.duration_s:
                ok = sum(p.counts["ok"] for p in producers)
                info = sum(p.counts["info"] for p in producers)
                fail = sum(p.counts["fail"] for p in producers)
                polls = sum(c.polls for c in consumers)
                progress.update(task, completed=elapsed,
                                stats=f"sends ok {ok} info {info} fail {fail} · polls {polls}")
                time.sleep(0.5)
    except KeyboardInterrupt:
        interrupted = True  # the cluster is about to go: stop at once, keep what the history has
        raise
    finally:
        with console.status("healing every fault…"):
            nemesis.stop()
            if not interrupted:
                with contextlib.suppress(Exception):
                    cluster.heal_all(timeout_s=90)
        with console.status("stopping clients…"):
            for p in producers:
                p.stop(flush_timeout_s=1 if interrupted else w.delivery_timeout_ms / 1000 + 5)
            for c in consumers:
                c.stop()
            if interrupted:
                observer.stop()
    with console.status("final drain read…"):
        drained = final_drain(consumer_settings, history, timeout_s=w.drain_timeout_s)
    history.record("harness", "info", "drain-complete", drained)
    observer.stop()


def check_run_dir(run_dir: Path, console: Console | None = None) -> dict[str, Any]:
    """Check a stored run (also one cut short): results.json, the report, junit.xml."""
    from kafka_chaos.checker import check_run

    results = check_run(Path(run_dir))
    write_junit(Path(run_dir), results)
    try:
        from kafka_chaos.harness.report import write_report
    except ImportError:
        return results
    try:
        write_report(Path(run_dir))
    except Exception as err:  # a broken report must not hide the verdict
        (console or Console(stderr=True)).print(f"[yellow]warning:[/] report not written: {err}")
    return results


def write_junit(run_dir: Path, results: dict[str, Any]) -> Path:
    """One test case per run; its failure text lists the violations."""
    name = run_dir.name
    violations = results.get("violations", [])
    body = ""
    if violations:
        lines = [f"{v.get('name', '?')} {v.get('key', '')}: {v.get('reason', '')}" for v in violations[:200]]
        body = (f'<failure message={quoteattr(f"{len(violations)} violations")}>'
                f"{escape(chr(10).join(lines))}</failure>")
    xml = (
        '<?xml version="1.0" encoding="utf-8"?>\n'
        f'<testsuite name="kafka-chaos" tests="1" failures="{1 if violations else 0}">'
        f'<testcase classname="kafka-chaos.run" name={quoteattr(name)}>{body}</testcase></testsuite>\n'
    )
    path = run_dir / "junit.xml"
    path.write_text(xml)
    return path
