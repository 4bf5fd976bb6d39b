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
