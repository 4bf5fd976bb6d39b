"""KAFKA-17754's shape made on purpose: the transactional producer's first EndTxn copy held on its connection to
the coordinator while librdkafka times the request out, drops the connection and sends EndTxn again on a new
one; the first copy is released ahead of the next transaction's own EndTxn (`release_after = ["EndTxn"]`,
`release_after_count = 2`: the re-send counts once), onto a coordinator where that transaction is open.
Under transaction protocol v1 (librdkafka) it ends that transaction: what the checker finds is shown with the
model's verdict, KAFKA-17754 a known defect (reference_model/request_faults.py, docs/architecture.md §5).
librdkafka sends EndTxn only once the transaction's messages are flushed, so a late commit that lands ahead of the
next transaction's own EndTxn commits a whole transaction: what Kafka's code says then shows is no anomaly; when
that transaction was to abort, its records are committed but its own EndTxn(abort) meets a finished commit and
gets INVALID_TXN_STATE, fatal to librdkafka (rd_kafka_txn_handle_EndTxn), so the op's outcome is unknown.
Asserts on the history only."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from .conftest import events, held_until_after, verdict_counts

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

SCENARIO: dict[str, Any] = {
    "name": "kafka-17754-request-hold",
    "duration_s": 30,
    "cluster": {"nodes": 3, "toxiproxy": True},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    # one producer: every EndTxn the coordinator's proxy sees is its own; the request times out in 3 s, so
    # librdkafka drops the connection and sends EndTxn again on a new one (socket.max.fails = 1)
    "workload": {"kind": "txn", "producers": 1, "consumers": 1, "txn_keys": 2, "txn_abort_share": 0.5,
                 "txn_socket_timeout_ms": 3000},
    "faults": {"schedule": [{"kind": "request-hold", "api": ["EndTxn"], "target": "txn-coordinator", "count": 1,
                             "release_after": ["EndTxn"], "release_after_count": 2, "at_s": 4,
                             "duration_s": 20}]},
}


def test_a_late_end_txn_ends_the_next_transaction(chaos_run: Any) -> None:
    result = chaos_run(SCENARIO)
    # the toxic passed the re-send on another connection, then the next transaction's EndTxn, and delivered the
    # held copy ahead of that one
    held = held_until_after(result, "EndTxn", ["EndTxn"])
    txns = [e for e in events(result) if e["f"] == "txn" and e["type"] in ("ok", "fail", "info")]
    r = result.results
    found = verdict_counts(result)
    print(f"held EndTxn {held}; txn ops {dict(Counter(e['type'] for e in txns))}; "
          f"anomalies (name, isolation, verdict, defect) {dict(found)}")
    # under protocol v1 whatever the late EndTxn does is KAFKA-17754's, a known defect; nothing else breaks
    for name in ("G1a", "G1c", "lost-write"):
        for inst in r["anomalies"].get(name, []):
            if inst.get("isolation", "read_committed") != "read_uncommitted":
                assert "KAFKA-17754" in str(inst.get("defect") or inst.get("reason")), inst
    assert not r["violations"], r["violations"][:3]
