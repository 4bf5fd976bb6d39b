"""Disk faults beyond power loss on real clusters: the volatile disk under a node made slow, failing or corrupt.

Each test asserts on what the history shows: what the nemesis armed and what the disk reports it did, the
workload's acknowledged sends and the checker's anomalies and violations."""

from __future__ import annotations

from typing import Any

import pyarrow.parquet as pq
import pytest

from kafka_chaos.rundir import POLLS_FILE

from .conftest import events, nemesis, samples, sends_invoked_between, topic_of, volatile_disk_scenario

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def scenario(name: str, duration_s: float, *faults: dict[str, Any]) -> dict[str, Any]:
    return volatile_disk_scenario(name, duration_s, *faults, seed=7)


def topic_samples(result: Any) -> list[dict[str, Any]]:
    """The observer's samples of the run's own partitions, in time order."""
    topic = topic_of(result)
    return [s for s in samples(result) if s["key"].startswith(topic + "/")]


def led_before(result: Any, node: int, time: int) -> list[str]:
    """The partitions whose last sample before `time` shows `node` leading them."""
    last = {s["key"]: s for s in topic_samples(result) if s["time"] < time}
    return sorted(key for key, s in last.items() if s["leader"] == node)


def test_a_slow_disk_on_the_leader_delays_fsyncs_and_loses_nothing_acknowledged(chaos_run) -> None:
    """Kafka acknowledges acks=all once the in-sync replicas have the records in memory (it does not fsync per
    append), so a leader whose fsyncs take 200 ms more keeps acknowledging, and nothing acknowledged is lost.

    The ISR is not asserted on. The data path does not fsync (UnifiedLog.append fsyncs only every flush.messages
    appends, Long.MAX_VALUE by default; followers fetch from the page cache), and when the slow leader was not
    the active controller every replica stayed in the ISR, though the disk stayed slow longer than
    replica.lag.time.max.ms (5 s in the fast timeouts). When it was (combined nodes: `leader` may pick the KRaft
    leader), its slow metadata-log fsyncs cost it the quorum (the voters' fetch timeout), its broker's
    heartbeats kept going to it and the new controller fenced the broker: the ISRs shrank without it and its
    leadership moved, with nothing acknowledged lost."""
    s = scenario("slow-disk-leader", 25, {"kind": "slow-disk", "target": "leader", "at_s": 5, "duration_s": 12,
                                          "delay_ms": 200})
    result = chaos_run(s)
    (slow,) = nemesis(result, "slow-disk")
    (victim,) = slow["value"]["nodes"]
    assert slow["value"]["delay_ms"] == 200 and slow["value"]["disks"][str(victim)]["fsync_delay_ms"] == 200
    (heal,) = nemesis(result, "slow-disk-heal")
    did = heal["value"]["disks"][str(victim)]
    assert did["delayed_fsyncs"] >= 1, f"node {victim}'s disk saw no fsync while slow: {did}"
    assert did["delayed_ms"] == 200 * did["delayed_fsyncs"] and did["fsync_delay_ms"] == 0
    assert heal["value"]["started"] == [], "a slow disk does not stop the broker"
    acknowledged = sends_invoked_between(result, slow["time"], heal["time"])
    assert acknowledged, "no send made while the leader's disk was slow was acknowledged"
    r = result.results
    assert r["complete"], "the final read finished"
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == [], r["violations"][:3]


def test_a_follower_whose_disk_fails_with_eio_stops_and_nothing_acknowledged_is_lost(chaos_run) -> None:
    """KIP-112: an I/O error in a log directory takes it offline; a broker whose only log directory (here also
    the metadata log's) failed halts. Its partitions' other in-sync replicas hold every acknowledged record.

    The victim follows the first partition and, with one preferred leader per node, leads another: that
    leadership moves to another node while the disk fails, which then acknowledges sends to that partition."""
    # 16 s: the broker halts (a kill, by the model's timeouts: fenced after 3 s, 8 s when it was the active
    # controller, plus slack) and a send must still be acknowledged by the new leader before the heal
    s = scenario("disk-error-follower", 31, {"kind": "disk-error", "target": "follower", "at_s": 5,
                                             "duration_s": 16})
    result = chaos_run(s)
    (failing,) = nemesis(result, "disk-error")
    (victim,) = failing["value"]["nodes"]
    assert failing["value"]["disks"][str(victim)]["eio_ops"] == ["fsync", "read", "write"]
    (heal,) = nemesis(result, "disk-error-heal")
    did = heal["value"]["disks"][str(victim)]
    assert did["eio_returned"], f"node {victim} did no I/O on its failing disk: {did}"
    assert heal["value"]["started"] == [victim], "the broker kept running on a failed log directory"
    (began,) = nemesis(result, "disk-error", "invoke")
    led = led_before(result, victim, began["time"])
    assert led, f"node {victim} led nothing before its disk failed: no leadership had to move"
    (healing,) = nemesis(result, "disk-error-heal", "invoke")
    for key in led:
        moved = [s["time"] for s in topic_samples(result) if s["key"] == key
                 and failing["time"] < s["time"] < healing["time"] and s["leader"] not in (None, victim)]
        assert moved, f"{key} was not led by another node while node {victim}'s disk failed"
        assert sends_invoked_between(result, moved[0], healing["time"], key=key), \
            f"no send to {key} made after its leadership moved was acknowledged before the heal"
    r = result.results
    assert r["complete"], "the final read finished"
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == [], r["violations"][:3]


def test_bits_flipped_in_a_followers_fsynced_segment_never_reach_a_reader_even_once_it_leads(chaos_run) -> None:
    """The follower is killed, bits flipped inside record batches of its newest segment's fsynced bytes, and it
    restarts. After an unclean shutdown Kafka's LogLoader.recoverLog recovers every segment from the one holding
    the checkpointed recovery point on (the newest, active segment always), and LogSegment.recover checks each
    batch's CRC, stopping at the first bad one: the segment is truncated there and the follower fetches the rest
    again from the leader. Once no partition is under-replicated a preferred-replica election (KIP-460) hands the
    partition whose first replica it is back to it, so Kafka then serves reads from the recovered log. No read
    returns a value no one wrote or a value at an offset where another was read, nothing acknowledged is lost,
    and no instance is a violation of the model. flush.messages=1 makes every append fsynced, so the flips land
    in the records the workload wrote.

    What Kafka 4.3.1 did (seed 7): node 3, a follower of partition 0 and the leader of partition 1, had its
    partition-1 segment hit (8 flips, the first in the first batch's header); on restart LogSegment logged "Found
    invalid messages in log segment .../00000000000000000000.log at byte offset 0" (CorruptRecordException:
    stored crc differs from computed crc) and LogLoader "Corruption found in segment 0, truncating to offset 0";
    the node refetched the partition from the new leader, rejoined the ISR, and the election made it leader of
    partition 1 again, at leader epoch 2 from offset 958. Another run's first flip fell at byte 25499: recovery
    truncated at the batch holding it (byte 25364, offset 198). Reads then returned only what was written."""
    s = scenario("corrupt-follower-segment-then-lead", 28,
                 {"kind": "corrupt", "target": "follower", "at_s": 6, "duration_s": 6, "files": "segment",
                  "bits": 8, "glob": "*/*.log"})
    s["topic"] = {**s["topic"], "configs": {"flush.messages": "1"}}
    s["operations"] = [{"kind": "preferred-election", "at_s": 18}]
    result = chaos_run(s)
    (corrupt,) = nemesis(result, "corrupt")
    (victim,) = corrupt["value"]["nodes"]
    hit = corrupt["value"]["corrupted"][str(victim)]
    assert hit["file"].endswith(".log") and not hit["file"].startswith("__cluster_metadata")
    assert len(hit["flips"]) == 8 and all(f["offset"] >= 0 and 0 <= f["bit"] < 8 for f in hit["flips"])
    (restart,) = nemesis(result, "corrupt-restart")
    assert restart["value"]["nodes"] == [victim]
    part = hit["file"].split("/")[0]  # <topic>-<partition>
    log = (result.run_dir / "logs" / f"node-{victim}.log").read_text(errors="replace")
    assert any(f"LogLoader partition={part}," in line and "Corruption found in segment" in line
               for line in log.splitlines()), f"node {victim}'s log recovery did not truncate {hit['file']}"
    (elected,) = [e for e in events(result) if e["f"] == "preferred-election-done"]
    assert elected["value"]["done"] is True and not elected.get("error"), elected
    topic = topic_of(result)
    led = sorted({s["key"] for s in samples(result) if s["key"].startswith(topic + "/")
                  and s["time"] > restart["time"] and s["leader"] == victim})
    preferred = {s["key"] for s in samples(result) if s["key"].startswith(topic + "/") and s["replicas"]
                 and s["replicas"][0] == victim}
    assert led, f"node {victim} led no partition after it restarted on its corrupted segment"
    assert preferred <= set(led), f"the election did not move {sorted(preferred)} to node {victim}: led {led}"
    served = pq.read_table(result.run_dir / POLLS_FILE, columns=["key", "time"]).to_pylist()
    assert any(row["key"] in preferred and row["time"] > elected["time"] for row in served), \
        f"no read of {sorted(preferred)} after node {victim} led it"
    r = result.results
    assert r["complete"], "the final read finished"
    counts = r["anomaly_counts"]
    assert counts.get("garbage-read", 0) == 0, r["anomalies"].get("garbage-read", [])[:3]
    assert counts.get("inconsistent-offsets", 0) == 0, r["anomalies"].get("inconsistent-offsets", [])[:3]
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert r["violations"] == [], r["violations"][:3]
    assert all(i["verdict"] != "violation" for insts in r["anomalies"].values() for i in insts)
