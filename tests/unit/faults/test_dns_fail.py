"""dns-fail without a cluster: its registry entry, the scenario's validation (bad input fails before any
container starts, with the fix named), the plan's parameters, and what the nemesis records of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pytest

from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.registry import KINDS, colour, heal_of, healed_by, kinds_of
from kafka_chaos.faults.schedule import FaultsConfig, plan
from kafka_chaos.harness.scenario import parse_scenario


def test_dns_fail_is_a_client_name_kind_with_its_own_heal_and_colour() -> None:
    info = KINDS["dns-fail"]
    assert kinds_of("client-name") == {"dns-fail"}
    assert heal_of("dns-fail") == "dns-restore" and healed_by("dns-restore") == {"dns-fail"}
    assert info.needs == {"host-names"} and info.brokers_only
    assert not info.takes_down and not info.cuts_off, "the cluster itself never looks the name up"
    assert colour("dns-fail") not in {colour(k) for k in KINDS if k != "dns-fail"}


def test_a_scenario_with_dns_fail_gives_the_brokers_names_and_plans_the_mode() -> None:
    s = parse_scenario({"name": "t", "faults": {"schedule": [
        {"kind": "dns-fail", "target": "leader", "mode": "dead-address", "at_s": 2, "duration_s": 5},
        {"kind": "dns-fail", "target": "follower", "at_s": 8},
    ]}})
    assert s.cluster.host_names
    dead, unresolvable = plan(s.faults, 20, 0)
    assert (dead.kind, dead.target, dead.params) == ("dns-fail", "leader", {"mode": "dead-address"})
    assert unresolvable.params == {"mode": "unresolvable"}
    assert plan(FaultsConfig.from_plan([dead, unresolvable]), 20, 0) == [dead, unresolvable]
    generated = plan(FaultsConfig.model_validate({"generator": {"kinds": ["dns-fail"], "mode": "dead-address"}}),
                     10, 0)
    assert generated and all(p.params == {"mode": "dead-address"} for p in generated)
    assert not parse_scenario({"name": "t"}).cluster.host_names, "no dns-fail: clients keep 127.0.0.1"


@pytest.mark.parametrize("data, says", [
    ({"name": "t", "cluster": {"bootstrap_servers": "b:9092"}, "faults": {"schedule": [{"kind": "dns-fail"}]}},
     "Remove bootstrap_servers to run it on a cluster kafka-chaos starts"),
    ({"name": "t", "cluster": {"bootstrap_servers": "b:9092"},
      "faults": {"generator": {"kinds": ["kill", "dns-fail"]}}}, "an external cluster's brokers advertise names"),
    ({"name": "t", "faults": {"schedule": [{"kind": "dns-fail", "mode": "slow"}]}},
     "'unresolvable' or 'dead-address'"),
])
def test_bad_dns_faults_fail_validation_naming_the_fix(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    assert says in str(err.value)
    assert err.value.exit_code == 2


@dataclass
class NamedNode:
    node_id: int
    is_broker: bool = True

    def running(self) -> bool:
        return True


@dataclass
class NamedCluster:
    """What the nemesis needs of a cluster with host names."""

    nodes: dict[int, NamedNode] = field(default_factory=lambda: {i: NamedNode(i) for i in (1, 2, 3)}
                                        | {101: NamedNode(101, is_broker=False)})
    broken: dict[int, str] = field(default_factory=dict)
    toxiproxy: None = None

    def partition_states(self, topic: str) -> list[Any]:
        return [type("S", (), {"leader": 2, "replicas": (1, 2, 3), "isr": (1, 2, 3)})()]

    def controller_id(self) -> int | None:
        return 101

    def break_host_name(self, node_id: int, mode: str) -> dict[str, str | None]:
        self.broken[node_id] = mode
        return {f"kc-t-broker-{node_id}": "127.0.0.2" if mode == "dead-address" else None}

    def restore_host_name(self, node_id: int) -> dict[str, str]:
        self.broken.pop(node_id, None)
        return {f"kc-t-broker-{node_id}": "127.0.0.1"}


class Events:
    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int:
        assert error is None, error
        self.rows.append({"process": process, "type": type_, "f": f, "value": value})
        return len(self.rows)


def test_the_nemesis_records_the_names_it_broke_and_restored() -> None:
    from kafka_chaos.faults.nemesis import Nemesis
    from kafka_chaos.faults.schedule import PlannedFault

    cluster, events = NamedCluster(), Events()
    planned = [PlannedFault(0.0, 0.05, "dns-fail", "leader", params={"mode": "dead-address"}),
               PlannedFault(0.0, 0.05, "dns-fail", "all", params={"mode": "unresolvable"})]
    nemesis = Nemesis(cluster, "t", planned, events, seed=1)  # type: ignore[arg-type]
    nemesis.start()
    nemesis.stop(wait_for_plan_s=5)
    infos = [(r["f"], r["value"]) for r in events.rows if r["type"] == "info"]
    started = [v for f, v in infos if f == "dns-fail"]
    assert started[0]["nodes"] == [2] and started[0]["mode"] == "dead-address"
    assert started[0]["names"] == {"kc-t-broker-2": "127.0.0.2"}
    assert started[1]["nodes"] == [1, 2, 3], "brokers only: a controller has no client name"
    assert started[1]["names"] == {f"kc-t-broker-{n}": None for n in (1, 2, 3)}
    from confluent_kafka import libversion

    # no client named: the in-process librdkafka, the default workload's
    assert started[0]["librdkafka"] == started[0]["version"] == libversion()[0], "for the model's verdict"
    assert started[0]["client"] == "librdkafka"
    restored = [v for f, v in infos if f == "dns-restore"]
    assert len(restored) == 2 and {"kc-t-broker-2": "127.0.0.1"} in [r["names"] for r in restored]
    assert cluster.broken == {}, "every name restored"


@pytest.mark.parametrize("workload, client, version, librdkafka", [
    ({"client_version": "2.2.0"}, "librdkafka", "2.2.0", "2.2.0"),
    ({"client": "java", "client_version": "4.1.0"}, "java", "4.1.0", None),
])
def test_dns_fail_records_the_client_the_run_runs_not_the_installed_one(
        workload: dict[str, Any], client: str, version: str, librdkafka: str | None) -> None:
    """The model's verdict on a dns-fail depends on the clients' librdkafka (librdkafka#4427 is 2.1-2.2's): a
    pinned worker's release, not the confluent-kafka installed with kafka-chaos, and none for another client."""
    from kafka_chaos.faults.nemesis import ScheduledNemesis
    from kafka_chaos.faults.schedule import PlannedFault

    scenario = parse_scenario({"name": "t", "workload": workload})
    events = Events()
    ctx = SimpleNamespace(cluster=NamedCluster(), topic="t", history=events, scenario=scenario)
    nemesis = ScheduledNemesis([PlannedFault(0.0, 0.05, "dns-fail", "leader", params={"mode": "unresolvable"})])
    nemesis.start(ctx)  # type: ignore[arg-type]
    assert nemesis._nemesis is not None
    nemesis._nemesis.stop(wait_for_plan_s=5)
    (started,) = [r["value"] for r in events.rows if r["f"] == "dns-fail" and r["type"] == "info"]
    assert (started["client"], started["version"], started["librdkafka"]) == (client, version, librdkafka)
