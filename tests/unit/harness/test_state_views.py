"""Choosing one partition state out of what several brokers report (harness.state.freshest)."""

from kafka_chaos.cluster.state import PartitionState, freshest


def state(partition: int, leader: int | None, epoch: int, isr: tuple[int, ...]) -> PartitionState:
    return PartitionState("t", partition, leader, epoch, (1, 2, 3), isr, (), ())


def test_isolated_follower_is_outvoted_when_the_epoch_is_the_same() -> None:
    stale = [state(0, 1, 4, (1, 2, 3))]
    fresh = [state(0, 1, 4, (1, 2))]
    assert freshest([stale, fresh, fresh]) == fresh
    assert freshest([fresh, stale, fresh]) == fresh


def test_a_higher_leader_epoch_wins_even_from_a_single_broker() -> None:
    old_leader_view = [state(0, 1, 4, (1, 2, 3))]
    new_leader_view = [state(0, 2, 5, (2, 3))]
    assert freshest([old_leader_view, old_leader_view, new_leader_view]) == new_leader_view


def test_each_partition_is_chosen_on_its_own() -> None:
    a = [state(0, 1, 4, (1, 2, 3)), state(1, 2, 7, (2, 3))]
    b = [state(0, 2, 5, (2, 3)), state(1, 2, 6, (1, 2, 3))]
    assert freshest([a, b]) == [state(0, 2, 5, (2, 3)), state(1, 2, 7, (2, 3))]


def test_a_partition_without_a_leader_is_kept() -> None:
    offline = [state(0, None, 9, (3,))]
    assert freshest([offline]) == offline


def test_a_metadata_answer_before_kip_966_has_no_elr_rather_than_an_empty_one() -> None:
    """Kafka before 3.8 has no DescribeTopicPartitions: its Metadata answer gives leader, epoch and ISR, and says
    nothing of ELR (None: unknown, not "no eligible replica")."""
    from kafka.protocol.admin import DescribeTopicPartitionsResponse
    from kafka.protocol.metadata import MetadataResponse

    from kafka_chaos.cluster.state import _states_of

    topic = MetadataResponse.MetadataResponseTopic
    old = MetadataResponse(topics=[topic(error_code=0, name="t", partitions=[topic.MetadataResponsePartition(
        error_code=0, partition_index=0, leader_id=2, leader_epoch=3, replica_nodes=[1, 2, 3], isr_nodes=[2, 3])])])
    [state] = _states_of(old)
    assert (state.leader, state.leader_epoch, state.replicas, state.isr) == (2, 3, (1, 2, 3), (2, 3))
    assert state.elr is None and state.last_known_elr is None
    dtp = DescribeTopicPartitionsResponse.DescribeTopicPartitionsResponseTopic
    new = DescribeTopicPartitionsResponse(topics=[dtp(error_code=0, name="t", partitions=[
        dtp.DescribeTopicPartitionsResponsePartition(
            error_code=0, partition_index=0, leader_id=2, leader_epoch=3, replica_nodes=[1, 2, 3], isr_nodes=[2, 3],
            eligible_leader_replicas=None, last_known_elr=[1])])])
    [state] = _states_of(new)
    assert state.elr == () and state.last_known_elr == (1,)
