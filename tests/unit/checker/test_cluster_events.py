"""Event extraction from node logs, on excerpts captured from a real 3-node run of scenarios/demo.toml
(tests/unit/checker/data/node-N.log: the lines the extractor reads, cut from the nodes' logs)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from kafka_chaos.checker.cluster_events import (
    causes_for,
    derive,
    extract,
    overlapping_leaders,
    read_events,
    write_events,
)

DATA = Path(__file__).parent / "data"
T0 = int(datetime(2026, 11, 24, 19, 24, 6, tzinfo=UTC).timestamp() * 1e9)


def events_of(node: int) -> list[dict]:
    return extract((DATA / f"node-{node}.log").read_text(), node, T0)


def kinds(events: list[dict]) -> set[str]:
    return {e["kind"] for e in events}


def test_raft_transitions_and_controller_activation() -> None:
    ev = events_of(1)
    raft = [(e["state"], e["epoch"]) for e in ev if e["kind"] == "raft-state"]
    assert raft[:4] == [("Unattached", 0), ("Prospective", 0), ("Candidate", 1), ("Leader", 1)]
    (active,) = [e for e in ev if e["kind"] == "controller-active"]
    assert active["epoch"] == 1 and active["time_s"] == 7.34  # 19:24:13,340 − 19:24:06
    (activation,) = derive(ev)
    assert activation["node"] == 1 and activation["delay_s"] is not None and activation["delay_s"] < 0.2


def test_fencing_unfencing_isr_and_truncation() -> None:
    ev = events_of(1) + events_of(2) + events_of(3)
    fenced = [e["text"] for e in ev if e["kind"] == "broker-fenced"]
    assert fenced[0].startswith("fenced broker 2: its session has timed out")
    assert any(e["kind"] == "broker-unfenced" and e["text"] == "unfenced broker 2" for e in ev)
    shrink = [e for e in ev if e["kind"] == "isr-shrink" and e["partition"] == "chaos-0"]
    assert shrink and shrink[0]["text"] == "chaos-0: ISR 2,1 → 2"
    truncations = [e for e in ev if e["kind"] == "truncation"]
    assert truncations and not any(e["partition"].startswith("__") for e in truncations)
    assert {"raft-state", "broker-state", "isr-update", "become-leader", "server-started"} <= kinds(ev)
    follower = next(e for e in events_of(2) if e["kind"] == "raft-state" and e["state"] == "Follower")
    assert follower["text"] == "Raft Follower at epoch 1, leader 1"


def test_not_controller_lines_become_one_storm_event() -> None:
    line = next(x for x in (DATA / "node-1.log").read_text().splitlines() if "NotControllerException" in x)
    stamp = line[1:24]
    # the same real line, as a burst of twenty every 100 ms and one stray line 5 s later
    burst = [line.replace(stamp, f"2026-11-24 19:24:13,{100 + 20 * i:03d}") for i in range(20)]
    stray = line.replace(stamp, "2026-11-24 19:24:18,000")
    ev = extract("\n".join([*burst, stray]), 1, T0)
    (storm,) = ev
    assert storm["kind"] == "not-controller-storm" and storm["count"] == 20
    assert "the active controller appears to be node 1" in storm["text"]


def test_read_write_and_causes(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    for n in (1, 2, 3):
        (logs / f"node-{n}.log").write_text((DATA / f"node-{n}.log").read_text())
    ev = read_events(tmp_path, T0)
    assert [e["time_s"] for e in ev] == sorted(e["time_s"] for e in ev)
    lines = write_events(tmp_path, ev).read_text().splitlines()
    assert len(lines) == len(ev) and all(set(e) >= {"time_s", "node", "kind", "text"} for e in ev)
    window = {"key": "chaos/0", "start_s": 28.0, "end_s": 41.0}
    causes = causes_for(window, ev)
    assert any("fenced broker 3" in c for c in causes)
    assert any("chaos-0: ISR" in c for c in causes)
    assert not any("chaos-1" in c for c in causes), "another partition's ISR is not a cause for this key"


def _raft(t: float, node: int, state: str, epoch: int) -> dict[str, Any]:
    return {"time_s": t, "node": node, "kind": "raft-state", "state": state, "epoch": epoch}


def test_two_leaders_at_once_are_a_split_brain_period() -> None:
    """Node 1 leads epoch 1 and logs nothing more (cut off, acting on, as before KAFKA-15489's fix); node 2 wins
    epoch 2 at 10 s: both lead until node 1 steps down at 20 s."""
    events = [_raft(1, 1, "Leader", 1), _raft(2, 2, "Follower", 1), _raft(9, 2, "Candidate", 2),
              _raft(10, 2, "Leader", 2), _raft(20, 1, "Follower", 2)]
    assert overlapping_leaders(events) == [{"start_s": 10, "end_s": 20, "nodes": [1, 2], "epochs": [1, 2]}]
    # with the fix the old leader resigns once no majority fetched from it: no overlap
    resigned = [*events[:2], _raft(8, 1, "Resigned", 1), *events[2:4]]
    assert overlapping_leaders(resigned) == []


def test_a_leader_that_went_down_leads_no_more() -> None:
    """A killed leader logs nothing: its leadership ends when the history says its process stopped."""
    events = [_raft(1, 1, "Leader", 1), _raft(10, 2, "Leader", 2)]
    assert overlapping_leaders(events, down={1: [5.0]}) == []
    assert overlapping_leaders(events, down={1: [12.0]}) == [
        {"start_s": 10, "end_s": 12.0, "nodes": [1, 2], "epochs": [1, 2]}]
    assert overlapping_leaders(events)[0]["end_s"] is None  # both still leading when the logs end


def test_an_unreadable_leader_epoch_checkpoint_names_its_partition() -> None:
    # LogDirFailureChannel's line when a torn checkpoint does not parse at log load (Kafka 3.7.0)
    line = ("[2026-11-24 19:24:20,125] ERROR Error while reading checkpoint file "
            "/var/lib/kafka/data/chaos-3/leader-epoch-checkpoint "
            "(org.apache.kafka.storage.internals.log.LogDirFailureChannel)")
    other = line.replace("leader-epoch-checkpoint", "replication-offset-checkpoint")
    (ev,) = extract("\n".join([line, other]), 2, T0)
    assert ev["kind"] == "epoch-checkpoint-unreadable" and ev["partition"] == "chaos-3" and ev["node"] == 2
    assert ev["text"] == "chaos-3: leader-epoch-checkpoint unreadable" and ev["time_s"] == 14.125


def _line(stamp: str, level: str, text: str) -> str:
    return f"[2026-11-24 19:24:{stamp}] {level} {text}"


def _truncating(stamp: str, partition: str, offset: int) -> str:
    return _line(stamp, "INFO", f"[ReplicaFetcher replicaId=1, leaderId=2, fetcherId=0] Truncating partition "
                                f"{partition} with TruncationState(offset={offset}, completed=true) due to leader "
                                f"epoch and offset EpochEndOffset(errorCode=0, partition=0, leaderEpoch=1, "
                                f"endOffset={offset}) (kafka.server.ReplicaFetcherThread)")


def _hw(stamp: str, partition: str, high: str, low: str) -> str:
    return _line(stamp, "WARN", f"[UnifiedLog partition={partition}, dir=/var/lib/kafka/data] Non-monotonic update "
                                f"of high watermark from {high} to {low} (kafka.log.UnifiedLog)")


def test_a_truncation_below_the_high_watermark_is_told_from_a_lagging_leaders_high_watermark() -> None:
    # a real 3.4.0 run (scenarios/bugs/kafka-14704-*.toml): the old leader took the new leader's high watermark
    # 657 from the fetch that told it to truncate to 655, then truncated: its own log position, from above
    bug = ["[2026-11-24 19:24:20,100] INFO [ReplicaFetcher replicaId=1, leaderId=3, fetcherId=0] Truncating partition "
           "chaos-5 with TruncationState(offset=655, completed=true) due to leader epoch and offset "
           "EpochEndOffset(errorCode=0, partition=5, leaderEpoch=0, endOffset=655) (kafka.server.ReplicaFetcherThread)",
           _hw("20,140", "chaos-5", "(offset=657 segment=[0:83454])", "(offset=655 segment=[0:83175])")]
    truncation, ev = extract("\n".join(bug), 1, T0)
    assert truncation["kind"] == "truncation" and ev["kind"] == "truncated-below-hw"
    assert ev["partition"] == "chaos-5" and ev["node"] == 1
    assert (ev["high_watermark"], ev["offset"], ev["time_s"]) == (657, 655, 14.14)
    assert ev["text"] == ("chaos-5: truncated to offset 655, below its high watermark 657 (2 records its high "
                          "watermark had counted as committed)")
    # later versions' format (a comma after the offset, as the fixed versions' logs print it)
    later = [_truncating("20,100", "chaos-1", 2235),
             _hw("20,140", "chaos-1", "(offset=2300, segment=[0:312545])", "(offset=2235, segment=[0:300000])")]
    assert [e["kind"] for e in extract("\n".join(later), 3, T0)] == ["truncation", "truncated-below-hw"]
    # not this: a new leader's lagging high watermark (a bare offset, segment -1) lowering a follower's, even right
    # after a truncation to the same offset (a real line of a fixed version); a truncation that left the high
    # watermark alone; another partition's truncation; an internal topic's
    benign = [_truncating("20,100", "chaos-1", 2235),
              _hw("20,140", "chaos-1", "(offset=2237, segment=[0:312545])", "(offset=2235, segment=[-1:-1])"),
              _hw("20,150", "chaos-1", "(offset=2235, segment=[0:312545])", "(offset=2233, segment=[-1:-1])"),
              _hw("20,160", "chaos-2", "(offset=2300, segment=[0:312545])", "(offset=2235, segment=[0:300000])"),
              _truncating("20,170", "__consumer_offsets-1", 23),
              _hw("20,180", "__consumer_offsets-1", "(offset=30, segment=[0:3000])", "(offset=23, segment=[0:2300])")]
    assert not [e for e in extract("\n".join(benign), 3, T0) if e["kind"] == "truncated-below-hw"]
