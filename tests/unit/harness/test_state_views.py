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
