"""The request-fault rules: what Kafka's code lets through when one kind of request is late, lost or repeated."""

from __future__ import annotations

import pytest

from kafka_chaos.reference_model.request_faults import (
    REQUEST_FAULT_KINDS,
    TXN_LOSS_ANOMALIES,
    rule_for,
    transaction_version_2,
)


@pytest.mark.parametrize("kind", sorted(REQUEST_FAULT_KINDS))
def test_idempotent_produce_is_never_written_twice(kind: str) -> None:
    rule = rule_for(kind, "Produce", kafka_version="4.3.1", idempotence=True, transactional=False)
    assert "duplicate" not in rule.permits
    assert "NUM_BATCHES_TO_RETAIN" in rule.rule


def test_duplicated_produce_without_idempotence_may_be_appended_twice() -> None:
    rule = rule_for("request-duplicate", "Produce", kafka_version="4.3.1", idempotence=False, transactional=False)
    assert "duplicate" in rule.permits
    assert rule.defect is None


@pytest.mark.parametrize(("version", "defect", "fixed_in"), [
    ("3.5.2", "KAFKA-14402", "3.6.0"),
    ("3.6.0", "KAFKA-14402 (late Produce joins the next transaction)", "4.0.0 with transaction version 2"),
    ("4.3.1", "KAFKA-14402 (late Produce joins the next transaction)", "4.0.0 with transaction version 2"),
])
def test_late_transactional_produce_with_librdkafka(version: str, defect: str, fixed_in: str) -> None:
    rule = rule_for("request-hold", "Produce", kafka_version=version, idempotence=True, transactional=True)
    assert rule.permits >= TXN_LOSS_ANOMALIES
    assert "duplicate" not in rule.permits  # idempotence still holds
    assert (rule.defect, rule.fixed_in) == (defect, fixed_in)


def test_late_transactional_produce_is_fenced_by_transaction_version_2() -> None:
    rule = rule_for("request-hold", "Produce", kafka_version="4.1.0", idempotence=True, transactional=True,
                    client_transaction_version=2)
    assert rule.permits == frozenset()
    assert rule.defect is None


@pytest.mark.parametrize("kind", ["request-hold", "request-delay", "request-duplicate"])
def test_late_end_txn_is_kafka_17754_under_protocol_v1(kind: str) -> None:
    rule = rule_for(kind, "EndTxn", kafka_version="4.3.1", idempotence=True, transactional=True)
    assert rule.defect == "KAFKA-17754"
    assert {"G1a", "G1c", "lost-write"} <= rule.permits


def test_late_end_txn_needs_both_a_4_0_broker_and_a_version_2_client() -> None:
    assert rule_for("request-hold", "EndTxn", kafka_version="4.0.1", idempotence=True, transactional=True,
                    client_transaction_version=2).permits == frozenset()
    assert rule_for("request-hold", "EndTxn", kafka_version="3.9.1", idempotence=True, transactional=True,
                    client_transaction_version=2).defect == "KAFKA-17754"
    assert not transaction_version_2("3.9.1", 2)
    assert not transaction_version_2("4.3.1", None)
    assert transaction_version_2("4.0.0", 2)


def test_a_cluster_formatted_below_transaction_version_2_makes_a_version_2_client_speak_1() -> None:
    """The Java client 4.0+ speaks the finalized transaction.version: on a cluster formatted with 1 (or 0) a late
    EndTxn or Produce is as under librdkafka."""
    for cluster_tv in (0, 1):
        assert not transaction_version_2("4.3.1", 2, cluster_tv)
        end_txn = rule_for("request-hold", "EndTxn", kafka_version="4.3.1", idempotence=True, transactional=True,
                           client_transaction_version=2, cluster_transaction_version=cluster_tv)
        assert end_txn.defect == "KAFKA-17754" and {"G1a", "lost-write"} <= end_txn.permits
        produce = rule_for("request-hold", "Produce", kafka_version="4.3.1", idempotence=True, transactional=True,
                           client_transaction_version=2, cluster_transaction_version=cluster_tv)
        assert produce.permits >= TXN_LOSS_ANOMALIES
    assert transaction_version_2("4.3.1", 2, 2) and transaction_version_2("4.3.1", 2, None)
    assert rule_for("request-hold", "EndTxn", kafka_version="4.3.1", idempotence=True, transactional=True,
                    client_transaction_version=2, cluster_transaction_version=2).permits == frozenset()
    assert not transaction_version_2("4.3.1", 1, 2)  # librdkafka on a version 2 cluster still speaks 1


@pytest.mark.parametrize("api", ["AlterPartition", "WriteTxnMarkers", "Fetch", "Metadata"])
@pytest.mark.parametrize("kind", sorted(REQUEST_FAULT_KINDS))
def test_other_requests_permit_no_data_anomaly(api: str, kind: str) -> None:
    rule = rule_for(kind, api, kafka_version="3.4.1", idempotence=True, transactional=True)
    assert rule.permits == frozenset()
    assert rule.defect is None


def test_end_txn_response_drop_is_only_a_retry() -> None:
    # a lost response makes the client re-send; the coordinator answers a repeat of a finished end as a retry
    assert rule_for("response-drop", "EndTxn", kafka_version="4.3.1", idempotence=True,
                    transactional=True).permits == frozenset()


def test_unknown_kind_is_refused() -> None:
    with pytest.raises(ValueError, match="not a request fault kind"):
        rule_for("latency", "Produce", kafka_version="4.3.1", idempotence=True, transactional=False)


def test_judge_reads_request_faults_from_fault_windows() -> None:
    from kafka_chaos.faults.windows import FaultWindow
    from kafka_chaos.reference_model.config import RunConfig
    from kafka_chaos.reference_model.verdicts import FaultSummary, judge

    def window(kind: str, api: list[str]) -> FaultWindow:
        return FaultWindow(f=kind, value={"nodes": [1], "api": api}, nodes=(1,), start=1, end=9, heal=None, index=0)

    held = FaultSummary.from_windows([window("request-hold", ["EndTxn"])])
    assert held.requests == frozenset({("request-hold", "EndTxn")})
    txn = RunConfig(rf=3, min_insync=2, kafka_version="4.3.1", transactional=True)
    torn = judge("lost-write", {"key": "k"}, txn, held)
    assert (torn.verdict, torn.defect) == ("known-defect", "KAFKA-17754") and "request-hold on EndTxn" in torn.reason
    # a duplicated Produce under idempotence: no request rule lets a duplicate through, the general rule judges it
    duplicated = FaultSummary.from_windows([window("request-duplicate", ["Produce"])])
    queue = RunConfig(rf=3, min_insync=2, kafka_version="4.3.1")
    assert judge("duplicate", {"key": "k"}, queue, duplicated).verdict == "violation"
    # a held Produce outside transactions permits no loss
    assert judge("lost-write", {"key": "k"}, queue,
                 FaultSummary.from_windows([window("request-hold", ["Produce"])])).verdict == "violation"
    # before 3.6.0 a late transactional Produce is KAFKA-14402
    late = judge("G1a", {"writer_txn": True, "isolation": "read_committed"},
                 RunConfig(rf=3, min_insync=2, kafka_version="3.5.2", transactional=True),
                 FaultSummary.from_windows([window("request-delay", ["Produce"])]))
    assert (late.verdict, late.defect, late.fixed_in) == ("known-defect", "KAFKA-14402", "3.6.0")
    # what Kafka permits anyway stays permitted: an aborted record read at read_uncommitted (KIP-98)
    uncommitted = judge("G1a", {"writer_txn": True, "isolation": "read_uncommitted"}, txn, held)
    assert uncommitted.verdict == "permitted" and uncommitted.defect is None


def test_run_config_knows_a_transactional_workload() -> None:
    from kafka_chaos.reference_model.config import RunConfig

    assert RunConfig.from_scenario({"workload": {"kind": "txn"}}).transactional
    assert not RunConfig.from_scenario({"workload": {}}).transactional
