"""Producers: Jepsen processes that each send one uniquely tagged value at a time.

One producer thread drives `in_flight` processes through one confluent-kafka Producer: each process has at most
one op outstanding (Jepsen's model: a process is single-threaded), and the thread keeps them all busy, so
throughput comes from many processes, not from breaking the model. Values come from one run-wide counter, so
every value is unique; each send names its partition, so a value's key is known at invoke time.

Outcomes, Jepsen's rules: the delivery report's offset → `ok`; an error that proves the record was never
appended → `fail`; anything else (timeouts, retriable errors that may have been appended on an earlier
attempt) → `info`, and the process is retired for a new number.

A client that raises a fatal error (an idempotent librdkafka producer whose sequence the broker's log no longer
holds, e.g. after an unclean election) is recorded as an `info` `crash` and replaced by a new client with new
processes; its unanswered sends stay open (unknown), as a crashed process's would.
"""

from __future__ import annotations

import contextlib
import itertools
import random
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Message

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.interrupts import join
from kafka_chaos.workloads.clients import client_id
from kafka_chaos.workloads.drivers import IN_PROCESS, Driver
from kafka_chaos.workloads.recorder import Recorder, kafka_error, payload

# Rejected by the broker or client before any append could happen, whatever the retries.
NEVER_APPENDED = {
    KafkaError.MSG_SIZE_TOO_LARGE,
    KafkaError.INVALID_RECORD,
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.UNKNOWN_TOPIC_OR_PART,
    KafkaError._UNKNOWN_PARTITION,
    KafkaError._UNKNOWN_TOPIC,
    KafkaError.INVALID_REQUIRED_ACKS,
}
# Rejected before the append on this attempt; "never appended" only when there were no earlier attempts.
REJECTED_BEFORE_APPEND = {KafkaError.NOT_ENOUGH_REPLICAS, KafkaError.NOT_LEADER_FOR_PARTITION}
FLUSH_AFTER_FATAL_S = 5.0
"""How long a client that raised a fatal error gets to report the sends it failed, before it is dropped."""


@dataclass(frozen=True)
class ProducerSettings:
    bootstrap_servers: str
    topic: str
    partitions: int
    acks: str = "all"
    idempotence: bool = True
    retries: int | None = None
    linger_ms: int = 5
    batch_size: int = 16384
    record_size: int = 100
    rate: float = 0  # sends per second for this thread; 0 = unthrottled
    in_flight: int = 8
    delivery_timeout_ms: int = 15000
    request_timeout_ms: int = 5000

    def client_config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": self.bootstrap_servers,
            "acks": self.acks,
            "enable.idempotence": self.idempotence,
            "linger.ms": self.linger_ms,
            "batch.size": self.batch_size,
            "delivery.timeout.ms": self.delivery_timeout_ms,
            "request.timeout.ms": min(self.request_timeout_ms, self.delivery_timeout_ms),
            "socket.timeout.ms": max(self.request_timeout_ms, 10),
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
            "client.id": "kafka-chaos-producer",
            "logger": client_logger(),
        }
        if self.retries is not None:
            conf["retries"] = self.retries
        return conf


def classify(err: KafkaError, retries: int | None) -> str:
    """`fail` only when the record certainly was not appended; otherwise `info` (unknown)."""
    if err.code() in NEVER_APPENDED:
        return "fail"
    if err.code() in REJECTED_BEFORE_APPEND and retries == 0:
        return "fail"
    return "info"


class ProducerWorkload:
    def __init__(self, settings: ProducerSettings, recorder: Recorder, values: Iterator[int], seed: int,
                 driver: Driver = IN_PROCESS) -> None:
        self.settings = settings
        self.driver = driver
        self.recorder = recorder
        self.values = values
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.outstanding = 0
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self._thread = threading.Thread(target=self._run, name=f"producer-{seed}", daemon=True)
        self._partition_cycle: dict[int, Iterator[int]] = {}
        # numbered here, before any thread runs, so a scenario can name them (workloads.clients)
        self._first = [recorder.new_process() for _ in range(settings.in_flight)]

    def start(self) -> None:
        self._thread.start()

    def stop(self, flush_timeout_s: float = 20) -> None:
        self._flush_timeout_s = flush_timeout_s
        self.stop_event.set()
        join(self._thread)  # bounded once interrupted: its unanswered sends stay open invokes (unknown)

    def _next_partition(self, process: int) -> int:
        if process not in self._partition_cycle:
            start = self.rng.randrange(self.settings.partitions)
            order = [(start + i) % self.settings.partitions for i in range(self.settings.partitions)]
            self._partition_cycle[process] = itertools.cycle(order)
        return next(self._partition_cycle[process])

    def _run(self) -> None:
        processes = list(self._first)
        while True:
            crashed = self._drive(processes)
            if crashed is None:
                return
            process, err = crashed
            # librdkafka's fatal error leaves the producer unusable (rd_kafka_fatal_error): the application makes a
            # new one, so the thread goes on with a new client and new processes; the old client's unanswered
            # sends stay open invokes (unknown outcome), as for a crashed process
            self.recorder.record(process, "info", "crash", None, error=[err.name(), err.str()])
            if self.stop_event.is_set():
                return
            processes = [self.recorder.new_process() for _ in range(self.settings.in_flight)]

    def _drive(self, processes: list[int]) -> tuple[int, KafkaError] | None:
        """One client driving `processes` until the workload stops (None) or the client raises a fatal error:
        then (a process of it with no op open, to record the crash on; the error)."""
        s = self.settings
        # one client for all of the thread's processes: named by the first (workloads.clients)
        producer = self.driver.producer({**s.client_config(), "client.id": client_id("producer", processes[0])},
                                        processes[0])
        idle: list[int] = list(processes)
        interval = 1.0 / s.rate if s.rate > 0 else 0.0
        next_send = time.monotonic()

        def invoke(process: int) -> None:
            value = next(self.values)
            partition = self._next_partition(process)
            key = f"{s.topic}/{partition}"
            self.recorder.record(process, "invoke", "send", [["send", key, value]])

            def on_delivery(err: KafkaError | None, msg: Message) -> None:
                self.outstanding -= 1
                if err is None:
                    offset = msg.offset()
                    known = offset if offset is not None and offset >= 0 else None
                    self.recorder.record(process, "ok", "send", [["send", key, [known, value]]])
                    self.counts["ok"] += 1
                    idle.append(process)
                    return
                failed(classify(err, s.retries), err)

            def failed(outcome: str, err: KafkaError) -> None:
                self.counts[outcome] += 1
                self.recorder.record(process, outcome, "send", [["send", key, [None, value]]],
                                     error=[err.name(), err.str()])
                idle.append(process if outcome == "fail" else self.recorder.new_process())

            while True:
                try:
                    producer.produce(s.topic, value=payload(value, s.record_size), partition=partition,
                                     on_delivery=on_delivery)
                    self.outstanding += 1
                    return
                except BufferError:
                    producer.poll(0.05)
                except KafkaException as raised:
                    err = kafka_error(raised)
                    if err is not None and err.code() == KafkaError._FATAL:
                        failed("fail", err)  # a client with a fatal error queues nothing (rd_kafka_producev)
                    raise

        try:
            while not self.stop_event.is_set():
                while idle and not self.stop_event.is_set():
                    if interval:
                        now = time.monotonic()
                        if now < next_send:
                            break
                        next_send = max(next_send + interval, now - 1.0)
                    invoke(idle.pop())
                wait = max(0.0, min(0.05, next_send - time.monotonic())) if interval else 0.005
                producer.poll(wait if idle or interval else 0.05)
            # Let outstanding sends finish; whatever is still unanswered stays an open invoke (unknown outcome).
            producer.flush(getattr(self, "_flush_timeout_s", 20))
            return None
        except KafkaException as raised:
            err = _fatal_error(raised, producer)
            if err is None:
                raise
            crashed = idle.pop() if idle else self.recorder.new_process()
            # the sends the fatal error failed are reported now (outcome info unless never appended)
            with contextlib.suppress(KafkaException):
                producer.flush(FLUSH_AFTER_FATAL_S)
            return crashed, err
        finally:
            self.driver.release(processes[0])


def _fatal_error(raised: KafkaException, producer: Any) -> KafkaError | None:
    """The fatal error that `raised` reports (None: it is not one). A produce() refused for an earlier fatal error
    raises only `_FATAL`: the error that made the client unusable is the one its next poll raises."""
    err = kafka_error(raised)
    if err is None or err.fatal():
        return err
    if err.code() != KafkaError._FATAL:
        return None
    try:
        producer.poll(0)
    except KafkaException as underlying:
        cause = kafka_error(underlying)
        if cause is not None and cause.fatal():
            return cause
    return err
