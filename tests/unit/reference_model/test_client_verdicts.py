"""The model per client and release: a client's known defect is named on the releases that have it and is a
violation (a regression) past its fix; KAFKA-17754 and librdkafka's reused sequence follow the client that ran."""

from __future__ import annotations

from typing import Any

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.verdicts import GROUP_POSITION_MOVES, FaultSummary, judge

KILLED = FaultSummary(kinds=frozenset({"kill"}), leader_affected=True)
SLOWED = FaultSummary(kinds=frozenset({"latency"}))
NONE = FaultSummary.coerce(None)
BACKWARDS = {"offsets": [40, 12], "delta": -28, "mode": "assign"}


def cfg(client: str = "librdkafka", version: str | None = None, kafka: str = "4.3.1", **kw: Any) -> RunConfig:
    return RunConfig(acks="all", idempotence=True, rf=3, min_insync=2, kafka_version=kafka, client=client,
                     client_version=version, **kw)


def test_librdkafka_2_1_0_rereads_after_a_leader_change_and_2_1_1_does_not() -> None:
    on_210 = judge("nonmonotonic-poll", BACKWARDS, cfg(version="2.1.0"), KILLED)
    assert (on_210.verdict, on_210.defect) == ("known-defect", "confluentinc/librdkafka#4261")
    assert on_210.fixed_in == "librdkafka 2.1.1" and "rd_kafka_toppar_leader_update" in on_210.reason
    assert judge("nonmonotonic-poll", BACKWARDS, cfg(version="2.1.1"), KILLED).verdict == "violation"
    assert judge("nonmonotonic-poll", BACKWARDS, cfg(version="2.16.0"), KILLED).verdict == "violation"
    assert judge("nonmonotonic-poll", BACKWARDS, cfg(), KILLED).verdict == "violation"  # the installed release
    # without a leader change the defect has nothing to act on
    assert judge("nonmonotonic-poll", BACKWARDS, cfg(version="2.1.0"), NONE).verdict == "violation"
    # the Java client has no such defect
    assert judge("nonmonotonic-poll", BACKWARDS, cfg("java", "4.1.0"), KILLED).verdict == "violation"


def test_a_quick_idempotent_duplicate_stays_a_violation_for_every_client() -> None:
    """librdkafka#4953's duplicates are not told apart from a broker's failed de-duplication (client_defects)."""
    for client, version in (("librdkafka", None), ("librdkafka", "2.1.0"), ("java", "4.1.0")):
        assert judge("duplicate", {"send_ms": 100}, cfg(client, version), KILLED).verdict == "violation"


def test_the_reused_sequence_is_librdkafkas_defect_and_not_the_java_clients() -> None:
    lost = {"reused_sequence": [{"value": 7, "op": 3, "process": 1, "offset": 5, "aborted_value": 6,
                                 "aborted_op": 2}]}
    librdkafka = judge("lost-write", lost, cfg(transactional=True), SLOWED)
    assert (librdkafka.verdict, librdkafka.defect) == ("known-defect", "librdkafka: an aborted send's sequence reused")
    java = judge("lost-write", lost, cfg("java", "4.1.0", transactional=True), SLOWED)
    assert java.verdict == "violation" and java.defect is None


def test_kafka_17754_is_a_regression_with_transaction_version_2_and_a_known_defect_without() -> None:
    aborted_read = {"writer_txn": True, "isolation": "read_committed"}
    for client, version, kafka, cluster_tv in (("librdkafka", None, "4.3.1", None), ("java", "3.9.1", "4.3.1", None),
                                               ("java", "4.1.0", "3.9.1", None), ("java", "4.1.0", "4.3.1", 1)):
        v = judge("G1a", aborted_read, cfg(client, version, kafka, transactional=True,
                                           cluster_transaction_version=cluster_tv), SLOWED)
        assert (v.verdict, v.defect) == ("known-defect", "KAFKA-17754"), (client, version, kafka, cluster_tv)
    tv2 = judge("G1a", aborted_read, cfg("java", "4.1.0", "4.3.1", transactional=True), SLOWED)
    assert tv2.verdict == "violation" and "regression of KAFKA-17754" in tv2.reason
    held = FaultSummary(kinds=frozenset({"request-hold"}), requests=frozenset({("request-hold", "EndTxn")}))
    torn = {"edges": [{"kind": "wr", "from_point": "commit", "to_point": 1}] * 2}
    assert judge("G1c", torn, cfg(transactional=True), held).verdict == "known-defect"
    assert judge("G1c", torn, cfg("java", "4.1.0", transactional=True), held).verdict == "violation"


def test_the_run_configuration_reads_the_client_from_the_scenario() -> None:
    c = RunConfig.from_scenario({"workload": {"client": "java", "client_version": "4.1.0"},
                                 "cluster": {"kafka_version": "4.3.1"}})
    assert (c.client, c.client_version, c.transaction_v2) == ("java", "4.1.0", True)
    v1 = RunConfig.from_scenario({"workload": {"client": "java", "client_version": "4.1.0"},
                                  "cluster": {"kafka_version": "4.3.1", "transaction_version": 1}})
    assert (v1.client_transaction_version, v1.cluster_transaction_version, v1.transaction_v2) == (2, 1, False)
    default = RunConfig.from_scenario({"cluster": {"kafka_version": "4.3.1"}})
    assert (default.client, default.client_version, default.transaction_v2) == ("librdkafka", None, False)


# A restarted group consumer's two faces of librdkafka #5213 (the zoo row librdkafka-5213-consume-eof-skip):
# one value skipped, and a reset to the partition's start after resuming past the log end.
ONE_SKIPPED = {"key": "chaos/1", "offsets": [26, 28], "delta": 2, "skipped": [81], "subscribe": True}
RESET_TO_START = {"key": "chaos/0", "offsets": [11, 0], "delta": -11, "subscribe": True}


def test_librdkafka_5213_names_a_group_consumers_resume_one_past_the_end_on_the_releases_that_have_it() -> None:
    for anomaly, instance in (("poll-skip", ONE_SKIPPED), ("nonmonotonic-poll", RESET_TO_START)):
        for version in ("2.1.0", "2.13.0"):
            v = judge(anomaly, dict(instance), cfg(version=version, partition_eof=True), NONE)
            assert (v.verdict, v.defect, v.fixed_in) == ("known-defect", "confluentinc/librdkafka#5213",
                                                          "librdkafka 2.13.2"), (anomaly, version)
            assert "rd_kafka_q_serve_rkmessages" in v.reason
        # past the fix, before the loop, without partition EOF events, on the installed release (the defect is
        # fixed) and on the Java client: the group permission, as before
        for c in (cfg(version="2.13.2", partition_eof=True), cfg(version="2.16.0", partition_eof=True),
                  cfg(version="2.0.2", partition_eof=True), cfg(version="2.13.0"), cfg(partition_eof=True),
                  cfg("java", "4.1.0", partition_eof=True)):
            assert judge(anomaly, dict(instance), c, NONE) == GROUP_POSITION_MOVES, (anomaly, c)


def test_librdkafka_5213_leaves_other_shapes_and_assigned_consumers_to_the_general_rules() -> None:
    affected = cfg(version="2.13.0", partition_eof=True)
    # a skip of several values, a re-read from a committed offset that is not the start: a rebalance's moves
    for anomaly, instance in (("poll-skip", {**ONE_SKIPPED, "delta": 5, "offsets": [26, 31]}),
                              ("nonmonotonic-poll", {**RESET_TO_START, "offsets": [11, 4]})):
        assert judge(anomaly, instance, affected, NONE) == GROUP_POSITION_MOVES
    # an assigned consumer does not resume from committed offsets: its one-value skip stays a violation
    assigned = {**ONE_SKIPPED, "subscribe": False, "mode": "assign", "offsets": [26, 29]}
    assert judge("poll-skip", assigned, affected, NONE).verdict == "violation"
    # within one poll the position never passes through a commit
    assert judge("int-poll-skip", dict(ONE_SKIPPED), affected, NONE) == GROUP_POSITION_MOVES


def test_the_run_configuration_reads_partition_eof_from_the_workload() -> None:
    on = RunConfig.from_scenario({"workload": {"client": "librdkafka", "client_version": "2.13.0",
                                               "consumer_mode": "subscribe", "partition_eof": True}})
    assert (on.client_version, on.partition_eof) == ("2.13.0", True)
    assert RunConfig.from_scenario({"workload": {"client_version": "2.13.0"}}).partition_eof is False
