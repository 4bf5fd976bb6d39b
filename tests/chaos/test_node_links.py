"""Links between nodes on real clusters (issue 13): every inter-node link through a proxy of its own, faults on
chosen directed links. Each test asserts on what the history and the observer's samples show, with the
reference model's verdicts (no violation) beside them; all share one cluster (same spec)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import nemesis, samples, sends_between

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

BASE: dict[str, Any] = {
    # fast timeouts: replica.lag.time.max.ms 5 s, broker.session.timeout.ms 3 s (cluster.settings)
    "cluster": {"nodes": 3, "link_proxies": True},
    "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "acks": "all", "idempotence": True, "rate": 200, "record_size": 200},
}
KEY = "chaos/0"


def scenario(name: str, duration_s: float, *faults: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "seed": 13, "duration_s": duration_s, **BASE, "faults": {"schedule": list(faults)}}


def window(result: RunResult, kind: str) -> tuple[dict[str, Any], int, int]:
    """The fault's info event and when it took effect and was healed (history times)."""
    (fault,) = nemesis(result, kind)
    (heal,) = nemesis(result, "heal-links")
    return fault, fault["time"], heal["time"]


def states(result: RunResult, start: int, end: int) -> list[dict[str, Any]]:
    return [s for s in samples(result) if s["key"] == KEY and start <= s["time"] <= end and s["isr"] is not None]


def no_violation(result: RunResult) -> None:
    r = result.results
    assert r["violations"] == [], r["violations"]
    assert not r["anomalies"].get("lost-write") and not r["anomalies"].get("duplicate"), r["anomalies"]


def test_a_slow_follower_leaves_the_isr_and_writes_go_on(chaos_run) -> None:
    """The seed's ISR shrink/expand flow: a follower whose fetches crawl leaves the ISR after
    replica.lag.time.max.ms; acks=all writes go on at min.insync=2; it rejoins after the heal."""
    result = chaos_run(scenario("links-slow-follower", 30, {
        "kind": "link-bandwidth", "target": "follower", "links": "replication", "direction": "one-way",
        "rate_kbps": 4, "at_s": 4, "duration_s": 14}))
    fault, start, end = window(result, "link-bandwidth")
    (follower,) = fault["value"]["nodes"]
    assert fault["value"]["toxic"] == "bandwidth" and fault["value"]["selector"] == "replication"
    assert {(a, listener) for a, _, listener in fault["value"]["links"]} == {(follower, "internal")}
    during = states(result, start, end)
    assert any(follower not in s["isr"] for s in during), f"node {follower} never left the ISR: {during[-3:]}"
    assert sends_between(result, start + 10 * 10**9, end) > 0, "acks=all writes stopped with min.insync met"
    after = states(result, end, 10**15)
    assert after and follower in after[-1]["isr"], f"node {follower} did not rejoin: {after[-1:]}"
    no_violation(result)


def test_the_leader_cut_from_the_controller_loses_no_acknowledged_write(chaos_run) -> None:
    """The leader still reaches its clients and followers but not the controller quorum (the split-brain shape of
    KAFKA-15489): the controller fences it and elects another leader; what the old leader acknowledged under
    acks=all was in every ISR member's log, so nothing acknowledged is lost."""
    result = chaos_run(scenario("links-leader-cut-from-controller", 30, {
        "kind": "link-cut", "target": "leader", "links": "controller", "at_s": 4, "duration_s": 12}))
    fault, start, end = window(result, "link-cut")
    (victim,) = fault["value"]["nodes"]
    assert all(listener == "controller" for _, _, listener in fault["value"]["links"])
    during = states(result, start, end)
    assert any(s["leader"] not in (None, victim) for s in during), f"leadership never left node {victim}"
    assert sends_between(result, end, 10**15) > 0
    no_violation(result)


def test_a_quorum_without_majority_keeps_its_leaders_serving(chaos_run) -> None:
    """Every link among the voters cut: no controller can act, so no leader changes and the ISR stays as it is;
    the partition's leader and followers still replicate, so acks=all writes go on; all recovers after."""
    result = chaos_run(scenario("links-quorum-cut", 28, {
        "kind": "link-cut", "links": "quorum", "target": "all", "at_s": 4, "duration_s": 10}))
    fault, start, end = window(result, "link-cut")
    assert len(fault["value"]["links"]) == 6  # 3 voters, each to the 2 others
    during = states(result, start, end)
    assert during and len({(s["leader"], s["leader_epoch"]) for s in during}) == 1, \
        f"a leader changed without a quorum: {sorted({(s['leader'], s['leader_epoch']) for s in during})}"
    assert sends_between(result, start + 3 * 10**9, end) > 0, "the leaders stopped serving"
    no_violation(result)


def test_a_flapping_replication_link_loses_nothing(chaos_run) -> None:
    """The leader's replication links go down and up every 500 ms for 12 s: connections torn down again and
    again; with idempotence, nothing lost and nothing written twice."""
    result = chaos_run(scenario("links-flap", 28, {
        "kind": "link-flap", "target": "leader", "links": "replication", "period_ms": 500, "at_s": 4,
        "duration_s": 12}))
    fault, _start, end = window(result, "link-flap")
    assert fault["value"]["period_ms"] == 500 and len(fault["value"]["links"]) == 4
    assert sends_between(result, end, 10**15) > 0
    no_violation(result)
