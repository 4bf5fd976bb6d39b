"""The observer: samples every partition's state about every 250 ms into state.jsonl (docs/architecture.md §3),
with the controller quorum's DescribeQuorum (leader, epoch, each voter's end offset and last fetch) in `quorum`
and the broker registrations (DescribeCluster: fenced and unfenced brokers) in `brokers`.

It reads through the harness-only listener, so client-link faults do not blind it. Fields it cannot read in a
sample (a leaderless partition's high watermark, a quorum with no leader) are written as null.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import Any, TypeVar

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.cluster.state import PartitionState, StateReader
from kafka_chaos.interrupts import STOPPING, join

T = TypeVar("T")


class Observer:
    def __init__(self, bootstrap: str, topic: str, partitions: int, path: Path, clock: Callable[[], int],
                 interval_s: float = 0.25) -> None:
        self.bootstrap, self.topic, self.partitions = bootstrap, topic, partitions
        self.path, self.clock, self.interval_s = path, clock, interval_s
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="observer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Safe to call twice, and before start; waits at most a few seconds once interrupted."""
        self._stop.set()
        join(self._thread, 15)

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kafka-chaos-observer",
                             "enable.auto.commit": False, "socket.timeout.ms": 2000,
                             "logger": client_logger()})
        # Reads run on a worker with a deadline: a call stuck on a dead or frozen broker must not stall the
        # samples (a stuck reader is abandoned and a fresh one used for the next sample).
        pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="observer-read")
        self._reader = StateReader(self.bootstrap, timeout_ms=1500)
        # Registrations on a reader of their own, one read at a time: a read stuck on a dead broker delays
        # only them (a sample carries the newest one that finished, with its own time), never the partitions.
        self._registrations_reader = StateReader(self.bootstrap, timeout_ms=1500)
        self._registrations_f: Future[tuple[dict[str, list[int]] | None, int]] | None = None
        self._registrations: dict[str, Any] | None = None
        with self.path.open("ab") as out:
            try:
                while not self._stop.wait(self.interval_s) and not STOPPING.is_set():
                    try:
                        self._sample(pool, consumer, out)
                    except RuntimeError as err:  # the pool refuses work: the interpreter is exiting
                        if "cannot schedule new futures" not in str(err):
                            raise
                        break
            finally:
                consumer.close()
                self._reader.close()
                self._registrations_reader.close()
                pool.shutdown(wait=False, cancel_futures=True)

    def _read(self, future: Future[T], reader: StateReader | None = None, timeout_s: float = 2.0) -> T | None:
        """The future's result within the deadline, else None; a `reader` stuck past it is abandoned (and closed
        once its call gives up), so the next sample uses a fresh one."""
        try:
            return future.result(timeout=timeout_s)
        except FuturesTimeout:
            if reader is not None and reader is self._reader:
                self._reader = StateReader(self.bootstrap, timeout_ms=1500)
                future.add_done_callback(lambda _: reader.close())
            return None
        except Exception:
            return None

    def _described(self, reader: StateReader) -> tuple[list[PartitionState], int]:
        """The partition states and when they were read: the sample's time, however long the other reads take."""
        states = reader.describe(self.topic, attempts=1)
        return states, self.clock()

    def _registered(self) -> tuple[dict[str, list[int]] | None, int]:
        return self._registrations_reader.registrations(), self.clock()

    def _latest_registrations(self, pool: ThreadPoolExecutor) -> dict[str, Any] | None:
        """The newest finished registrations read (with its `time`), and a new read started if none is running."""
        f = self._registrations_f
        if f is None or f.done():
            if f is not None and f.exception() is None:
                value, time_ns = f.result()
                self._registrations = {**value, "time": time_ns} if value is not None else None
            self._registrations_f = pool.submit(self._registered)
        return self._registrations

    def _watermarks(self, consumer: Consumer) -> dict[int, int | None]:
        marks: dict[int, int | None] = {}
        for p in range(self.partitions):
            try:
                marks[p] = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=1)[1]
            except KafkaException:
                marks[p] = None
        return marks

    def _sample(self, pool: ThreadPoolExecutor, consumer: Consumer, out: object) -> None:
        # The three reads run side by side, so a dead controller or partition leader slows a sample by one
        # deadline, not by the sum of them.
        reader = self._reader
        described_f = pool.submit(self._described, reader)
        quorum_f = pool.submit(reader.quorum)
        marks_f = pool.submit(self._watermarks, consumer)
        deadline = time.monotonic() + 2.0
        described = self._read(described_f, reader, deadline - time.monotonic())
        quorum = self._read(quorum_f, reader, max(0.0, deadline - time.monotonic()))
        controller = quorum["leader"] if quorum else None
        marks = self._read(marks_f, None, max(0.0, deadline - time.monotonic())) or {}
        brokers = self._latest_registrations(pool)
        if described is None:
            return  # nothing was read: a sample of nulls would read as "no leader"
        states = {s.partition: s for s in described[0]}
        time_ns = described[1]
        lines = []
        for p in range(self.partitions):
            s = states.get(p)
            hw = marks.get(p)
            lines.append(orjson.dumps({
                "time": time_ns,
                "key": f"{self.topic}/{p}",
                "leader": s.leader if s else None,
                "leader_epoch": s.leader_epoch if s else None,
                "replicas": list(s.replicas) if s else None,
                "isr": list(s.isr) if s else None,
                "elr": list(s.elr) if s and s.elr is not None else None,
                "last_known_elr": list(s.last_known_elr) if s and s.last_known_elr is not None else None,
                "hw": hw,
                "controller": controller,
                "quorum": quorum,  # DescribeQuorum: leader, epoch, voters' end offsets and last fetch (ms)
                "brokers": brokers,  # DescribeCluster: {"unfenced", "fenced", "time"} (its own read time)
            }))
        out.write(b"\n".join(lines) + b"\n")  # type: ignore[attr-defined]
        out.flush()  # type: ignore[attr-defined]
        self.samples += 1
