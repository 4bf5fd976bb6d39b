"""Request faults without a cluster: the Kafka API table, the scenario's validation (bad input fails before any
container starts, with the fix named), the plan's parameters, the toxics a fault adds and removes, and the
firings read back from a proxy's log into the history."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kafka_chaos.cluster.kafka_toxic import firings, toxics
from kafka_chaos.cluster.node_links import Link
from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.kafka_apis import APIS, UnknownApi, api_key, api_keys, api_name
from kafka_chaos.faults.kinds import RequestFault
from kafka_chaos.faults.registry import KINDS, colour, heal_of, kinds_of
from kafka_chaos.faults.schedule import FaultsConfig, plan
from kafka_chaos.harness.scenario import parse_scenario

REQUEST_KINDS = ["request-delay", "response-delay", "request-hold", "request-drop", "response-drop",
                 "request-duplicate"]


def test_api_names_and_keys_are_kafkas() -> None:
    assert api_keys(["EndTxn", "Produce", 26, "27"]) == [0, 26, 27]
    assert [api_key(n) for n in ("Fetch", "AlterPartition", "WriteTxnMarkers", "endtxn")] == [1, 56, 27, 26]
    assert api_name(22) == "InitProducerId" and len(APIS) == len({k for k, _ in APIS.values()})
    with pytest.raises(UnknownApi, match="did you mean EndTxn"):
        api_key("EndTxm")
    with pytest.raises(UnknownApi, match="keys run from 0"):
        api_key(4000)


def test_request_kinds_are_registered_with_one_heal_a_colour_and_what_they_do() -> None:
    assert kinds_of("request") == frozenset(REQUEST_KINDS)
    for kind in REQUEST_KINDS:
        info = KINDS[kind]
        assert heal_of(kind) == "heal-requests" and colour(kind) != "#999999" and info.description
        assert info.frames == ("response" if kind.startswith("response-") else "request")
        assert not info.takes_down and not info.cuts_off
    assert len({colour(k) for k in KINDS}) == len(KINDS), "each kind its own colour on the timeline"
    assert KINDS["request-hold"].action == "hold" and KINDS["response-drop"].action == "drop"


def scenario(fault: dict[str, Any], **cluster: Any) -> dict[str, Any]:
    return {"name": "t", "cluster": cluster, "faults": {"schedule": [fault]}}


@pytest.mark.parametrize("data, says", [
    (scenario({"kind": "request-hold", "api": ["EndTxn"]}), "set cluster.toxiproxy = true"),
    (scenario({"kind": "request-hold", "api": ["EndTxm"]}, toxiproxy=True), "did you mean EndTxn"),
    (scenario({"kind": "request-drop"}, toxiproxy=True), 'needs api, the Kafka requests it acts on'),
    (scenario({"kind": "request-delay", "api": ["AlterPartition"]}, toxiproxy=True),
     "clients never send AlterPartition"),
    (scenario({"kind": "response-drop", "api": ["AlterPartition"], "links": "controller"}),
     "needs cluster.link_proxies = true"),
    (scenario({"kind": "response-drop", "api": ["AlterPartition"], "links": "replication"}, link_proxies=True),
     "no node sends AlterPartition there"),
    (scenario({"kind": "request-delay", "api": ["Produce"], "links": "quorum"}, link_proxies=True,
              controllers=3), "no node sends Produce there"),
    (scenario({"kind": "request-drop", "api": ["Fetch"], "links": [[101, 2]], "direction": "one-way"},
              link_proxies=True, controllers=3), "names no proxied link"),
    (scenario({"kind": "request-drop", "api": ["Fetch"], "links": [[1, 9]]}, link_proxies=True), "faults.schedule[0]"),
    (scenario({"kind": "latency", "clients": [0]}, toxiproxy=True), "only request faults"),
    (scenario({"kind": "request-hold", "api": ["Fetch"], "links": "replication", "clients": [0]}, link_proxies=True),
     "travel on the client links only"),
    # the default queue workload: consumer 0, then 2 producer threads of 8 processes each (1-8, 9-16)
    (scenario({"kind": "request-drop", "api": ["Produce"], "clients": [1, 3]}, toxiproxy=True),
     "names processes [3] that own no client"),
    (scenario({"kind": "request-drop", "api": ["Produce"], "clients": [40]}, toxiproxy=True),
     "9: kafka-chaos-producer-p9"),
    ({"name": "t", "cluster": {"toxiproxy": True}, "faults": {"generator": {"kinds": ["request-hold"]}}},
     "faults.generator (request-hold) needs api"),
])
def test_bad_request_faults_fail_validation_naming_the_fix(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario(data)
    assert says in str(err.value)
    assert ScenarioError.exit_code == 2


def test_the_plan_keeps_links_only_when_given_and_loads_again() -> None:
    s = parse_scenario({"name": "t", "cluster": {"toxiproxy": True, "link_proxies": True}, "faults": {"schedule": [
        {"kind": "request-hold", "api": ["EndTxn"], "count": 1, "release_on_connect": True, "at_s": 1},
        {"kind": "response-delay", "api": [56], "links": "controller", "latency_ms": 300, "at_s": 2},
    ]}})
    hold, delay = plan(s.faults, 30, 1)
    assert hold.params == {"api": ["EndTxn"], "count": 1, "hold_ms": 0, "release_on_connect": True}
    assert delay.params == {"api": [56], "links": "controller", "direction": "both", "count": 0, "latency_ms": 300}
    again = FaultsConfig.from_plan([hold, delay])
    assert plan(again, 30, 1) == [hold, delay]


def test_release_after_reaches_the_toxic_by_key_and_is_checked_by_name() -> None:
    s = parse_scenario({"name": "t", "cluster": {"toxiproxy": True}, "faults": {"schedule": [
        {"kind": "request-hold", "api": ["EndTxn"], "count": 1, "release_after": ["EndTxn"],
         "release_after_count": 2, "at_s": 1}]}})
    (hold,) = plan(s.faults, 30, 1)
    assert hold.params["release_after"] == ["EndTxn"] and hold.params["release_after_count"] == 2
    assert plan(FaultsConfig.from_plan([hold]), 30, 1) == [hold]
    (only,) = toxics("request-hold", "request", "hold", [26], "broker-1", "t1", count=1, release_after=[26],
                     release_after_count=2)
    assert only[2]["release_after_api_keys"] == [26] and only[2]["release_after_count"] == 2
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "t", "cluster": {"toxiproxy": True}, "faults": {"schedule": [
            {"kind": "request-hold", "api": ["EndTxn"], "release_after": ["EndTxnn"], "at_s": 1}]}})
    assert "faults.schedule[0] (request-hold).release_after" in str(err.value)


def test_a_response_fault_tracks_requests_upstream_and_acts_downstream() -> None:
    (only,) = toxics("request-hold", "request", "hold", [26], "broker-1", "t1", hold_ms=500, count=1)
    assert only[0] == "upstream" and only[2]["action"] == "hold" and only[2]["delay_ms"] == 500
    track, act = toxics("response-drop", "response", "drop", [56], "2-to-101-controller", "t2")
    assert (track[0], track[2]["action"], track[2]["frames"]) == ("upstream", "track", "request")
    assert (act[0], act[2]["action"], act[2]["frames"]) == ("downstream", "drop", "response")
    assert track[2]["proxy"] == act[2]["proxy"] == "2-to-101-controller" and track[2]["fault"] == act[2]["fault"]


def log_line(**fields: Any) -> str:
    return json.dumps({"kafka_toxic": "fired", "kind": "request-hold", "fault": "t1", "proxy": "broker-1",
                       "frames": "request", "api_key": 26, "api_version": 3, "correlation_id": 6,
                       "client_id": "kafka-chaos-txn-p0", "held_from": 1000, "held_to": 4000, "released": "heal",
                       **fields})


def test_firings_are_the_fault_own_lines_of_the_log() -> None:
    logs = "\n".join([
        '{"level":"info","proxy":"broker-1","time":"2026-01-01T00:00:00Z","message":"Accepted client"}',
        log_line(held_from=2000, held_to=2500, correlation_id=9),
        log_line(fault="other"),
        "not json {",
        log_line(),
    ])
    got = firings(logs, "t1")
    assert [f["correlation_id"] for f in got] == [6, 9]
    assert got[0] == {"kind": "request-hold", "proxy": "broker-1", "frames": "request", "api_key": 26,
                      "api_version": 3, "correlation_id": 6, "client_id": "kafka-chaos-txn-p0",
                      "held_from_ms": 1000, "held_to_ms": 4000, "released": "heal"}


class FakeProxies:
    """Client proxies and link proxies at once: what was added and removed, and a log with firings."""

    def __init__(self) -> None:
        self.brokers, self.controllers = {1, 2, 3}, {1, 2, 3}
        self.calls: list[tuple[str, Any, str, str]] = []
        self.fired: dict[str, list[str]] = {}

    def add_toxic(self, where: Any, name: str, type_: str, stream: str, attributes: dict[str, Any]) -> None:
        assert type_ == "kafka"
        self.calls.append(("add", where, name, stream))
        self.fired.setdefault(attributes["fault"], []).append(
            log_line(fault=attributes["fault"], proxy=attributes["proxy"], kind=attributes["kind"]))

    def remove_toxic(self, where: Any, name: str) -> None:
        self.calls.append(("remove", where, name, ""))

    def all_lines(self) -> str:
        return "\n".join(line for lines in self.fired.values() for line in lines)

    def logs(self, node: int, since_s: float | None = None) -> str:
        return "\n".join(line for lines in self.fired.values() for line in lines
                         if json.loads(line)["proxy"].startswith(f"{node}-to-"))


def test_a_request_fault_on_client_links_adds_one_toxic_per_broker_and_reads_its_firings() -> None:
    proxies = FakeProxies()
    fault = RequestFault("request-hold", proxies, None, {"api": ["EndTxn"], "count": 1},  # type: ignore[arg-type]
                         client_logs=lambda since: proxies.all_lines())
    value = fault.start([1, 3])
    assert value["proxies"] == ["broker-1", "broker-3"] and value["api_keys"] == [26] and value["count"] == 1
    assert [(c[0], c[1], c[3]) for c in proxies.calls] == [("add", 1, "upstream"), ("add", 3, "upstream")]
    healed = fault.heal([1, 3])
    assert [c[:3] for c in proxies.calls[2:]] == [("remove", w, n) for _, w, n, _ in proxies.calls[:2]]
    assert healed["fired"] == 2 and {f["proxy"] for f in fault.fired} == {"broker-1", "broker-3"}
    assert all(f["api"] == "EndTxn" for f in fault.fired)


def test_a_response_fault_on_links_between_nodes_tracks_then_acts_and_removes_in_that_order() -> None:
    proxies = FakeProxies()
    fault = RequestFault("response-drop", None, proxies, {"api": ["AlterPartition"], "links": [[2, 1]],
                                                          "direction": "one-way"})
    value = fault.start([1])
    assert value["links"] == [[2, 1, "controller"], [2, 1, "internal"]] and value["nodes"] == [1, 2]
    link = Link(2, 1, "controller")
    assert [(c[1], c[3]) for c in proxies.calls[:2]] == [(link, "upstream"), (link, "downstream")]
    fault.heal([1])
    removed = [c for c in proxies.calls if c[0] == "remove"]
    assert [c[2] for c in removed] == [c[2] for c in proxies.calls if c[0] == "add"]
    assert len(fault.fired) == 4 and {f["proxy"] for f in fault.fired} == {"2-to-1-controller", "2-to-1-internal"}


def test_clients_reach_both_toxics_as_the_client_ids_of_those_processes() -> None:
    s = parse_scenario({"name": "t", "cluster": {"toxiproxy": True}, "workload": {"kind": "txn", "producers": 2},
                        "faults": {"schedule": [{"kind": "response-drop", "api": ["EndTxn"], "clients": [1]}]}})
    (drop,) = plan(s.faults, 30, 1)
    assert drop.params["clients"] == [1] and plan(FaultsConfig.from_plan([drop]), 30, 1) == [drop]
    proxies = FakeProxies()
    owners = {0: ["kafka-chaos-txn-p0"], 1: ["kafka-chaos-txn-p1", "kafka-chaos-txn-consumer-p1"]}
    fault = RequestFault("response-drop", proxies, None, drop.params,  # type: ignore[arg-type]
                         client_logs=lambda since: proxies.all_lines(), clients_of=owners)
    added: list[dict[str, Any]] = []
    proxies.add_toxic = lambda where, name, type_, stream, attributes: added.append(attributes)  # type: ignore
    value = fault.start([2])
    assert value["clients"] == [1] and value["client_ids"] == owners[1]
    assert [(a["action"], a["client_ids"]) for a in added] == [("track", owners[1]), ("drop", owners[1])]
    everyone = RequestFault("request-drop", proxies, None, {"api": [26]}, clients_of=owners)  # type: ignore[arg-type]
    everyone.start([2])
    assert added[-1]["client_ids"] == [] and "clients" not in everyone.start([2])
    with pytest.raises(ValueError, match=r"clients \[5\] own no client"):
        RequestFault("request-drop", proxies, None, {"api": [26], "clients": [5]},  # type: ignore[arg-type]
                     clients_of=owners).start([2])


def test_a_firing_names_the_client_and_the_process_it_belongs_to() -> None:
    proxies = FakeProxies()
    fault = RequestFault("request-hold", proxies, None, {"api": ["EndTxn"]},  # type: ignore[arg-type]
                         client_logs=lambda since: "\n".join([log_line(fault=fault._token),
                                                               log_line(fault=fault._token, client_id="")]))
    fault.start([1])
    fault.heal([1])
    assert [(f["client_id"], f["client"]) for f in fault.fired] == [("kafka-chaos-txn-p0", 0), ("", None)]


def test_a_request_fault_without_its_proxies_says_which_to_turn_on() -> None:
    with pytest.raises(RuntimeError, match=r"cluster\.toxiproxy = true"):
        RequestFault("request-drop", None, None, {"api": [0]}).start([1])
    with pytest.raises(RuntimeError, match=r"cluster\.link_proxies = true"):
        RequestFault("request-drop", None, None, {"api": [0], "links": "replication"}).start([1])


def test_the_report_labels_a_request_fault_with_its_apis() -> None:
    from kafka_chaos.report.data import _target_label

    value = {"nodes": [1, 2, 3], "api": ["EndTxn"], "api_keys": [26], "proxies": ["broker-1"], "count": 1}
    assert _target_label(value) == "n1,n2,n3 api=EndTxn"
