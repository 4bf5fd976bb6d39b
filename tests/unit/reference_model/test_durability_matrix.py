"""The durability matrix comes out of the model; here it is held against Kafka's documented guarantees.

Sources: Kafka's design docs ("Replication": acks=all with min.insync.replicas, unclean leader election) and
KIP-966 (eligible leader replicas). Each documented statement is one test; the structural properties
(monotonicity in unclean election and min.insync.replicas) hold for every cell.
"""

from __future__ import annotations

import pytest
from rich.console import Console

from kafka_chaos.reference_model.explore import FAULT_SETS, explore, fault_scripts, replay, settle, writes_available
from kafka_chaos.reference_model.matrix import MatrixRow, durability_matrix, predict, render_matrix
from kafka_chaos.reference_model.model import Cluster, Fetch, Kill, Produce, TopicConfig


@pytest.fixture(scope="module")
def matrix() -> dict[tuple[str, int, bool, str], MatrixRow]:
    return {(r.acks, r.min_insync, r.unclean, r.fault_set): r for r in durability_matrix()}


def test_matrix_covers_every_cell(matrix):
    assert len(matrix) == 3 * 3 * 2 * 4
    assert {r.rf for r in matrix.values()} == {3}
    assert {fs for *_, fs in matrix} == {"one-down", "two-down", "leader-isolated", "all-isr-down"}


def test_acks_all_min_isr_2_one_broker_down_loses_nothing_and_stays_writable(matrix):
    for unclean in (False, True):
        for fs in ("one-down", "leader-isolated"):
            cell = matrix[("all", 2, unclean, fs)]
            assert not cell.loss_possible and cell.writes_available, cell


def test_acks_all_min_isr_2_two_down_is_unavailable_not_lossy(matrix):
    for unclean in (False, True):
        cell = matrix[("all", 2, unclean, "two-down")]
        assert not cell.loss_possible and not cell.writes_available, cell


def test_acks_1_leader_isolated_or_crashed_can_lose(matrix):
    for min_insync in (1, 2, 3):
        for fs in ("one-down", "leader-isolated"):
            assert matrix[("1", min_insync, False, fs)].loss_possible


def test_unclean_on_all_isr_down_can_lose_even_acks_all(matrix):
    for min_insync in (1, 2):
        cell = matrix[("all", min_insync, True, "all-isr-down")]
        assert cell.loss_possible, cell
        assert "unclean" in cell.reason


def test_unclean_off_all_isr_down_is_unavailable_and_lossless_for_acks_all(matrix):
    for min_insync in (1, 2, 3):
        cell = matrix[("all", min_insync, False, "all-isr-down")]
        assert not cell.loss_possible and not cell.writes_available, cell


def test_min_isr_3_with_rf_3_refuses_acks_all_writes_under_any_failure(matrix):
    for unclean in (False, True):
        for fs in ("one-down", "two-down", "leader-isolated", "all-isr-down"):
            assert not matrix[("all", 3, unclean, fs)].writes_available


def test_acks_all_never_loses_with_unclean_off(matrix):
    """Kafka's core promise: an acks=all write survives while unclean election is off."""
    for (acks, _m, unclean, _fs), cell in matrix.items():
        if acks == "all" and not unclean:
            assert not cell.loss_possible, cell


def test_unclean_election_only_adds_loss_and_availability(matrix):
    for (acks, m, unclean, fs), cell in matrix.items():
        if not unclean:
            on = matrix[(acks, m, True, fs)]
            assert on.loss_possible >= cell.loss_possible
            assert on.writes_available >= cell.writes_available


def test_higher_min_insync_never_helps_acks_all_availability(matrix):
    for (acks, m, unclean, fs), cell in matrix.items():
        if acks == "all" and m < 3:
            assert cell.writes_available >= matrix[(acks, m + 1, unclean, fs)].writes_available


def test_elr_protects_a_slow_isr_from_unclean_loss():
    """KIP-966: with slow followers the ISR can shrink to the leader alone; without ELR its crash forces an
    unclean election (loss), with ELR the replica that left the ISR below min.insync leads instead."""
    without = predict("all", 2, 3, True, "leader-down", elr=False, lagging=True)
    with_elr = predict("all", 2, 3, True, "leader-down", elr=True, lagging=True)
    assert without.loss_possible and not without.clean_loss_possible
    assert not with_elr.loss_possible


def test_loss_witness_replays_to_a_loss():
    p = predict("1", 2, 3, False, "one-down")
    assert p.loss_possible and p.witness is not None
    final = replay(TopicConfig(min_insync=2), p.witness)
    assert final.lost_acked()


def test_explore_proves_the_classic_acks_1_loss_and_its_absence_for_acks_all():
    cfg = TopicConfig(min_insync=2)
    (leader_down,) = fault_scripts("leader-down", cfg.replicas)
    assert explore(cfg, "1", leader_down).clean_loss_possible
    found = explore(cfg, "all", leader_down, n_values=2, exhaustive=True)
    assert not found.loss_possible and not found.truncated and found.states > 100


def test_known_acks_1_loss_trace():
    """The textbook case, by hand: acknowledged by the leader alone, leader dies, a follower takes over."""
    c = Cluster(TopicConfig(min_insync=2), eager=True)
    c.run([Produce(1, "1", 1), Kill(1)])
    settle(c)
    assert c.reg.leader in (2, 3) and c.lost_acked() == [1]
    assert not c.unclean_elected


def test_acks_all_needs_every_isr_member():
    c = Cluster(TopicConfig(min_insync=2), eager=True)
    c.run([Produce(1, "all", 1), Fetch(2), Fetch(2)])
    assert 1 in c.pending, "follower 3 is in the ISR and has not fetched"
    c.run([Fetch(3), Fetch(3)])
    assert c.outcomes[1].type == "ok" and c.outcomes[1].offset == 0


def test_writes_available_for_two_down_depends_on_min_insync():
    for m, expected in ((1, True), (2, False)):
        cfg = TopicConfig(min_insync=m)
        assert all(writes_available(cfg, "all", s) == expected for s in fault_scripts("two-down", cfg.replicas))


def test_every_fault_set_has_scripts():
    for name in FAULT_SETS:
        assert fault_scripts(name, (1, 2, 3))
    with pytest.raises(ValueError, match="unknown fault set"):
        fault_scripts("meteor", (1, 2, 3))


def test_render_matrix_is_a_rich_table():
    rows = durability_matrix()
    table = render_matrix(rows)
    assert len(table.columns) == 3 + 4 and table.row_count == 18
    console = Console(width=200, record=True)
    console.print(table)
    text = console.export_text()
    assert "leader-isolated" in text and "lost: yes" in text and "writes: no" in text
