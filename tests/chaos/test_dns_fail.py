"""A DNS failure during a leader change, on a real cluster. The leader of partition 0 shuts down (its
leaderships move), its host name stops resolving for the clients while it is down (dns-fail,
cluster.host_names: a name matters at a client's next connection, and a stopped broker has none left), it
starts again, and a preferred election hands its partitions back to it while its name is still broken: the
shape of confluentinc/librdkafka#4427, where a consumer validating its position against a new leader it could
not resolve reset its offsets (fixed from librdkafka 2.3.0). Kafka promises no data anomaly from a lookup that
fails. Asserts on the history and on the checker's verdict, with the model's expectation beside it."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest
from confluent_kafka import libversion

from kafka_chaos.cluster import host_names
from kafka_chaos.reference_model import judge
from kafka_chaos.reference_model.expectations import expectations
from kafka_chaos.rundir import SENDS_FILE

from .conftest import events, leader_changes, nemesis, sends_between, topic_of

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

DNS_DURING_LEADER_CHANGE: dict[str, Any] = {
    "name": "dns-fail-leader-change",
    "duration_s": 32,
    "cluster": {"nodes": 3},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "consumers": 1, "acks": "all", "idempotence": True, "rate": 150},
    "faults": {"schedule": [
        {"kind": "stop", "target": "leader", "at_s": 3, "duration_s": 4},
        {"kind": "dns-fail", "target": "previous", "mode": "unresolvable", "at_s": 5, "duration_s": 22},
    ]},
    # Kafka hands a partition back only to a preferred replica in its ISR: the election waits up to 15 s for the
    # restarted broker (JVM start, catch-up) and still falls within the name's 22 s outage on a slow host
    "operations": [{"kind": "preferred-election", "at_s": 9, "healthy_timeout_s": 15}],
}


def test_clients_go_on_after_a_dns_failure_during_a_leader_change(chaos_run: Any) -> None:
    result = chaos_run(DNS_DURING_LEADER_CHANGE)
    (broken,) = nemesis(result, "dns-fail")
    (restored,) = nemesis(result, "dns-restore")
    (stopped,) = nemesis(result, "stop")
    (started,) = nemesis(result, "start")
    (broker,) = broken["value"]["nodes"]
    ((name, address),) = broken["value"]["names"].items()
    assert name.startswith("kc-") and name.endswith(f"-broker-{broker}") and address is None
    assert broken["value"]["mode"] == "unresolvable" and broken["value"]["librdkafka"] == libversion()[0]
    assert restored["value"]["names"] == {name: host_names.LOOPBACK}
    assert stopped["value"]["nodes"] == [broker], "the name broke while its broker was down"
    assert stopped["time"] < broken["time"] < started["time"] < restored["time"]

    # the leader change: leaderships moved onto the broker whose name was broken, before its name came back
    topic = topic_of(result)
    onto = {f"{topic}/{p}": t for p in range(3) for t, new, _ in leader_changes(result, f"{topic}/{p}")[1:]
            if new == broker and started["time"] < t < restored["time"]}
    assert onto, "no partition moved onto the broker while its name was broken"
    # clients could not reach the new leader: no send to it invoked after the change was acknowledged before the
    # name came back (a send already in flight to the old leader is not one of these)
    sends = pq.read_table(result.run_dir / SENDS_FILE, columns=["key", "type", "invoke_time", "complete_time"])
    early = [r for r in sends.to_pylist() if r["key"] in onto and r["type"] == "ok"
             and onto[r["key"]] < r["invoke_time"] and r["complete_time"] < restored["time"]]
    assert not early, early[:3]

    # clients went on: acknowledged sends after the heal, and the consumers read them
    after = {(key, tuple(written)[1]) for e in events(result) if e["f"] == "send" and e["type"] == "ok"
             and e["time"] > restored["time"] for _, key, written in e["value"]}
    read = {(key, value) for e in events(result) if e["f"] == "poll" and e["type"] == "ok"
            for op in e["value"] if len(op) > 1 for key, records in op[1].items() for _, value in records}
    assert after and sends_between(result, restored["time"], 2**63) > 0, "no acknowledged send after the heal"
    assert after <= read, f"{len(after - read)} sends acknowledged after the heal never read"

    # the checker's verdict: valid, nothing lost; the model's expectation beside it
    r = result.results
    assert r["valid"] and r["complete"] and not r["violations"], r["violations"][:3]
    assert r["anomaly_counts"].get("lost-write", 0) == r["anomaly_counts"].get("duplicate", 0) == 0
    assert not r.get("known_defects"), "librdkafka from 2.3.0 retries offset validation after a failed lookup"
    expected = expectations(result.scenario.model_dump(), r["faults"]["windows"], r)
    durability = expected.rows[0]
    assert durability.predicted.startswith("no acknowledged write may be lost") and not durability.mismatch
    assert judge("poll-skip", {"offsets": [3, 9], "delta": 6}, result.scenario.model_dump(),
                 events(result)).verdict == "violation", "the model permits no consumer skip on this client"
