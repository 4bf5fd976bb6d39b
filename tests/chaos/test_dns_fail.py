"""A DNS failure during a leader change, on a real cluster: a follower's host name stops resolving for the
clients (dns-fail, cluster.host_names), then the leader shuts down (a controlled shutdown moves its
leaderships at once, where a kill of a leader that is also the active controller waits for a failover and a
session timeout), so its partitions change leader while one broker's name is broken, possibly onto that
broker. Kafka promises no data anomaly from a lookup that fails (clients retry; the librdkafka offset reset of
confluentinc/librdkafka#4427 is fixed from 2.3.0). Asserts on the history and on the checker's verdict, with
the model's expectation beside it."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import libversion

from kafka_chaos.cluster import host_names
from kafka_chaos.reference_model import judge
from kafka_chaos.reference_model.expectations import expectations

from .conftest import events, leader_changes, nemesis, sends_between, topic_of

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

DNS_DURING_LEADER_CHANGE: dict[str, Any] = {
    "name": "dns-fail-leader-change",
    "duration_s": 20,
    "cluster": {"nodes": 3},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "consumers": 1, "acks": "all", "idempotence": True, "rate": 150},
    "faults": {"schedule": [
        {"kind": "dns-fail", "target": "follower", "mode": "unresolvable", "at_s": 3, "duration_s": 10},
        {"kind": "stop", "target": "leader", "at_s": 5, "duration_s": 4},
    ]},
}


def test_clients_go_on_after_a_dns_failure_during_a_leader_change(chaos_run: Any) -> None:
    result = chaos_run(DNS_DURING_LEADER_CHANGE)
    (broken,) = nemesis(result, "dns-fail")
    (restored,) = nemesis(result, "dns-restore")
    (stopped,) = nemesis(result, "stop")
    (started,) = nemesis(result, "start")
    (follower,) = broken["value"]["nodes"]
    ((name, address),) = broken["value"]["names"].items()
    assert name.startswith("kc-") and name.endswith(f"-broker-{follower}") and address is None
    assert broken["value"]["mode"] == "unresolvable" and broken["value"]["librdkafka"] == libversion()[0]
    assert restored["value"]["names"] == {name: host_names.LOOPBACK}
    (leader,) = stopped["value"]["nodes"]
    assert leader != follower and broken["time"] < stopped["time"] < started["time"] < restored["time"]
    topic = topic_of(result)
    moved = [(t, new) for p in range(3) for t, new, _ in leader_changes(result, f"{topic}/{p}")[1:]
             if broken["time"] < t < restored["time"]]
    assert moved, "no partition changed leader while the name was broken"

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
