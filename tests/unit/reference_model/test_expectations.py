"""The model's expectations beside what a run measured (reference_model.expectations)."""

from __future__ import annotations

from typing import Any

from kafka_chaos.reference_model.expectations import expectations

SEC = 1_000_000_000

# What scenarios/demo.toml resolves to (the parts the model reads)
DEMO: dict[str, Any] = {
    "name": "demo", "seed": 7, "duration_s": 45.0,
    "cluster": {"nodes": 3, "controllers": 0, "kafka_version": "4.3.1"},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2, "unclean_leader_election": False},
    "workload": {"producers": 2, "acks": "all", "idempotence": True},
}
DEMO_FAULTS = [
    {"f": "kill", "nodes": [1], "start": int(17.6 * SEC), "end": int(25.5 * SEC), "value": {"nodes": [1]}},
    {"f": "partition", "nodes": [2], "start": int(33.1 * SEC), "end": int(41.6 * SEC),
     "value": {"shape": "isolate", "nodes": [2]}},
]


def _results(windows: list[dict[str, Any]] | None = None, counts: dict[str, int] | None = None) -> dict[str, Any]:
    return {
        "complete": True, "anomaly_counts": counts or {}, "conformance": {},
        "health": {"under_min_isr_s": 0.0, "offline_s": 0.0},
        "availability": {"windows": windows if windows is not None else [
            {"key": None, "kind": "send", "start_s": 17.2, "end_s": 23.2},
            {"key": None, "kind": "send", "start_s": 32.4, "end_s": 48.3},
            {"key": "chaos/0", "kind": "send", "start_s": 17.2, "end_s": 80.0},  # per key: not the whole run's
        ]},
    }


def _row(ex: Any, aspect: str) -> Any:
    return next(r for r in ex.rows if r.aspect.startswith(aspect))


def test_the_demo_gets_every_aspect_filled() -> None:
    ex = expectations(DEMO, DEMO_FAULTS, _results())
    text = " ".join(f"{r.aspect} {r.predicted} {r.observed}" for r in ex.rows)
    assert "not available" not in text and "not measured" not in text
    assert "RF=3" in ex.config and "min.insync.replicas=2" in ex.config and "ELR on" in ex.config
    loss = _row(ex, "acknowledged writes lost")
    assert loss.predicted.startswith("no acknowledged write may be lost") and "0 lost write" in loss.observed
    kill, partition = _row(ex, "writes during kill [1]"), _row(ex, "writes during partition [2]")
    assert "17.2–23.2" in kill.observed and "32.4–48.3" in partition.observed  # each window laid to its fault
    assert "by " in kill.predicted and "by " in partition.predicted
    assert _row(ex, "ISR below min.insync.replicas").predicted.startswith("not forced")
    assert "conforms" in _row(ex, "who may lead").observed
    assert ex.mismatches == 0


def test_a_loss_the_model_forbids_is_a_mismatch() -> None:
    ex = expectations(DEMO, DEMO_FAULTS, _results(counts={"lost-write": 2}))
    loss = _row(ex, "acknowledged writes lost")
    assert loss.mismatch and "2 lost write" in loss.observed
    assert ex.mismatches == 1


def test_a_loss_the_model_permits_is_not_a_mismatch() -> None:
    acks1 = {**DEMO, "workload": {"acks": "1", "idempotence": False}}
    ex = expectations(acks1, DEMO_FAULTS, _results(counts={"lost-write": 2}))
    loss = _row(ex, "acknowledged writes lost")
    assert loss.predicted.startswith("acknowledged writes may be lost") and not loss.mismatch


def test_writes_back_after_the_models_deadline_is_a_mismatch() -> None:
    late = [{"key": None, "kind": "send", "start_s": 17.2, "end_s": 200.0}]
    ex = expectations(DEMO, DEMO_FAULTS, _results(late))
    assert _row(ex, "writes during kill [1]").mismatch
    assert "no window" in _row(ex, "writes during partition [2]").observed


def test_faults_open_together_let_writes_wait_for_the_heal() -> None:
    kills = [{"f": "kill", "nodes": [n], "start": (20 + 3 * n) * SEC, "end": 60 * SEC, "value": {"nodes": [n]}}
             for n in (1, 2, 3)]
    late = [{"key": None, "kind": "send", "start_s": 23.0, "end_s": 70.0}]
    ex = expectations(DEMO, kills, _results(late))
    rows = [r for r in ex.rows if r.aspect.startswith("writes during kill")]
    assert len(rows) == 3 and all("until the heal" in r.predicted for r in rows)
    assert not any(r.mismatch for r in rows)
    assert _row(ex, "ISR below min.insync.replicas").predicted.startswith("forced by the faults")
    assert _row(ex, "partitions without a leader").predicted.startswith("forced by the faults")


def test_without_results_the_prediction_stands_and_the_observed_side_says_so() -> None:
    ex = expectations(DEMO, DEMO_FAULTS, None)
    assert _row(ex, "acknowledged writes lost").predicted.startswith("no acknowledged write may be lost")
    assert "not measured" in _row(ex, "ISR below min.insync.replicas").observed
    assert "not checked" in _row(ex, "who may lead").observed
    assert ex.mismatches == 0


def test_a_run_without_faults_is_bounded_by_a_client_retry() -> None:
    ex = expectations(DEMO, [], _results([{"key": None, "kind": "send", "start_s": 5.0, "end_s": 500.0}]))
    row = _row(ex, "writes with no fault before")
    assert row.mismatch and "495.0 s" in row.observed
