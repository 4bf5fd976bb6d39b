"""The Java client worker against a real cluster: what it acknowledges is what a consumer reads back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kafka_chaos.cluster import KafkaCluster
from kafka_chaos.workloads.drivers.java import DEFAULT_JAVA_CLIENT_VERSION, java_settings
from tests.unit.workloads.java_worker import GUARD_S, Worker

pytestmark = pytest.mark.cluster


@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(DEFAULT_JAVA_CLIENT_VERSION)
    yield w
    w.kill()


def test_a_hundred_idempotent_acks_all_records_are_read_back_at_their_offsets(
        kafka_cluster: KafkaCluster, make_topic, worker: Worker) -> None:
    topic = make_topic(partitions=2, replication_factor=3, configs={"min.insync.replicas": "2"})
    bootstrap = kafka_cluster.bootstrap_servers()
    worker.ok("create", handle="p", kind="producer", config=java_settings({
        "bootstrap.servers": bootstrap, "acks": "all", "enable.idempotence": True, "linger.ms": 5,
        "delivery.timeout.ms": 60000, "request.timeout.ms": 10000}))
    # a latin-1 payload beside the numbers: every byte value survives the JSON lines both ways
    values = {tag: (f"{tag}" if tag else "".join(map(chr, range(256)))) for tag in range(100)}
    for tag, value in values.items():
        worker.ok("produce", handle="p", topic=topic, partition=tag % 2, value=value, tag=tag)
    assert worker.ok("flush", handle="p", timeout=60) == 0
    reports: list[list[object]] = []  # [tag, offset] or [tag, null, error], in `deliveries` events
    while len(reports) < len(values):
        event = worker.events.get(timeout=GUARD_S)
        assert event["event"] == "deliveries" and event["handle"] == "p", event
        reports.extend(event["reports"])
    assert all(len(r) == 2 for r in reports), [r for r in reports if len(r) != 2]
    acked = {int(r[0]): r[1] for r in reports}  # type: ignore[call-overload]
    assert len(acked) == len(reports) and sorted(acked) == sorted(values)  # each record reported once
    for p in (0, 1):  # one producer, one partition: offsets 0..49 in send order
        assert [acked[t] for t in sorted(values) if t % 2 == p] == list(range(50))

    worker.ok("create", handle="c", kind="consumer", config=java_settings({
        "bootstrap.servers": bootstrap, "group.id": f"kc-java-{topic}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "enable.partition.eof": False}))
    worker.ok("assign", handle="c", partitions=[[topic, 0, -2], [topic, 1, -2]])
    assert worker.ok("watermarks", handle="c", topic=topic, partition=1, timeout=30) == [0, 50]
    read: list[list[object]] = []
    while len(read) < 100:
        batch = worker.ok("consume", handle="c", max=7, timeout=1)  # fewer than a poll returns: the rest waits
        assert len(batch) <= 7
        read.extend(batch)
    assert len(read) == 100  # nothing twice
    by_tag = {(p, o): v for _, p, o, v in read}
    assert by_tag == {(tag % 2, acked[tag]): value for tag, value in values.items()}
    assert worker.ok("position", handle="c", partitions=[[topic, 0], [topic, 1]]) == [[topic, 0, 50], [topic, 1, 50]]
    assert worker.ok("close", handle="c") is None and worker.ok("close", handle="p") is None
    assert worker.exit() == 0


def test_a_committed_transaction_is_read_and_an_aborted_one_is_not(
        kafka_cluster: KafkaCluster, make_topic, tmp_path: Path) -> None:
    topic = make_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    bootstrap = kafka_cluster.bootstrap_servers()
    log = tmp_path / "worker.stderr"
    with log.open("w") as stderr:
        w = Worker(DEFAULT_JAVA_CLIENT_VERSION, stderr=stderr)
        try:
            w.ok("create", handle="t", kind="producer", config=java_settings({
                "bootstrap.servers": bootstrap, "transactional.id": f"kc-java-{topic}",
                "transaction.timeout.ms": 10000, "enable.idempotence": True, "acks": "all",
                "delivery.timeout.ms": 10000, "request.timeout.ms": 5000}))
            w.ok("create", handle="c", kind="consumer", config=java_settings({
                "bootstrap.servers": bootstrap, "group.id": f"kc-java-{topic}", "isolation.level": "read_committed",
                "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
            w.ok("assign", handle="c", partitions=[[topic, 0, -2]])
            w.ok("init_transactions", handle="t", timeout=60)
            for values, end in ((["a", "b", "c"], "commit_transaction"), (["x", "y"], "abort_transaction")):
                w.ok("begin_transaction", handle="t")
                for value in values:
                    w.ok("produce", handle="t", topic=topic, partition=0, value=value, tag=ord(value))
                # the consumer handle's group metadata goes with the offsets
                w.ok("send_offsets_to_transaction", handle="t", consumer="c", offsets=[[topic, 0, 0]], timeout=60)
                w.ok(end, handle="t", timeout=60)
            _, high = w.ok("watermarks", handle="c", topic=topic, partition=0, timeout=30)
            read: list[str] = []
            while w.ok("position", handle="c", partitions=[[topic, 0]])[0][2] < high:
                read.extend(value for _, _, _, value in w.ok("consume", handle="c", max=10, timeout=1))
            assert read == ["a", "b", "c"]
            assert w.exit() == 0
        finally:
            w.kill()
    assert "speaks transaction.version=" in log.read_text()  # which protocol it chose is in the client log
