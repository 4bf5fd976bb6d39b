"""A pinned confluent-kafka release in worker processes of its own (workloads.drivers), on a real cluster, with
one consumer frozen (client-pause: SIGSTOP) for longer than its session timeout: its group moves its
partitions to the other consumer, and the frozen one answers nothing until it is thawed. Kafka promises no data
anomaly from a paused client. Asserts on the history: the client and version it records, the paused consumer's
polls, and that every acknowledged send was read."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import events, nemesis

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

PINNED = "2.6.1"
"""A confluent-kafka release other than the one installed with kafka-chaos, with a wheel for Python 3.11."""
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
