"""Consumers and the final drain read. Every poll is one op: `invoke [["poll"]]`, then `ok` with what it read,
`{key: [[offset, value], …]}` (Jepsen's poll value). A poll has no side effects, so a poll that raised is `fail`.

`assign` consumers read every partition from the beginning with no group (so positions only move by reading);
`subscribe` consumers join a group, where rebalances may move positions: the checker allows their poll skips.

With `client.rack` (KIP-392), which replica serves a consumer's fetches is the broker's choice: each consumer then
records, from librdkafka's statistics (per partition `broker`: the broker it fetches from, and `leader`), a harness
event `fetch-from` `{"process", "key", "broker", "leader"}` whenever that changes (docs/architecture.md §3).
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.interrupts import join
from kafka_chaos.workloads.clients import client_id
from kafka_chaos.workloads.drivers import IN_PROCESS, Driver
from kafka_chaos.workloads.recorder import Recorder, parse_payload


@dataclass(frozen=True)
class ConsumerSettings:
    bootstrap_servers: str
    topic: str
    partitions: int
    mode: Literal["assign", "subscribe"] = "assign"
    max_records: int = 500
    poll_timeout_s: float = 0.5
    group_id: str = "kafka-chaos"
    client_rack: str | None = None  # KIP-392: fetch from the closest replica (brokers with a rack-aware selector)
    partition_eof: bool = False  # group consumers get end-of-partition events (consume() returns them as errors)
    reopen_s: float | None = None  # group consumers are closed and opened again this often, in the same process
    auto_offset_reset: Literal["earliest", "latest"] = "earliest"  # where a reset position goes (not the start)

    def client_config(self) -> dict[str, Any]:
        rack = {"client.rack": self.client_rack} if self.client_rack else {}
        return {
            **rack,
            "bootstrap.servers": self.bootstrap_servers,
            "group.id": f"{self.group_id}-{uuid.uuid4().hex[:8]}" if self.mode == "assign" else self.group_id,
            "enable.auto.commit": self.mode == "subscribe",
            "auto.offset.reset": self.auto_offset_reset,
            "enable.partition.eof": self.partition_eof and self.mode == "subscribe",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "topic.metadata.refresh.interval.ms": 1000,
            "client.id": "kafka-chaos-consumer",
            "logger": client_logger(),
        }

    def keys(self) -> list[str]:
        return [f"{self.topic}/{p}" for p in range(self.partitions)]


FETCH_STATS_INTERVAL_MS = 1000
"""How often a rack-aware consumer's statistics (and so its fetch sources) are read."""


def fetch_sources_recorder(recorder: Recorder, process: int, topic: str) -> Callable[[str], None]:
    """librdkafka's `stats_cb`: records `fetch-from` when the broker a partition is fetched from (or its leader)
    changes. Called from the consumer's own poll, so it runs on the consumer's thread."""
    seen: dict[str, tuple[int, int]] = {}

    def on_stats(raw: str) -> None:
        partitions = json.loads(raw).get("topics", {}).get(topic, {}).get("partitions", {})
        for p, part in partitions.items():
            broker, leader = part.get("broker", -1), part.get("leader", -1)
            if int(p) < 0 or broker < 0:  # -1: librdkafka's unassigned-partition entry, or not fetching yet
                continue
            key = f"{topic}/{p}"
            if seen.get(key) != (broker, leader):
                seen[key] = (broker, leader)
                recorder.record("harness", "info", "fetch-from",
                                {"process": process, "key": key, "broker": broker, "leader": leader})

    return on_stats


def poll_once(consumer: Consumer, process: int, recorder: Recorder, settings: ConsumerSettings,
              timeout_s: float | None = None) -> dict[str, list[list[int]]] | None:
    """One poll op. Returns what it read (None when it failed)."""
    recorder.record(process, "invoke", "poll", [["poll"]])
    try:
        messages = consumer.consume(settings.max_records, timeout=timeout_s or settings.poll_timeout_s)
    except KafkaException as err:
        recorder.record(process, "fail", "poll", [["poll"]], error=[type(err).__name__, str(err)])
        return None
    read: dict[str, list[list[int]]] = defaultdict(list)
    for msg in messages:
        if msg.error() is not None:
            # informational (e.g. transport) errors and end-of-partition events: librdkafka recovers on its own,
            # and an EOF is not a record (where the position goes after one is librdkafka's business: kept as is)
            continue
        value, offset = parse_payload(msg.value()), msg.offset()
        if value is not None and offset is not None:
            read[f"{msg.topic()}/{msg.partition()}"].append([offset, value])
    recorder.record(process, "ok", "poll", [["poll", dict(read)]])
    return read


def start_reading(consumer: Consumer, process: int, recorder: Recorder, settings: ConsumerSettings) -> None:
    if settings.mode == "assign":
        recorder.record(process, "invoke", "assign", settings.keys())
        consumer.assign([TopicPartition(settings.topic, p, OFFSET_BEGINNING) for p in range(settings.partitions)])
        recorder.record(process, "ok", "assign", settings.keys())
    else:
        recorder.record(process, "invoke", "subscribe", [settings.topic])
        consumer.subscribe([settings.topic])
        recorder.record(process, "ok", "subscribe", [settings.topic])


class ConsumerWorkload:
    """One consumer thread polling until stopped, every op recorded. Subclasses choose the client's settings
    (`client_config`) and how it starts reading (`start_reading`)."""

    thread_name = "consumer"

    def __init__(self, settings: ConsumerSettings, recorder: Recorder, driver: Driver = IN_PROCESS) -> None:
        self.settings = settings
        self.driver = driver
        self.recorder = recorder
        self.process = recorder.new_process()  # before any thread runs: a scenario can name it (workloads.clients)
        self.stop_event = threading.Event()
        self.polls = 0
        self._thread = threading.Thread(target=self._run, name=self.thread_name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        join(self._thread)  # bounded once interrupted: a close stuck on a dead broker must not hold the exit

    def client_config(self) -> dict[str, Any]:
        return {**self.settings.client_config(), "client.id": client_id("consumer", self.process)}

    def start_reading(self, consumer: Consumer, process: int) -> None:
        start_reading(consumer, process, self.recorder, self.settings)

    def _run(self) -> None:
        process = self.process
        config = self.client_config()
        if self.settings.client_rack:
            config |= {"statistics.interval.ms": FETCH_STATS_INTERVAL_MS,
                       "stats_cb": fetch_sources_recorder(self.recorder, process, self.settings.topic)}
        consumer = self.driver.consumer(config, process)
        try:
            self.start_reading(consumer, process)
            reopen_s = self.settings.reopen_s if self.settings.mode == "subscribe" else None
            reopen_at = time.monotonic() + reopen_s if reopen_s else None
            while not self.stop_event.is_set():
                if reopen_s and reopen_at is not None and time.monotonic() >= reopen_at:
                    consumer = self._reopen(consumer, config, process)
                    reopen_at = time.monotonic() + reopen_s
                poll_once(consumer, process, self.recorder, self.settings)
                self.polls += 1
        finally:
            try:
                consumer.close()
            finally:
                self.driver.release(process)

    def _reopen(self, consumer: Consumer, config: dict[str, Any], process: int) -> Consumer:
        """A restarted application: close (which commits the stored offsets of a group consumer with auto commit),
        then a new consumer reads again in the same process, so the checker compares its positions across it."""
        consumer.close()
        fresh: Consumer = self.driver.consumer(config, process)
        self.start_reading(fresh, process)
        return fresh


def end_offsets(consumer: Consumer, settings: ConsumerSettings, deadline: float) -> dict[int, int] | None:
    """High watermark of every partition, retried until `deadline` (a partition may be briefly leaderless)."""
    ends: dict[int, int] = {}
    while time.monotonic() < deadline:
        for p in range(settings.partitions):
            if p in ends:
                continue
            with contextlib.suppress(KafkaException):
                ends[p] = consumer.get_watermark_offsets(TopicPartition(settings.topic, p), timeout=5)[1]
        if len(ends) == settings.partitions:
            return ends
        time.sleep(0.5)
    return None


def final_drain(settings: ConsumerSettings, recorder: Recorder, timeout_s: float,
                driver: Driver = IN_PROCESS) -> bool:
    """Assign every key, seek to the beginning, read up to the end offsets (as of the start of the drain),
    retrying until done or `timeout_s`. Returns whether every partition was read to its end."""
    deadline = time.monotonic() + timeout_s
    drain_settings = ConsumerSettings(**{**settings.__dict__, "mode": "assign", "partition_eof": False,
                                         "reopen_s": None, "auto_offset_reset": "earliest"})
    process = recorder.new_process()
    consumer = driver.consumer({**drain_settings.client_config(), "client.id": client_id("drain", process)}, process)
    try:
        ends = end_offsets(consumer, drain_settings, deadline)
        if ends is None:
            return False
        start_reading(consumer, process, recorder, drain_settings)
        position = {p: 0 for p in range(settings.partitions)}
        while any(position[p] < ends[p] for p in position) and time.monotonic() < deadline:
            read = poll_once(consumer, process, recorder, drain_settings, timeout_s=1.0)
            for key, records in (read or {}).items():
                p = int(key.rsplit("/", 1)[1])
                if records:
                    position[p] = max(position[p], records[-1][0] + 1)
        return all(position[p] >= ends[p] for p in position)
    except KafkaException as err:
        recorder.record(process, "info", "poll", [["poll"]], error=[KafkaError.__name__, str(err)])
        return False
    finally:
        try:
            consumer.close()
        finally:
            driver.release(process)
