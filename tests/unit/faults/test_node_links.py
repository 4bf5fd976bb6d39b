"""Links between nodes: which directed links a selector names, the proxies a cluster gets, the
scenario's validation, the plan's parameters, and how the models read link faults. No cluster needed."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.checker.availability import availability
from kafka_chaos.cluster.node_links import Link, LinkProxies, proxy_name
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.node_links import LinkSelectorError, links_of
from kafka_chaos.faults.registry import KINDS, heal_of
from kafka_chaos.faults.schedule import plan
from kafka_chaos.faults.windows import FaultWindow, FaultWindows
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.reference_model.availability import (
    TimedFault,
    expected_unavailability,
    impaired_by,
    node_link_blocked,
    predict,
)
from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.verdicts import FaultSummary as VerdictFaults

COMBINED = ([1, 2, 3], [1, 2, 3])
DEDICATED = ([1, 2, 3], [101, 102, 103])


def named(links: list[Link]) -> list[str]:
    return [proxy_name(link) for link in links]


def test_replication_links_of_a_follower_one_way_and_both_ways() -> None:
    assert named(links_of("replication", [3], *COMBINED, "one-way")) == ["3-to-1-internal", "3-to-2-internal"]
    assert named(links_of("replication", [3], *COMBINED)) == [
        "1-to-3-internal", "2-to-3-internal", "3-to-1-internal", "3-to-2-internal"]


def test_controller_and_quorum_links() -> None:
    # a broker of a cluster with dedicated controllers: its connections to each controller
    assert named(links_of("controller", [2], *DEDICATED, "one-way")) == [
        "2-to-101-controller", "2-to-102-controller", "2-to-103-controller"]
    assert links_of("controller", [2], *DEDICATED) == links_of("controller", [2], *DEDICATED, "one-way"), \
        "controllers open no connection to a broker"
    # a combined node: the other voters, both ways
    assert named(links_of("controller", [1], *COMBINED)) == [
        "1-to-2-controller", "1-to-3-controller", "2-to-1-controller", "3-to-1-controller"]
    quorum = links_of("quorum", [], *DEDICATED)
    assert len(quorum) == 6 and {link.listener for link in quorum} == {"controller"}
    assert all(link.source >= 101 and link.dest >= 101 for link in quorum)


def test_pairs_take_every_listener_of_the_destination() -> None:
    assert named(links_of([[3, 1]], [], *COMBINED, "one-way")) == ["3-to-1-controller", "3-to-1-internal"]
    assert named(links_of([[3, 101]], [], *DEDICATED, "one-way")) == ["3-to-101-controller"]
    assert named(links_of([[3, 101]], [], *DEDICATED)) == ["3-to-101-controller"], "a controller never dials a broker"
    assert named(links_of([[101, 102]], [], *DEDICATED)) == ["101-to-102-controller", "102-to-101-controller"]


@pytest.mark.parametrize(("selector", "targets", "says"), [
    ([[1, 9]], [], "nodes [9] the cluster does not have"),
    ([[2, 2]], [], "no link to itself"),
    ([[1, 2, 3]], [], "a link is [from, to]"),
    ("replication", [101], "controllers only"),
    ("sideways", [1], "unknown link selector"),
])
def test_selectors_that_name_what_the_cluster_lacks(selector: Any, targets: list[int], says: str) -> None:
    with pytest.raises(LinkSelectorError, match=says.replace("[", r"\[").replace("]", r"\]")):
        links_of(selector, targets, *DEDICATED)


def test_every_directed_link_has_its_own_proxy() -> None:
    class FakeCluster:
        spec = ClusterSpec(nodes=3, link_proxies=True)
        run_id = "t"

    proxies = LinkProxies(FakeCluster())  # type: ignore[arg-type]
    links = proxies.all_links()
    # combined nodes: each of 3 nodes reaches 2 peers on 2 listeners
    assert len(links) == 12 and len(set(named(links))) == 12
    assert proxies.port(2, "internal") == 20002 and proxies.port(2, "controller") == 21002


def test_link_kinds_are_registered_with_one_heal_and_need_proxies() -> None:
    link_kinds = [k for k, info in KINDS.items() if info.family == "node-link"]
    assert set(link_kinds) == {"link-latency", "link-bandwidth", "link-timeout", "link-reset", "link-slicer",
                               "link-cut", "link-flap"}
    assert {heal_of(k) for k in link_kinds} == {"heal-links"}
    assert all("link-proxies" in KINDS[k].needs for k in link_kinds)


@pytest.mark.parametrize(("data", "says"), [
    ({"faults": {"schedule": [{"kind": "link-latency"}]}}, "need cluster.link_proxies = true"),
    ({"cluster": {"link_proxies": True}, "faults": {"schedule": [{"kind": "link-cut", "links": [[1, 7]]}]}},
     "faults.schedule[0].links: link [1, 7] names nodes [7]"),
    ({"cluster": {"link_proxies": True}, "faults": {"schedule": [{"kind": "partition"}]}}, 'kind = "link-cut"'),
    ({"cluster": {"link_proxies": True}, "faults": {"schedule": [{"kind": "link-cut", "links": "sideways"}]}},
     "faults.schedule.0.links"),
    ({"cluster": {"link_proxies": True}, "faults": {"schedule": [{"kind": "link-flap", "period_ms": 10}]}},
     "period_ms"),
])
def test_bad_link_scenarios_name_the_field(data: dict[str, Any], says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "t", **data})
    assert says in str(err.value)


def test_the_plan_carries_the_selector_and_the_kind_options() -> None:
    s = parse_scenario({"name": "t", "cluster": {"link_proxies": True}, "faults": {"schedule": [
        {"kind": "link-flap", "links": [[1, 2]], "direction": "one-way", "period_ms": 200, "at_s": 1},
        {"kind": "link-bandwidth", "links": "replication", "target": "follower", "rate_kbps": 32, "at_s": 2},
        {"kind": "link-latency", "links": "quorum", "latency_ms": 80, "jitter_ms": 20, "at_s": 3},
    ]}})
    flap, bandwidth, latency = plan(s.faults, 30, 1)
    assert flap.params == {"links": [[1, 2]], "direction": "one-way", "period_ms": 200}
    assert bandwidth.params == {"links": "replication", "direction": "both", "rate_kbps": 32}
    assert latency.params == {"links": "quorum", "direction": "both", "latency_ms": 80, "jitter_ms": 20}
    # the resolved scenario's entry loads again as the same fault
    again = parse_scenario({"name": "t", "cluster": {"link_proxies": True},
                            "faults": {"schedule": [flap.to_spec()]}})
    assert plan(again.faults, 30, 1)[0] == flap


CONFIG: dict[str, Any] = {
    "cluster": {"nodes": 3, "controllers": 0},
    "topic": {"min_insync_replicas": 2, "replication_factor": 3},
    "workload": {"acks": "all", "request_timeout_ms": 5000, "delivery_timeout_ms": 15000},
}


def test_the_availability_model_reads_link_faults_by_selector() -> None:
    topo = RunConfig.from_scenario(CONFIG)
    t = RunConfig.from_scenario(CONFIG).timeouts
    replication = {"selector": "replication", "links": [[1, 2, "internal"]]}
    controller = {"selector": "controller"}
    quorum = {"selector": "quorum"}
    # the leader's replication links cut: its ISR shrinks to itself, writes to it are not owed until the heal
    assert node_link_blocked("link-cut", (1,), replication) == {1}
    assert expected_unavailability(set(), topo, (1, 2, 3), leader=1, node_link_nodes={1}) == ("node-link-fault",)
    assert expected_unavailability(set(), topo, (1, 2, 3), leader=2, node_link_nodes={1}) == ()
    # cut from the controller: fenced like an isolated node; a cut quorum keeps every leader serving
    assert impaired_by("link-cut", (1,), controller) == {1} and node_link_blocked("link-cut", (1,), controller) == set()
    assert impaired_by("link-timeout", (1, 2, 3), quorum) == set()
    # slowing links never block: a bound from the start, through replica.lag.time.max.ms
    assert node_link_blocked("link-bandwidth", (1,), replication) == set()
    slow = predict(TimedFault("link-bandwidth", (3,), 10.0, 20.0, "replication"), t)
    assert slow.after == "start" and slow.within_s >= t.replica_lag_s
    after_quorum = predict(TimedFault("link-cut", (1, 2, 3), 10.0, 20.0, "quorum"), t)
    assert after_quorum.after == "heal" and after_quorum.expected == () and after_quorum.deadline_s is not None
    follower_cut = predict(TimedFault("link-cut", (3,), 10.0, 20.0, "replication"), t, hit_leader=False)
    assert follower_cut.after == "start" and follower_cut.within_s >= 1.5 * t.replica_lag_s
    fenced = predict(TimedFault("link-cut", (1,), 10.0, 20.0, "controller"), t, hit_leader=True)
    assert fenced.after == "start" and fenced.within_s >= t.session_s + t.request_timeout_s


def test_a_window_while_the_leaders_replication_links_are_cut_is_expected_not_a_finding() -> None:
    s = 1_000_000_000
    import pyarrow as pa

    from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA

    rows = [("k/0", i * 0.1, i * 0.1 + 0.01, "ok") for i in range(40)] + [("k/0", 4.05, 30.0, "ok")]
    rows += [("k/0", 30.1 + i * 0.1, 30.11 + i * 0.1, "ok") for i in range(50)]
    cols: dict[str, list[Any]] = {n: [] for n in SENDS_SCHEMA.names}
    for i, (key, inv, comp, type_) in enumerate(rows):
        for n, v in (("value", i), ("key", key), ("offset", i), ("process", i), ("op_index", i), ("type", type_),
                     ("invoke_time", int(inv * s)), ("complete_time", int(comp * s))):
            cols[n].append(v)
    sends = pa.table(cols, schema=SENDS_SCHEMA)
    polls = pa.table({n: [] for n in POLLS_SCHEMA.names}, schema=POLLS_SCHEMA)
    cut = FaultWindow("link-cut", {"nodes": [1], "selector": "replication"}, (1,), 4 * s, 25 * s, "heal-links", 0)
    samples = [{"time": 1 * s, "key": "k/0", "leader": 1, "replicas": [1, 2, 3], "isr": [1, 2, 3], "controller": 2}]
    a = availability(sends, polls, FaultWindows((cut,), 36 * s), config=CONFIG, state_samples=samples)
    (w,) = [w for w in a["windows"] if w["key"] == "k/0"]
    assert w["expected"] == ["node-link-fault"] and w["finding"] is None


def test_the_safety_model_reads_link_faults_as_network_faults() -> None:
    events = [
        {"process": "nemesis", "type": "invoke", "f": "link-cut", "value": {"target": "leader"}},
        {"process": "nemesis", "type": "info", "f": "link-cut", "value": {"nodes": [1], "selector": "controller"}},
        {"process": "nemesis", "type": "info", "f": "heal-links", "value": {"nodes": [1]}},
    ]
    faults = VerdictFaults.from_events(events)
    assert faults.partitioned and faults.replication_faults and faults.leader_affected is True


def test_the_report_labels_a_link_fault_with_its_links() -> None:
    from kafka_chaos.report.data import _target_label

    value = {"nodes": [3], "selector": "replication", "direction": "one-way", "rate": 4,
             "links": [[3, 1, "internal"], [3, 2, "internal"]]}
    assert _target_label(value).endswith("replication: 3→1 3→2")
    both_listeners = {"nodes": [1, 2], "selector": [[1, 2]], "links": [[1, 2, "internal"], [1, 2, "controller"]]}
    assert _target_label(both_listeners).endswith(" 1→2"), "one directed link, whatever its listeners"


def test_conformance_flags_a_cut_off_follower_that_stays_in_the_isr() -> None:
    """The model's rule with its tolerance: a follower that cannot fetch leaves the ISR within
    1.5 × replica.lag.time.max.ms (+ the samples' staleness) once the leader has new records for it."""
    import pyarrow as pa

    from kafka_chaos.checker.conformance import conformance
    from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA

    s = 1_000_000_000
    lag = 5 * s
    cut = FaultWindow("link-cut", {"nodes": [3], "selector": "replication",
                                   "links": [[3, 1, "internal"], [3, 2, "internal"]]}, (3,), 10 * s, 30 * s,
                      "heal-links", 0)
    sends = pa.table({"value": [1], "key": ["k/0"], "offset": [None], "process": [0], "op_index": [0],
                      "type": ["info"], "invoke_time": [11 * s], "complete_time": [None]}, schema=SENDS_SCHEMA)
    polls = pa.table({n: [] for n in POLLS_SCHEMA.names}, schema=POLLS_SCHEMA)

    def samples(isr_after: list[int]) -> list[dict[str, Any]]:
        rows = [{"time": t * s, "key": "k/0", "leader": 1, "leader_epoch": 4, "isr": [1, 2, 3]} for t in (5, 9, 12)]
        return rows + [{"time": t * s, "key": "k/0", "leader": 1, "leader_epoch": 4, "isr": isr_after}
                       for t in (18, 21, 25)]

    kept = conformance(samples([1, 2, 3]), sends, polls, None, faults=[cut], replica_lag_ns=lag)
    (found,) = kept["follower-kept-in-isr"]
    assert (found["follower"], found["leader"], found["time"]) == (3, 1, 21 * s), "18 s is within the tolerance"
    assert conformance(samples([1, 2]), sends, polls, None, faults=[cut], replica_lag_ns=lag)[
        "follower-kept-in-isr"] == []
    idle = sends.set_column(6, "invoke_time", pa.array([2 * s]))  # nothing new for the follower during the cut
    assert conformance(samples([1, 2, 3]), idle, polls, None, faults=[cut], replica_lag_ns=lag)[
        "follower-kept-in-isr"] == []
    slowed = FaultWindow("link-bandwidth", cut.value, (3,), cut.start, cut.end, "heal-links", 0)
    assert conformance(samples([1, 2, 3]), sends, polls, None, faults=[slowed], replica_lag_ns=lag)[
        "follower-kept-in-isr"] == [], "a slowed follower may keep up: no rule"


def test_conformance_flags_a_cut_off_follower_back_in_the_isr_before_the_heal() -> None:
    import pyarrow as pa

    from kafka_chaos.checker.conformance import conformance
    from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA

    s = 1_000_000_000
    cut = FaultWindow("link-timeout", {"nodes": [3], "links": [[3, 1, "internal"]]}, (3,), 10 * s, 30 * s,
                      "heal-links", 0)
    none = pa.table({n: [] for n in SENDS_SCHEMA.names}, schema=SENDS_SCHEMA)
    polls = pa.table({n: [] for n in POLLS_SCHEMA.names}, schema=POLLS_SCHEMA)

    def run(isrs: list[tuple[int, list[int]]], epoch_after: int = 4) -> list[dict[str, Any]]:
        rows = [{"time": 9 * s, "key": "k/0", "leader": 1, "leader_epoch": 4, "isr": [1, 2, 3]}]
        rows += [{"time": t * s, "key": "k/0", "leader": 1, "leader_epoch": epoch_after, "isr": isr} for t, isr in isrs]
        return conformance(rows, none, polls, None, faults=[cut])["follower-rejoined-while-cut"]

    (found,) = run([(16, [1, 2]), (20, [1, 2, 3]), (21, [1, 2, 3])])
    assert (found["follower"], found["left_at"], found["time"]) == (3, 16 * s, 20 * s)
    assert run([(16, [1, 2]), (17, [1, 2, 3]), (20, [1, 2])]) == [], "one stale sample within the staleness"
    assert run([(16, [1, 2]), (31, [1, 2, 3]), (32, [1, 2, 3])]) == [], "after the heal it may rejoin"
    assert run([(16, [1, 2]), (20, [1, 2, 3]), (21, [1, 2, 3])], epoch_after=5) == [], "another leader epoch"
