"""SIGTERM (what CI sends on cancel) and SIGINT at a random moment of a two-run campaign on a real cluster: the
campaign exits with the signal's code (143, 130), says that it checked nothing it started is left and nothing
else, leaves no labelled container, network or volume, and every run folder it wrote stays checkable.

The moment is a random phase of the campaign (the cluster starting, a run under way, between the runs, the last
run just finished) plus a random delay; the seed is printed (set KAFKA_CHAOS_INTERRUPT_SEED to replay one).
The default selection sends one SIGTERM and one SIGINT; `-m nightly` sends several more."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from kafka_chaos.cluster import labelled
from kafka_chaos.cluster.engine import docker_client
from kafka_chaos.harness.outputs import check_run_dir

pytestmark = pytest.mark.cluster
CLI = [sys.executable, "-m", "kafka_chaos.harness.cli"]
NOTHING: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}

TINY = """
name = "tiny"
seed = 1
duration_s = 10
[cluster]
nodes = 1
[topic]
partitions = 1
replication_factor = 1
min_insync_replicas = 1
[workload]
producers = 1
in_flight = 2
consumers = 1
rate = 50
"""

CAMPAIGN = """
name = "interrupted"
base = "tiny.toml"
seeds = [1, 2]
[fault_sets.pause]
schedule = [{ kind = "pause", target = "leader", at_s = 3, duration_s = 2 }]
"""

PHASES = ("cluster-starting", "first-run", "between-runs", "second-run", "last-run-finished")


def _histories(out: Path) -> list[Path]:
    return sorted(out.glob("*/history.jsonl"), key=lambda p: p.stat().st_mtime)


def _lines(path: Path) -> int:
    with path.open("rb") as f:
        return sum(1 for _ in f)


def _reached(phase: str, out: Path) -> Callable[[], bool]:
    """Whether the campaign writing to `out` has reached `phase`, from what it leaves on the engine and disk."""
    def nth_run(n: int, done: bool) -> bool:
        runs = _histories(out)
        if len(runs) <= n:
            return False
        return (runs[n].parent / "results.json").exists() if done else _lines(runs[n]) > 40

    return {
        "cluster-starting": lambda: bool(labelled(docker_client())["containers"]),
        "first-run": lambda: nth_run(0, done=False),
        "between-runs": lambda: nth_run(0, done=True),
        "second-run": lambda: nth_run(1, done=False),
        "last-run-finished": lambda: nth_run(1, done=True),
    }[phase]


def _interrupt_campaign(tmp_path: Path, signum: int, seed: int) -> None:
    rng = random.Random(seed)
    phase = rng.choice(PHASES)
    # the campaign's teardown after its last run lasts about a second (one node to remove): signal inside it
    delay_s = rng.uniform(0, 0.2 if phase == "last-run-finished" else 1.5)
    print(f"interrupt seed {seed}: {signal.Signals(signum).name} at {phase} + {delay_s:.2f}s")
    assert labelled(docker_client()) == NOTHING, "labelled leftovers before the test: run `kafka-chaos clean`"
    (tmp_path / "tiny.toml").write_text(TINY)
    (tmp_path / "campaign.toml").write_text(CAMPAIGN)
    out = tmp_path / "results"
    proc = subprocess.Popen([*CLI, "campaign", str(tmp_path / "campaign.toml"), "--out", str(out)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "COLUMNS": "300"},
                            # a suite started in the background inherits SIGINT ignored: give the default back
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        reached = _reached(phase, out)
        deadline = time.monotonic() + 600
        while not reached() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None, f"the campaign ended before {phase}: {proc.communicate()}"
        assert reached(), f"the campaign never reached {phase}"
        time.sleep(delay_s)
        assert proc.poll() is None, f"the campaign ended before the signal: {proc.communicate()}"
        proc.send_signal(signum)
        stdout, stderr = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    name = signal.Signals(signum).name
    assert proc.returncode == 128 + signum, (proc.returncode, stdout, stderr)
    assert f"interrupted ({name}): checked, no container, network or volume it started is left" in stderr, stderr
    assert "Traceback" not in stdout + stderr, stderr
    assert "still left" not in stderr
    assert labelled(docker_client()) == NOTHING
    # every run folder it wrote reads back; one cut short (no final read recorded) is marked incomplete
    for history in _histories(out):
        results = check_run_dir(history.parent)
        if b'"drain-complete"' not in history.read_bytes():
            assert results.complete is False, history.parent


def _seed() -> int:
    return int(os.environ.get("KAFKA_CHAOS_INTERRUPT_SEED") or random.SystemRandom().randrange(1_000_000))


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_interrupted_campaign_exits_truthfully_and_leaves_nothing(tmp_path, kafka_chaos_pool, signum) -> None:
    kafka_chaos_pool.release()  # one cluster at a time: the campaign starts its own
    _interrupt_campaign(tmp_path, signum, _seed())


@pytest.mark.nightly
@pytest.mark.parametrize("round_", range(6))
def test_interrupted_campaign_at_more_moments(tmp_path, kafka_chaos_pool, round_) -> None:
    kafka_chaos_pool.release()
    seed = _seed() + round_
    _interrupt_campaign(tmp_path, random.Random(seed).choice([signal.SIGTERM, signal.SIGINT]), seed)


PLUGIN_TEST = '''
import pytest

TINY = {"name": "tiny-plugin", "duration_s": 30, "cluster": {"nodes": 1},
        "topic": {"partitions": 1, "replication_factor": 1, "min_insync_replicas": 1},
        "workload": {"producers": 1, "in_flight": 2, "consumers": 1, "rate": 50}}

@pytest.mark.chaos(scenario=TINY)
def test_tiny(chaos_result):
    pass
'''


def test_sigterm_ends_a_pytest_session_of_the_plugin_and_leaves_nothing(tmp_path, kafka_chaos_pool) -> None:
    """A user's suite cancelled by CI: the session ends as on Ctrl-C, its cluster is removed and checked."""
    kafka_chaos_pool.release()
    assert labelled(docker_client()) == NOTHING, "labelled leftovers before the test: run `kafka-chaos clean`"
    (tmp_path / "test_tiny_chaos.py").write_text(PLUGIN_TEST)
    out = tmp_path / "results"
    proc = subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                             f"--kafka-chaos-results={out}", str(tmp_path / "test_tiny_chaos.py")],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 600
        while (not (runs := _histories(out)) or _lines(runs[0]) <= 40) and proc.poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGTERM)
        output, _ = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 2, output  # pytest's own code for an interrupted session
    assert "interrupted (SIGTERM): checked, no container, network or volume it started is left" in output, output
    assert labelled(docker_client()) == NOTHING
    (history,) = _histories(out)
    assert check_run_dir(history.parent).complete is False
