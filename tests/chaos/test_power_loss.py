"""Power loss on real clusters (issue 12): nodes whose disks lose every write that was not fsynced.

Each test asserts on what the history shows (the nemesis's record of what each node's disk lost, the checker's
anomalies) with the reference model's verdict beside it."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult

from .conftest import nemesis, samples

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

BASE: dict[str, Any] = {
    "cluster": {"nodes": 3, "volatile_disks": "unsynced"},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "acks": "all", "idempotence": True, "rate": 300},
}


def scenario(name: str, duration_s: float, *faults: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "seed": 12, "duration_s": duration_s, **BASE, "faults": {"schedule": list(faults)}}


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
    found = {name: [(i.get("verdict"), i.get("key")) for i in insts] for name, insts in r["anomalies"].items()}
    return f"taken {offsets_taken(result)}; anomalies {found}; violations {len(r['violations'])}"


def test_one_broker_loses_power_and_nothing_acknowledged_is_lost(chaos_run) -> None:
    """Kafka's promise: a replica that lost unflushed data re-syncs before it counts again (Kafka's design
    notes, "Replicated Logs"); with acks=all, RF=3, min.insync=2 one node's power loss loses nothing."""
    result = chaos_run(scenario("power-loss-one", 25, {"kind": "power-loss", "target": "leader", "at_s": 5,
                                                         "duration_s": 6}))
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
    assert len(rejoined) == BASE["topic"]["partitions"], f"node {victim} back in the ISR of {sorted(rejoined)} only"
    r = result.results
    assert r["complete"], "the final read finished"
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == []
