"""The model's disk-replace rules: one replaced replica loses nothing from 3.5.0 (KIP-903); before, a loss is the
known defect KAFKA-14139; every replica gone at once may lose anything; a controller is a voter again at once on a
static quorum and an observer until re-added on a dynamic one (KIP-853)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.disk_replace import controller_expectation, loss_rule
from kafka_chaos.reference_model.verdicts import FaultSummary, judge

SAFE = RunConfig(acks="all", idempotence=True, rf=3, min_insync=2, kafka_version="4.3.1")


def disk_replace(*nodes: int) -> list[dict[str, Any]]:
    return [{"process": "nemesis", "type": "invoke", "f": "disk-replace", "value": {"target": "follower"}},
            {"process": "nemesis", "type": "info", "f": "disk-replace", "value": {"nodes": list(nodes)}},
            {"process": "nemesis", "type": "info", "f": "disk-replaced", "value": {"nodes": list(nodes)}}]


@pytest.mark.parametrize("anomaly", ["lost-write", "unseen"])
def test_one_replaced_replica_loses_nothing_acknowledged_from_3_5(anomaly: str) -> None:
    verdict = judge(anomaly, {"key": "0"}, SAFE, FaultSummary.from_events(disk_replace(2)))
    assert verdict.verdict == "violation", verdict.reason


@pytest.mark.parametrize("version", ["3.4.1", "3.4.0"])
def test_before_kip_903_a_loss_with_a_replaced_disk_is_the_known_defect_kafka_14139(version: str) -> None:
    verdict = judge("lost-write", {"key": "0"}, replace(SAFE, kafka_version=version),
                    FaultSummary.from_events(disk_replace(2)))
    assert (verdict.verdict, verdict.defect, verdict.fixed_in) == ("known-defect", "KAFKA-14139", "3.5.0")
    assert "broker epochs to AlterPartition" in verdict.reason


def test_every_replica_replaced_at_once_may_lose_anything() -> None:
    verdict = judge("lost-write", {"key": "0"}, SAFE, FaultSummary.from_events(disk_replace(1, 2, 3)))
    assert verdict.verdict == "permitted" and "nothing else holds the records" in verdict.reason


def test_no_disk_replaced_no_rule() -> None:
    assert loss_rule({"kill"}, "3.4.1", 3, 1) is None
    assert loss_rule({"disk-replace"}, "3.5.2", 3, 1) is None
    assert loss_rule({"disk-replace"}, "3.5.2", 3, 3) is not None


def test_a_static_quorum_takes_a_wiped_controller_back_at_once_a_dynamic_one_only_once_re_added() -> None:
    static, dynamic = controller_expectation(False), controller_expectation(True)
    assert (static.voter_at_once, static.needs_readd) == (True, False)
    assert (dynamic.voter_at_once, dynamic.needs_readd) == (False, True)
    assert "directory id" in dynamic.reason and "KIP-853" in static.reason


@pytest.mark.parametrize("anomaly", ["vanished-read", "follower-kept-in-isr"])
def test_kafka_14139s_readmitted_empty_replica_shows_as_its_defect_before_3_5_only(anomaly: str) -> None:
    replaced = FaultSummary.from_events(disk_replace(2))
    before = judge(anomaly, {"key": "0"}, replace(SAFE, kafka_version="3.4.1"), replaced)
    assert (before.verdict, before.defect, before.fixed_in) == ("known-defect", "KAFKA-14139", "3.5.0")
    assert judge(anomaly, {"key": "0"}, replace(SAFE, kafka_version="3.5.0"), replaced).verdict == "violation"
    assert judge(anomaly, {"key": "0"}, replace(SAFE, kafka_version="3.4.1"), FaultSummary()).verdict == "violation"
