"""The observer: samples every partition's state about every 250 ms into state.jsonl (DESIGN.md §3).

It reads through the harness-only listener, so client-link faults do not blind it. Fields it cannot read in a
sample (a leaderless partition's high watermark, a quorum with no leader) are written as null.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FuturesTimeout
from pathlib import Path
from typing import TypeVar

import orjson
from confluent_kafka import Consumer, KafkaException, TopicPartition

from harness.state import StateReader
from workloads.recorder import client_logger

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
        self._stop.set()
        self._thread.join(timeout=15)

    def _run(self) -> None:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": "kafka-chaos-observer",
                             "enable.auto.commit": False, "socket.timeout.ms": 2000,
                             "logger": client_logger()})
        # Reads run on a worker with a deadline: a call stuck on a dead or frozen broker must not stall the
        # samples (a stuck reader is abandoned and a fresh one used for the next sample).
        pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="observer-read")
        self._reader = StateReader(self.bootstrap, timeout_ms=1500)
        with self.path.open("ab") as out:
            try:
                while not self._stop.wait(self.interval_s):
                    self._sample(pool, consumer, out)
            finally:
                consumer.close()
                self._reader.close()
                pool.shutdown(wait=False, cancel_futures=True)

    def _read(self, pool: ThreadPoolExecutor, fn: Callable[[], T], timeout_s: float = 2.0) -> T | None:
        try:
            return pool.submit(fn).result(timeout=timeout_s)
        except FuturesTimeout:
            self._reader = StateReader(self.bootstrap, timeout_ms=1500)
            return None
        except Exception:
            return None

    def _sample(self, pool: ThreadPoolExecutor, consumer: Consumer, out: object) -> None:
        reader = self._reader
        described = self._read(pool, lambda: reader.describe(self.topic, attempts=1))
        if described is None:
            return  # nothing was read: a sample of nulls would read as "no leader"
        states = {s.partition: s for s in described}
        controller = self._read(pool, reader.quorum_leader)
        time_ns = self.clock()  # when the state was read, not when the sample began
        lines = []
        for p in range(self.partitions):
            s = states.get(p)
            try:
                hw: int | None = consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=1)[1]
            except KafkaException:
                hw = None
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
            }))
        out.write(b"\n".join(lines) + b"\n")  # type: ignore[attr-defined]
        out.flush()  # type: ignore[attr-defined]
        self.samples += 1
