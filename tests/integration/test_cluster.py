"""Real KRaft clusters: start, produce/consume, partition state, and the fault primitives."""

from __future__ import annotations

import re
import time

import pytest

from kafka_chaos.cluster import KafkaCluster
from tests.integration.conftest import produce, read_all

pytestmark = pytest.mark.cluster


def test_ten_thousand_acks_all_records_read_back_in_order(kafka_cluster: KafkaCluster, make_topic) -> None:
    topic = make_topic(partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
    acked, errors = produce(kafka_cluster, topic, ((v % 3, v) for v in range(10_000)))
    assert errors == []
    assert len(acked) == 10_000
    records = read_all(kafka_cluster, topic, 3)
    for p in range(3):
        values = [v for _, v in records[p]]
        assert values == [v for v in range(10_000) if v % 3 == p], f"partition {p} out of order or incomplete"
        offsets = [o for o, _ in records[p]]
        assert offsets == list(range(len(offsets)))


def test_partition_state_has_leader_replicas_isr_and_elr(kafka_cluster: KafkaCluster, make_topic) -> None:
    topic = make_topic(partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
    states = kafka_cluster.partition_states(topic)
    assert [s.partition for s in states] == [0, 1, 2]
    for s in states:
        assert sorted(s.replicas) == [1, 2, 3]
        assert sorted(s.isr) == [1, 2, 3]
        assert s.leader in s.isr
        assert s.leader_epoch is not None and s.leader_epoch >= 0
        assert s.elr is not None  # 4.1+: DescribeTopicPartitions carries ELR (empty while the ISR is full)
    assert kafka_cluster.controller_id() in {1, 2, 3}


def test_kill_leader_elects_from_isr_and_restarted_node_rejoins_with_data(
    kafka_cluster: KafkaCluster, make_topic
) -> None:
    topic = make_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    acked, errors = produce(kafka_cluster, topic, ((0, v) for v in range(500)))
    assert len(acked) == 500 and not errors
    before = kafka_cluster.partition_states(topic)[0]
    victim = kafka_cluster.node(before.leader)  # type: ignore[arg-type]
    starts_before = victim.started_count()
    victim.kill()
    (after,) = kafka_cluster.wait_for_state(
        topic, lambda s: s.leader not in (None, victim.node_id) and victim.node_id not in s.isr, "a new leader"
    )
    assert after.leader != victim.node_id
    assert after.leader in before.isr
    assert after.leader_epoch > before.leader_epoch  # type: ignore[operator]
    acked2, errors2 = produce(kafka_cluster, topic, ((0, v) for v in range(500, 600)))
    assert len(acked2) == 100 and not errors2, errors2

    victim.start()
    kafka_cluster.wait_for_isr(topic, 3, node_id=victim.node_id)
    assert victim.started_count() == starts_before + 1
    # It came back with its log: on restart it loaded the partition from its volume, not empty.
    loaded = re.findall(rf"Completed load of Log\(dir=\S+/{topic}-0,.*?logEndOffset=(\d+)\)", victim.logs())
    assert loaded and int(loaded[-1]) >= 500, loaded
    records = read_all(kafka_cluster, topic, 1)
    assert [v for _, v in records[0]] == list(range(600))


def assert_leaves_isr_under_writes(cluster: KafkaCluster, topic: str, follower: int) -> None:
    """The leader shrinks the ISR only for a follower that falls behind, so keep writing while waiting.
    (An isolated broker still answers clients from its stale metadata, where it is still in the ISR; the harness's
    reader outvotes it with the brokers still in touch with the controllers — harness.state.freshest.)"""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if follower not in cluster.partition_states(topic)[0].isr:
            return
        produce(cluster, topic, ((0, v) for v in range(10)), timeout_s=10)
        time.sleep(1)
    raise AssertionError(f"node {follower} was still in the ISR of {topic} after 60 s")


def test_paused_follower_leaves_isr_and_rejoins_after_resume(kafka_cluster: KafkaCluster, make_topic) -> None:
    topic = make_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    state = kafka_cluster.partition_states(topic)[0]
    follower = next(r for r in state.replicas if r != state.leader)
    node = kafka_cluster.node(follower)
    node.pause()
    try:
        assert_leaves_isr_under_writes(kafka_cluster, topic, follower)
    finally:
        node.resume()
    kafka_cluster.wait_for_isr(topic, 3, node_id=follower)


def test_isolated_node_leaves_isr_and_rejoins_after_heal(kafka_cluster: KafkaCluster, make_topic) -> None:
    topic = make_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    state = kafka_cluster.partition_states(topic)[0]
    follower = next(r for r in state.replicas if r != state.leader)
    node = kafka_cluster.node(follower)
    others = [n for n in kafka_cluster.nodes.values() if n is not node]
    node.drop_traffic(others)
    for other in others:
        other.drop_traffic([node])
    try:
        assert_leaves_isr_under_writes(kafka_cluster, topic, follower)
    finally:
        for n in kafka_cluster.nodes.values():
            n.heal()
    kafka_cluster.wait_for_isr(topic, 3, node_id=follower)


@pytest.mark.kafka_cluster(nodes=3, controllers=3)
def test_two_brokers_down_refuses_acks_all_and_still_serves_committed_reads(
    kafka_cluster: KafkaCluster, make_topic
) -> None:
    topic = make_topic(partitions=1, replication_factor=3, configs={"min.insync.replicas": "2"})
    acked, errors = produce(kafka_cluster, topic, ((0, v) for v in range(200)))
    assert len(acked) == 200 and not errors
    state = kafka_cluster.partition_states(topic)[0]
    survivor = state.leader
    down = [b for b in state.replicas if b != survivor]
    for b in down:
        kafka_cluster.node(b).kill()
    kafka_cluster.wait_for_state(topic, lambda s: list(s.isr) == [survivor], f"ISR = [{survivor}]")
    acked2, errors2 = produce(kafka_cluster, topic, ((0, v) for v in range(200, 220)), timeout_s=8)
    assert acked2 == []
    assert errors2 and set(errors2) <= {"NOT_ENOUGH_REPLICAS", "NOT_ENOUGH_REPLICAS_AFTER_APPEND", "_MSG_TIMED_OUT"}
    survivor_port = kafka_cluster.node(survivor).client_port  # type: ignore[arg-type]
    records = read_all(kafka_cluster, topic, 1, bootstrap=f"127.0.0.1:{survivor_port}")
    assert [v for _, v in records[0]] == list(range(200))
