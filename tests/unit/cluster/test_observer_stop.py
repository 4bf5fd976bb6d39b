"""The observer ends quietly when interrupted: on the shared stop flag, and when its read pool refuses work because
the interpreter is exiting (that used to print a traceback from the observer thread). No cluster: nothing listens
on the bootstrap address, and the sampling step is replaced."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos import interrupts
from kafka_chaos.cluster.observer import Observer


@pytest.fixture(autouse=True)
def fresh() -> Iterator[None]:
    interrupts.reset()
    yield
    interrupts.reset()


@pytest.fixture
def thread_errors(monkeypatch: pytest.MonkeyPatch) -> list[BaseException | None]:
    errors: list[BaseException | None] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: errors.append(args.exc_value))
    return errors


def _observer(tmp_path: Path) -> Observer:
    return Observer("127.0.0.1:1", "t", 1, tmp_path / "state.jsonl", lambda: 0, interval_s=0.01)


def test_a_pool_refusing_work_at_exit_ends_the_observer_without_a_traceback(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, thread_errors: list[BaseException | None]) -> None:
    samples: list[int] = []

    def refuse(self: Observer, *args: Any) -> None:
        samples.append(1)
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(Observer, "_sample", refuse)
    observer = _observer(tmp_path)
    observer.start()
    observer._thread.join(60)
    assert not observer._thread.is_alive()
    assert samples == [1]  # it stopped at the refusal instead of sampling on
    assert thread_errors == []


def test_another_runtime_error_still_surfaces(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              thread_errors: list[BaseException | None]) -> None:
    def broken(self: Observer, *args: Any) -> None:
        raise RuntimeError("a bug")

    monkeypatch.setattr(Observer, "_sample", broken)
    observer = _observer(tmp_path)
    observer.start()
    observer._thread.join(60)
    assert [str(e) for e in thread_errors] == ["a bug"]


def test_the_stop_flag_ends_the_sampling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         thread_errors: list[BaseException | None]) -> None:
    sampled = threading.Event()

    def sample(self: Observer, *args: Any) -> None:
        sampled.set()

    monkeypatch.setattr(Observer, "_sample", sample)
    observer = _observer(tmp_path)
    observer.start()
    assert sampled.wait(60)
    interrupts.STOPPING.set()  # set by a signal; the observer's own stop() is not called
    observer._thread.join(60)
    assert not observer._thread.is_alive()
    assert thread_errors == []
    observer.stop()  # and stopping it afterwards is harmless
