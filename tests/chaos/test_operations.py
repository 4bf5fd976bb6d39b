"""Operations under load on a real cluster: what the history shows, with the model's verdict beside."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import SCENARIOS, events, nemesis, samples, sends_between, topic_of

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

BASE: dict[str, Any] = {
    "cluster": {"nodes": 3},
    "topic": {"partitions": 2, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "in_flight": 8, "rate": 150, "acks": "all", "idempotence": True},
}


def operator_events(result: RunResult) -> list[dict[str, Any]]:
    return [e for e in events(result) if e["process"] == "operator"]


def done(result: RunResult, kind: str) -> dict[str, Any]:
    (end,) = [e for e in operator_events(result) if e["f"] == f"{kind}-done"]
    assert end.get("error") is None, end["error"]
    value: dict[str, Any] = end["value"]
    return value


def test_rolling_restart_under_acks_all_loses_and_duplicates_nothing(chaos_run) -> None:
    result = chaos_run({**BASE, "name": "rolling-restart", "duration_s": 20,
                        "operations": [{"kind": "rolling-restart", "at_s": 3, "healthy_timeout_s": 40}]})
    steps = [(e["f"], e["value"]["nodes"]) for e in operator_events(result) if e["f"] in ("stop", "start")]
    assert steps == [("stop", [1]), ("start", [1]), ("stop", [2]), ("start", [2]), ("stop", [3]), ("start", [3])]
    outcome = done(result, "rolling-restart")
    assert outcome["done"] and all(step["healthy"] for step in outcome["steps"]), outcome
    # acks=all, min.insync=2, RF=3, one broker down at a time, idempotent producers: Kafka promises no loss and
    # no duplicate, and the model (the verdicts) says the same: any instance would be a violation.
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == counts.get("duplicate", 0) == 0, counts
    assert result.results["complete"] and not result.results["violations"]


def test_reassignment_raises_the_replication_factor_under_load(chaos_run) -> None:
    scenario = {**BASE, "name": "reassign-rf", "duration_s": 15,
                "topic": {"partitions": 2, "replication_factor": 2, "min_insync_replicas": 1},
                "operations": [{"kind": "reassign", "at_s": 3, "replication_factor": 3,
                                "throttle_bytes_per_s": 10_000_000, "healthy_timeout_s": 40}]}
    result = chaos_run(scenario)
    outcome = done(result, "reassign")
    assert outcome["done"], outcome
    assert all(len(replicas) == 3 for replicas in outcome["target"].values())
    last = {s["key"]: s for s in samples(result)}  # the observer's last sample of each key
    assert all(len(s["replicas"]) == 3 and sorted(s["isr"]) == sorted(s["replicas"]) for s in last.values()), last
    assert not result.results["violations"] and result.results["anomaly_counts"].get("lost-write", 0) == 0


def test_reassignment_waits_for_the_new_replicas_paused_broker(chaos_run) -> None:
    """RF 2 → 3 on one partition while the broker receiving the new replica is paused (`spare`, chosen before the
    reassignment). Kafka (KIP-455): an adding replica joins the ISR only once caught up, and the reassignment
    completes only then; the old ISR of 2 = min.insync keeps taking acks=all writes. The model: nothing lost."""
    scenario = {**BASE, "name": "reassign-paused-replica", "duration_s": 20,
                "topic": {"partitions": 1, "replication_factor": 2, "min_insync_replicas": 2},
                "faults": {"schedule": [{"kind": "pause", "target": "spare", "at_s": 2, "duration_s": 7}]},
                "operations": [{"kind": "reassign", "at_s": 3, "replication_factor": 3, "healthy_timeout_s": 40}]}
    result = chaos_run(scenario)
    (paused,) = nemesis(result, "pause")
    (resumed,) = nemesis(result, "resume")
    (new_broker,) = paused["value"]["nodes"]
    outcome = done(result, "reassign")
    assert outcome["done"] and new_broker in outcome["target"]["0"], outcome
    finished = next(e for e in operator_events(result) if e["f"] == "reassign-done")
    assert finished["time"] > resumed["time"], "the reassignment finished while its new replica could not fetch"
    topic = topic_of(result)
    during = [s for s in samples(result) if s["key"] == f"{topic}/0" and paused["time"] < s["time"] < resumed["time"]]
    assert during and all(new_broker not in (s["isr"] or []) for s in during), during
    assert sends_between(result, paused["time"], resumed["time"]) > 0, "the old ISR (2 = min.insync) took no write"
    last = [s for s in samples(result) if s["key"] == f"{topic}/0"][-1]
    assert sorted(last["replicas"]) == sorted(last["isr"]) == [1, 2, 3], last
    assert result.results["anomaly_counts"].get("lost-write", 0) == 0 and not result.results["violations"]


def test_controller_removed_and_added_back_under_load(chaos_run) -> None:
    """KIP-853 on a dynamic quorum: controller 3 out of the voters, then back in, while acks=all producers write.
    Kafka: the removed controller keeps running as an observer and its broker keeps serving; a voter change is
    committed by the remaining majority. The model: no fault, so no loss and no duplicate is permitted."""
    result = chaos_run(SCENARIOS / "controller-membership.toml")
    removed, added = done(result, "remove-controller"), done(result, "add-controller")
    assert removed["done"] and removed["voters_before"] == [1, 2, 3] and removed["voters_after"] == [1, 2], removed
    assert added["done"] and added["voters_after"] == [1, 2, 3], added
    removed_at = next(e for e in operator_events(result) if e["f"] == "remove-controller-done")["time"]
    added_at = next(e for e in operator_events(result) if e["f"] == "add-controller-done")["time"]
    # The add may start the moment the removal is done (it waits for the removal's health check), so the
    # samples from the removal's end to the addition's end show two voters, then three, never anything else.
    voters = [(s["time"], sorted(v["id"] for v in s["quorum"]["voters"])) for s in samples(result)
              if removed_at < s["time"] < added_at and s.get("quorum")]
    two = [t for t, v in voters if v == [1, 2]]
    back = next((t for t, v in voters if v == [1, 2, 3]), added_at)
    assert two and all(v in ([1, 2], [1, 2, 3]) for _, v in voters), voters  # DescribeQuorum agrees with the tool
    assert all(t < back for t in two), f"two voters again after the third was back: {voters}"
    assert sends_between(result, removed_at, back) > 0, "no acknowledged write while the quorum had 2 voters"
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == counts.get("duplicate", 0) == 0, counts
    assert result.results["complete"] and not result.results["violations"]


def test_a_broker_joins_takes_replicas_and_is_decommissioned_under_load(chaos_run) -> None:
    """Broker 4 joins, a reassignment puts replicas on it, then it is decommissioned (replicas moved off, controlled
    shutdown, unregistered) while acks=all producers write. Kafka: a reassignment adds a replica before it drops
    one, so every partition keeps min.insync in-sync replicas; the model: no fault, nothing may be lost."""
    result = chaos_run(SCENARIOS / "broker-lifecycle.toml")
    added, moved_on, retired = done(result, "add-broker"), done(result, "reassign"), done(result, "decommission-broker")
    assert added["done"] and added["node"] == 4, added
    assert moved_on["done"], moved_on
    assert retired["done"] and retired["moved"] and retired["moves"] == 2 and retired["unregister_code"] == 0, retired
    at = {e["f"]: e["time"] for e in operator_events(result)}
    topic = topic_of(result)
    ours = [s for s in samples(result) if s["key"].startswith(f"{topic}/")]
    # each partition showed the reassignment's target before the decommission moved its replicas off (the
    # operations run one after another, so on a slow machine the decommission may start as the reassign ends)
    during = [s for s in ours if at["reassign"] <= s["time"] <= at["decommission-broker-done"]]
    for partition, target in moved_on["target"].items():
        shown = [s["replicas"] for s in during if s["key"] == f"{topic}/{partition}"]
        assert target in shown, (partition, target, shown)
    last = {s["key"]: s for s in ours}
    assert all(4 not in s["replicas"] and len(s["replicas"]) == 3 == len(s["isr"]) for s in last.values()), last
    registered = [s["brokers"] for s in samples(result) if s.get("brokers")]
    assert any(4 in b["unfenced"] for b in registered), "broker 4 never showed as registered and unfenced"
    assert 4 not in registered[-1]["unfenced"] + registered[-1]["fenced"], registered[-1]  # unregistered
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == counts.get("duplicate", 0) == 0, counts
    assert result.results["complete"] and not result.results["violations"]


def test_preferred_election_moves_leadership_back_after_a_leader_kill(chaos_run) -> None:
    # the election comes 10 s after the restart: time for the restarted node to be back in every ISR even on a
    # slow machine (Kafka refuses to elect a preferred replica that is not in sync)
    scenario = {**BASE, "name": "preferred-election", "duration_s": 22,
                "faults": {"schedule": [{"kind": "kill", "target": "leader", "at_s": 2, "duration_s": 4}]},
                "operations": [{"kind": "preferred-election", "at_s": 16}]}
    result = chaos_run(scenario)
    outcome = done(result, "preferred-election")
    assert outcome["done"] and set(outcome["partitions"].values()) <= {"elected", "ELECTION_NOT_NEEDED"}, outcome
    end = next(e for e in operator_events(result) if e["f"] == "preferred-election-done")["time"]
    # what the observer last saw of each partition, once the election had returned (its samples keep the view
    # most brokers share at the highest leader epoch, so none of them is a broker's stale cache)
    topic = topic_of(result)
    last = {s["key"]: s for s in samples(result) if s["key"].startswith(f"{topic}/") and s["leader"] is not None}
    assert len(last) == BASE["topic"]["partitions"], last
    assert all(s["time"] > end for s in last.values()), f"no state sample after the election: {last}"
    assert all(s["leader"] == s["replicas"][0] for s in last.values()), last
    assert not result.results["violations"]


def test_rolling_upgrade_from_4_0_1_then_features_raised(chaos_run) -> None:
    """Kafka's upgrade path under load: every node moved to the default version one at a time, then the release's
    features finalized (ELR on: `eligible.leader.replicas.version=1`, the ELR document's upgrade path)."""
    scenario = {**BASE, "name": "rolling-upgrade", "duration_s": 20,
                "cluster": {"nodes": 3, "kafka_version": "4.0.1"},
                "operations": [{"kind": "rolling-upgrade", "at_s": 3, "to_version": "4.3.1", "release_version": "4.3",
                                "features": {"eligible.leader.replicas.version": 1}, "healthy_timeout_s": 60}]}
    result = chaos_run(scenario)
    moves = [(e["f"], e["value"]["nodes"], e["value"].get("image", "")) for e in operator_events(result)
             if e["f"] in ("stop", "start")]
    image = "localhost/kafka-chaos/kafka:4.3.1"
    assert moves == [("stop", [1], ""), ("start", [1], image), ("stop", [2], ""), ("start", [2], image),
                     ("stop", [3], ""), ("start", [3], image)]
    outcome = done(result, "rolling-upgrade")
    assert outcome["done"], outcome
    described = outcome["features"][-1]["output"]
    assert "eligible.leader.replicas.version" in described and "FinalizedVersionLevel: 1" in described, described
    assert "4.3-IV" in described, described  # metadata.version finalized at the new release
    for node in (1, 2, 3):  # the saved node logs are those of the re-created containers
        assert "Kafka version: 4.3.1" in (result.run_dir / "logs" / f"node-{node}.log").read_text()
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == counts.get("duplicate", 0) == 0, counts
    assert result.results["complete"] and not result.results["violations"]


def test_an_unfinalized_upgrade_rolled_back_under_load(chaos_run) -> None:
    """4.0.1 → 4.3.1 without raising the features, then back to 4.0.1, one node at a time under acks=all: Kafka
    allows it (metadata.version is still 4.0's) and promises no loss; the model says the same."""
    result = chaos_run(SCENARIOS / "rolling-rollback.toml")
    up, down = [e["value"] for e in operator_events(result) if e["f"] == "rolling-upgrade-done"]
    assert up["done"] and down["done"] and all(s["healthy"] for s in up["steps"] + down["steps"]), (up, down)
    assert [s["image"].rsplit(":", 1)[1] for s in down["steps"]] == ["4.0.1"] * 3, down
    for node in (1, 2, 3):  # the saved logs are those of the last containers: back on 4.0.1
        assert "Kafka version: 4.0.1" in (result.run_dir / "logs" / f"node-{node}.log").read_text()
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == counts.get("duplicate", 0) == 0, counts
    assert result.results["complete"] and not result.results["violations"]


def test_upgrade_to_a_version_without_an_image_fails_before_any_container(tmp_path) -> None:
    import subprocess
    import sys

    from kafka_chaos.cluster import labelled
    from kafka_chaos.cluster.engine import docker_client

    before = labelled(docker_client())["containers"]
    bad = tmp_path / "upgrade.toml"
    bad.write_text('name = "bad-upgrade"\n[[operations]]\nkind = "rolling-upgrade"\nto_version = "9.9.9"\n')
    proc = subprocess.run([sys.executable, "-m", "kafka_chaos.harness.cli", "run", str(bad), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    # 9.9.9 cannot be built (Maven Central serves no such release): the message says so instead of naming a build
    assert "kafka:9.9.9 is not built on this engine, and cannot be" in proc.stderr, proc.stderr
    assert "Maven Central" in proc.stderr and "Traceback" not in proc.stderr
    assert labelled(docker_client())["containers"] == before


def test_rack_cut_in_a_two_rack_cluster(chaos_run) -> None:
    """Racks a (nodes 1, 3) and b (node 2), RF=3, min.insync=2, acks=all; rack b cut from rack a for 12 s while
    consumers fetch from their closest replica (client.rack = b, KIP-392). The model: one replica of three cut
    off leaves an ISR of two — once the ISR has shrunk to rack a (replica.lag.time.max.ms, and the fencing of
    node 2 where it led), writes are available again within the model's bound and nothing acknowledged may be lost;
    rack-b reads are held to the same rules as any other."""
    result = chaos_run(SCENARIOS / "rack-cut.toml")  # the example scenario for racks
    (cut,) = nemesis(result, "partition")
    assert cut["value"]["nodes"] == [2], cut
    (heal,) = nemesis(result, "heal")
    # Anchored on what the observer saw, not on a fixed delay: the first sample in the cut where every partition
    # is led from rack a with an ISR without node 2 (how long that takes depends on the machine's speed).
    topic = topic_of(result)
    shrunk = [s["time"] for s in samples(result) if cut["time"] < s["time"] < heal["time"]
              and s["key"].startswith(f"{topic}/")
              and s["leader"] in (1, 3) and 2 not in (s["isr"] or [2])]
    by_time: dict[int, int] = {}
    for t in shrunk:
        by_time[t] = by_time.get(t, 0) + 1
    partitions = result.scenario.topic.partitions
    rack_a_only = min((t for t, n in by_time.items() if n == partitions), default=None)
    assert rack_a_only is not None, "the ISR never shrank to rack a while rack b was cut off (model: it must, " \
        "replica.lag.time.max.ms after the cut)"
    # Writes: the model bounds how long the cut may hold them — the ISR's shrink to rack a, the fencing of node 2
    # where it led, and clients following the isolated leader's stale metadata a request timeout more (node 2
    # stays reachable by clients: the cut is between the racks). Whether they resume before the heal depends on
    # which broker the clients ask next; that they stay within the bound does not.
    cut_windows = [w for w in result.results["availability"]["windows"]
                   if w["kind"] == "send" and any(f.startswith("partition") for f in w["faults"])]
    assert all(w["finding"] is None for w in cut_windows), cut_windows
    assert sends_between(result, heal["time"], 10**15) > 0, "no acknowledged write after the heal"
    assert "broker.rack = b" in (result.run_dir / "logs" / "node-2.log").read_text()
    # KIP-392: before the cut, the rack-b consumers' reads of partitions led from rack a are served by node 2
    fetched = [e["value"] for e in events(result) if e["process"] == "harness" and e["f"] == "fetch-from"
               and e["time"] < cut["time"]]
    assert any(f["broker"] == 2 and f["leader"] != 2 for f in fetched), fetched
    assert "Reads served by" in (result.run_dir / "report.html").read_text()
    counts = result.results["anomaly_counts"]
    assert counts.get("lost-write", 0) == 0 and not result.results["violations"], counts
