"""Which process owns which client (workloads.clients): the numbering a scenario's `clients` relies on is the one
the workloads hand out, and every client.id names its process."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.workloads.clients import client_id, process_of, starting_clients
from kafka_chaos.workloads.consumer import ConsumerWorkload
from kafka_chaos.workloads.producer import ProducerWorkload
from kafka_chaos.workloads.queue import QueueWorkload
from kafka_chaos.workloads.txn import TxnProducerThread, TxnWorkload


class Numbers:
    """A history that only numbers processes."""

    def __init__(self) -> None:
        self._n = itertools.count()

    def new_process(self) -> int:
        return next(self._n)

    def record(self, *args: Any, **kwargs: Any) -> int:
        return 0


def started(workload: Any, scenario: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> Any:
    """The workload after `start`, its threads not run: what it numbered before any thread could."""
    for cls in (ProducerWorkload, ConsumerWorkload, TxnProducerThread):
        monkeypatch.setattr(cls, "start", lambda self: None)
    s = parse_scenario({"name": "t", **scenario})
    ctx = SimpleNamespace(scenario=s, topic="t", history=Numbers(),
                          cluster=SimpleNamespace(bootstrap_servers=lambda: "localhost:1"))
    workload.start(ctx)
    return workload


def test_client_ids_name_their_process_and_nothing_else_does() -> None:
    assert client_id("txn", 3) == "kafka-chaos-txn-p3" and process_of("kafka-chaos-txn-p3") == 3
    assert process_of(client_id("consumer-read_committed", 12)) == 12
    assert process_of("kafka-chaos-observer") is None and process_of(None) is None and process_of("p3") is None


def test_the_queue_workload_numbers_consumers_then_each_producers_processes(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = {"workload": {"producers": 2, "in_flight": 3, "consumers": 2}}
    w = started(QueueWorkload(parse_scenario({"name": "t", **scenario}).workload), scenario, monkeypatch)
    assert [c.process for c in w.consumers] == [0, 1]
    assert [p._first for p in w.producers] == [[2, 3, 4], [5, 6, 7]]
    owners = starting_clients(w.config)
    assert owners == {0: ["kafka-chaos-consumer-p0"], 1: ["kafka-chaos-consumer-p1"],
                      2: ["kafka-chaos-producer-p2"], 5: ["kafka-chaos-producer-p5"]}
    assert [c.client_config()["client.id"] for c in w.consumers] == [owners[0][0], owners[1][0]]


def test_the_txn_workload_numbers_producers_then_its_consumers(monkeypatch: pytest.MonkeyPatch) -> None:
    scenario = {"workload": {"kind": "txn", "producers": 2, "consumers": 1}}
    w = started(TxnWorkload(parse_scenario({"name": "t", **scenario}).workload), scenario, monkeypatch)
    assert [p._first_process for p in w.producers] == [0, 1]
    assert [c.process for c in w.consumers] == [2, 3]
    owners = starting_clients(w.config)
    assert owners[0] == ["kafka-chaos-txn-p0", "kafka-chaos-txn-consumer-p0"]
    assert [owners[c.process] for c in w.consumers] == [[c.client_config()["client.id"]] for c in w.consumers]
    assert w.consumers[0].client_config()["client.id"] == "kafka-chaos-consumer-read_committed-p2"
    without_reads = parse_scenario({"name": "t", "workload": {"kind": "txn", "producers": 1, "consumers": 0,
                                                              "txn_mixed_share": 0}}).workload
    assert starting_clients(without_reads) == {0: ["kafka-chaos-txn-p0"]}
