"""A full disk on a real cluster: the leader's data disk fills up under load.

Asserts on what the history shows (what the ballast took, whether the node had stopped by itself when the heal
came), the node's own log, the observer's samples and the checker's verdicts."""

from __future__ import annotations

import pytest

from .conftest import SCENARIOS, nemesis, samples, topic_of

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def test_a_leader_whose_disk_fills_up_shuts_down_and_nothing_acknowledged_is_lost(chaos_run) -> None:
    """Kafka's reaction to ENOSPC: the append fails, the log directory is marked offline (LogDirFailureChannel),
    and a broker with no online log directory shuts down (KIP-112) — a crash in effect, so with acks=all,
    min.insync=2, RF=3 the other in-sync replicas hold every acknowledged record and one of them leads."""
    result = chaos_run(SCENARIOS / "disk-full.toml")
    (full,) = nemesis(result, "disk-full")
    (victim,) = full["value"]["nodes"]
    disk = full["value"]["disks"][str(victim)]
    assert disk["ballast"] > 0 and disk["free_after"] <= 64 * 1024, disk
    (freed,) = nemesis(result, "disk-freed")
    assert freed["value"]["started"] == [victim], "the broker had not stopped by itself on a full disk"
    assert freed["value"]["freed"][str(victim)] == disk["ballast"]
    log = (result.run_dir / "logs" / f"node-{victim}.log").read_text(errors="replace")
    assert "No space left on device" in log
    topic = topic_of(result)
    during = [s for s in samples(result) if s["key"].startswith(topic + "/")
              and full["time"] <= s["time"] <= freed["time"] and s["leader"] is not None]
    assert during and all(s["leader"] != victim for s in during[-3:]), "leadership stayed on the full disk"
    last = {s["key"]: s for s in samples(result) if s["key"].startswith(topic + "/")}
    assert all(victim in s["isr"] for s in last.values()), f"node {victim} did not rejoin every ISR"
    r = result.results
    assert r["violations"] == [], r["violations"]
    assert not r["anomalies"].get("lost-write"), r["anomalies"].get("lost-write")
