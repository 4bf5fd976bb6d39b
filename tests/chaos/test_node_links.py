"""Links between nodes on real clusters: every inter-node link through a proxy of its own, faults on
chosen directed links. Each test asserts on what the history and the observer's samples show, with the
reference model's verdicts (no violation) beside them; all share one cluster (same spec)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import SCENARIOS, events, nemesis, samples, sends_between, sends_invoked_between, topic_of

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

def run(chaos_run: Any, name: str) -> RunResult:
    """One of the ready scenarios (scenarios/<name>.toml): 3 nodes with link proxies, RF 3, min.insync 2,
    acks=all, idempotence, fast timeouts (replica.lag.time.max.ms 5 s, broker.session.timeout.ms 3 s)."""
    return chaos_run(SCENARIOS / f"{name}.toml")  # type: ignore[no-any-return]


def window(result: RunResult, kind: str) -> tuple[dict[str, Any], int, int]:
    """The fault's info event and when it took effect and was healed (history times)."""
    (fault,) = nemesis(result, kind)
    (heal,) = nemesis(result, "heal-links")
    return fault, fault["time"], heal["time"]


def states(result: RunResult, start: int, end: int) -> list[dict[str, Any]]:
    """The observer's samples of the topic's one partition between two history times."""
    topic = topic_of(result)
    return [s for s in samples(result)
            if s["key"] == f"{topic}/0" and start <= s["time"] <= end and s["isr"] is not None]


def json_lines(result: RunResult, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.run_dir / name).read_text().splitlines()]


def no_violation(result: RunResult) -> None:
    r = result.results
    assert r["violations"] == [], r["violations"]
    assert not r["anomalies"].get("lost-write") and not r["anomalies"].get("duplicate"), r["anomalies"]


def hw_rate(during: list[dict[str, Any]]) -> float:
    """Records per second the high watermark advanced over the samples (those that read one)."""
    marks = [(s["time"], s["hw"]) for s in during if s["hw"] is not None]
    (t0, hw0), (t1, hw1) = marks[0], marks[-1]
    return (hw1 - hw0) / ((t1 - t0) / 1e9)


def slow_follower(result: RunResult) -> tuple[int, list[dict[str, Any]], list[dict[str, Any]], list[dict[str, Any]]]:
    """The throttled follower, and the samples before, during and after its fault."""
    fault, start, end = window(result, "link-bandwidth")
    (follower,) = fault["value"]["nodes"]
    assert fault["value"]["toxic"] == "bandwidth" and fault["value"]["rate"] == 16
    assert {(a, listener) for a, _, listener in fault["value"]["links"]} == {(follower, "internal")}
    return follower, states(result, 0, start), states(result, start, end), states(result, end, 10**15)


def test_a_slow_follower_under_acks_all_stays_in_the_isr_and_sets_the_pace(chaos_run) -> None:
    """acks=all: the producers wait for the slow follower, so the leader's log end never runs more than one
    fetch ahead and the follower is caught up at every fetch (`Replica.updateFetchState`: a fetch reaching the
    leader's log end as of the previous fetch counts as caught up then). Kafka keeps it in the ISR, and every
    write is acknowledged at the pace of its 16 KB/s link (~16 records/s of 1 KB) until the heal."""
    result = run(chaos_run, "slow-follower")
    follower, before, during, after = slow_follower(result)
    assert before and follower in before[-1]["isr"]
    assert during and all(follower in s["isr"] for s in during), "caught up at every fetch: never out of sync"
    link_rate = 16 * 1024 / 1000  # records of 1,000 bytes per second through the link
    # while throttled: the second half of the window (what was already past the link drains first), up to the
    # heal's invocation (the heal takes effect before its `info` is written, and the follower catches up at once)
    (heal_invoked,) = [e["time"] for e in nemesis(result, "heal-links", "invoke")]
    start = nemesis(result, "link-bandwidth")[0]["time"]
    throttled = [s for s in during if (start + heal_invoked) // 2 <= s["time"] <= heal_invoked]
    # the link caps the pace (a slower machine can only be slower still); the heal lifts the cap
    assert hw_rate(throttled) < 2 * link_rate, (hw_rate(throttled), link_rate)
    assert hw_rate(throttled) < hw_rate(after), (hw_rate(throttled), hw_rate(after))
    no_violation(result)


def test_a_slow_follower_under_acks_1_leaves_the_isr_and_rejoins(chaos_run) -> None:
    """The seed's ISR shrink/expand flow: under acks=1 the leader's log end runs away from the 16 KB/s follower,
    its fetches stop reaching it, and after replica.lag.time.max.ms the leader drops it from the ISR
    (`Partition.maybeShrinkIsr`); writes go on; after the heal it catches up and the ISR expands."""
    result = run(chaos_run, "slow-follower-acks1")
    follower, before, during, after = slow_follower(result)
    assert before and follower in before[-1]["isr"]
    left = [s["time"] for s in during if follower not in s["isr"]]
    assert left, f"node {follower} never left the ISR: {during[-1:]}"
    assert after and follower in after[-1]["isr"], f"node {follower} did not rejoin: {after[-1:]}"
    (heal_invoked,) = [e["time"] for e in nemesis(result, "heal-links", "invoke")]
    assert sends_invoked_between(result, left[0], heal_invoked), \
        "acks=1 writes made with the follower out of the ISR were not acknowledged while it was still throttled"
    assert result.results["violations"] == [], result.results["violations"]


def test_a_follower_cut_from_its_leader_leaves_the_isr_within_the_models_window(chaos_run) -> None:
    """A follower that cannot fetch at all must leave the ISR within 1.5 × replica.lag.time.max.ms of the cut
    (`Partition.maybeShrinkIsr`); the checker's conformance rule `follower-kept-in-isr` finds none; writes go
    on at min.insync=2 once it is out; it rejoins after the heal."""
    result = run(chaos_run, "follower-cut")
    fault, start, end = window(result, "link-cut")
    (follower,) = fault["value"]["nodes"]
    assert fault["value"]["enabled"] is False and all(a == follower for a, _, _ in fault["value"]["links"])
    during = states(result, start, end)
    left = [s["time"] for s in during if follower not in s["isr"]]
    assert left, f"node {follower} never left the ISR"
    conformance = result.results.get("conformance") or {}
    assert not conformance.get("anomalies", {}).get("follower-kept-in-isr"), conformance
    assert not conformance.get("anomalies", {}).get("follower-rejoined-while-cut"), conformance
    assert sends_between(result, left[0], end) > 0, "acks=all writes stopped with two replicas in the ISR"
    after = states(result, end, 10**15)
    assert after and follower in after[-1]["isr"], f"node {follower} did not rejoin: {after[-1:]}"
    no_violation(result)


def test_the_leader_cut_from_the_controller_loses_no_acknowledged_write(chaos_run) -> None:
    """The leader still reaches its clients and followers but not the controller quorum (the split-brain shape of
    KAFKA-15489): the controller fences it and elects another leader; what the old leader acknowledged under
    acks=all was in every ISR member's log, so nothing acknowledged is lost."""
    result = run(chaos_run, "leader-cut-from-controller")
    fault, start, end = window(result, "link-cut")
    (victim,) = fault["value"]["nodes"]
    assert all(listener == "controller" for _, _, listener in fault["value"]["links"])
    during = states(result, start, end)
    assert any(s["leader"] not in (None, victim) for s in during), f"leadership never left node {victim}"
    assert sends_between(result, end, 10**15) > 0
    no_violation(result)


def test_one_way_cuts_to_the_controller_fence_a_broker_whose_replication_works(chaos_run) -> None:
    """Asymmetric links: the leader (then a follower) cannot reach the controllers, its replication untouched.
    Its heartbeats stop, the controller fences it after broker.session.timeout.ms, and a fenced broker leaves
    the ISR (KIP-841): the leader loses its leadership, the follower its ISR place; nothing is lost."""
    result = run(chaos_run, "asymmetric-controller-links")
    cuts = nemesis(result, "link-cut")
    heals = nemesis(result, "heal-links")
    assert len(cuts) == len(heals) == 2
    for cut, heal in zip(cuts, heals, strict=True):
        (victim,) = cut["value"]["nodes"]
        assert heal["value"]["nodes"] == [victim]
        assert cut["value"]["direction"] == "one-way"
        assert {(a, listener) for a, _, listener in cut["value"]["links"]} == {(victim, "controller")}
    (leader,), (follower,) = cuts[0]["value"]["nodes"], cuts[1]["value"]["nodes"]
    first = states(result, cuts[0]["time"], heals[0]["time"])
    assert any(s["leader"] not in (None, leader) and leader not in s["isr"] for s in first), \
        f"node {leader} kept its leadership while fenced"
    second = states(result, cuts[1]["time"], heals[1]["time"])
    assert any(s["leader"] not in (None, follower) and follower not in s["isr"] for s in second), \
        f"node {follower} kept its ISR place while fenced"
    fenced = [e for e in json_lines(result, "events.jsonl") if e["kind"] == "broker-fenced"]
    assert {leader, follower} <= {int(e["text"].split()[2].rstrip(":")) for e in fenced}, fenced
    no_violation(result)


def test_a_quorum_without_majority_keeps_its_leaders_serving(chaos_run) -> None:
    """Every link among the voters cut: no controller can act, so no leader changes and the ISR stays as it is;
    the partition's leader and followers still replicate, so acks=all writes go on; all recovers after."""
    result = run(chaos_run, "quorum-cut")
    fault, start, end = window(result, "link-cut")
    assert len(fault["value"]["links"]) == 6  # 3 voters, each to the 2 others
    during = states(result, start, end)
    assert during and len({(s["leader"], s["leader_epoch"]) for s in during}) == 1, \
        f"a leader changed without a quorum: {sorted({(s['leader'], s['leader_epoch']) for s in during})}"
    assert sends_invoked_between(result, start, end), "no write made during the cut was acknowledged before the heal"
    # after the heal the re-elected controller may commit the fencing it decided while it could hear no broker
    # (leaderships move until they unfence): the model bounds that from the heal, so no window is a finding
    windows = result.results["availability"]["windows"]
    assert [w for w in windows if w["finding"]] == [], windows
    no_violation(result)


def test_a_flapping_replication_link_loses_nothing(chaos_run) -> None:
    """The leader's replication links go down and up every 500 ms for 12 s: connections torn down again and
    again; with idempotence, nothing lost and nothing written twice."""
    result = run(chaos_run, "flapping-replication")
    fault, start, end = window(result, "link-flap")
    assert fault["value"]["period_ms"] == 500 and len(fault["value"]["links"]) == 4
    (leader,) = fault["value"]["nodes"]
    # the flapping is real: each follower's fetcher saw its connection to the leader torn down again and again
    (t0,) = [e["value"]["clock_unix_ns"] for e in events(result) if e["f"] == "run-start"]
    during = (datetime.fromtimestamp((t0 + start) / 1e9, UTC), datetime.fromtimestamp((t0 + end) / 1e9, UTC))
    for node in {1, 2, 3} - {leader}:
        log = (result.run_dir / "logs" / f"node-{node}.log").read_text()
        broken = sum(1 for line in log.splitlines()
                     if "Error sending fetch request" in line and f"to node {leader}:" in line
                     and during[0] <= datetime.strptime(line[1:24] + "+0000", "%Y-%m-%d %H:%M:%S,%f%z") <= during[1])
        assert broken >= 5, f"node {node}'s fetches from node {leader} broke {broken} times in 12 s of flapping"
    assert sends_between(result, end, 10**15) > 0
    no_violation(result)


def test_every_link_kind_takes_effect_and_heals(chaos_run) -> None:
    """Each node-link kind once, 2 s each, on a follower's replication links: Toxiproxy accepts every toxic,
    each is recorded with its links and healed, and nothing is lost."""
    kinds = ["link-latency", "link-bandwidth", "link-timeout", "link-reset", "link-slicer", "link-cut", "link-flap"]
    faults = [{"kind": k, "target": "follower", "links": "replication", "direction": "one-way", "latency_ms": 200,
               "jitter_ms": 50, "rate_kbps": 32, "period_ms": 200, "at_s": 2 + 3 * i, "duration_s": 2}
              for i, k in enumerate(kinds)]
    scenario = {"name": "links-every-kind", "seed": 13, "duration_s": 26,
                "cluster": {"nodes": 3, "link_proxies": True},
                "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
                "workload": {"producers": 1, "acks": "all", "idempotence": True, "rate": 100},
                "faults": {"schedule": faults}}
    result = chaos_run(scenario)
    recorded = [e for e in events(result) if e["process"] == "nemesis" and e["type"] == "info"]
    assert all("error" not in e for e in recorded), [e for e in recorded if "error" in e]
    started = [e for e in recorded if e["f"] != "heal-links"]
    assert [e["f"] for e in started] == kinds
    assert all(e["value"]["links"] and e["value"]["selector"] == "replication" for e in started)
    toxics = {e["f"]: e["value"].get("toxic") for e in started}
    assert toxics == {"link-latency": "latency", "link-bandwidth": "bandwidth", "link-timeout": "timeout",
                      "link-reset": "reset_peer", "link-slicer": "slicer", "link-cut": None, "link-flap": None}
    assert len([e for e in recorded if e["f"] == "heal-links"]) == len(kinds)
    assert result.results["complete"] is True
    no_violation(result)
