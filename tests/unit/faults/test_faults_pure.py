# mypy: disable-error-code="arg-type"
# (the fakes implement only the part of the cluster protocol that target resolution reads)
"""The nemesis's pure parts: deterministic plans, partition shapes, symbolic targets, scenario validation."""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import pytest

from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults import FaultsConfig, grudge, plan, resolve
from kafka_chaos.faults.kinds import NodeLinkFault
from kafka_chaos.faults.registry import KINDS
from kafka_chaos.faults.targets import TargetError
from kafka_chaos.harness.scenario import parse_scenario


def test_generated_plan_is_deterministic_per_seed_and_cut_to_the_run() -> None:
    cfg = FaultsConfig.model_validate({"generator": {"kinds": ["kill", "pause", "partition"],
                                                     "targets": ["leader", "one"], "every_s": 10,
                                                     "duration_s": 8, "start_s": 3}})
    a, b, c = plan(cfg, 30, seed=1), plan(cfg, 30, seed=1), plan(cfg, 30, seed=2)
    assert a == b
    assert [p.at_s for p in a] == [3, 13, 23]
    assert [(p.kind, p.target) for p in a] != [(p.kind, p.target) for p in c] or a[0].shape != c[0].shape
    assert a[-1].heal_at_s <= 30  # 23 + 8 would end after the run: cut to end with it


def test_explicit_schedule_is_sorted_and_keeps_link_parameters() -> None:
    cfg = FaultsConfig.model_validate({"schedule": [
        {"kind": "latency", "at_s": 9, "latency_ms": 250, "jitter_ms": 10},
        {"kind": "kill", "at_s": 2, "target": [2]},
    ]})
    p = plan(cfg, 60, seed=0)
    assert [x.kind for x in p] == ["kill", "latency"]
    assert p[0].target == [2]
    assert p[1].params == {"latency_ms": 250, "jitter_ms": 10}


def symmetric_cuts(g: dict[int, set[int]]) -> set[frozenset[int]]:
    return {frozenset((a, b)) for a, bs in g.items() for b in bs}


def test_isolate_cuts_the_target_from_everyone_else() -> None:
    g = grudge("isolate", [1, 2, 3], [2], random.Random(0))
    assert symmetric_cuts(g) == {frozenset((1, 2)), frozenset((2, 3))}


def test_halves_split_in_two_groups_that_cannot_talk() -> None:
    g = grudge("halves", [1, 2, 3, 4, 5], [], random.Random(3))
    small = [n for n, dropped in g.items() if len(dropped) == 3]
    big = [n for n, dropped in g.items() if len(dropped) == 2]
    assert len(small) == 2 and len(big) == 3
    assert all(g[s] == set(big) for s in small)


def test_bridge_node_talks_to_both_sides() -> None:
    g = grudge("bridge", [1, 2, 3, 4, 5], [], random.Random(1))
    bridges = [n for n, dropped in g.items() if not dropped]
    assert len(bridges) == 1
    others = [n for n in g if n not in bridges]
    assert all(g[n] for n in others)


def test_majority_ring_gives_every_node_a_different_majority() -> None:
    nodes = [1, 2, 3, 4, 5]
    g = grudge("majority-ring", nodes, [], random.Random(2))
    visible = {n: frozenset(set(nodes) - g[n]) for n in nodes}
    assert all(len(v) == 3 for v in visible.values())
    assert len(set(visible.values())) == 5


def test_one_way_drops_only_what_the_targets_hear() -> None:
    g = grudge("one-way", [1, 2, 3], [1], random.Random(0))
    assert g == {1: {2, 3}}


@dataclass
class FakeNode:
    node_id: int
    is_broker: bool = True


@dataclass
class FakeState:
    leader: int | None
    replicas: tuple[int, ...] = (1, 2, 3)
    isr: tuple[int, ...] = (1, 2, 3)


@dataclass
class FakeCluster:
    states: list[FakeState]
    controller: int | None = 101
    nodes: dict[int, FakeNode] = field(default_factory=lambda: {i: FakeNode(i) for i in (1, 2, 3)}
                                       | {101: FakeNode(101, is_broker=False)})

    def partition_states(self, topic: str) -> list[FakeState]:
        return self.states

    def controller_id(self) -> int | None:
        return self.controller


def test_symbolic_targets_resolve_from_live_metadata() -> None:
    cluster = FakeCluster([FakeState(leader=2, isr=(2, 3))])
    rng = random.Random(0)
    assert resolve("leader", cluster, "t", rng) == [2]
    assert resolve("follower", cluster, "t", rng) == [3]  # the in-sync follower, not the lagging one
    assert resolve("controller", cluster, "t", rng) == [101]
    assert resolve("all", cluster, "t", rng, brokers_only=True) == [1, 2, 3]
    assert len(resolve("majority", cluster, "t", rng)) == 3
    assert len(resolve("minority", cluster, "t", rng)) == 1
    assert resolve("previous", cluster, "t", rng, previous=[3]) == [3]
    assert resolve([1, 3], cluster, "t", rng) == [1, 3]
    with pytest.raises(TargetError):
        resolve([7], cluster, "t", rng)
    with pytest.raises(TargetError):
        resolve("leader", FakeCluster([FakeState(leader=None)]), "t", rng)


def test_spare_is_a_broker_without_a_replica_of_partition_0() -> None:
    rng = random.Random(0)
    assert resolve("spare", FakeCluster([FakeState(leader=1, replicas=(1, 3))]), "t", rng) == [2]
    assert resolve("spare", FakeCluster([FakeState(leader=1, replicas=(1,))]), "t", rng) in ([2], [3])
    with pytest.raises(TargetError, match="no spare broker"):  # controller 101 is no broker: never a spare
        resolve("spare", FakeCluster([FakeState(leader=1)]), "t", rng)


def test_scenario_errors_name_field_value_and_allowed_values() -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "topic": {"replication_factor": 3, "min_insync_replicas": 4}}, "s.toml")
    assert "min_insync_replicas (4) cannot exceed replication_factor (3)" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "faults": {"schedule": [{"kind": "latency"}]}}, "s.toml")
    assert "need cluster.toxiproxy = true" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "workload": {"acks": "1", "idempotence": True}}, "s.toml")
    assert "idempotence = true needs acks" in str(err.value)


def test_power_loss_needs_volatile_disks_and_a_cluster_kafka_chaos_starts() -> None:
    power = {"faults": {"schedule": [{"kind": "power-loss", "target": "all"}]}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", **power}, "s.toml")
    assert 'cluster.volatile_disks = "unsynced"' in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "cluster": {"volatile_disks": "sometimes"}, **power}, "s.toml")
    assert "volatile_disks" in str(err.value)
    ok = parse_scenario({"name": "x", "cluster": {"volatile_disks": "last:30s"}, **power}, "s.toml")
    assert ok.cluster.disk_writeback_s == 30.0
    assert parse_scenario({"name": "x", "cluster": {"volatile_disks": "unsynced"}, **power},
                          "s.toml").cluster.disk_writeback_s is None
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "cluster": {"bootstrap_servers": "b:9092", "volatile_disks": "unsynced"},
                        **power}, "s.toml")
    assert "power-loss act on the disks kafka-chaos mounts" in str(err.value)
    assert "remove bootstrap_servers" in str(err.value)


def test_disk_full_needs_sized_disks_and_one_kind_of_disk() -> None:
    full = {"faults": {"schedule": [{"kind": "disk-full", "target": "leader", "free_mb": 2}]}}
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", **full}, "s.toml")
    assert "disk-full needs the nodes' data on disks of a known size: set cluster.disk_size_mb" in str(err.value)
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "cluster": {"disk_size_mb": 8}, **full}, "s.toml")
    assert "cluster.disk_size_mb" in str(err.value), "too small for Kafka's own files"
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "cluster": {"disk_size_mb": 128, "volatile_disks": "unsynced"}, **full})
    assert "choose one" in str(err.value)
    ok = parse_scenario({"name": "x", "cluster": {"disk_size_mb": 128}, **full})
    (planned,) = plan(ok.faults, 30, 1)
    assert planned.params == {"free_mb": 2.0} and planned.kind == "disk-full"
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", "cluster": {"bootstrap_servers": "b:9092", "disk_size_mb": 128}, **full})
    assert "disk-full (not possible on an external cluster)" in str(err.value)


@dataclass
class SlowNode(FakeNode):
    kill_s: float = 0.0

    def kill(self) -> None:
        time.sleep(self.kill_s)

    def start(self) -> None:
        pass

    stop = pause = resume = start


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []

    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int:
        assert error is None, error
        self.events.append((type_, f))
        return len(self.events)


@pytest.mark.parametrize(("grace_s", "fired"), [(5.0, 2), (0.0, 1)])
def test_a_plan_running_late_still_fires_at_the_end_of_the_run(grace_s: float, fired: int) -> None:
    """The nemesis acts one fault at a time: a slow step (here a kill taking 0.6 s) pushes the next fault past
    the run's end. Stopping the run waits for what is left of the plan instead of dropping it (the node-links
    every-node-fault test once saw 2 of its 5 partition shapes)."""
    from kafka_chaos.faults.nemesis import Nemesis
    from kafka_chaos.faults.schedule import PlannedFault

    cluster = FakeCluster([FakeState(leader=1)], nodes={1: SlowNode(1, kill_s=0.6), 2: SlowNode(2)})
    planned = [PlannedFault(0.0, 0.1, "kill", [1]), PlannedFault(0.2, 0.1, "kill", [2])]
    recorder = ListRecorder()
    nemesis = Nemesis(cluster, "t", planned, recorder, seed=1)  # type: ignore[arg-type]
    nemesis.start()
    time.sleep(0.35)  # the run's duration: the second fault was due at 0.2 s, the first still killing
    nemesis.stop(wait_for_plan_s=grace_s)
    assert [f for t, f in recorder.events if t == "info"].count("kill") == fired
    assert ("info", "restart") in recorder.events, "whatever fired is healed"


def test_the_availability_model_reads_what_each_kind_does_from_the_registry() -> None:
    from kafka_chaos.reference_model import availability as model

    down, restarts, client_blocking = model.PROCESS_DOWN, model.RESTARTS, model.LINK_BLOCKING
    cutting, slowing = model.NODE_LINK_CUTTING, model.NODE_LINK_SLOWING
    assert down == {"kill", "power-loss", "disk-full", "stop", "pause", "corrupt", "disk-replace"}
    assert restarts == down - {"pause"}  # a frozen JVM resumes where it was
    # a broker name clients cannot resolve cuts them off from it as a blocked client link does
    assert client_blocking == {"timeout", "link-down", "reset_peer", "bandwidth", "dns-fail"}
    assert cutting == {"link-cut", "link-timeout", "link-reset", "link-flap"}
    assert slowing == {k for k, info in KINDS.items() if info.family == "node-link"} - cutting


def test_what_each_kind_does_is_the_registrys_and_every_reader_takes_it_from_there() -> None:
    from kafka_chaos.checker.conformance import CUTTING_LINK_FAULTS
    from kafka_chaos.reference_model import availability, verdicts

    effects = {k: info.effect for k, info in KINDS.items() if info.family == "process"}
    assert effects == {"kill": "crash", "power-loss": "power-loss", "disk-full": "disk-full", "stop": "stop",
                       "pause": "freeze", "corrupt": "corrupt", "disk-replace": "disk-replace"}
    assert all(info.effect is None for info in KINDS.values() if info.family != "process")
    # every link kind names what it does to a proxy; no other kind does
    assert {k for k, info in KINDS.items() if info.proxy} == {
        k for k, info in KINDS.items() if info.family in ("client-link", "node-link")}
    assert KINDS["link-cut"].proxy == "disable" and KINDS["link-down"].proxy == "disable"
    assert {"link-cut", "link-timeout"} == CUTTING_LINK_FAULTS  # a flap or a reset lets fetches through
    assert {"partition"} | {k for k in KINDS if k.startswith("link-") and k != "link-down"} == verdicts.NETWORK_FAULTS
    assert verdicts.PROCESS_FAULTS == availability.PROCESS_DOWN
    assert {"kill"} == verdicts.CRASHES and {"pause"} == verdicts.FREEZES and {"power-loss"} == verdicts.POWER_LOSSES
    assert {"stop"} == availability.STOPS and {"latency"} == availability.LINK_SLOWING


def test_a_link_kind_reaches_its_proxy_as_the_registry_says() -> None:
    class Proxies:
        brokers, controllers = [1, 2, 3], [1, 2, 3]

        def __init__(self) -> None:
            self.actions: list[str] = []

        def apply(self, action: str, links: Any, **_: Any) -> dict[str, Any]:
            self.actions.append(action)
            return {}

    proxies = Proxies()
    for kind in ("link-cut", "link-flap", "link-reset", "link-slicer"):
        NodeLinkFault(kind, proxies, {}).start([1])
    assert proxies.actions == ["disable", "flap", "reset_peer", "slicer"]
