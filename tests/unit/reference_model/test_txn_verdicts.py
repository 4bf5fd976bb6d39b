"""The model's transaction rules (KIP-98): isolation levels for G1a and skips, and which cycles time forbids."""

from __future__ import annotations

from typing import Any

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.verdicts import FaultSummary, judge

SAFE = RunConfig(acks="all", idempotence=True, rf=3, min_insync=2)
NONE = FaultSummary.coerce(None)


def v(anomaly: str, instance: dict[str, Any], config: RunConfig = SAFE) -> str:
    return judge(anomaly, instance, config, NONE).verdict


def ww(a: int, b: int) -> dict[str, Any]:
    return {"kind": "ww", "from_point": a, "to_point": b}


def wr(from_point: int | str, to_point: int) -> dict[str, Any]:
    return {"kind": "wr", "from_point": from_point, "to_point": to_point}


RT = {"kind": "realtime", "from_point": "commit", "to_point": "invoke"}


def test_g1a_depends_on_the_readers_isolation_level() -> None:
    assert v("G1a", {"writer_txn": True, "isolation": "read_uncommitted"}) == "permitted"
    assert v("G1a", {"writer_txn": True, "isolation": "read_committed"}) == "violation"
    assert v("G1a", {"isolation": "read_uncommitted"}) == "violation"  # a failed plain send is not an abort


def test_cycles_forced_in_time_are_violations_others_permitted() -> None:
    assert v("G0", {"edges": [ww(0, 0), ww(1, 1)]}) == "permitted"  # interleaved appends
    assert v("G0", {"edges": [ww(0, 0), RT]}) == "violation"  # a later transaction appended earlier
    assert v("G1c", {"edges": [wr("commit", 1), wr("commit", 1)]}) == "violation"  # each saw the other's commit
    assert v("G1c", {"edges": [ww(0, 0), wr("commit", 1)]}) == "permitted"  # append before the other's commit
    # read_uncommitted wr edges leave from an append, not a commit: not forced
    assert v("G1c", {"edges": [wr(0, 1), wr(0, 1)]}) == "permitted"
    # a poll that returned before the transaction's own later send: the read precedes that append
    assert v("G1c", {"edges": [wr("commit", 0), ww(1, 0), RT]}) == "violation"
    # arriving and leaving at the same append: T1 before T2 on a key, T2 before T1 on it again is one chain
    assert v("G0", {"edges": [ww(0, 0), ww(0, 0)]}) == "violation"
    unclean = RunConfig(acks="all", idempotence=True, rf=3, min_insync=2, unclean=True)
    assert v("G0", {"edges": [ww(0, 0), RT]}, unclean) == "permitted"


def test_read_committed_skips_of_uncommitted_records_are_permitted() -> None:
    base = {"offsets": [0, 5], "delta": 2, "values": [1, 3]}
    assert v("poll-skip", {**base, "skipped_uncommitted": True, "isolation": "read_committed"}) == "permitted"
    assert v("poll-skip", {**base, "skipped_uncommitted": False, "isolation": "read_committed"}) == "violation"


def test_kafka_17754_is_a_known_defect_for_aborted_reads_and_torn_transactions_only_under_client_link_faults() -> None:
    """A request held back on one client link can end or join the next transaction of the same producer epoch
    (transaction protocol v1, which librdkafka speaks on every version): the model judges an aborted record
    seen at read_committed and a forced cycle a known defect (KAFKA-17754) when a client link was slowed, and a
    violation anywhere else."""
    slowed = FaultSummary(kinds=frozenset({"latency"}))
    paused = FaultSummary(kinds=frozenset({"pause"}))
    aborted_read = {"writer_txn": True, "isolation": "read_committed"}
    forced = {"edges": [wr("commit", 1), wr("commit", 1)]}
    for name, instance in (("G1a", aborted_read), ("G1c", forced)):
        verdict = judge(name, instance, SAFE, slowed)
        assert (verdict.verdict, verdict.defect) == ("known-defect", "KAFKA-17754")
        assert verdict.fixed_in and "transaction version 2" in verdict.fixed_in
        assert "KAFKA-17754" in verdict.reason
        assert judge(name, instance, SAFE, paused).verdict == "violation"  # the client waits out a pause
        assert judge(name, instance, SAFE, NONE).verdict == "violation"
    # a plain send reported failed and read is no transaction's doing
    assert judge("G1a", {"isolation": "read_committed"}, SAFE, slowed).verdict == "violation"


def test_a_cycle_through_a_values_second_append_is_forced_only_when_no_late_produce_copy_can_exist() -> None:
    """A: send v (ok), then B: send w after A completed; w sits between v's two copies. The ww edge B → A arrives
    at v's second append ("reappend"). A retry's second append precedes A's completion, so the cycle is forced in
    time; a duplicated Produce can land after A completed, so under request-duplicate it is not."""
    through_copy = {"edges": [RT, {"kind": "ww", "from_point": 0, "to_point": "reappend"}]}
    assert v("G0", through_copy) == "violation"
    duplicated = FaultSummary(requests=frozenset({("request-duplicate", "Produce")}))
    assert judge("G0", through_copy, SAFE, duplicated).verdict == "permitted"
    # a fault on another API delivers no late copy of a Produce
    other = FaultSummary(requests=frozenset({("request-duplicate", "Fetch")}))
    assert judge("G0", through_copy, SAFE, other).verdict == "violation"
