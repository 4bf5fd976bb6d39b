"""Availability on real clusters: windows with no successful send, the reference model's
prediction of each, and the cluster's own events that explain them. Each asserts on results.json and
events.jsonl, never on wall-clock time."""

from __future__ import annotations

import json
from typing import Any

import pytest

pytestmark = pytest.mark.cluster

BASE: dict[str, Any] = {
    "cluster": {"nodes": 3},
    "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "acks": "all", "idempotence": True, "rate": 200},
}


def scenario(name: str, duration_s: float, *faults: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "seed": 19, "duration_s": duration_s, **BASE, "faults": {"schedule": list(faults)}}


def windows_during(result: Any, f: str) -> list[dict[str, Any]]:
    """Send windows overlapping the fault named `f` (the nemesis's history name, e.g. `kill`)."""
    (fault,) = [w for w in result.results["faults"]["windows"] if w["f"] == f]
    start, end = fault["start"] / 1e9, fault["end"] / 1e9
    return [w for w in result.results["availability"]["windows"]
            if w["kind"] == "send" and w["start_s"] <= end and w["end_s"] >= start]


def samples(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.run_dir / "state.jsonl").read_text().splitlines()]


def cluster_events(result: Any) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.run_dir / "events.jsonl").read_text().splitlines()]


def test_leader_kill_recovers_within_the_prediction(chaos_run) -> None:
    result = chaos_run(scenario("avail-kill-leader", 20, {"kind": "kill", "target": "leader", "at_s": 4,
                                                          "duration_s": 8}))
    avail = result.results["availability"]
    during = windows_during(result, "kill")
    # the leader's death stops writes until the controller fences it (broker.session.timeout.ms)
    assert during, "a leader kill leaves a window with no successful send"
    for w in during:
        assert w["predicted_s"] is not None and w["duration_s"] <= w["predicted_s"], w
        assert w["expected"] == [], "one broker down of three is survivable: nothing excuses the window"
    assert [w for w in avail["windows"] if w["finding"]] == [], avail["windows"]
    assert 0 < avail["share"] < 1
    victim = next(w for w in result.results["faults"]["windows"] if w["f"] == "kill")["nodes"][0]
    fenced = [e for e in cluster_events(result) if e["kind"] == "broker-fenced" and f"broker {victim}" in e["text"]]
    assert fenced, "the node logs show the controller fencing the killed leader"
    # the observer's DescribeCluster samples agree: the victim registered and unfenced, then fenced while dead,
    # then unfenced again after its restart
    registrations = [s["brokers"] for s in samples(result) if s.get("brokers")]
    sides = [victim in b["fenced"] for b in registrations]
    assert registrations and victim in registrations[0]["unfenced"], registrations[:1]
    assert True in sides and sides[-1] is False, "fenced during the kill, unfenced by the end"
    assert result.results["violations"] == []


def test_controller_quorum_loss_is_expected_unavailability(chaos_run) -> None:
    result = chaos_run(scenario("avail-quorum-loss", 20, {"kind": "kill", "target": "majority", "at_s": 4,
                                                          "duration_s": 6}))
    during = windows_during(result, "kill")
    assert during, "with two of three nodes dead no acks=all send can succeed"
    longest = max(during, key=lambda w: w["duration_s"])
    assert "no-controller-quorum" in longest["expected"], longest
    assert "below-min-insync" in longest["expected"], longest
    assert longest["finding"] is None, longest
    assert all(w["finding"] is None for w in during), during
    assert result.results["violations"] == []
    # the observer's DescribeQuorum samples: three voters, and a new epoch once the restarted voters elect
    quorums = [s["quorum"] for s in samples(result) if s.get("quorum")]
    assert quorums and {v["id"] for v in quorums[0]["voters"]} == {1, 2, 3}
    assert quorums[-1]["epoch"] > quorums[0]["epoch"], "the quorum elected anew after losing its majority"
    won = [e for e in cluster_events(result) if e["kind"] == "raft-state" and e["state"] == "Leader"]
    assert won and won[-1]["epoch"] == quorums[-1]["epoch"], "the node logs name the same epoch"
