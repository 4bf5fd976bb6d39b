# mypy: disable-error-code="arg-type"
# (the fakes implement only the part of the cluster protocol disk-replace uses)
"""disk-replace without a cluster: what it asks each node, the quorum commands it runs, what it records."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_chaos.faults.disk_replace import DiskReplaceFault, replication_rows, voters
from kafka_chaos.faults.registry import KINDS, taking_down

REPLICATION = """NodeId  DirectoryId             LogEndOffset  Lag  LastFetchTimestamp  LastCaughtUpTimestamp  Status
2       AAAAAAAAAAAAAAAAAAAAAA  120           0    1                   1                      Leader
3       BBBBBBBBBBBBBBBBBBBBBB  120           0    1                   1                      Follower
1       CCCCCCCCCCCCCCCCCCCCCC  {end}         {lag}  1                 1                      {status}
"""
STATUS = ('ClusterId: x\nLeaderId: 2\nCurrentVoters: [{{"id": 1, "directoryId": "{one}", "endpoints": []}}, '
          '{{"id": 2, "directoryId": "AAAAAAAAAAAAAAAAAAAAAA", "endpoints": []}}]\n'
          'CurrentObservers: [{{"id": 1, "directoryId": "{observer}"}}]\n')


@dataclass
class Node:
    node_id: int
    is_controller: bool = True
    is_broker: bool = False
    alias: str = ""
    controller_port: int = 9093
    config_path: str = "/etc/server.properties"
    log: list[Any] = field(default_factory=list)
    answers: list[tuple[int, str]] = field(default_factory=list)

    def kill(self) -> None:
        self.log.append("kill")

    def start(self) -> None:
        self.log.append("start")

    def replace_disk(self) -> dict[str, Any]:
        self.log.append("replace")
        return {"files": 3, "bytes": 99, "entries": {"t-0": 90, "meta.properties": 9}, "directory_id": "OLD"}

    def format_disk(self, flags: str) -> dict[str, Any]:
        self.log.append(("format", flags))
        return {"command": f"kafka-storage.sh format -t C{flags}", "output": "", "directory_id": "NEW"}

    def log_offsets(self, topic: str) -> dict[str, dict[str, int | None]]:
        return {"0": {"log_start": 0, "log_end": 120}}

    def run_tool(self, *argv: str) -> tuple[int, str]:
        self.log.append(argv[3:])
        return self.answers.pop(0) if self.answers else (0, "")


def cluster(dynamic: bool, **nodes: Node) -> Any:
    return SimpleNamespace(nodes={n.node_id: n for n in nodes.values()},
                           spec=SimpleNamespace(dynamic_quorum=dynamic))


def test_disk_replace_is_a_process_kind_on_volatile_disks_that_restarts_its_node() -> None:
    info = KINDS["disk-replace"]
    assert (info.family, info.heal, info.effect, info.restarts) == ("process", "disk-replaced", "disk-replace", True)
    assert info.needs == {"volatile-disks"} and "disk-replace" in taking_down()


def test_the_quorum_tables_are_read_by_their_headers() -> None:
    rows = replication_rows("log noise\n" + REPLICATION.format(end=7, lag=113, status="Follower"))
    assert [(r["NodeId"], r["Lag"], r["Status"]) for r in rows] == [("2", "0", "Leader"), ("3", "0", "Follower"),
                                                                     ("1", "113", "Follower")]
    assert replication_rows("no table") == []
    assert voters(STATUS.format(one="NEW", observer="X")) == [(1, "NEW"), (2, "AAAAAAAAAAAAAAAAAAAAAA")]
    assert voters(STATUS.format(one="OLD", observer="NEW"), "CurrentObservers") == [(1, "NEW")]


def test_a_broker_is_killed_wiped_then_formatted_and_started_without_the_quorum() -> None:
    broker = Node(1, is_controller=False)
    fault = DiskReplaceFault(cluster(False, a=broker, b=Node(101)))
    started = fault.start([1])
    assert broker.log == ["kill", "replace"]
    assert started["wiped"]["1"]["bytes"] == 99 and started["quorum"] == "static"
    healed = fault.heal([1])
    assert broker.log[2:] == [("format", ""), "start"]
    assert healed["rejoined"]["1"] == {"format": {"command": "kafka-storage.sh format -t C", "output": "",
                                                  "directory_id": "NEW"}}


def test_a_static_voter_is_formatted_as_at_first_and_waited_for_until_it_has_no_lag() -> None:
    wiped, peer = Node(1), Node(2)
    caught_up = REPLICATION.format(end=120, lag=0, status="Follower")
    heard = "3       BBBBBBBBBBBBBBBBBBBBBB  120           0    1 "
    unheard = caught_up.replace(heard, "3       BBBBBBBBBBBBBBBBBBBBBB  -1            121  -1")
    assert unheard != caught_up
    peer.answers = [(0, unheard),  # the leader just elected has not heard from node 3: no majority yet
                    (0, caught_up),
                    (0, REPLICATION.format(end=0, lag=120, status="Follower")),
                    (0, REPLICATION.format(end=120, lag=0, status="Follower"))]
    fault = DiskReplaceFault(cluster(False, a=wiped, b=peer, c=Node(3)), poll_s=0)
    fault.start([1])
    out = fault.heal([1])["rejoined"]["1"]
    assert wiped.log[2:] == [("format", ""), "start"]
    assert out["caught_up"] and [r["Lag"] for r in out["replication_after"]] == ["0", "0", "0"]
    assert {r["NodeId"] for r in out["replication_before"]} == {"1", "2", "3"} and out["majority_caught_up"]
    assert len([c for c in peer.log if c[-1] == "--replication"]) == 4
    assert all(call[-1] == "--replication" for call in peer.log)


def test_a_dynamic_voter_is_formatted_as_an_observer_then_removed_by_its_old_id_and_added_back() -> None:
    wiped, peer = Node(1), Node(2)
    peer.answers = [(0, REPLICATION.format(end=120, lag=0, status="Follower")),
                    (0, STATUS.format(one="OLD", observer="X")), (0, STATUS.format(one="OLD", observer="NEW")),
                    (0, "removed"), (0, STATUS.format(one="NEW", observer="X"))]
    wiped.answers = [(1, "REQUEST_TIMED_OUT: not caught up"), (0, "added")]
    fault = DiskReplaceFault(cluster(True, a=wiped, b=peer, c=Node(3)), poll_s=0)
    fault.start([1])
    out = fault.heal([1])["rejoined"]["1"]
    assert ("format", " --no-initial-controllers") in wiped.log
    remove, add = out["steps"]
    assert remove["command"] == "remove-controller --controller-id 1 --controller-directory-id OLD"
    assert add["attempts"] == 2 and add["code"] == 0 and add["command"].endswith("add-controller")
    assert out["observer_first"] and out["re_added"]
    assert out["voters_after"] == [[1, "NEW"], [2, "AAAAAAAAAAAAAAAAAAAAAA"]]


def test_a_controller_with_no_other_controller_has_no_quorum_to_rejoin() -> None:
    from kafka_chaos.errors import ClusterError

    fault = DiskReplaceFault(cluster(False, a=Node(1)))
    fault.start([1])
    with pytest.raises(ClusterError, match="only controller"):
        fault.heal([1])


def test_a_brokers_heal_waits_until_it_is_back_in_the_isr_of_each_of_its_partitions() -> None:
    broker = Node(1, is_controller=False, is_broker=True)
    answers = [[SimpleNamespace(replicas=(1, 2), isr=(2,)), SimpleNamespace(replicas=(2, 3), isr=(2, 3))],
               [SimpleNamespace(replicas=(1, 2), isr=(2, 1)), SimpleNamespace(replicas=(2, 3), isr=(2,))]]
    c = cluster(False, a=broker, b=Node(101))
    c.partition_states = lambda topic: answers.pop(0) if len(answers) > 1 else answers[0]
    fault = DiskReplaceFault(c, topic="t", poll_s=0)
    fault.start([1])
    isr = fault.heal([1])["rejoined"]["1"]["isr"]
    assert isr["regained"] and isr["logs"] == {"0": {"log_start": 0, "log_end": 120}} and answers == [answers[0]]


def test_a_broker_healed_to_unfenced_waits_for_the_old_incarnation_fenced_then_the_new_one_listed() -> None:
    broker = Node(1, is_controller=False, is_broker=True)
    listed = [{1, 2}, {2}, {2}, {2}, {1, 2}]  # the old registration until fenced, then the new one once unfenced
    c = cluster(False, a=broker, b=Node(101))

    def live_broker_ids() -> set[int]:
        broker.log.append(("listed", sorted(listed[0])))
        return listed.pop(0)

    def no_isr_wait(topic: str) -> Any:
        raise AssertionError("a heal to unfenced must not wait for the ISR")

    c.live_broker_ids, c.partition_states = live_broker_ids, no_isr_wait
    fault = DiskReplaceFault(c, topic="t", poll_s=0, rejoin="unfenced")
    fault.start([1])
    out = fault.heal([1])["rejoined"]["1"]
    assert broker.log[2:] == [("format", ""), ("listed", [1, 2]), ("listed", [2]), "start", ("listed", [2]),
                              ("listed", [2]), ("listed", [1, 2])]
    assert out["old_fenced"]["reached"] and out["unfenced"]["reached"] and "isr" not in out and not listed


def test_a_heal_to_unfenced_that_never_sees_the_broker_says_so() -> None:
    broker = Node(1, is_controller=False, is_broker=True)
    c = cluster(False, a=broker, b=Node(101))
    c.live_broker_ids = lambda: {2}
    fault = DiskReplaceFault(c, topic="t", poll_s=0, timeout_s=0.05, rejoin="unfenced")
    fault.start([1])
    out = fault.heal([1])["rejoined"]["1"]
    assert out["old_fenced"]["reached"] and not out["unfenced"]["reached"]


def test_the_nemesis_hands_the_planned_rejoin_to_the_fault() -> None:
    from kafka_chaos.faults.nemesis import Nemesis
    from kafka_chaos.faults.schedule import PlannedFault

    nemesis = Nemesis(cluster(False, a=Node(1, is_controller=False, is_broker=True)), "t", [], recorder=None, seed=1)
    asked = nemesis._fault(PlannedFault(1, 5, "disk-replace", "follower", params={"rejoin": "unfenced"}))
    plain = nemesis._fault(PlannedFault(1, 5, "disk-replace", "follower"))
    assert isinstance(asked, DiskReplaceFault) and isinstance(plain, DiskReplaceFault)
    assert (asked.rejoin, plain.rejoin, asked.topic) == ("unfenced", "isr", "t")
