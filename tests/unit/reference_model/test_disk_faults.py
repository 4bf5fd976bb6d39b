"""The disk-fault rules: what Kafka's code lets through when a node's disk loses, tears, corrupts, fails or slows."""

from __future__ import annotations

import pytest

from kafka_chaos.reference_model.disk_faults import (
    DISK_FAULT_KINDS,
    LOSS_ANOMALIES,
    corrupt_rule,
    leader_epoch_checkpoint_unsynced,
    power_loss_rule,
    rule_for,
)


@pytest.mark.parametrize(("version", "affected"), [
    ("3.6.2", False), ("3.7.0", True), ("3.7.2", True), ("3.8.0", False), ("3.9.1", False), ("4.3.1", False),
    (None, False),
])
def test_kafka_16541_affects_the_3_7_line_only(version: str | None, affected: bool) -> None:
    assert leader_epoch_checkpoint_unsynced(version) is affected
    rule = rule_for("power-loss", "page", kafka_version=version)
    assert (rule.defect, rule.fixed_in) == (("KAFKA-16541", "3.8.0") if affected else (None, None))
    assert rule.permits == frozenset(), "a torn write permits no data anomaly, even with the defect"
    assert "ensureValid" in rule.rule and "CheckpointFile.write" in rule.rule


def test_a_torn_write_never_lets_a_partial_batch_reach_a_reader() -> None:
    for torn in ("page", "byte"):
        rule = rule_for("power-loss", torn, kafka_version="4.3.1")
        assert "garbage-read" not in rule.permits and not rule.permits & LOSS_ANOMALIES
        assert "recovery point" in rule.rule
    with pytest.raises(ValueError, match="torn-write mode"):
        rule_for("power-loss", "half", kafka_version="4.3.1")


def test_power_loss_of_one_live_replica_permits_nothing() -> None:
    assert rule_for("power-loss", kafka_version="4.3.1").permits == frozenset()
    rule = power_loss_rule(rf=3, max_power_lost=1, max_down=1, elr=True, kafka_version="4.3.1")
    assert rule.permits == frozenset() and "LogSegment.recover" in rule.rule


def test_power_loss_of_every_replica_permits_loss() -> None:
    rule = power_loss_rule(rf=3, max_power_lost=3, max_down=3, elr=False, kafka_version="4.0.1")
    assert rule.permits == LOSS_ANOMALIES and "fsynced" in rule.rule


@pytest.mark.parametrize(("version", "elr", "reason"), [
    ("4.3.1", True, "canElectLastKnownLeader"),
    ("4.0.1", False, "eligible.leader.replicas.version=0"),
    ("3.9.1", False, "Kafka 3.9.1 has no ELR feature"),
])
def test_kip_966_last_in_sync_replica_losing_power(version: str, elr: bool, reason: str) -> None:
    rule = power_loss_rule(rf=3, max_power_lost=1, max_down=3, elr=elr, kafka_version=version)
    assert rule.permits == LOSS_ANOMALIES and reason in rule.rule and "KIP-966" in rule.rule


def test_flushing_every_message_makes_any_power_loss_safe() -> None:
    rule = power_loss_rule(rf=3, max_power_lost=3, max_down=3, elr=False, kafka_version="4.3.1",
                           flush_every_message=True)
    assert rule.permits == frozenset()


def test_corruption_by_file_class() -> None:
    segment = corrupt_rule("segment")
    assert segment.permits == frozenset({"garbage-read"}) and "check.crcs" in segment.rule
    assert corrupt_rule("segment", client_checks_crcs=True).permits == frozenset()
    assert {"poll-skip"} <= corrupt_rule("index").permits and "garbage-read" not in corrupt_rule("index").permits
    assert corrupt_rule("checkpoint").permits == LOSS_ANOMALIES and "no checksum" in corrupt_rule("checkpoint").rule
    assert corrupt_rule("metadata-log").permits == frozenset()
    assert rule_for("corrupt", kafka_version="4.3.1") == segment  # the kind's default class
    with pytest.raises(ValueError, match="not a file class"):
        corrupt_rule("journal")


@pytest.mark.parametrize(("kind", "source"), [("disk-error", "KIP-112"), ("slow-disk", "replica.lag.time.max.ms")])
def test_failing_and_slow_disks_permit_no_data_anomaly(kind: str, source: str) -> None:
    rule = rule_for(kind, kafka_version="3.7.1")
    assert rule.permits == frozenset() and rule.defect is None and source in rule.rule


def test_unknown_kind_is_refused() -> None:
    assert "kill" not in DISK_FAULT_KINDS
    with pytest.raises(ValueError, match="not a disk fault kind"):
        rule_for("kill", kafka_version="4.3.1")


def test_judge_reads_disk_faults_from_fault_windows() -> None:
    from kafka_chaos.faults.windows import FaultWindow
    from kafka_chaos.reference_model.config import RunConfig
    from kafka_chaos.reference_model.verdicts import FaultSummary, judge

    def window(kind: str, value: dict[str, object]) -> FaultWindow:
        return FaultWindow(f=kind, value={"nodes": [2], **value}, nodes=(2,), start=1, end=9, heal=None, index=0)

    torn = FaultSummary.from_windows([window("power-loss", {"torn": "page"})])
    assert torn.disks == frozenset({("power-loss", "page")})
    cfg = RunConfig(rf=3, min_insync=2, kafka_version="4.3.1")
    # a torn write of one node permits neither a garbage read nor a loss: the general rules stand
    assert judge("garbage-read", {}, cfg, torn).verdict == "violation"
    assert judge("lost-write", {"key": "k"}, cfg, torn).verdict == "violation"
    # a flipped segment below the recovery point may reach a librdkafka reader
    flipped = FaultSummary.from_windows([window("corrupt", {"files": "segment", "bits": 8})])
    garbage = judge("garbage-read", {}, cfg, flipped)
    assert garbage.verdict == "permitted" and garbage.reason.startswith("corrupt (segment): ")
    # a flipped checkpoint is believed: a loss is permitted
    assert judge("lost-write", {"key": "k"}, cfg,
                 FaultSummary.from_windows([window("corrupt", {"files": "checkpoint"})])).verdict == "permitted"
    # a slow or failing disk permits nothing
    for kind in ("slow-disk", "disk-error"):
        summary = FaultSummary.from_windows([window(kind, {})])
        assert summary.disks == frozenset({(kind, "")})
        assert judge("lost-write", {"key": "k"}, cfg, summary).verdict == "violation"
