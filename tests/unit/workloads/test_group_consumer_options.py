"""`[workload] partition_eof` and `consumer_reopen_s`: what the group consumers are configured with, what the
scenario refuses, and that a reopened consumer reads on in the same history process."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from confluent_kafka import KafkaError
from pydantic import ValidationError

from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.workloads import drivers
from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.consumer import ConsumerSettings, ConsumerWorkload, final_drain, poll_once
from kafka_chaos.workloads.recorder import payload


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None,
               extra: Any = None) -> int:
        with self._lock:
            self.events.append((process, type_, f, value))
            return len(self.events) - 1

    def new_process(self) -> int:
        return 3


class Msg:
    def __init__(self, partition: int, offset: int, value: int | None, error: KafkaError | None = None) -> None:
        self._p, self._o, self._v, self._e = partition, offset, value, error

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o

    def value(self) -> bytes | None:
        return None if self._v is None else payload(self._v, 16)

    def error(self) -> KafkaError | None:
        return self._e


EOF = KafkaError(KafkaError._PARTITION_EOF)


class FakeConsumer:
    def __init__(self, log: list[str], config: dict[str, Any], batches: list[list[Msg]] | None = None) -> None:
        self.log, self.config, self.batches = log, config, list(batches or [])

    def subscribe(self, topics: list[str]) -> None:
        self.log.append("subscribe")

    def assign(self, partitions: Any) -> None:
        self.log.append("assign")

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Msg]:
        self.log.append("consume")
        return self.batches.pop(0) if self.batches else []

    def get_watermark_offsets(self, partition: Any, timeout: float = 0) -> tuple[int, int]:
        return 0, 0

    def close(self) -> None:
        self.log.append("close")


class FakeDriver:
    client, version, out_of_process = "fake", "0", False

    def __init__(self) -> None:
        self.log: list[str] = []
        self.configs: list[dict[str, Any]] = []
        self.opened = threading.Condition()

    def consumer(self, config: dict[str, Any], process: int) -> FakeConsumer:
        with self.opened:
            self.configs.append(config)
            self.log.append(f"open p{process}")
            self.opened.notify_all()
        return FakeConsumer(self.log, config)

    def release(self, process: int) -> None:
        self.log.append(f"release p{process}")


def test_partition_eof_turns_on_end_of_partition_events_for_group_consumers_only() -> None:
    group = ConsumerSettings("b:9092", "t", 3, mode="subscribe", partition_eof=True)
    assert group.client_config()["enable.partition.eof"] is True
    assert ConsumerSettings("b:9092", "t", 3, mode="subscribe").client_config()["enable.partition.eof"] is False
    sample = drivers._sample_configs(WorkloadConfig(consumer_mode="subscribe", partition_eof=True))
    assert sample[0]["enable.partition.eof"] is True  # what a worker is given (and a client's mapping checks)


def test_the_final_drain_reads_without_end_of_partition_events() -> None:
    driver = FakeDriver()
    settings = ConsumerSettings("b:9092", "t", 1, mode="subscribe", partition_eof=True, reopen_s=0.01)
    assert final_drain(settings, ListRecorder(), timeout_s=5, driver=driver)  # type: ignore[arg-type]
    assert driver.configs[0]["enable.partition.eof"] is False and driver.log[-2:] == ["close", "release p3"]


def test_the_java_client_has_no_partition_eof_and_assign_consumers_no_group_options() -> None:
    with pytest.raises(ValidationError, match="Java client does not have"):
        WorkloadConfig(client="java", client_version="4.1.0", consumer_mode="subscribe", partition_eof=True)
    with pytest.raises(ScenarioError, match=r'partition_eof applies to group consumers.*consumer_mode = "subscribe"'):
        parse_scenario({"name": "t", "workload": {"partition_eof": True}})
    with pytest.raises(ScenarioError, match="consumer_reopen_s applies to group consumers"):
        parse_scenario({"name": "t", "workload": {"consumer_reopen_s": 5}})
    with pytest.raises(ScenarioError, match="greater than 0"):
        parse_scenario({"name": "t", "workload": {"consumer_mode": "subscribe", "consumer_reopen_s": 0}})
    ok = WorkloadConfig(consumer_mode="subscribe", partition_eof=True, consumer_reopen_s=8)
    assert ok.partition_eof and ok.consumer_reopen_s == 8


def test_a_poll_records_the_records_around_an_eof_event_and_not_the_event() -> None:
    rec = ListRecorder()
    consumer = FakeConsumer([], {}, [[Msg(0, 4, 40), Msg(0, 5, None, EOF), Msg(1, 9, 90)]])
    read = poll_once(consumer, 3, rec, ConsumerSettings("b:9092", "t", 2, mode="subscribe"))  # type: ignore[arg-type]
    assert read == {"t/0": [[4, 40]], "t/1": [[9, 90]]}
    assert rec.events[-1] == (3, "ok", "poll", [["poll", {"t/0": [[4, 40]], "t/1": [[9, 90]]}]])


def test_a_reopened_group_consumer_closes_first_and_subscribes_again_in_the_same_process() -> None:
    driver, rec = FakeDriver(), ListRecorder()
    settings = ConsumerSettings("b:9092", "t", 1, mode="subscribe", partition_eof=True, reopen_s=0.001,
                                poll_timeout_s=0)
    worker = ConsumerWorkload(settings, rec, driver)  # type: ignore[arg-type]
    worker.start()
    with driver.opened:
        assert driver.opened.wait_for(lambda: len(driver.configs) >= 3, timeout=60)
    worker.stop()
    opened = [i for i, line in enumerate(driver.log) if line.startswith("open")]
    assert all(line == "open p3" for line in (driver.log[i] for i in opened))
    assert all(driver.log[i - 1] == "close" for i in opened[1:])  # the old consumer is gone before the new one
    assert driver.log[-1] == "release p3" and driver.log.count("release p3") == 1
    subscribes = [e for e in rec.events if e[2] == "subscribe" and e[1] == "ok"]
    assert len(subscribes) >= 3 and {e[0] for e in subscribes} == {3}
    assert all(c["enable.partition.eof"] is True for c in driver.configs)
