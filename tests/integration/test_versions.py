"""The oldest Kafka release kafka-chaos supports starts in KRaft mode and runs a clean control scenario."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kafka_chaos.versions import OLDEST_RELEASE

pytestmark = pytest.mark.cluster
SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def test_the_oldest_supported_release_runs_a_clean_control_scenario(chaos_run) -> None:
    result = chaos_run(SCENARIOS / "control.toml", seed=21, duration_s=10, cluster__kafka_version=OLDEST_RELEASE,
                       name=f"control-{OLDEST_RELEASE}")
    assert f"Kafka version: {OLDEST_RELEASE} " in (result.run_dir / "logs" / "node-1.log").read_text()
    events = [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]
    acked = {e["value"][0][2][1] for e in events if e["f"] == "send" and e["type"] == "ok"}
    read = {v for e in events if e["f"] == "poll" and e["type"] == "ok"
            for records in e["value"][0][1].values() for _, v in records}
    assert len(acked) > 500  # it really ran under load
    assert acked <= read, f"{len(acked - read)} acknowledged values never read"
    assert result.results["anomaly_counts"] == {} and result.results["valid"] is True
    assert result.results["complete"] is True
    # the observer read the partitions and the quorum from a release without DescribeTopicPartitions (KIP-966)
    samples = [json.loads(line) for line in (result.run_dir / "state.jsonl").read_text().splitlines()]
    assert samples and all(s["elr"] is None for s in samples)
    assert {s["controller"] for s in samples} & {1, 2, 3}
    assert all(s["leader"] in (1, 2, 3) and len(s["isr"]) == 3 for s in samples[-3:])
