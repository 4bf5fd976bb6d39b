"""The transactional workload's pure parts: bounded client calls (librdkafka#5456) and its configuration."""

from __future__ import annotations

import threading

import pytest

from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.workloads.txn import _returns_within


def test_a_call_that_returns_in_time_passes_its_exception_on() -> None:
    assert _returns_within(lambda: None, 1.0)
    with pytest.raises(ZeroDivisionError):
        _returns_within(lambda: 1 / 0, 1.0)


def test_a_blocked_call_is_left_behind_and_reported() -> None:
    release = threading.Event()
    assert not _returns_within(release.wait, 0.2)
    release.set()


def test_the_scenario_selects_the_transactional_workload() -> None:
    s = parse_scenario({"name": "t", "workload": {"kind": "txn", "txn_keys": 3, "txn_isolation": ["read_committed"]}})
    assert s.workload.kind == "txn" and s.workload.txn_keys == 3 and s.workload.txn_isolation == ["read_committed"]
    assert parse_scenario({"name": "q"}).workload.kind == "queue"  # the default stays the queue
    with pytest.raises(Exception, match="kind"):
        parse_scenario({"name": "t", "workload": {"kind": "exactly-once"}})


def test_the_run_builds_the_scenarios_workload() -> None:
    from kafka_chaos.harness.run import default_workload
    from kafka_chaos.workloads.queue import QueueWorkload
    from kafka_chaos.workloads.txn import TxnWorkload

    assert isinstance(default_workload(parse_scenario({"name": "t", "workload": {"kind": "txn"}})), TxnWorkload)
    assert isinstance(default_workload(parse_scenario({"name": "q"})), QueueWorkload)


class _CallLog:
    """A producer and recorder that note what the workload asked, in order (no client, no broker)."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.ops: list[tuple[str, str]] = []

    def new_process(self) -> int:
        return 0

    def record(self, process: int | str, type_: str, f: str, value: object, error: object = None,
               extra: object = None) -> None:
        self.ops.append((type_, f))

    def begin_transaction(self) -> None:
        self.calls.append("begin")

    def produce(self, *args: object, **kwargs: object) -> None:
        self.calls.append("produce")

    def flush(self, timeout: float = 0) -> int:
        self.calls.append(f"flush {timeout}")
        return 0

    def abort_transaction(self, timeout: float = 0) -> None:
        self.calls.append("abort")

    def commit_transaction(self, timeout: float = 0) -> None:
        self.calls.append("commit")

    def poll(self, timeout: float = 0) -> int:
        return 0


@pytest.mark.parametrize("wait_ms", [None, 2500])
def test_an_abort_on_purpose_waits_for_its_sends_only_when_asked(wait_ms: int | None) -> None:
    import itertools

    from kafka_chaos.workloads.txn import TxnProducerThread

    s = parse_scenario({"name": "t", "workload": {"kind": "txn", "txn_keys": 2, "txn_abort_share": 1,
                                                  "txn_mixed_share": 0, "txn_abort_wait_ms": wait_ms}})
    log = _CallLog()
    thread = TxnProducerThread("b:9092", "t", 3, s.workload, log, itertools.count(), 0, seed=1)  # type: ignore[arg-type]
    thread._one(0, log, None, 5.0)  # type: ignore[arg-type]
    waited = ["flush 2.5"] if wait_ms else []
    assert log.calls == ["begin", "produce", "produce", *waited, "abort"]
    assert log.ops == [("invoke", "txn"), ("fail", "txn")]


@pytest.mark.parametrize("delay_ms", [None, 1500])
def test_a_commit_waits_for_its_sends_and_holds_the_transaction_open_only_when_asked(delay_ms: int | None) -> None:
    import itertools

    from kafka_chaos.workloads.txn import TxnProducerThread

    s = parse_scenario({"name": "t", "workload": {"kind": "txn", "txn_keys": 2, "txn_abort_share": 0,
                                                  "txn_mixed_share": 0, "txn_commit_delay_ms": delay_ms}})
    log = _CallLog()
    thread = TxnProducerThread("b:9092", "t", 3, s.workload, log, itertools.count(), 0, seed=1)  # type: ignore[arg-type]
    held: list[float | None] = []

    def hold(timeout: float | None = None) -> bool:
        held.append(timeout)
        return False

    thread.stop_event.wait = hold  # type: ignore[method-assign]
    thread._one(0, log, None, 5.0)  # type: ignore[arg-type]
    assert log.calls == ["begin", "produce", "produce", *(["flush 1.5"] if delay_ms else []), "commit"]
    assert held == ([1.5] if delay_ms else [])
    assert log.ops == [("invoke", "txn"), ("ok", "txn")]
