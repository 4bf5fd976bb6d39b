"""KAFKA-14402's shape made on purpose with librdkafka: the transactional producer's first Produce held on its
connection until the message times out in the client (delivery.timeout.ms), so the transaction aborts, and
delivered late, ahead of the next transaction's AddPartitionsToTxn (`release_after = ["AddPartitionsToTxn"]`).

Why that moment: librdkafka's abort waits for in-flight Produce requests (rd_kafka_abort_transaction flushes
before EndTxn), so the held one must time out first; a timed-out message bumps the epoch after the abort
(rd_kafka_idemp_drain_epoch_bump → abortable error "with bump", then rd_kafka_txn_endtxn_complete sends
InitProducerId with the current producer id and epoch, KIP-360). The coordinator answers that InitProducerId
only once the abort markers are written, and the next transaction's AddPartitionsToTxn follows it: the late
Produce reaches the leader after the abort marker, at the aborted transaction's epoch and the next sequence.
Before 3.6.0 the leader appends it (a transaction no coordinator knows, which the next transaction's commit
marker at the bumped epoch ends: the aborted records committed); from 3.6.0 the leader first asks the
coordinator (KIP-890 part 1 verification), which answers that the transaction is not ongoing at that epoch, and
the Produce is rejected. One broker, so the coordinator and the partition leader share the proxy whose other
connections release the hold. Asserts on the history only (reference_model/request_faults.py,
docs/architecture.md §5)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kafka_chaos.harness.zoo import load_bug
from kafka_chaos.reference_model.request_faults import rule_for

from .conftest import SCENARIOS, events, held_until_after, verdict_counts

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

SCENARIO = load_bug(SCENARIOS / "bugs" / "kafka-14402.toml").base.with_overrides(name="held-produce-across-abort")
"""The zoo row's run at the default version: one broker, one partition every transaction writes and commits,
the first Produce held until the next transaction's AddPartitionsToTxn; the held message times out in 6 s."""


def test_a_produce_held_across_an_abort_is_rejected(chaos_run: Any) -> None:
    result = chaos_run(SCENARIO)
    held = held_until_after(result, "Produce", ["AddPartitionsToTxn"])
    hist = events(result)
    (run_start,) = [e["value"]["clock_unix_ns"] for e in hist if e["f"] == "run-start"]
    released_ns = held["held_to_ms"] * 1_000_000 - run_start  # the history's clock: ns since the run began
    txns = [e for e in hist if e["f"] == "txn" and e["type"] in ("ok", "fail", "info")]
    aborted = [e for e in txns if e["type"] == "fail" and e["time"] <= released_ns]
    assert aborted, "the held message timed out and its transaction aborted before the release"
    r = result.results
    found = verdict_counts(result)
    expect = rule_for("request-hold", "Produce", kafka_version=result.scenario.cluster.kafka_version,
                      idempotence=True, transactional=True)
    print(f"held Produce {held}; txn ops {dict(Counter(e['type'] for e in txns))}; anomalies (name, isolation, "
          f"verdict, defect) {dict(found)}; model: permits {sorted(expect.permits)} ({expect.defect})")
    uncommitted = {e["process"] for e in hist if e["f"] == "assign" and isinstance(e["value"], dict)
                   and e["value"].get("isolation") == "read_uncommitted"}
    read: dict[bool, set[int]] = {True: set(), False: set()}  # read_committed? -> values read
    for e in hist:
        if e["f"] == "poll" and e["type"] == "ok":
            for mop in e["value"]:
                if mop[0] == "poll" and len(mop) > 1:
                    read[e["process"] not in uncommitted] |= {v for recs in mop[1].values() for _, v in recs}
    assert read[False], "the read_uncommitted reader read"
    # the held frame was the only copy of the timed-out transaction's records: rejected by the leader, they are
    # read at no isolation level (before 3.6.0 they would be appended, and committed by the next transaction)
    aborted_values = {m[2][1] for e in aborted for m in e["value"] if m[0] == "send"}
    assert not aborted_values & (read[True] | read[False]), sorted(aborted_values & (read[True] | read[False]))
    assert not r["anomalies"].get("G1a"), r["anomalies"]["G1a"][:3]
    # no hanging transaction: what committed after the release was read at read_committed, so the partition's
    # last stable offset moved past where the late Produce landed
    later = {m[2][1] for e in txns if e["type"] == "ok" and e["time"] > released_ns for m in e["value"]
             if m[0] == "send"}
    assert later, "transactions committed after the release"
    assert later <= read[True], sorted(later - read[True])
    assert not r["anomalies"].get("unseen") and not r["violations"], (r["anomalies"].get("unseen"),
                                                                       r["violations"][:3])
