"""kafka_chaos.interrupts: SIGTERM and SIGINT become one stop path, cleanup steps run whole, stops are bounded,
and the last message says only what was checked. No cluster: signals go to this process or to a small child."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console

from kafka_chaos import interrupts
from kafka_chaos.harness import run as run_mod

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    interrupts.reset()
    yield
    interrupts.reset()


def _signal_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    for _ in range(100):  # Python runs the handler at the next bytecode boundary of the main thread
        time.sleep(0.01)


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_raises_keyboard_interrupt_sets_stopping_and_names_its_exit_code(signum: int, code: int) -> None:
    with interrupts.handling(), pytest.raises(KeyboardInterrupt):
        _signal_self(signum)
    assert interrupts.STOPPING.is_set()
    assert interrupts.received() == signum
    assert interrupts.exit_code() == code


def test_handlers_are_restored_after_the_block() -> None:
    def before(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, before)
    try:
        with interrupts.handling():
            assert signal.getsignal(signal.SIGTERM) is not before
        assert signal.getsignal(signal.SIGTERM) is before
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_a_signal_inside_a_deferred_step_is_raised_when_the_step_has_run_whole() -> None:
    steps: list[str] = []
    with interrupts.handling(), pytest.raises(KeyboardInterrupt):
        with interrupts.deferred():
            _signal_self(signal.SIGTERM)
            steps.append("after the signal")  # the cleanup goes on
        steps.append("after the block")  # never reached: the held signal is raised here
    assert steps == ["after the signal"]
    assert interrupts.exit_code() == 143


def test_a_second_signal_does_not_cut_the_cleanup_short() -> None:
    steps: list[str] = []
    with interrupts.handling():
        with pytest.raises(KeyboardInterrupt):
            _signal_self(signal.SIGINT)
        _signal_self(signal.SIGTERM)  # while cleaning up: noted, not raised
        steps.append("cleanup done")
    assert steps == ["cleanup done"]
    assert interrupts.received() == signal.SIGINT  # the first signal decides the exit code
    assert interrupts.exit_code() == 130


def test_join_is_bounded_once_stopping_and_returns_whether_the_thread_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(interrupts, "STOP_GRACE_S", 0.05)
    release = threading.Event()
    stuck = threading.Thread(target=release.wait, daemon=True)  # like a client call that never returns
    stuck.start()
    interrupts.STOPPING.set()
    assert interrupts.join(stuck) is False  # unbounded without an interrupt; left behind with one
    assert interrupts.bounded(None) == 0.05
    assert interrupts.bounded(0.01) == 0.01
    release.set()
    assert interrupts.join(stuck) is True
    assert interrupts.join(threading.Thread(target=print)) is True  # never started: nothing to wait for


def test_without_an_interrupt_waits_keep_their_own_timeouts() -> None:
    assert interrupts.bounded(None) is None
    assert interrupts.bounded(600.0) == 600.0


def test_the_last_message_says_what_was_checked() -> None:
    with interrupts.handling(), pytest.raises(KeyboardInterrupt):
        _signal_self(signal.SIGTERM)
    clean = interrupts.outcome({"containers": [], "networks": [], "volumes": []})
    assert clean.startswith("interrupted (SIGTERM): checked, no container, network or volume it started is left")
    left = interrupts.outcome({"containers": ["kc-node-1"], "networks": ["kc-net"], "volumes": []})
    assert "still left: 1 containers (kc-node-1); 1 networks (kc-net)" in left
    assert "kafka-chaos clean" in left and "nothing" not in left
    unknown = interrupts.outcome(None, "ConnectionError: engine gone")
    assert "could not check" in unknown and "engine gone" in unknown and "kafka-chaos clean" in unknown


class _Part:
    def __init__(self, name: str, calls: list[tuple[str, bool]], fail_start: bool = False) -> None:
        self.name, self.calls, self.fail_start = name, calls, fail_start

    def start(self, ctx: Any) -> None:
        if self.fail_start:
            raise KeyboardInterrupt
        self.calls.append((f"start {self.name}", False))

    def stop(self, ctx: Any, *, interrupted: bool) -> None:
        self.calls.append((f"stop {self.name}", interrupted))

    def progress(self) -> str:
        return ""


def test_parts_started_before_an_interrupt_are_all_stopped_as_interrupted() -> None:
    calls: list[tuple[str, bool]] = []
    ctx = SimpleNamespace(scenario=SimpleNamespace(name="t", duration_s=60), console=Console(quiet=True))
    workloads = [_Part("w1", calls), _Part("w2", calls)]
    nemeses = [_Part("n1", calls), _Part("n2", calls, fail_start=True)]  # the interrupt comes as n2 starts
    with pytest.raises(KeyboardInterrupt):
        run_mod._run_parts(ctx, workloads, nemeses)  # type: ignore[arg-type]
    assert calls == [("start w1", False), ("start w2", False), ("start n1", False),
                     ("stop n1", True), ("stop w2", True), ("stop w1", True)]


NAP = """
import time, typer
from kafka_chaos.harness import cli

@cli.app.command()
def nap() -> None:
    print("napping", flush=True)
    time.sleep(600)

cli.main()
"""


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_the_cli_exits_with_the_signals_code_and_says_only_what_it_checked(signum: int, code: int) -> None:
    proc = subprocess.Popen([sys.executable, "-c", NAP, "nap"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "300"},
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "napping"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err
    name = signal.Signals(signum).name
    assert f"interrupted ({name}): checked, no container, network or volume it started is left" in err
    assert "Traceback" not in err


class _LateOperator(_Part):
    """Busy for its first few polls past the run's end, as an operator whose operation was made late."""

    def __init__(self, name: str, calls: list[tuple[str, bool]], polls: int) -> None:
        super().__init__(name, calls)
        self.polls = polls

    def busy(self) -> bool:
        self.polls -= 1
        self.calls.append(("busy", self.polls >= 0))
        return self.polls >= 0


def test_the_run_goes_on_under_load_while_an_operation_scheduled_in_it_is_under_way() -> None:
    calls: list[tuple[str, bool]] = []
    ctx = SimpleNamespace(scenario=SimpleNamespace(name="t", duration_s=0.1), console=Console(quiet=True))
    workloads: list[Any] = [_Part("w", calls)]
    run_mod._run_parts(ctx, workloads, [_LateOperator("op", calls, polls=3)])  # type: ignore[arg-type]
    assert calls[:2] == [("start w", False), ("start op", False)]
    assert calls[2:] == [("busy", True)] * 3 + [("busy", False), ("stop op", False), ("stop w", False)]
