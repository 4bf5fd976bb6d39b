"""Clients in worker processes of their own (workloads.drivers), on a real cluster, frozen (client-pause: SIGSTOP):
a pinned confluent-kafka release's consumer for longer than its session timeout (its group moves its partitions
to the other consumer, and the frozen one answers nothing until it is thawed), and a transactional producer of
each client for longer than its transaction timeout. Kafka promises no data anomaly from a paused client. Asserts
on the history: the client and version it records, the paused client's ops, and what the readers read."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import events, nemesis, readers, txn_sends

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

PINNED = "2.6.1"
"""A confluent-kafka release other than the one installed with kafka-chaos, with a wheel for Python 3.11."""
JAVA_VERSION = "4.1.0"
SESSION_TIMEOUT_S = 6  # workloads.consumer's session.timeout.ms

PAUSED_CONSUMER: dict[str, Any] = {
    "name": "client-pause-consumer",
    "duration_s": 20,
    "cluster": {"nodes": 3},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 1, "consumers": 2, "consumer_mode": "subscribe", "rate": 100,
                 "client": "librdkafka", "client_version": PINNED},
    # process 0 is the first consumer (workloads.clients numbers the consumers first)
    "faults": {"schedule": [{"kind": "client-pause", "clients": [0], "at_s": 4,
                             "duration_s": SESSION_TIMEOUT_S + 4}]},
}


# nightly: a repeat by client of the Java consumer's pause (tests/chaos/test_java_client_suites.py); the pinned
# librdkafka runs in make test on the zoo's #5213 row (tests/chaos/test_zoo.py)
@pytest.mark.nightly
def test_a_pinned_client_paused_past_its_session_timeout_loses_nothing(chaos_run: Any) -> None:
    result = chaos_run(PAUSED_CONSUMER)
    history = events(result)
    (start,) = [e for e in history if e["process"] == "harness" and e["f"] == "run-start"]
    assert start["value"]["client"] == {"client": "librdkafka", "version": PINNED, "in_process": False}
    (paused,) = nemesis(result, "client-pause")
    (resume_invoked,) = nemesis(result, "client-resume", "invoke")
    (resumed,) = nemesis(result, "client-resume")
    assert paused["value"]["clients"] == [0] and paused["value"]["nodes"] == []
    assert (paused["value"]["client"], paused["value"]["version"]) == ("librdkafka", PINNED)
    assert resumed["value"]["pids"] == paused["value"]["pids"]["0"]

    # the paused consumer's polls: a stopped process answers nothing, so one poll spans the pause (invoked
    # before the thaw was asked for, completed after it) and at most one reply already on its way when the
    # worker stopped completes during it (an unpaused consumer completes one every poll_timeout_s)
    polls = [e for e in history if e["process"] == 0 and e["f"] == "poll"]
    invoked_at: dict[int, int] = {}
    completed: list[tuple[int, int]] = []  # (invoke time, completion time)
    for e in polls:
        if e["type"] == "invoke":
            invoked_at[0] = e["time"]
        elif 0 in invoked_at:
            completed.append((invoked_at.pop(0), e["time"]))
    assert any(done < paused["time"] for _, done in completed), "the consumer polled before the pause"
    spanning = [(i, done) for i, done in completed if i < resume_invoked["time"] < done]
    assert len(spanning) == 1, spanning
    during = [done for _, done in completed if paused["time"] < done < resume_invoked["time"]]
    assert len(during) <= 1, during
    after = [e for e in polls if e["type"] == "ok" and e["time"] > resumed["time"]]
    assert after, "the consumer did not poll again after the thaw"

    # nothing lost: every acknowledged send was read (the other consumer took the paused one's partitions over)
    acked = {(key, written[1]) for e in history if e["f"] == "send" and e["type"] == "ok"
             for _, key, written in e["value"]}
    read = {(key, value) for e in history if e["f"] == "poll" and e["type"] == "ok"
            for op in e["value"] if len(op) > 1 for key, records in op[1].items() for _, value in records}
    assert acked and acked <= read, f"{len(acked - read)} acknowledged sends never read"
    r = result.results
    assert r["valid"] and r["complete"] and not r["violations"], r["violations"][:3]
    assert r["anomaly_counts"].get("lost-write", 0) == 0


TXN_TIMEOUT_S = 10  # workloads.txn.TXN_TIMEOUT_MS
ABORT_CHECK_MS = 1000
"""transaction.abort.timed.out.transaction.cleanup.interval.ms: how often a coordinator looks for transactions
past their timeout (Kafka's 10 s would double the pause the test needs)."""
FENCED = {
    # a transaction version 1 client: the coordinator answers its old epoch PRODUCER_FENCED, which
    # rd_kafka_txn_handle_EndTxn takes for fatal and normalizes to _FENCED
    "librdkafka": "_FENCED",
    # a transaction version 2 client: the coordinator takes epoch + 1 (the fence's bump) for a retry of the
    # transaction it aborted, and a commit of an aborted transaction is INVALID_TXN_STATE, which the Java client's
    # EndTxnHandler takes for fatal
    "java": "INVALID_TXN_STATE",
}


def paused_producer(client: str, version: str) -> dict[str, Any]:
    return {
        "name": f"client-pause-txn-{client}", "duration_s": 42,
        "cluster": {"nodes": 3, "broker_overrides": {
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": ABORT_CHECK_MS}},
        "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
        # every transaction is held open for 2 s after its sends were acknowledged, as a slow application would,
        # and the pause waits for one (during = "transaction"): the freeze lands inside an open transaction
        "workload": {"kind": "txn", "client": client, "client_version": version, "producers": 1, "consumers": 1,
                     "txn_keys": 2, "txn_abort_share": 0, "txn_mixed_share": 0, "txn_commit_delay_ms": 2000,
                     "txn_isolation": ["read_committed", "read_uncommitted"]},
        # process 0 is the producer thread's first process (workloads.clients numbers the txn producers first);
        # at 10 s it has committed before (a worker's start, init_transactions and a 2 s hold come first), and the
        # thawed thread's next process has 12 s to start and commit
        "faults": {"schedule": [{"kind": "client-pause", "clients": [0], "during": "transaction", "at_s": 10,
                                 "duration_s": TXN_TIMEOUT_S + 8}]},
    }


# one client in make test, the other's repeat nightly (the suite's time budget)
@pytest.mark.parametrize("client, version", [pytest.param("librdkafka", PINNED, marks=pytest.mark.nightly),
                                             ("java", JAVA_VERSION)])
def test_a_transactional_producer_paused_past_its_transaction_timeout_is_aborted_and_fenced(
        chaos_run: Any, client: str, version: str) -> None:
    """A producer frozen inside a transaction whose sends were acknowledged, for longer than transaction.timeout.ms:
    its coordinator aborts the transaction (abort markers written, the producer epoch bumped: KIP-98's timeout,
    whichever client). Thawed, the producer asks to commit with its old epoch and the coordinator refuses it:
    librdkafka speaks transaction version 1, so the old epoch is PRODUCER_FENCED, which rd_kafka_txn_handle_EndTxn
    takes for fatal (_FENCED, "Failed to end transaction"); the Java client 4.1.0 speaks version 2 with a 4.x
    cluster, whose coordinator takes the old epoch for a retry (one below the fence's bump) and refuses to commit
    an aborted transaction: INVALID_TXN_STATE, fatal in the Java client's EndTxnHandler, as are PRODUCER_FENCED and
    INVALID_PRODUCER_EPOCH there (both a ProducerFencedException; the abortable InvalidProducerEpochException comes
    only from a Produce answer). The workload records the commit `info` (a `fail` needs the abort to return, and a
    producer in a fatal state cannot abort), never `ok`, and starts a new process, which fences the old epoch.

    The model (reference_model.client_faults): a client-side availability fault; Kafka permits no data anomaly.
    Measured: the transaction open at the freeze did not commit, its acknowledged records are on the log (the
    read_uncommitted reader read them) and read_committed never returned them (no G1a at read_committed), every
    committed transaction was read, and nothing acknowledged was lost."""
    result = chaos_run(paused_producer(client, version))
    history = events(result)
    (start,) = [e for e in history if e["process"] == "harness" and e["f"] == "run-start"]
    assert start["value"]["client"] == {"client": client, "version": version, "in_process": False}
    (paused,) = nemesis(result, "client-pause")
    (resume_invoked,) = nemesis(result, "client-resume", "invoke")
    assert (paused["value"]["client"], paused["value"]["during"]) == (client, "transaction")
    assert paused["value"]["in_transaction"] == paused["value"]["pids"]["0"], "frozen inside an open transaction"

    # the paused process's transaction: invoked before the freeze, completed only after the thaw
    spans: list[tuple[dict[str, Any], dict[str, Any]]] = []
    invoked: dict[str, Any] | None = None
    for e in history:
        if e["process"] == 0 and e["f"] == "txn":
            if e["type"] == "invoke":
                invoked = e
            elif invoked is not None:
                spans.append((invoked, e))
                invoked = None
    assert any(done["type"] == "ok" and done["time"] < paused["time"] for _, done in spans), "none committed before"
    (frozen,) = [done for inv, done in spans if inv["time"] < paused["time"] < resume_invoked["time"] < done["time"]]
    assert frozen["type"] in ("fail", "info"), frozen
    assert frozen["error"][0] == FENCED[client], frozen["error"]
    written = {(m[1], m[2][1]) for m in frozen["value"] if m[0] == "send"}
    assert len(written) == 2 and all(m[2][0] is not None for m in frozen["value"]), "its sends were acknowledged"

    read = readers(result)
    assert written <= read["read_uncommitted"], "the aborted transaction's records were on the log"
    assert not written & read["read_committed"], "a record of the timed-out transaction read at read_committed"
    committed = txn_sends(result, "ok")
    after = [e for e in history if e["f"] == "txn" and e["type"] == "ok" and e["time"] > frozen["time"]]
    assert after, "the producer thread's next process committed nothing"
    assert committed and committed <= read["read_committed"], f"{len(committed - read['read_committed'])} unread"
    r = result.results
    assert r["complete"] and not r["violations"], r["violations"][:3]
    assert not [i for i in r["anomalies"].get("G1a", []) if i["isolation"] == "read_committed"]
    assert r["anomaly_counts"].get("lost-write", 0) == 0
