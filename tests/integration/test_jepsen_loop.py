"""The Jepsen loop on real clusters: no false alarms, real lost writes found, every fault kind
recorded with its heal, interrupts leave a checkable history and no containers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.checker.stored_tables import read_stored_tables
from kafka_chaos.checker.tables import history_to_tables
from kafka_chaos.cluster import labelled
from kafka_chaos.cluster.engine import docker_client
from kafka_chaos.harness.run import RunResult

CLI = [sys.executable, "-m", "kafka_chaos.harness.cli"]

pytestmark = pytest.mark.cluster
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def history(result: RunResult) -> list[dict]:
    return [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]


# one seed in make test; the others are the nightly's "more seeds" (README)
@pytest.mark.parametrize("seed", [11, pytest.param(12, marks=pytest.mark.nightly),
                                  pytest.param(13, marks=pytest.mark.nightly)])
def test_control_scenario_reports_no_anomalies(chaos_run, seed: int) -> None:
    result = chaos_run(SCENARIOS / "control.toml", seed=seed, duration_s=10)
    assert result.results["complete"] is True
    assert result.results["anomaly_counts"] == {}, result.results["anomaly_counts"]
    assert result.results["valid"] is True
    sends = result.results["stats"]["ops"]["send"]
    assert sends["ok"] > 500  # it really ran under load
    polls = result.results["stats"]["ops"]["poll"]
    assert polls["ok"] > 0
    # the recorder built the check's tables as it wrote the history: what a parse of the finished file gives
    stored, parsed = read_stored_tables(result.run_dir), history_to_tables(result.run_dir)
    assert stored is not None
    assert stored.sends.cast(SENDS_SCHEMA).equals(parsed.sends) and stored.polls.cast(POLLS_SCHEMA).equals(parsed.polls)
    assert stored.meta.events == parsed.meta.events == len(history(result))


def test_acks1_isolated_leader_loses_acknowledged_writes(chaos_run) -> None:
    result = chaos_run(SCENARIOS / "isolate-leader-acks1.toml", duration_s=31)
    lost = result.results["anomalies"].get("lost-write", [])
    assert lost, f"expected lost writes; got {result.results['anomaly_counts']}"
    events = history(result)
    acked: dict[int, tuple[str, int]] = {}
    read: set[int] = set()
    for e in events:
        if e["f"] == "send" and e["type"] == "ok":
            _, key, (offset, value) = e["value"][0]
            acked[value] = (key, offset)
        if e["f"] == "poll" and e["type"] == "ok":
            for records in e["value"][0][1].values():
                read.update(v for _, v in records)
    for instance in lost[:50]:
        value = instance["value"]
        assert value in acked, f"lost value {value} was never acknowledged"
        assert acked[value][0] == instance["key"]
        assert value not in read, f"lost value {value} was read"
    # the partition and its heal are in the history, in order
    fs = [(e["f"], e["type"]) for e in events if e["process"] == "nemesis"]
    assert fs == [("partition", "invoke"), ("partition", "info"), ("heal", "invoke"), ("heal", "info")]
    # the real run's report in a real browser: loads cleanly, verdict and lost-write rows present
    from tests.unit.report.test_chromium import check_report_in_browser

    assert shutil.which("chromium"), "make setup installs Debian's chromium for this check"
    dom = check_report_in_browser(result.run_dir / "report.html").dom
    assert 'data-anomaly="lost-write"' in dom and 'class="anomaly-row"' in dom
    assert (result.run_dir / "report.png").stat().st_size > 20_000


SUBSCRIBERS: dict[str, Any] = {
    "name": "subscribe-group",
    "seed": 31,
    "duration_s": 20,
    "cluster": {"nodes": 3},
    "topic": {"partitions": 4, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 1, "rate": 200, "consumers": 2, "consumer_mode": "subscribe"},
    "faults": {"schedule": [{"kind": "kill", "target": "leader", "at_s": 6, "duration_s": 4}]},
}


def test_subscribe_consumers_share_the_group_and_their_rebalances_are_not_violations(chaos_run) -> None:
    result = chaos_run(SUBSCRIBERS)
    events = history(result)
    subscribers = {e["process"] for e in events if e["f"] == "subscribe" and e["type"] == "ok"}
    assert len(subscribers) == 2
    assert sorted(result.results["run"]["subscribe_processes"]) == sorted(subscribers)
    # one group: each record goes to one of the two (re-reads after a rebalance aside), and both get some
    reads: list[tuple[str, int]] = []
    readers: set[int] = set()
    for e in events:
        if e["f"] == "poll" and e["type"] == "ok" and e["process"] in subscribers:
            got = [(k, offset) for k, records in e["value"][0][1].items() for offset, _ in records]
            reads += got
            readers |= {e["process"]} if got else set()
    assert readers == subscribers
    assert len(reads) < 1.5 * len(set(reads)), "each record read by both consumers: not one group"
    assert result.results["complete"] is True
    assert result.results["violations"] == [], result.results["anomaly_counts"]
    for name in ("poll-skip", "nonmonotonic-poll"):  # rebalances may move positions: allowed, not bad
        assert all(not i["bad"] for i in result.results["anomalies"].get(name, []))


NODE_FAULTS: dict[str, Any] = {
    "name": "every-node-fault",
    "seed": 21,
    "duration_s": 40,
    "cluster": {"nodes": 3},
    "topic": {"partitions": 2, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 1, "rate": 200},
    "faults": {"schedule": [
        {"kind": "kill", "target": "leader", "at_s": 1, "duration_s": 3},
        {"kind": "stop", "target": "one", "at_s": 6, "duration_s": 3},
        {"kind": "pause", "target": "leader", "at_s": 11, "duration_s": 3},
        {"kind": "partition", "shape": "isolate", "target": "leader", "at_s": 16, "duration_s": 3},
        {"kind": "partition", "shape": "halves", "target": "all", "at_s": 21, "duration_s": 3},
        {"kind": "partition", "shape": "majority-ring", "target": "all", "at_s": 26, "duration_s": 3},
        {"kind": "partition", "shape": "bridge", "target": "all", "at_s": 31, "duration_s": 3},
        {"kind": "partition", "shape": "one-way", "target": "minority", "at_s": 35, "duration_s": 3},
    ]},
}
HEALS = {"kill": "restart", "stop": "start", "pause": "resume", "partition": "heal"}


LINK_KINDS = ("latency", "bandwidth", "timeout", "reset_peer", "link-down")


def test_every_node_fault_kind_leaves_start_and_heal_in_history(chaos_run) -> None:
    result = chaos_run(NODE_FAULTS)
    events = history(result)
    nemesis = [e for e in events if e["process"] == "nemesis"]
    assert all("error" not in e for e in nemesis), [e for e in nemesis if "error" in e]
    for spec in NODE_FAULTS["faults"]["schedule"]:
        kind, heal = spec["kind"], HEALS[spec["kind"]]
        starts = [e for e in nemesis if e["f"] == kind and e["type"] == "info"]
        heals = [e for e in nemesis if e["f"] == heal and e["type"] == "info"]
        assert starts and heals, f"{kind}/{heal} missing"
    shapes = [e["value"]["shape"] for e in nemesis if e["f"] == "partition" and e["type"] == "info"]
    assert shapes == ["isolate", "halves", "majority-ring", "bridge", "one-way"]
    # every fault is healed: as many heals as faults, and the run still drained completely
    assert len([e for e in nemesis if e["type"] == "info"]) == 2 * len(NODE_FAULTS["faults"]["schedule"])
    assert result.results["complete"] is True
    assert result.results["violations"] == [], result.results["anomaly_counts"]


LINK_FAULTS: dict[str, Any] = {
    "name": "every-link-fault",
    "seed": 22,
    "duration_s": 22,
    "cluster": {"nodes": 3, "toxiproxy": True},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 1, "rate": 100},
    "faults": {"schedule": [
        {"kind": "latency", "target": "leader", "latency_ms": 300, "at_s": 1, "duration_s": 3},
        {"kind": "bandwidth", "target": "all", "rate_kbps": 32, "at_s": 5, "duration_s": 3},
        {"kind": "timeout", "target": "one", "at_s": 9, "duration_s": 3},
        {"kind": "reset_peer", "target": "one", "at_s": 13, "duration_s": 3},
        {"kind": "link-down", "target": "leader", "at_s": 17, "duration_s": 3},
    ]},
}


def test_every_link_fault_kind_through_toxiproxy_and_nothing_left_behind(tmp_path) -> None:
    from kafka_chaos.harness.run import run_scenario

    result = run_scenario(LINK_FAULTS, out=tmp_path)
    events = history(result)
    nemesis = [e for e in events if e["process"] == "nemesis"]
    assert all("error" not in e for e in nemesis), [e for e in nemesis if "error" in e]
    for kind in LINK_KINDS:
        assert [e["type"] for e in nemesis if e["f"] == kind] == ["invoke", "info"], kind
    assert len([e for e in nemesis if e["f"] == "heal-link" and e["type"] == "info"]) == len(LINK_KINDS)
    assert result.results["complete"] is True
    assert result.results["violations"] == []
    assert labelled(docker_client(), result.run_id) == {"containers": [], "networks": [], "volumes": []}


def _cli(*args: str, **kw) -> subprocess.Popen:
    """The CLI as a user's terminal starts it. A suite started as a background job (`make test &`, nohup)
    inherits SIGINT ignored, and so would the child: give it the default, as an interactive shell does."""
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **kw)


def test_sigint_during_run_leaves_checkable_incomplete_history_and_no_containers(tmp_path, kafka_chaos_pool) -> None:
    kafka_chaos_pool.release()  # one cluster at a time: this run starts its own
    proc = _cli("run", str(SCENARIOS / "control.toml"), "--out", str(tmp_path))
    deadline = time.monotonic() + 120
    history_file = None
    while time.monotonic() < deadline:
        runs = list(tmp_path.glob("*/history.jsonl"))
        if runs and sum(1 for _ in runs[0].open()) > 300:  # the workload is running
            history_file = runs[0]
            break
        time.sleep(0.5)
    assert history_file is not None, "the run never started writing its history"
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    run_dir = history_file.parent
    run_id = run_dir.name
    assert labelled(docker_client(), run_id) == {"containers": [], "networks": [], "volumes": []}
    check = subprocess.run([*CLI, "check", str(run_dir), "--json"],
                           capture_output=True, text=True)
    results = json.loads(check.stdout)
    assert results["complete"] is False
    assert results["stats"]["ops"]["send"]["ok"] > 0
    assert (run_dir / "results.json").exists()


def test_sigint_during_cluster_up_removes_everything(kafka_chaos_pool) -> None:
    kafka_chaos_pool.release()
    proc = _cli("cluster", "up", "--nodes", "1")
    client = docker_client()
    deadline = time.monotonic() + 120
    out_lines = []
    assert proc.stdout is not None
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        out_lines.append(line)
        if "Ctrl-C removes it" in line:
            break
    assert any("ready" in line for line in out_lines), "".join(out_lines)
    run_id = next(line.split("run id ")[1].split()[0] for line in out_lines if "run id" in line)
    assert labelled(client, run_id)["containers"], "the cluster is not there while it runs"
    proc.send_signal(signal.SIGINT)
    proc.communicate(timeout=60)
    assert proc.returncode == 130
    assert labelled(client, run_id) == {"containers": [], "networks": [], "volumes": []}


def test_unreachable_engine_is_one_paragraph_not_a_traceback() -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    proc = subprocess.run([*CLI, "cluster", "up"], capture_output=True, text=True,
                          env=env, timeout=60)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr + proc.stdout
    assert "No container engine answers at unix:///nonexistent/docker.sock" in " ".join(proc.stderr.split())
    assert "make setup" in " ".join(proc.stderr.split())


def test_bad_scenario_names_field_value_and_allowed_values(tmp_path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "bad"\n[workload]\nacks = "two"\n[[faults.schedule]]\nkind = "explode"\n')
    proc = subprocess.run([*CLI, "run", str(bad)], capture_output=True, text=True,
                          timeout=60)
    err = " ".join(proc.stderr.split())
    assert proc.returncode == 2
    assert "Traceback" not in err
    assert "workload.acks" in err and "'two'" in err and "'all'" in err
    assert "faults.schedule.0.kind" in err and "'explode'" in err
