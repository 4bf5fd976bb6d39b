"""The health timeline from state samples: counts per sample and the time spent below min ISR or offline."""

from __future__ import annotations

from kafka_chaos.checker.health import health_series, health_summary

S = 1_000_000_000


def sample(time_s: float, key: str, leader: int | None, isr: list[int] | None,
           replicas: list[int] | None = None) -> dict[str, object]:
    return {"time": int(time_s * S), "key": key, "leader": leader, "isr": isr,
            "replicas": replicas if replicas is not None else [1, 2, 3], "controller": 1}


SAMPLES = [
    sample(0, "t/0", 1, [1, 2, 3]), sample(0, "t/1", 2, [2, 3, 1]),
    sample(2, "t/0", 1, [1, 2]), sample(2, "t/1", 2, [2, 3, 1]),          # one under-replicated
    sample(5, "t/0", 1, [1]), sample(5, "t/1", None, [2]),                # both below min ISR 2, one offline
    sample(6, "t/0", 1, [1, 2, 3]), sample(6, "t/1", None, None, None),   # t/1 unreadable at 6 s
    sample(9, "t/0", 1, [1, 2, 3]), sample(9, "t/1", 2, [2, 3, 1]),
]


def test_counts_per_sample_time() -> None:
    series = health_series(SAMPLES, min_insync=2)
    assert [(p["under_replicated"], p["under_min_isr"], p["offline"], p["unknown"]) for p in series] == [
        (0, 0, 0, 0), (1, 0, 0, 0), (2, 2, 1, 0), (0, 0, 0, 1), (0, 0, 0, 0)]


def test_seconds_under_min_isr_and_offline_hold_until_the_next_sample() -> None:
    summary = health_summary(SAMPLES, min_insync=2, end_time=10 * S)
    assert summary is not None
    assert summary["under_replicated_s"] == 4.0  # 2 s → 6 s
    assert summary["under_min_isr_s"] == 1.0 and summary["offline_s"] == 1.0  # 5 s → 6 s
    assert summary["controllers"] == [1]


def test_no_samples_no_health() -> None:
    assert health_summary([], 2) is None and health_summary(None, 2) is None


def test_consumer_lag_leaves_out_the_final_drain(tmp_path) -> None:
    """The drain reads the whole log at the end: its reads measure the run's length, not consumer lag."""
    from checker_histories import History, K

    from kafka_chaos.checker import check_run

    h = History()
    h.send(0, K, 1, 0)
    h.poll(1, {K: [(0, 1)]})  # a consumer keeping up
    h.send(0, K, 2, 1)
    h.time += 30 * S  # a long run with nothing read
    h.event("harness", "info", "drain-start", None)
    h.poll(2, {K: [(0, 1)]})  # the drain's first poll: 30 s behind the acknowledged offset 1
    h.poll(2, {K: [(1, 2)]})
    h.drain()
    results = check_run(h.write(tmp_path / "run")).to_json_dict()
    lag = results["stats"]["realtime_lag"]
    assert lag["max_ns"] < S, lag  # without the drain-start cut it would be ~30 s
    assert results["run"]["drain_start"] is not None
