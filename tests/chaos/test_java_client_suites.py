"""The workloads with the Apache Kafka Java client (workloads.drivers.java: one worker process per history process)
on a real cluster: the control run and a killed partition leader for the queue workload, and (nightly) the
transactional control run. The history is recorded the same way whichever client ran it, so the checks are the
librdkafka suites' own. Asserts on the history."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import events, nemesis, run_logging_clients

pytestmark = [pytest.mark.cluster, pytest.mark.chaos,
              pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")]

JAVA_VERSION = "4.1.0"
JAVA = {"client": "java", "client_version": JAVA_VERSION}
CLUSTER: dict[str, Any] = {
    "cluster": {"nodes": 3},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
}
QUEUE = {**JAVA, "producers": 2, "in_flight": 8, "consumers": 1, "acks": "all", "idempotence": True, "rate": 300}


def run_start(result: RunResult) -> dict[str, Any]:
    (start,) = [e for e in events(result) if e["process"] == "harness" and e["f"] == "run-start"]
    return dict(start["value"])


def acked_and_read(result: RunResult) -> tuple[set[tuple[str, int]], set[tuple[str, int]]]:
    """(key, value) of every acknowledged send, and of every record the consumers read."""
    history = events(result)
    acked = {(key, written[1]) for e in history if e["f"] == "send" and e["type"] == "ok"
             for _, key, written in e["value"]}
    read = {(key, value) for e in history if e["f"] == "poll" and e["type"] == "ok"
            for op in e["value"] if len(op) > 1 for key, records in op[1].items() for _, value in records}
    return acked, read


def assert_java_client(result: RunResult) -> None:
    assert run_start(result)["client"] == {"client": "java", "version": JAVA_VERSION, "in_process": False}


def assert_nothing_lost(result: RunResult) -> None:
    acked, read = acked_and_read(result)
    assert acked and acked <= read, f"{len(acked - read)} acknowledged sends never read"
    r = result.results
    assert r["valid"] and r["complete"] and not r["violations"], r["violations"][:3]
    assert r["anomaly_counts"].get("lost-write", 0) == 0


def test_the_java_clients_control_run_reads_every_acknowledged_send(chaos_run: Any) -> None:
    result = chaos_run({"name": "java-control", "duration_s": 15, **CLUSTER, "workload": QUEUE})
    assert_java_client(result)
    sends = [e for e in events(result) if e["f"] == "send" and e["type"] == "ok"]
    assert len(sends) > 100, len(sends)  # the Java workers carried the workload, not a handful of ops
    assert_nothing_lost(result)
    assert not any(insts for insts in result.results["anomalies"].values()), result.results["anomaly_counts"]


def test_the_java_producer_loses_nothing_when_the_partition_leader_is_killed(chaos_run: Any) -> None:
    """acks=all, min.insync 2, RF 3 and an idempotent producer: Kafka promises every acknowledged write survives
    the leader's death, whichever client sent it."""
    result = chaos_run({"name": "java-kill-leader", "duration_s": 18, **CLUSTER, "workload": QUEUE,
                        "faults": {"schedule": [{"kind": "kill", "target": "leader", "at_s": 4, "duration_s": 7}]}})
    assert_java_client(result)
    (kill,) = nemesis(result, "kill")
    assert kill["value"]["nodes"], kill
    after = [e for e in events(result) if e["f"] == "send" and e["type"] == "ok" and e["time"] > kill["time"]]
    assert after, "the Java producers sent nothing acknowledged after the kill"
    assert_nothing_lost(result)


def readers(result: RunResult) -> dict[str, set[tuple[str, int]]]:
    """(key, value) of what each standalone reader read, by its isolation level (its `assign` op names it)."""
    history = events(result)
    isolation = {e["process"]: e["value"]["isolation"] for e in history
                 if e["f"] == "assign" and e["type"] == "invoke" and isinstance(e["value"], dict)}
    out: dict[str, set[tuple[str, int]]] = {level: set() for level in isolation.values()}
    for e in history:
        if e["f"] == "poll" and e["type"] == "ok" and e["process"] in isolation:
            out[isolation[e["process"]]] |= {(key, value) for op in e["value"] if len(op) > 1
                                             for key, records in op[1].items() for _, value in records}
    return out


def txn_sends(result: RunResult, type_: str) -> set[tuple[str, int]]:
    """(key, value) of the sends of the transactions that completed as `type_` (ok: committed, fail: aborted)."""
    return {(m[1], m[2][1] if isinstance(m[2], list) else m[2]) for e in events(result)
            if e["f"] == "txn" and e["type"] == type_ for m in e["value"] if m[0] == "send"}


@pytest.mark.nightly
def test_the_java_clients_transactions_are_read_committed_as_kip_98_says(chaos_run: Any) -> None:
    """The transactional workload with the Java client, no faults: a read_committed reader reads every committed
    transaction's records and no aborted one's (KIP-98); kafka-clients 4.1.0 on a new 4.x cluster speaks
    transaction version 2 (KIP-890 part 2: a 4.x cluster finalizes transaction.version 2 at format)."""
    result, log = run_logging_clients(chaos_run, {
        "name": "java-txn-control", "duration_s": 15, **CLUSTER,
        "workload": {**JAVA, "kind": "txn", "producers": 2, "consumers": 1, "txn_keys": 2,
                     "txn_abort_share": 0.2, "txn_mixed_share": 0.3,
                     "txn_isolation": ["read_committed", "read_uncommitted"]}})
    assert_java_client(result)
    assert any("speaks transaction.version=2" in line for line in log), [x for x in log if "transaction" in x][:5]
    committed, aborted = txn_sends(result, "ok"), txn_sends(result, "fail")
    assert len(committed) > 20 and aborted, (len(committed), len(aborted))
    read = readers(result)
    assert committed <= read["read_committed"], f"{len(committed - read['read_committed'])} committed never read"
    assert not aborted & read["read_committed"], "an aborted transaction's record read at read_committed"
    assert aborted & read["read_uncommitted"], "the read_uncommitted reader read no aborted record"
    r = result.results
    assert "not_checked" not in r and r["complete"] and not r["violations"], r["violations"][:3]
    g1a = r["anomalies"].get("G1a", [])
    assert {i["isolation"] for i in g1a} == {"read_uncommitted"}, g1a[:3]
