"""Helpers shared by the real-cluster tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from kafka_chaos.cluster import KafkaCluster
from kafka_chaos.cluster.volatile_disk import VolatileDisk, is_mounted


@pytest.fixture
def disk(tmp_path: Path) -> Iterator[VolatileDisk]:
    """A volatile disk mounted on this machine (FUSE), closed after the test."""
    d = VolatileDisk(tmp_path / "disk")
    d.mount()
    yield d
    d.close()
    assert not is_mounted(d.mountpoint) and not d.root.exists(), "close() leaves no mount and no files"


def produce(cluster: KafkaCluster, topic: str, items: Iterable[tuple[int, int]], acks: str = "all",
            timeout_s: float = 60) -> tuple[list[tuple[int, int, int]], list[str]]:
    """Send (partition, value) pairs; return the acknowledged (partition, offset, value) and the errors seen."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers(), "acks": acks,
                         "enable.idempotence": acks == "all", "message.timeout.ms": int(timeout_s * 1000),
                         "linger.ms": 5})
    acked: list[tuple[int, int, int]] = []
    errors: list[str] = []

    def report(err: KafkaError | None, msg) -> None:  # type: ignore[no-untyped-def]
        if err is None:
            acked.append((msg.partition(), msg.offset(), int(msg.value())))
        else:
            errors.append(err.name())

    for partition, value in items:
        while True:
            try:
                producer.produce(topic, value=str(value).encode(), partition=partition, on_delivery=report)
                break
            except BufferError:
                producer.poll(0.1)
        producer.poll(0)
    producer.flush(timeout_s + 10)
    return acked, errors


def read_all(cluster: KafkaCluster, topic: str, partitions: int, timeout_s: float = 60,
             bootstrap: str | None = None) -> dict[int, list[tuple[int, int]]]:
    """Every record of every partition from the beginning to the end offsets, as (offset, value) lists."""
    consumer = Consumer({"bootstrap.servers": bootstrap or cluster.bootstrap_servers(), "group.id": "kc-test",
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    try:
        tps = [TopicPartition(topic, p, 0) for p in range(partitions)]
        ends = {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=timeout_s)[1]
                for p in range(partitions)}
        consumer.assign(tps)
        out: dict[int, list[tuple[int, int]]] = {p: [] for p in range(partitions)}
        import time

        deadline = time.monotonic() + timeout_s
        while any((out[p][-1][0] + 1 if out[p] else 0) < ends[p] for p in out) and time.monotonic() < deadline:
            for msg in consumer.consume(500, timeout=1):
                partition, offset, value = msg.partition(), msg.offset(), msg.value()
                if msg.error() is None and partition is not None and offset is not None and value is not None:
                    out[partition].append((offset, int(value)))
        return out
    finally:
        consumer.close()
