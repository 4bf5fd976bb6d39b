# mypy: disable-error-code="arg-type"
# (the fakes implement only the part of the cluster protocol that operations use)
"""Operations without a cluster: validation, the rolling restart's steps in the history, reassignment targets,
and the checker reading operation steps as fault windows."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.checker.tables import history_to_tables
from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.operations import OPERATOR, OperationRunner, OperationSpec
from kafka_chaos.faults.windows import faults_from_history
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.history import History


@dataclass
class FakeNode:
    node_id: int
    log: list[str]

    def stop(self) -> None:
        self.log.append(f"stop {self.node_id}")

    def kill(self) -> None:
        self.log.append(f"kill {self.node_id}")

    def start(self) -> None:
        self.log.append(f"start {self.node_id}")


@dataclass
class FakeState:
    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    @property
    def key(self) -> str:
        return f"t/{self.partition}"


@dataclass
class FakeCluster:
    log: list[str] = field(default_factory=list)
    lagging_reads: int = 2  # how many metadata reads still show the restarted broker out of the ISR

    @property
    def brokers(self) -> list[FakeNode]:
        return [FakeNode(i, self.log) for i in (1, 2, 3)]

    def node(self, node_id: int) -> FakeNode:
        return FakeNode(node_id, self.log)

    def partition_states(self, topic: str) -> list[FakeState]:
        self.log.append("describe")
        if self.lagging_reads:
            self.lagging_reads -= 1
            return [FakeState(0, (1, 2, 3), (1, 2))]
        self.lagging_reads = 2  # the next restart lags again
        return [FakeState(0, (1, 2, 3), (1, 2, 3)), FakeState(1, (2, 3), (2, 3))]

    def bootstrap_servers(self, *, direct: bool = False) -> str:
        return "unused:1"


def test_rolling_restart_records_each_step_and_waits_for_full_replication(tmp_path: Path) -> None:
    cluster = FakeCluster()
    with History(tmp_path / "history.jsonl") as history:
        runner = OperationRunner(cluster, "t", history, sleep=lambda s: None)
        outcome = runner.perform(OperationSpec(kind="rolling-restart", nodes=[3, 1, 2]))
    assert outcome["done"] and [s["node"] for s in outcome["steps"]] == [3, 1, 2]
    assert all(s["healthy"] for s in outcome["steps"])
    # One broker at a time: the next stop only after the previous broker is back in every ISR.
    steps = [entry for entry in cluster.log if entry != "describe"]
    assert steps == ["stop 3", "start 3", "stop 1", "start 1", "stop 2", "start 2"]
    between = cluster.log[cluster.log.index("start 3") + 1: cluster.log.index("stop 1")]
    assert between == ["describe"] * 3  # two lagging reads, then a healthy one
    events = [line for line in (tmp_path / "history.jsonl").read_text().splitlines() if OPERATOR in line]
    assert '"f":"rolling-restart"' in events[0] and '"f":"rolling-restart-done"' in events[-1]


def test_hard_bounce_kills_and_unhealthy_step_is_reported(tmp_path: Path) -> None:
    cluster = FakeCluster(lagging_reads=10**6)
    with History(tmp_path / "history.jsonl") as history:
        runner = OperationRunner(cluster, "t", history, sleep=lambda s: None)
        outcome = runner.perform(OperationSpec(kind="rolling-restart", clean=False, nodes=[2],
                                               healthy_timeout_s=0.05))
    assert cluster.log[:2] == ["kill 2", "start 2"]
    assert not outcome["done"]
    assert [(s["node"], s["healthy"]) for s in outcome["steps"]] == [(2, False)]


def test_operation_steps_are_fault_windows_for_the_checker(tmp_path: Path) -> None:
    cluster = FakeCluster()
    with History(tmp_path / "history.jsonl") as history:
        OperationRunner(cluster, "t", history, sleep=lambda s: None).perform(
            OperationSpec(kind="rolling-restart", nodes=[1, 2]))
    tables = history_to_tables(tmp_path / "history.jsonl")
    windows = faults_from_history(tables.meta.nemesis, end_time=tables.meta.end_time).to_dict()
    kinds = [(w["f"], w["nodes"]) for w in windows["windows"]]
    assert ("stop", [1]) in kinds and ("stop", [2]) in kinds and ("rolling-restart", [1, 2]) in kinds
    assert all(w["end"] is not None for w in windows["windows"])  # every step and the operation ended


def test_reassign_target_raises_replication_factor_with_spare_brokers() -> None:
    runner = OperationRunner(FakeCluster(lagging_reads=0), "t", None)  # type: ignore[arg-type]
    target = runner.target_replicas(OperationSpec(kind="reassign", replication_factor=3))
    assert target == {0: [1, 2, 3], 1: [2, 3, 1]}


@pytest.mark.parametrize(("operations", "message"), [
    ([{"kind": "reassign"}], "exactly one of replication_factor or replicas"),
    ([{"kind": "rolling-restart", "nodes": [1, 7]}], "names brokers [7] that do not exist"),
    ([{"kind": "reassign", "replication_factor": 5}], "needs that many brokers"),
    ([{"kind": "preferred-election", "replication_factor": 2}], "belong to reassign"),
    ([{"kind": "rebalance"}], "operations.0.kind"),
    ([{"kind": "rolling-upgrade"}], "needs to_version"),
    ([{"kind": "rolling-restart", "to_version": "4.3.1"}], "belong to rolling-upgrade"),
    ([{"kind": "remove-controller", "controller_id": 3}], "needs a dynamic KRaft quorum (KIP-853): set "
                                                          "cluster.dynamic_quorum = true"),
    ([{"kind": "add-controller"}], "needs controller_id"),
    ([{"kind": "reassign", "replication_factor": 3, "controller_id": 2}], "controller_id belongs to"),
])
def test_bad_operations_are_rejected_naming_the_field(operations: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "ops", "operations": operations})
    assert message in str(err.value)


@pytest.mark.parametrize(("scenario", "message"), [
    ({"faults": {"schedule": [{"kind": "kill", "target": "rack:a"}]}}, "need racks: set cluster.racks"),
    ({"cluster": {"racks": ["a", "b"]}, "faults": {"schedule": [{"kind": "kill", "target": "rack:c"}]}},
     "name racks ['c'] that no broker is in"),
])
def test_rack_targets_need_racks(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "racks", **scenario})
    assert message in str(err.value)


def test_brokers_take_racks_in_turn_and_rack_targets_resolve_to_them() -> None:
    import random

    from kafka_chaos.cluster.spec import ClusterSpec
    from kafka_chaos.faults.targets import resolve

    spec = ClusterSpec(nodes=3, racks=["a", "b"])
    assert [spec.rack_of(b) for b in (1, 2, 3)] == ["a", "b", "a"]
    assert spec.settings()["replica.selector.class"].endswith("RackAwareReplicaSelector")

    @dataclass
    class RackNode:
        node_id: int
        rack: str | None
        is_broker: bool = True

    class RackCluster:
        def __init__(self) -> None:
            self.nodes = {i: RackNode(i, spec.rack_of(i)) for i in (1, 2, 3)}

    assert resolve("rack:a", RackCluster(), "t", random.Random(0)) == [1, 3]
    assert resolve("rack:b", RackCluster(), "t", random.Random(0)) == [2]


def test_controller_ids_must_be_controllers_and_the_quorum_dynamic_from_3_9() -> None:
    dedicated = {"nodes": 3, "controllers": 3, "dynamic_quorum": True}
    with pytest.raises(ScenarioError, match=r"controller_id 2 is not a controller; controllers are \[101, 102, 103\]"):
        parse_scenario({"name": "q", "cluster": dedicated,
                        "operations": [{"kind": "remove-controller", "controller_id": 2}]})
    assert parse_scenario({"name": "q", "cluster": dedicated,
                           "operations": [{"kind": "remove-controller", "controller_id": 102}]}).operations
    with pytest.raises(ScenarioError, match=r"KIP-853 came in 3\.9"):
        parse_scenario({"name": "q", "cluster": {"kafka_version": "3.8.1", "dynamic_quorum": True}})


class ToolNode:
    """A node whose Kafka tools answer from a script: `describes` answer describe --status in turn, `answers` the
    other commands by a substring of their command line."""

    def __init__(self, node_id: int, describes: list[str], answers: dict[str, tuple[int, str]], ran: list[str]):
        self.node_id, self.alias, self.controller_port = node_id, f"node-{node_id}", 9093
        self.is_controller, self.config_path, self.data_dir = True, "/etc/p", "/data"
        self.describes, self.answers, self.ran = describes, answers, ran

    def run_tool(self, *argv: str) -> tuple[int, str]:
        line = " ".join(argv)
        self.ran.append(f"{self.node_id}: {line}")
        if "describe --status" in line:
            return 0, self.describes.pop(0)
        return next(answer for needle, answer in self.answers.items() if needle in line)


def test_remove_controller_names_its_directory_id_and_waits_for_the_voters() -> None:
    ran: list[str] = []
    voters_3 = 'CurrentVoters:          [{"id": 1, "directoryId": "a"}, {"id": 2}, {"id": 3, "directoryId": "c"}]'
    describes = [f"ClusterId: x\n{voters_3}\n", f"ClusterId: x\n{voters_3}\n",  # not applied yet: ask again
                 'CurrentVoters:          [{"id": 1}, {"id": 2}]\n']
    answers = {"meta.properties": (0, "version=1\ndirectory.id=DiR3ctoryId\nnode.id=3\n"),
               "remove-controller": (0, "[2026-11-25 03:54:00,000] INFO x\nRemoved  KRaft controller 3\n")}
    nodes = {i: ToolNode(i, describes, answers, ran) for i in (1, 2, 3)}

    class Cluster:
        def __init__(self) -> None:
            self.nodes = nodes

        def node(self, node_id: int) -> ToolNode:
            return nodes[node_id]

    runner = OperationRunner(Cluster(), "t", None, sleep=lambda _: None)  # type: ignore[arg-type]
    out = runner._controller_membership(OperationSpec(kind="remove-controller", controller_id=3))
    assert out["done"] and out["voters_before"] == [1, 2, 3] and out["voters_after"] == [1, 2], out
    assert out["output"] == "Removed  KRaft controller 3"
    (remove,) = [r for r in ran if "remove-controller" in r]
    assert remove.startswith("1: kafka-metadata-quorum.sh --bootstrap-controller node-1:9093,node-2:9093 ")
    assert remove.endswith("remove-controller --controller-id 3 --controller-directory-id DiR3ctoryId")


@pytest.mark.parametrize(("scenario", "message"), [
    ({"operations": [{"kind": "decommission-broker", "node": 2}]}, "node 2 is also a controller"),
    ({"cluster": {"nodes": 3, "controllers": 1},
      "operations": [{"kind": "decommission-broker", "node": 2}]}, "only 3 brokers hold a replication factor of 3"),
    ({"operations": [{"kind": "decommission-broker", "node": 4}]},
     "node 4 is not a broker then; brokers are [1, 2, 3]"),
    ({"operations": [{"kind": "decommission-broker"}]}, "needs node"),
    ({"operations": [{"kind": "add-broker", "node": 4}]}, "node belongs to decommission-broker"),
    ({"cluster": {"toxiproxy": True}, "operations": [{"kind": "add-broker"}]}, "add-broker starts a plain broker"),
    ({"operations": [{"kind": "add-broker", "at_s": 5}, {"kind": "reassign", "at_s": 1, "replicas": {0: [4, 1, 2]}}]},
     "names brokers [4] that do not exist"),  # the reassignment comes before the broker joins
])
def test_broker_lifecycle_operations_are_checked_in_time_order(scenario: dict[str, Any], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "brokers", **scenario})
    assert message in str(err.value)


def test_an_added_broker_can_take_replicas_and_be_decommissioned() -> None:
    ops = [{"kind": "add-broker", "at_s": 1}, {"kind": "reassign", "at_s": 2, "replicas": {0: [4, 1, 2]}},
           {"kind": "decommission-broker", "at_s": 3, "node": 4},
           {"kind": "reassign", "at_s": 4, "replicas": {0: [4, 1, 2]}}]
    with pytest.raises(ScenarioError, match=r"operations\.3 .*names brokers \[4\]"):  # 4 is gone by then
        parse_scenario({"name": "brokers", "operations": ops})
    assert len(parse_scenario({"name": "brokers", "operations": ops[:3]}).operations) == 3


def test_a_rolling_downgrade_is_refused_once_metadata_version_is_beyond_it() -> None:
    up = {"kind": "rolling-upgrade", "at_s": 1, "to_version": "4.3.1"}
    down = {"kind": "rolling-upgrade", "at_s": 2, "to_version": "4.0.1"}
    assert parse_scenario({"name": "d", "cluster": {"kafka_version": "4.0.1"}, "operations": [up, down]})
    with pytest.raises(ScenarioError, match=r"operations\.1: a rolling downgrade to 4\.0\.1 .* finalized at 4\.3"):
        parse_scenario({"name": "d", "cluster": {"kafka_version": "4.0.1"},
                        "operations": [{**up, "release_version": "4.3"}, down]})
    with pytest.raises(ScenarioError, match=r"finalized at 4\.3 by then"):  # formatted by 4.3.1 at its latest
        parse_scenario({"name": "d", "cluster": {"kafka_version": "4.3.1"}, "operations": [down]})


def test_an_operation_an_earlier_one_made_late_still_runs_and_one_after_the_run_does_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """CI saw add-controller (at 11 s of 20) skipped because the removal's tool calls took past the run's end:
    the operator stays busy until every operation scheduled within the duration is performed."""
    import threading
    import time
    from types import SimpleNamespace

    from kafka_chaos.faults.operations import Operator

    release = threading.Event()
    performed: list[str] = []

    def perform(self: OperationRunner, op: OperationSpec) -> dict[str, Any]:
        if op.kind == "remove-controller":
            release.wait(10)  # the removal outlasts the run
        performed.append(op.kind)
        return {"done": True}

    monkeypatch.setattr(OperationRunner, "perform", perform)
    ops = [OperationSpec(kind="remove-controller", at_s=0, controller_id=3),
           OperationSpec(kind="add-controller", at_s=0.05, controller_id=3),
           OperationSpec(kind="preferred-election", at_s=5)]  # after the run's 0.2 s: never performed
    operator = Operator(ops)
    ctx = SimpleNamespace(cluster=None, topic="t", history=None, scenario=SimpleNamespace(duration_s=0.2))
    operator.start(ctx)  # type: ignore[arg-type]
    time.sleep(0.4)
    assert operator.busy() and performed == []  # past the run's end, the addition still to come
    release.set()
    deadline = time.monotonic() + 10
    while operator.busy() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not operator.busy() and performed == ["remove-controller", "add-controller"]
    operator.stop(ctx, interrupted=False)  # type: ignore[arg-type]
    assert performed == ["remove-controller", "add-controller"]


class FeaturesNode:
    """A broker whose kafka-features.sh refuses kraft.version `refusals` times, as a quorum leader does until every
    restarted voter's UpdateRaftVoter has arrived, then upgrades."""

    def __init__(self, refusals: int) -> None:
        self.alias, self.internal_port = "node-3", 19092
        self.refusals = refusals
        self.ran: list[str] = []

    def run_tool(self, *argv: str) -> tuple[int, str]:
        line = " ".join(argv)
        self.ran.append(line)
        if "--release-version" in line and self.refusals:
            self.refusals -= 1
            return 1, ("[2026-11-30 01:21:50,000] INFO log line\nCould not upgrade kraft.version to 1. The update "
                       "failed for all features since the following feature had an error: Invalid upgrade of "
                       "kraft.version to KRAFT_VERSION_1 because not all of the voters support it\n")
        if "--release-version" in line:
            return 0, "kraft.version was upgraded to 1.\nmetadata.version was upgraded to 30.\n"
        if "--feature" in line:
            return 0, "eligible.leader.replicas.version was upgraded to 1.\n"
        return 0, "Feature: kraft.version  FinalizedVersionLevel: 1\n"


def features_runner(node: FeaturesNode) -> OperationRunner:
    class Cluster:
        def node(self, node_id: int) -> FeaturesNode:
            return node

    return OperationRunner(Cluster(), "t", None, sleep=lambda _: None)  # type: ignore[arg-type]


def test_a_release_upgrade_the_quorum_refuses_until_every_voter_reported_is_asked_again() -> None:
    node = FeaturesNode(refusals=2)
    op = OperationSpec(kind="rolling-upgrade", to_version="4.3.1", release_version="4.3",
                       features={"eligible.leader.replicas.version": 1})
    steps = features_runner(node)._upgrade_features(3, op)
    assert [(s["command"], s["code"], s["attempts"]) for s in steps] == [
        ("upgrade --release-version 4.3", 0, 3), ("upgrade --feature eligible.leader.replicas.version=1", 0, 1),
        ("describe", 0, 1)]
    assert steps[0]["output"] == "kraft.version was upgraded to 1.\nmetadata.version was upgraded to 30."
    assert len(node.ran) == 5


def test_a_refusal_that_lasts_past_the_operations_patience_is_the_outcome() -> None:
    node = FeaturesNode(refusals=10**9)
    op = OperationSpec(kind="rolling-upgrade", to_version="4.3.1", release_version="4.3", healthy_timeout_s=0.05)
    runner = features_runner(node)
    runner.sleep = lambda _: time.sleep(0.01)
    (release, describe) = runner._upgrade_features(3, op)
    assert release["code"] == 1 and "not all of the voters support it" in release["output"]
    assert release["attempts"] == len(node.ran) - 1 and describe["code"] == 0


def test_any_other_failure_of_a_features_command_is_not_retried() -> None:
    class Refusing(FeaturesNode):
        def run_tool(self, *argv: str) -> tuple[int, str]:
            self.ran.append(" ".join(argv))
            return 1, "Could not upgrade metadata.version to 30: Invalid metadata.version 30\n"

    node = Refusing(refusals=0)
    op = OperationSpec(kind="rolling-upgrade", to_version="4.3.1", release_version="4.3")
    steps = features_runner(node)._upgrade_features(3, op)
    assert [s["attempts"] for s in steps] == [1, 1] and len(node.ran) == 2
