"""A node's disk replaced (disk-replace): the node killed, its data directory emptied, formatted again as an operator
would and started with the same node id (faults.disk_replace).

Each test asserts on the history: what the fault wiped and the new directory id (KIP-858), what the quorum did with
a controller that came back empty, the ISR as the observer and the nodes' logs saw it, and the checker's verdicts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_chaos.harness.run import RunResult
from kafka_chaos.reference_model.disk_replace import controller_expectation
from kafka_chaos.rundir import EVENTS_FILE

from .conftest import nemesis, samples, topic_of, volatile_disk_scenario

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def scenario(name: str, cluster: dict[str, Any], target: str) -> dict[str, Any]:
    s = volatile_disk_scenario(name, 25, {"kind": "disk-replace", "target": target, "at_s": 4, "duration_s": 4},
                               seed=11)
    s["cluster"] = {**s["cluster"], **cluster}
    return s


def replaced(result: RunResult) -> tuple[int, dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The victim, what its disk held (the fault's value), what its rejoining did (the heal's), the heal event."""
    (fault,) = nemesis(result, "disk-replace")
    (victim,) = fault["value"]["nodes"]
    (heal,) = nemesis(result, "disk-replaced")
    assert heal["value"]["nodes"] == [victim]
    return victim, fault["value"]["wiped"][str(victim)], heal["value"]["rejoined"][str(victim)], heal


def assert_no_data_anomaly(result: RunResult) -> None:
    r = result.results
    assert r["complete"], "the final read finished"
    lost = [i for name in ("lost-write", "unseen") for i in r["anomalies"].get(name, [])]
    assert not lost, lost[:3]
    assert not r["anomalies"].get("garbage-read"), r["anomalies"]["garbage-read"][:3]
    assert r["violations"] == [], r["violations"][:3]


def assert_new_directory(wiped: dict[str, Any], rejoined: dict[str, Any], topic: str) -> None:
    """The disk held the topic's partitions and meta.properties; the format gave it another directory id."""
    assert wiped["bytes"] > 0 and wiped["files"] > 0, wiped
    assert "meta.properties" in wiped["entries"], sorted(wiped["entries"])
    assert any(name.startswith(f"{topic}-") and size > 0 for name, size in wiped["entries"].items()), wiped
    new = rejoined["format"]["directory_id"]
    assert wiped["directory_id"] and new and new != wiped["directory_id"], (wiped["directory_id"], new)


def test_a_followers_replaced_disk_refetches_everything_before_it_rejoins_the_isr(chaos_run) -> None:
    """A broker (not a controller: one dedicated controller) whose disk is replaced comes back empty with the same
    node id and a new broker epoch. Its partitions' leaders take it back into the ISR only once its log end reached
    the high watermark (Partition.maybeExpandIsr), and since 3.5 the controller refuses an AlterPartition that names
    it with the broker epoch of its old incarnation (KIP-903, KAFKA-14139): nothing acknowledged is lost."""
    result = chaos_run(scenario("disk-replace-follower", {"controllers": 1}, "follower"))
    topic = topic_of(result)
    victim, wiped, rejoined, heal = replaced(result)
    assert_new_directory(wiped, rejoined, topic)
    assert "__cluster_metadata-0" in wiped["entries"], "a broker keeps its copy of the metadata log too"
    assert "--no-initial-controllers" not in rejoined["format"]["command"], "a static quorum's broker format"
    assert "replication_before" not in rejoined, "a broker's rejoining does not involve the quorum"
    (start,) = nemesis(result, "disk-replace", "invoke")
    isr = rejoined["isr"]
    assert isr["regained"], f"node {victim} was not back in every ISR of {topic} after {isr['waited_s']}s"
    # the replica fetched again from the start (the leaders' logs begin at 0: nothing deleted in 25 s)
    refetched = {e["partition"]: e["time_s"] * 1e9 for e in reversed(cluster_events(result))
                 if e["kind"] == "truncation" and e["node"] == victim and e["time_s"] * 1e9 > start["time"]
                 and e["text"].endswith("truncated to offset 0")}
    by_sample: dict[str, list[dict[str, Any]]] = {}
    for s in samples(result):
        if s["key"].startswith(f"{topic}/") and s["time"] > start["time"]:
            by_sample.setdefault(s["key"], []).append(s)
    rejoined_partitions = 0
    for key, seen in sorted(by_sample.items()):
        if not any(victim in (s.get("replicas") or ()) for s in seen):
            continue
        out = next((s["time"] for s in seen if s["isr"] is not None and victim not in s["isr"]), None)
        assert out is not None and out < heal["time"], f"{key}: node {victim} never left the ISR while down"
        back = next((s for s in seen if s["time"] > out and s["isr"] is not None and victim in s["isr"]), None)
        if back is None:
            continue  # back in the ISR after the observer's last sample: the heal's wait saw it
        partition = key.replace("/", "-")
        assert partition in refetched and refetched[partition] < back["time"], \
            f"{key}: node {victim} was back in the ISR before it began fetching from offset 0 ({refetched})"
        committed = max((s["hw"] for s in seen if out <= s["time"] < back["time"] and s.get("hw") is not None),
                        default=0)
        log = isr["logs"][key.rsplit("/", 1)[1]]
        assert log["log_start"] == 0 and (log["log_end"] or 0) >= committed, \
            f"{key}: the new log {log} does not hold what was committed while it was away (hw {committed})"
        rejoined_partitions += 1
    assert rejoined_partitions, f"node {victim} rejoined no ISR of {topic} after its new disk"
    assert_no_data_anomaly(result)


def cluster_events(result: RunResult) -> list[dict[str, Any]]:
    """What the nodes' logs said (events.jsonl: checker.cluster_events), times in s on the history's clock."""
    path = result.run_dir / EVENTS_FILE
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _raft_epochs_after(result: RunResult, node: int, after_ns: int) -> list[int]:
    return [e["epoch"] for e in cluster_events(result) if e["kind"] == "raft-state" and e["node"] == node
            and e["time_s"] * 1e9 > after_ns]


def test_a_static_quorum_takes_back_a_controller_with_an_empty_log_as_a_voter(chaos_run) -> None:
    """Kafka's default quorum here (4.3.1, controller.quorum.voters): the active controller (a combined node) loses
    its disk. Formatted again as the operations guide says ("Replace KRaft Controller Disk", once a majority holds
    the committed log), it starts with no log and no election state and is a voter again at once: a static voter
    set is ids only, so Kafka cannot tell it from the node that held the log (KIP-853's motivation calls this
    unsafe: it may vote for a candidate missing committed records). With the other two voters up it refetches the
    log and nothing is lost."""
    expect = controller_expectation(dynamic_quorum=False)
    assert expect.voter_at_once and not expect.needs_readd
    result = chaos_run(scenario("disk-replace-controller-static", {}, "controller"))
    victim, wiped, rejoined, _heal = replaced(result)
    assert "steps" not in rejoined, "the model's static quorum needs no re-add, and none was run"
    (fault,) = nemesis(result, "disk-replace")
    assert_new_directory(wiped, rejoined, topic_of(result))
    assert wiped["entries"].get("__cluster_metadata-0", 0) > 0, "the metadata log went with the disk"
    assert "--no-initial-controllers" not in rejoined["format"]["command"]
    before = {r["NodeId"] for r in rejoined["replication_before"]}
    assert before >= {"1", "2", "3"} - {str(victim)} and rejoined["majority_caught_up"], rejoined["replication_before"]
    # a static voter set is ids only: describe --replication shows no directory ids (the zero UUID)
    assert {r.get("DirectoryId") for r in rejoined["replication_after"]} <= {"AAAAAAAAAAAAAAAAAAAAAA", None}
    assert rejoined["caught_up"], f"node {victim} never showed as a voter with no lag: {rejoined}"
    mine = [r for r in rejoined["replication_after"] if r["NodeId"] == str(victim)]
    assert mine and mine[0]["Status"] in ("Follower", "Leader"), rejoined["replication_after"]
    epochs = _raft_epochs_after(result, victim, fault["time"])
    assert epochs and epochs[0] == 0, f"the wiped voter did not start over at epoch 0: {epochs[:5]}"
    assert_back_in_the_isr_from_offset_0(rejoined)
    assert_no_data_anomaly(result)


def assert_back_in_the_isr_from_offset_0(rejoined: dict[str, Any]) -> None:
    isr = rejoined["isr"]
    assert isr["regained"] and isr["logs"], isr
    assert all(log["log_start"] == 0 and (log["log_end"] or 0) > 0 for log in isr["logs"].values()), isr["logs"]


@pytest.mark.nightly  # the dynamic-quorum variant (KIP-853); make test runs the default, static, quorum
def test_a_dynamic_quorum_keeps_a_wiped_controller_an_observer_until_it_is_added_back(chaos_run) -> None:
    """KIP-853 (kraft.version 1): the voters are (id, directory id) pairs. The wiped controller, formatted with
    --no-initial-controllers, has a new directory id, so it starts as an observer; remove-controller with its old
    directory id and add-controller (refused until it caught up) make it a voter again."""
    expect = controller_expectation(dynamic_quorum=True)
    assert expect.needs_readd and not expect.voter_at_once
    result = chaos_run(scenario("disk-replace-controller-dynamic", {"dynamic_quorum": True}, "controller"))
    victim, wiped, rejoined, _heal = replaced(result)
    assert_new_directory(wiped, rejoined, topic_of(result))
    assert "--no-initial-controllers" in rejoined["format"]["command"]
    assert rejoined["observer_first"], f"node {victim} on its new disk never showed as an observer: {rejoined}"
    remove, add = rejoined["steps"]
    assert remove["code"] == 0 and wiped["directory_id"] in remove["command"], remove
    assert add["code"] == 0, add
    new = rejoined["format"]["directory_id"]
    assert rejoined["re_added"] and [victim, new] in rejoined["voters_after"], rejoined
    assert [victim, wiped["directory_id"]] not in rejoined["voters_after"]
    assert_back_in_the_isr_from_offset_0(rejoined)
    assert_no_data_anomaly(result)

