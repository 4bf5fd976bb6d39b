"""Request faults on a real cluster: the kafka toxic (images/toxiproxy/kafkatoxic) on the client proxies holds
one kind of Kafka request, and the history records each firing (process `harness`, f `frame-fault`) beside the
fault's window. Asserts on the history only."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kafka_chaos.faults.nemesis import FRAME_FAULT

from .conftest import events, frame_faults, nemesis

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]

HOLD_END_TXN: dict[str, Any] = {
    "name": "request-hold-endtxn",
    "duration_s": 20,
    "cluster": {"nodes": 3, "toxiproxy": True},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    # two transactional producers: processes 0 and 1 (workloads.clients numbers them before the run)
    "workload": {"kind": "txn", "producers": 2, "consumers": 1, "txn_keys": 2},
    # every broker's client proxy holds the first EndTxn of process 1's client until the heal; only the
    # transaction coordinator of its transactional.id sees any, and process 0's EndTxns pass
    "faults": {"schedule": [{"kind": "request-hold", "api": ["EndTxn"], "target": "all", "count": 1, "at_s": 4,
                             "duration_s": 6, "clients": [1]}]},
}


def test_a_held_end_txn_is_delivered_at_the_heal_and_recorded(chaos_run: Any) -> None:
    result = chaos_run(HOLD_END_TXN)
    (fault,) = nemesis(result, "request-hold")
    (heal,) = nemesis(result, "heal-requests")
    assert fault["value"]["api"] == ["EndTxn"] and fault["value"]["api_keys"] == [26]
    assert sorted(fault["value"]["proxies"]) == ["broker-1", "broker-2", "broker-3"]
    assert fault["value"]["clients"] == [1]
    assert fault["value"]["client_ids"] == ["kafka-chaos-txn-p1", "kafka-chaos-txn-consumer-p1"]
    (held,) = frame_faults(result)  # count = 1, and EndTxn goes to one coordinator
    assert heal["value"]["fired"] == 1 and heal["value"]["fault"] == fault["value"]["fault"]
    assert held["api"] == "EndTxn" and held["api_key"] == 26 and held["kind"] == "request-hold"
    assert held["client_id"] == "kafka-chaos-txn-p1" and held["client"] == 1, "only the named process's client"
    assert held["released"] == "heal", "no duration and no release_on_connect: only the heal lets it go"
    assert isinstance(held["correlation_id"], int) and held["proxy"] in fault["value"]["proxies"]
    assert held["held_from_ms"] <= held["held_to_ms"]
    # recorded after the heal took effect, as the frames were delivered when the toxic went
    (record,) = [e for e in events(result) if e["f"] == FRAME_FAULT]
    assert record["index"] > heal["index"]
    txns = [e for e in events(result) if e["f"] == "txn" and e["type"] in ("ok", "fail", "info")]
    assert any(e["time"] > heal["time"] for e in txns), "transactions went on after the heal"
    assert any(e["process"] != 1 and e["type"] == "ok" and fault["time"] < e["time"] < heal["time"] for e in txns), \
        "the other producer's EndTxns passed: it committed while process 1's was held"


DELAY_FETCH: dict[str, Any] = {
    "name": "request-delay-fetch",
    "duration_s": 15,
    "cluster": {"nodes": 3, "link_proxies": True},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    # the follower's replica fetches (and the others' from it) each held 200 ms, the first 5 on each link
    "faults": {"schedule": [{"kind": "request-delay", "api": ["Fetch"], "links": "replication", "target": "follower",
                             "latency_ms": 200, "count": 5, "at_s": 3, "duration_s": 5}]},
}


def test_a_request_delay_on_replica_fetches_fires_on_the_links_between_nodes(chaos_run: Any) -> None:
    result = chaos_run(DELAY_FETCH)
    (fault,) = nemesis(result, "request-delay")
    (heal,) = nemesis(result, "heal-requests")
    proxies = set(fault["value"]["proxies"])
    assert proxies and all(p.endswith("-internal") for p in proxies)
    firings = frame_faults(result)
    assert firings and heal["value"]["fired"] == len(firings)
    assert {f["api"] for f in firings} == {"Fetch"} and {f["released"] for f in firings} == {"time"}
    assert {f["proxy"] for f in firings} <= proxies
    per_proxy = Counter(f["proxy"] for f in firings)
    assert max(per_proxy.values()) <= 5, per_proxy  # count is per proxy
    assert len({(f["proxy"], f["correlation_id"]) for f in firings}) == len(firings)
