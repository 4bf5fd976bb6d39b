"""The model's power-loss rules: one node that lost its unsynced writes is covered by replication; every replica
losing power at once is not (Kafka acknowledges from memory, not from disk)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.verdicts import FaultSummary, judge

SAFE = RunConfig(acks="all", idempotence=True, rf=3, min_insync=2)


def power_loss(*nodes: int, heal: bool = True) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = [
        {"process": "nemesis", "type": "invoke", "f": "power-loss", "value": {"target": "all"}},
        {"process": "nemesis", "type": "info", "f": "power-loss", "value": {"nodes": list(nodes)}},
    ]
    if heal:
        events += [{"process": "nemesis", "type": "info", "f": "power-on", "value": {"nodes": list(nodes)}}]
    return events


def test_the_tracker_counts_nodes_without_power_at_once() -> None:
    assert FaultSummary.from_events(power_loss(1, 2, 3)).max_power_lost == 3
    assert FaultSummary.from_events(power_loss(2) + power_loss(3)).max_power_lost == 1
    assert FaultSummary.from_events(power_loss(2)).max_down == 1


@pytest.mark.parametrize("anomaly", ["lost-write", "unseen"])
def test_one_node_losing_power_loses_nothing_acknowledged(anomaly: str) -> None:
    verdict = judge(anomaly, {"key": "0"}, SAFE, FaultSummary.from_events(power_loss(2)))
    assert verdict.verdict == "violation", verdict.reason


@pytest.mark.parametrize("anomaly", ["lost-write", "unseen"])
def test_every_replica_losing_power_at_once_may_lose_what_no_one_fsynced(anomaly: str) -> None:
    verdict = judge(anomaly, {"key": "0"}, SAFE, FaultSummary.from_events(power_loss(1, 2, 3)))
    assert verdict.verdict == "permitted" and "fsynced" in verdict.reason


def test_fsync_on_every_message_keeps_acknowledged_writes_through_a_correlated_power_loss() -> None:
    config = RunConfig.from_scenario({"topic": {"replication_factor": 3, "min_insync_replicas": 2,
                                                "configs": {"flush.messages": 1}}})
    assert config.flush_every_message
    verdict = judge("lost-write", {"key": "0"}, config, FaultSummary.from_events(power_loss(1, 2, 3)))
    assert verdict.verdict == "violation", verdict.reason


def test_a_read_record_may_vanish_only_when_every_replica_lost_power() -> None:
    assert judge("vanished-read", {"key": "0"}, SAFE, FaultSummary.from_events(power_loss(1, 2, 3))).verdict == \
        "permitted"
    assert judge("vanished-read", {"key": "0"}, SAFE, FaultSummary.from_events(power_loss(1))).verdict == "violation"


def kill(*nodes: int) -> list[dict[str, Any]]:
    return [{"process": "nemesis", "type": "invoke", "f": "kill", "value": {"target": "follower"}},
            {"process": "nemesis", "type": "info", "f": "kill", "value": {"nodes": list(nodes)}}]


def test_the_last_in_sync_replica_losing_power_is_kip_966s_case_on_either_side_of_elr() -> None:
    faults = FaultSummary.from_events(kill(3) + kill(2) + power_loss(1))
    assert faults.max_down == 3 and faults.max_power_lost == 1
    without_elr = judge("inconsistent-offsets", {"key": "0"}, SAFE, faults)
    with_elr = judge("inconsistent-offsets", {"key": "0"}, RunConfig(acks="all", rf=3, min_insync=2, elr=True), faults)
    assert without_elr.verdict == with_elr.verdict == "permitted"
    assert "KIP-966" in without_elr.reason and "ELR off" in without_elr.reason
    assert "canElectLastKnownLeader" in with_elr.reason
    # the same sequence with SIGKILL only: the returning replica has every record it acknowledged
    sigkill_only = FaultSummary.from_events(kill(3) + kill(2) + kill(1))
    assert judge("lost-write", {"key": "0"}, SAFE, sigkill_only).verdict == "violation"


@pytest.mark.parametrize("elr", [False, True])
def test_the_verdict_rules_agree_with_the_explored_model(elr: bool) -> None:
    """The hand-written reasons must say what the state machine finds over every interleaving."""
    from kafka_chaos.reference_model.matrix import predict

    config = RunConfig(acks="all", rf=3, min_insync=2, elr=elr)
    cases = {
        "one-power-loss": power_loss(2),
        "last-isr-power-loss": kill(3) + kill(2) + power_loss(1),
        "all-power-loss": power_loss(1, 2, 3),
    }
    for fault_set, events in cases.items():
        explored = predict("all", 2, 3, False, fault_set, elr=elr)
        verdict = judge("lost-write", {"key": "0"}, config, FaultSummary.from_events(events)).verdict
        assert (verdict == "permitted") == explored.loss_possible, (fault_set, explored.reason)
