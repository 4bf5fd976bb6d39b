"""The known-bug zoo on real clusters: one Kafka bug and one client bug on both sides in `make test` (the rest of
the zoo runs nightly, `kafka-chaos zoo`). KIP-966's last replica standing and librdkafka #5213 are the cheapest
reliable rows: one run per side, tens of seconds each, and what each version does follows from its code, not from
timing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.harness.scenario import Scenario
from kafka_chaos.harness.zoo import BugFile, load_zoo, run_zoo

from .conftest import SCENARIOS, events, nemesis, samples

pytestmark = [pytest.mark.cluster, pytest.mark.chaos]


def one_run_per_side(chaos_run: Any, bug_id: str, out: Path) -> tuple[BugFile, dict[str, Any], Any, Any]:
    """Run a zoo row once per side through the pool's cluster: the bug, its zoo row, the affected side's RunResult
    and the fixed side's (run_zoo runs the sides in that order)."""
    (bug,) = load_zoo([bug_id], SCENARIOS / "bugs")
    results: list[Any] = []

    def runner(scenario: Scenario, _out: Path) -> tuple[Path, dict[str, Any]]:
        result = chaos_run(scenario)
        results.append(result)
        return result.run_dir, result.results

    state = run_zoo([bug], out=out, attempts=1, runner=runner)
    affected, fixed = results
    return bug, state["bugs"][bug.bug.id], affected, fixed


def test_kip_966_last_replica_standing_loses_on_4_0_and_not_with_elr(chaos_run, tmp_path: Path) -> None:
    """The zoo's KIP-966 row, one attempt per side. 4.0.1 (ELR off): the leader, the last ISR member once one
    follower died and the other shut down cleanly, loses power and leads again with what its disk kept; the
    acknowledged records it lost are gone (the model permits it, naming ELR off). 4.3.1 (ELR on): the cleanly
    stopped follower entered the ELR, the leader's unclean shutdown took it out of the ISR, and the partition waited
    for the ELR member, which led with every committed record: nothing lost, no violation."""
    bug, row, affected, fixed = one_run_per_side(chaos_run, "KIP-966-last-replica-standing", tmp_path)
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


def test_librdkafka_5213_a_pinned_2_13_0_group_skips_a_record_and_2_13_2_does_not(chaos_run, tmp_path: Path) -> None:
    """The zoo's librdkafka #5213 row, one attempt per side: the pinned older client on a zoo row. A group consumer
    with end-of-partition events, closed and reopened every 5 s, resumes from what it committed. confluent-kafka
    2.13.0 (librdkafka 2.13.0) commits the end-of-partition event's offset + 1, so the next consumer skips one
    record or, when none was written yet, is reset to the start (rd_kafka_q_serve_rkmessages); 2.13.2 moves the
    position only for fetched records. No broker fault: what each release does follows from its code."""
    bug, row, affected, fixed = one_run_per_side(chaos_run, "librdkafka-5213-consume-eof-skip", tmp_path)
    for version, result in (("2.13.0", affected), ("2.13.2", fixed)):
        (start,) = [e for e in events(result) if e["process"] == "harness" and e["f"] == "run-start"]
        assert start["value"]["client"] == {"client": "librdkafka", "version": version, "in_process": False}
    # the measurement, and the model's expectation beside it
    shown = {name: insts for name, insts in affected.results["anomalies"].items()
             if name in bug.bug.symptom.anomalies and insts}
    print(f"2.13.0: {row['affected']['runs'][0]['shown']}; 2.13.2: {row['fixed']['runs'][0]['shown']}")
    assert row["affected"]["reproduced"] == 1 and shown, affected.results["anomaly_counts"]
    assert all(i["verdict"] == "known-defect" and i["defect"] == "confluentinc/librdkafka#5213"
               and i["fixed_in"] == "librdkafka 2.13.2" for insts in shown.values() for i in insts)
    assert row["fixed"]["reproduced"] == 0, fixed.results["anomaly_counts"]
    assert not affected.results["violations"] and not fixed.results["violations"]
