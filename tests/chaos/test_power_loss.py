"""Power loss on real clusters: nodes whose disks lose every write that was not fsynced.

Each test asserts on what the history shows (the nemesis's record of what each node's disk lost, the checker's
anomalies) with the reference model's verdict beside it."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult
from kafka_chaos.reference_model.disk_faults import rule_for

from .conftest import VOLATILE_DISK_BASE, nemesis, samples, volatile_disk_scenario

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

def scenario(name: str, duration_s: float, *faults: dict[str, Any]) -> dict[str, Any]:
    return volatile_disk_scenario(name, duration_s, *faults, seed=12)


def offsets_taken(result: RunResult) -> dict[str, dict[str, tuple[int | None, int | None]]]:
    """Per node and partition of the workload's topic: the log end before and after the crash."""
    taken: dict[str, dict[str, tuple[int | None, int | None]]] = {}
    for loss in nemesis(result, "power-loss"):
        for node, lost in loss["value"]["lost"].items():
            for partition, ends in lost["partitions"].items():
                if not partition.startswith("__"):  # the workload's topic, not __consumer_offsets or metadata
                    taken.setdefault(node, {})[partition] = (ends["end_offset_before"], ends["end_offset_after"])
    return taken


def loss_summary(result: RunResult) -> str:
    r = result.results
    found = {name: dict(Counter(i.get("verdict") for i in insts)) for name, insts in r["anomalies"].items()}
    return f"taken {offsets_taken(result)}; anomalies {found}; violations {len(r['violations'])}"


@pytest.mark.parametrize("kafka_version", [
    "4.3.1",
    pytest.param("4.0.1", marks=pytest.mark.nightly),  # the promise on every version: the others nightly
    pytest.param("3.9.1", marks=pytest.mark.nightly),
])
def test_one_broker_loses_power_and_nothing_acknowledged_is_lost(chaos_run, kafka_version: str) -> None:
    """Kafka's promise: a replica that lost unflushed data re-syncs before it counts again (Kafka's design
    notes, "Replicated Logs"); with acks=all, RF=3, min.insync=2 one node's power loss loses nothing."""
    s = scenario(f"power-loss-one-{kafka_version}", 25, {"kind": "power-loss", "target": "leader", "at_s": 5,
                                                          "duration_s": 6})
    s["cluster"] = {**s["cluster"], "kafka_version": kafka_version}
    result = chaos_run(s)
    (loss,) = nemesis(result, "power-loss")
    (victim,) = loss["value"]["nodes"]
    assert loss["value"]["lose"] == "unsynced"
    taken = offsets_taken(result)
    print(loss_summary(result))
    # the fault is a real power loss: the node's partitions of the topic came back shorter than they were
    shortened = {p: (b, a) for p, (b, a) in taken.get(str(victim), {}).items() if b is not None and (a or 0) < b}
    assert shortened, f"node {victim}'s disk lost no record of the topic: {loss['value']['lost']}"
    (power_on,) = nemesis(result, "power-on")
    # it came back on what its disk kept, re-synced from the leader and counts as in sync again
    rejoined = {s["key"] for s in samples(result) if s["time"] > power_on["time"] and victim in (s["isr"] or [])}
    assert len(rejoined) == VOLATILE_DISK_BASE["topic"]["partitions"], \
        f"node {victim} back in the ISR of {sorted(rejoined)} only"
    r = result.results
    assert r["complete"], "the final read finished"
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == []


LOSS_ANOMALIES = ("lost-write", "unseen", "inconsistent-offsets", "vanished-read")


def test_a_torn_write_at_the_leaders_power_loss_never_reaches_a_reader(chaos_run) -> None:
    """The leader loses power and the last unsynced write of each of its files keeps a prefix of any length (torn =
    "byte"): its segments end in a partial batch. The model's rule (reference_model.disk_faults): the tear lies past
    the recovery point, where log recovery checks every batch's CRC and truncates at the first invalid one, so no
    reader sees the partial batch and, acks=all with RF=3 and min.insync=2, the other replicas hold every
    acknowledged record."""
    s = scenario("torn-write-leader", 20, {"kind": "power-loss", "target": "leader", "at_s": 5, "duration_s": 5,
                                           "torn": "byte"})
    s["cluster"] = {**s["cluster"], "kafka_version": "4.3.1"}
    rule = rule_for("power-loss", "byte", kafka_version="4.3.1")
    assert rule.permits == frozenset() and rule.defect is None, "the model permits no anomaly for one torn node"
    result = chaos_run(s)
    (loss,) = nemesis(result, "power-loss")
    (victim,) = loss["value"]["nodes"]
    assert loss["value"]["torn"] == "byte" and loss["value"]["lose"] == "unsynced"
    torn = loss["value"]["lost"][str(victim)].get("torn_writes", [])
    # what the disk returned: per file, a prefix of the last unsynced write and never all of it; in the topic's
    # segments (a batch per write, many bytes long) at least one byte of it, so each ends in a partial batch
    assert torn and all(0 <= w["kept"] < w["length"] for w in torn), torn
    topic_segments = [w for w in torn if w["path"].endswith(".log") and not w["path"].startswith("__")]
    assert topic_segments and all(w["kept"] > 0 for w in topic_segments), [w["path"] for w in torn]
    r = result.results
    print(f"torn {[(w['path'], w['kept'], w['length']) for w in topic_segments]}; {loss_summary(result)}; "
          f"model: {rule.rule}")
    assert r["complete"], "the final read finished"
    assert r["anomalies"].get("garbage-read", []) == [], "a read returned bytes of a torn batch"
    lost = [(name, i) for name in LOSS_ANOMALIES for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == [], r["violations"][:3]


@pytest.mark.parametrize("kafka_version", [
    "4.3.1",
    pytest.param("4.0.1", marks=pytest.mark.nightly),  # the same run on the ELR-off version: nightly
    pytest.param("3.9.1", marks=pytest.mark.nightly),  # and on the last 3.x
])
def test_every_node_loses_power_at_once(chaos_run, kafka_version: str) -> None:
    """A rack losing power: every replica loses what it had not fsynced. Kafka acknowledges from memory
    (log.flush.interval.messages = Long.MAX_VALUE), so the model permits losing acknowledged records here, and
    only here; the run shows what each version actually lost and whether it came back."""
    s = scenario(f"power-loss-all-{kafka_version}", 25, {"kind": "power-loss", "target": "all", "at_s": 6,
                                                         "duration_s": 5})
    s["cluster"] = {**s["cluster"], "kafka_version": kafka_version}
    result = chaos_run(s)
    (loss,) = nemesis(result, "power-loss")
    assert sorted(loss["value"]["nodes"]) == [1, 2, 3]
    taken = offsets_taken(result)
    print(f"{kafka_version}: {loss_summary(result)}")
    for node in ("1", "2", "3"):
        assert taken.get(node) and all(b is not None and (a or 0) < b for b, a in taken[node].values()), \
            f"node {node}'s disk kept every record of the topic: {taken.get(node)}"
    r = result.results
    lost = [(name, i) for name in LOSS_ANOMALIES for i in r["anomalies"].get(name, [])]
    assert lost, "every replica lost its unsynced records, yet the history shows no acknowledged record lost"
    assert {i["verdict"] for _, i in lost} == {"permitted"} and all("fsynced" in i["reason"] for _, i in lost)
    assert r["violations"] == [], r["violations"][:3]


def kip_966_scenario(kafka_version: str) -> dict[str, Any]:
    """KIP-966's motivating sequence on one partition: both followers die (the leader is the last in-sync
    replica), then the leader loses power and comes back first with what its disk kept. A dedicated controller
    keeps the quorum alive through it."""
    s = scenario(f"kip-966-{kafka_version}", 30,
                 {"kind": "kill", "target": "follower", "at_s": 4, "duration_s": 22},
                 {"kind": "kill", "target": "follower", "at_s": 7, "duration_s": 12},
                 {"kind": "power-loss", "target": "leader", "at_s": 10, "duration_s": 3})
    s["cluster"] = {**s["cluster"], "controllers": 1, "kafka_version": kafka_version}
    s["topic"] = {**s["topic"], "partitions": 1}
    return s


@pytest.mark.parametrize("kafka_version", [
    pytest.param("3.9.1", marks=pytest.mark.nightly),  # before ELR existed: as 4.0.1, nightly
    pytest.param("4.0.1", marks=pytest.mark.nightly),  # ELR off: the zoo's KIP-966 row shows it in make test
    "4.3.1",
])
def test_kip_966_last_in_sync_replica_loses_power(chaos_run, kafka_version: str) -> None:
    """What each version does when the last in-sync replica lost unflushed data (see the model's reasons):
    4.0.1 (ELR off) keeps it in the ISR and it leads again; 4.3.1 (ELR on) drops it from ISR and ELR, then elects
    it anyway as the last known leader once the other replica, SIGKILLed and so also an unclean shutdown, left the
    ELR. Both lose the acknowledged records; the model expects exactly that, for the reason it names."""
    result = chaos_run(kip_966_scenario(kafka_version))
    kills = nemesis(result, "kill")
    (loss,) = nemesis(result, "power-loss")
    (victim,) = loss["value"]["nodes"]
    assert len(kills) == 2 and victim not in {n for k in kills for n in k["value"]["nodes"]}
    state = samples(result)
    before = [s for s in state if s["time"] < loss["time"]]
    assert before and before[-1]["leader"] == victim, "the power loss hit the leader, the last in-sync replica"
    taken = offsets_taken(result)
    assert any(b is not None and (a or 0) < b for b, a in taken[str(victim)].values()), taken
    (power_on,) = nemesis(result, "power-on")
    after = [s for s in state if s["time"] > power_on["time"]]
    led_again = [s for s in after if s["leader"] == victim]
    assert led_again, f"node {victim} did not lead again: {[(s['leader'], s['isr']) for s in after][:5]}"
    if kafka_version == "4.3.1":
        # KIP-966 dropped the unclean replica from ISR and ELR before the last-known-leader election
        assert any(s["leader"] is None and not s["isr"] and victim in (s["last_known_elr"] or []) for s in after), \
            [(s["leader"], s["isr"], s["elr"], s["last_known_elr"]) for s in after][:8]
    r = result.results
    print(f"{kafka_version}: {loss_summary(result)}")
    lost = [(name, i) for name in LOSS_ANOMALIES for i in r["anomalies"].get(name, [])]
    assert lost, "the last in-sync replica came back without the acknowledged records, yet none was lost"
    reason = "canElectLastKnownLeader" if kafka_version == "4.3.1" else "ELR off"
    assert {i["verdict"] for _, i in lost} == {"permitted"} and all(reason in i["reason"] for _, i in lost), \
        {i["reason"] for _, i in lost}
    assert r["violations"] == [], r["violations"][:3]
