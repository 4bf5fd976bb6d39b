"""End to end with the real reference model: the configuration and the faults in the history decide
whether an anomaly is a violation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from checker_histories import History, K

from kafka_chaos.checker import check_run
from kafka_chaos.checker.verdicts import INCOMPLETE_UNSEEN

pytest.importorskip("kafka_chaos.reference_model.verdicts")


def scenario(acks: str) -> dict[str, Any]:
    return {
        "topic": {"replication_factor": 3, "min_insync_replicas": 2},
        "workload": {"acks": acks, "idempotence": acks == "all"},
    }


def lost_write_run(tmp_path: Path, acks: str, *, kill: bool) -> dict[str, Any]:
    h = History(run_start=scenario(acks))
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    if kill:
        h.nemesis("kill", {"target": "leader", "nodes": [1]})
    h.send(0, K, 3, 2)
    h.poll(1, {K: [(0, 1)]})
    h.poll(2, {K: [(2, 3)]})
    if kill:
        h.nemesis("restart", {"nodes": [1]})
    h.drain()
    return check_run(h.write(tmp_path / f"{acks}-{kill}"), write=False).to_json_dict()


def test_acks_1_may_lose_a_write_when_the_leader_crashes(tmp_path: Path) -> None:
    r = lost_write_run(tmp_path, "1", kill=True)
    (lost,) = r["anomalies"]["lost-write"]
    assert lost["verdict"] == "permitted" and "acks=1" in lost["reason"]
    assert r["valid"] is False and not [v for v in r["violations"] if v["name"] == "lost-write"]


def test_acks_all_min_isr_2_loses_nothing_to_one_crash(tmp_path: Path) -> None:
    r = lost_write_run(tmp_path, "all", kill=True)
    (lost,) = r["anomalies"]["lost-write"]
    assert lost["verdict"] == "violation" and "acks=all" in lost["reason"]
    assert [v["name"] for v in r["violations"]] == ["lost-write", "unseen"]


def test_without_faults_any_loss_is_a_violation(tmp_path: Path) -> None:
    r = lost_write_run(tmp_path, "1", kill=False)
    assert r["anomalies"]["lost-write"][0]["verdict"] == "violation"


def test_unseen_in_an_incomplete_run_is_permitted(tmp_path: Path) -> None:
    h = History(run_start=scenario("all"))
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.poll(1, {K: [(0, 1)]})
    h.drain(ok=False)
    r = check_run(h.write(tmp_path), write=False).to_json_dict()
    (unseen,) = r["anomalies"]["unseen"]
    assert r["complete"] is False
    assert unseen["verdict"] == "permitted" and unseen["reason"] == INCOMPLETE_UNSEEN
    assert r["violations"] == []


def test_state_samples_feed_conformance(tmp_path: Path) -> None:
    pytest.importorskip("kafka_chaos.checker.conformance")
    h = History(run_start=scenario("all"))
    h.send(0, K, 1, 0)
    h.poll(1, {K: [(0, 1)]})
    h.drain()
    run = h.write(tmp_path)
    sample = {"key": K, "leader": 1, "leader_epoch": 3, "replicas": [1, 2, 3], "isr": [1, 2, 3], "elr": [],
              "last_known_elr": [], "hw": 1, "controller": 4}  # fmt: skip
    (run / "state.jsonl").write_text(
        "".join(json.dumps({"time": t, **sample}) + "\n" for t in (500, 1500, 2500)) + '{"time": 30'
    )
    r = check_run(run, write=False).to_json_dict()
    assert r["conformance"]["anomaly_counts"] == {} and r["violations"] == []
