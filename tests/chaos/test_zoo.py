"""The known-bug zoo on real clusters: one bug on both sides in `make test` (the rest of the zoo runs nightly,
`kafka-chaos zoo`). KIP-966's last replica standing is the cheapest reliable row: one run per side, tens of
seconds each, and what each version does follows from Kafka's code, not from timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.harness.scenario import Scenario
from kafka_chaos.harness.zoo import load_zoo, run_zoo

from .conftest import SCENARIOS, nemesis, samples

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def test_kip_966_last_replica_standing_loses_on_4_0_and_not_with_elr(chaos_run, tmp_path: Path) -> None:
    """The zoo's KIP-966 row, one attempt per side. 4.0.1 (ELR off): the leader, the last ISR member once one
    follower died and the other shut down cleanly, loses power and leads again with what its disk kept; the
    acknowledged records it lost are gone (the model permits it, naming ELR off). 4.3.1 (ELR on): the cleanly
    stopped follower entered the ELR, the leader's unclean shutdown took it out of the ISR, and the partition waited
    for the ELR member, which led with every committed record: nothing lost, no violation."""
    (bug,) = load_zoo(["KIP-966-last-replica-standing"], SCENARIOS / "bugs")
    runs: dict[str, Any] = {}

    def runner(scenario: Scenario, out: Path) -> tuple[Path, dict[str, Any]]:
        result = chaos_run(scenario)
        runs[str(scenario.cluster.kafka_version)] = result
        return result.run_dir, result.results

    state = run_zoo([bug], out=tmp_path, attempts=1, runner=runner)
    row = state["bugs"][bug.bug.id]
    affected, fixed = runs["4.0.1"], runs["4.3.1"]
    for result in (affected, fixed):
        (loss,) = nemesis(result, "power-loss")
        assert nemesis(result, "stop")[0]["value"]["nodes"] != loss["value"]["nodes"]
    # the measurement, and the model's expectation beside it
    lost = {name: insts for name, insts in affected.results["anomalies"].items() if name in bug.bug.symptom.anomalies
            and insts}
    print(f"4.0.1: {row['affected']['runs'][0]['shown']}; 4.3.1: {row['fixed']['runs'][0]['shown']}")
    assert row["affected"]["reproduced"] == 1 and lost, affected.results["anomaly_counts"]
    assert all(i["verdict"] == "permitted" and "ELR off" in i["reason"] for insts in lost.values() for i in insts)
    assert row["fixed"]["reproduced"] == 0, fixed.results["anomaly_counts"]
    assert not affected.results["violations"] and not fixed.results["violations"]
    # how 4.3.1 avoided it: a leaderless partition with an empty ISR and the stopped follower in the ELR
    (stopped,) = nemesis(fixed, "stop")[0]["value"]["nodes"]
    assert any(s["leader"] is None and not s["isr"] and stopped in (s["elr"] or []) for s in samples(fixed)), \
        [(s["leader"], s["isr"], s["elr"]) for s in samples(fixed)][-12:]
