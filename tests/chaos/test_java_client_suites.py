"""The workloads with the Apache Kafka Java client (workloads.drivers.java: one worker process per history process)
on a real cluster: the control run, a killed partition leader and a consumer paused past its session timeout for
the queue workload, and (nightly) the transactional control run. The history is recorded the same way whichever
client ran it, so the checks are the librdkafka suites' own. Asserts on the history."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import events, nemesis, readers, run_logging_clients, topic_of, txn_sends

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


SESSION_TIMEOUT_S = 6  # workloads.consumer's session.timeout.ms
PAUSED_JAVA_CONSUMER: dict[str, Any] = {
    "name": "java-client-pause-consumer", "duration_s": 36, **CLUSTER,
    "workload": {**JAVA, "producers": 1, "consumers": 2, "consumer_mode": "subscribe", "rate": 100},
    # process 0 is the first consumer (workloads.clients numbers the consumers first); paused once the group has
    # settled after both consumers joined (two JVM starts and a join on a slow host), frozen long enough for the
    # session timeout, a rebalance and the other member's fetches, and thawed with time left to rejoin and read
    "faults": {"schedule": [{"kind": "client-pause", "clients": [0], "at_s": 9,
                             "duration_s": SESSION_TIMEOUT_S + 10}]},
}


def test_a_java_consumer_paused_past_its_session_timeout_is_replaced_and_rejoins(chaos_run: Any) -> None:
    """The Java consumer speaks the classic group protocol here (kafka-clients' default group.protocol; the
    workload sets session.timeout.ms, a classic-protocol setting, and never group.protocol=consumer, KIP-848).
    SIGSTOP freezes the whole JVM, its heartbeat thread too, so the coordinator hears nothing for longer than
    session.timeout.ms and removes the member: its partitions go to the other consumer, which reads on from the
    group's committed offsets (auto-commit lags what the paused one read, so some records are read again). When it
    is thawed, its heartbeat finds the member unknown (UNKNOWN_MEMBER_ID), it resets its generation and joins again.

    The model (reference_model.client_faults): an availability fault on the client's side; Kafka permits no data
    anomaly for it. A subscribe consumer's poll-skip and nonmonotonic-poll are permitted (a rebalance moves its
    position: checker.verdicts), a re-read by another member is no anomaly at all; what the group as a whole must
    not do is skip a committed position, so the two consumers' reads of each partition leave no offset out."""
    result, log = run_logging_clients(chaos_run, PAUSED_JAVA_CONSUMER)
    assert_java_client(result)
    history = events(result)
    (paused,) = nemesis(result, "client-pause")
    (resume_invoked,) = nemesis(result, "client-resume", "invoke")
    assert paused["value"]["clients"] == [0]
    assert (paused["value"]["client"], paused["value"]["version"]) == ("java", JAVA_VERSION)

    def reads(process: int, after: int = -1, before: int = 2**63) -> dict[str, list[int]]:
        """Offsets `process` read per key, in polls that completed between `after` and `before`."""
        out: dict[str, list[int]] = {}
        for e in history:
            if e["process"] == process and e["f"] == "poll" and e["type"] == "ok" and after < e["time"] < before:
                for op in e["value"]:
                    for key, records in (op[1] if len(op) > 1 else {}).items():
                        out.setdefault(key, []).extend(offset for offset, _ in records)
        return out

    keys = {f"{topic_of(result)}/{p}" for p in range(3)}
    assert reads(0, before=paused["time"]), "the consumer read nothing before the pause"
    # the group moved the paused member's partitions: the other consumer alone read every partition meanwhile
    assert set(reads(1, after=paused["time"], before=resume_invoked["time"])) == keys
    # thawed, the paused consumer learnt from its coordinator that it had been removed and joined again
    p0 = [line for line in log if line.startswith("java-p0:")]
    removed = [i for i, line in enumerate(p0) if "UNKNOWN_MEMBER_ID" in line or "resetting generation" in line]
    assert removed, [line for line in p0 if "group" in line.lower()][-10:]
    assert any("Successfully joined group" in line for line in p0[removed[0]:]), p0[removed[0]:][:10]
    assert reads(0, after=resume_invoked["time"]), "the thawed consumer read nothing after rejoining"

    # no committed position skipped: between them the two consumers read every offset of each partition up to the
    # furthest either reached (re-reads are no anomaly)
    for key in keys:
        offsets = set(reads(0).get(key, [])) | set(reads(1).get(key, []))
        assert offsets and offsets == set(range(max(offsets) + 1)), (key, sorted(set(range(max(offsets) + 1))
                                                                                 - offsets)[:10])
    r = result.results
    moved = [(name, i) for name in ("poll-skip", "nonmonotonic-poll") for i in r["anomalies"].get(name, [])]
    assert all(i["subscribe"] and i["verdict"] == "permitted" for _, i in moved), moved[:3]
    assert_nothing_lost(result)


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
