"""Availability windows on hand-made sends/polls tables: overlaps, windows at the start and the end, several
keys; the reference model's prediction and finding; `[expect] max_unavailable_s`."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import numpy as np
import orjson
import pyarrow as pa
import pytest
from checker_histories import K1, History, K
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_chaos.checker import check_run
from kafka_chaos.checker.availability import (
    FINDING,
    MERGE_WITHIN_NS,
    availability,
    expect_violations,
    poll_gaps,
    poll_gaps_of,
    send_gaps,
    send_gaps_of,
)
from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.cluster.settings import fast_test_settings
from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.windows import FaultWindow, FaultWindows
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.reference_model.availability import expected_unavailability
from kafka_chaos.reference_model.config import RunConfig

S = 1_000_000_000
CONFIG: dict[str, Any] = {
    "cluster": {"nodes": 3, "controllers": 0},
    "topic": {"min_insync_replicas": 2, "replication_factor": 3},
    "workload": {"acks": "all", "request_timeout_ms": 5000, "delivery_timeout_ms": 15000},
    "kafka_settings": fast_test_settings(3),
}


def sends(*rows: tuple[str, float, float | None, str]) -> pa.Table:
    """(key, invoke_s, complete_s or None, type) per send."""
    cols: dict[str, list[Any]] = {n: [] for n in SENDS_SCHEMA.names}
    for i, (key, inv, comp, type_) in enumerate(rows):
        cols["value"].append(i)
        cols["key"].append(key)
        cols["offset"].append(i if type_ == "ok" else None)
        cols["process"].append(i)
        cols["op_index"].append(i)
        cols["type"].append(type_)
        cols["invoke_time"].append(int(inv * S))
        cols["complete_time"].append(None if comp is None else int(comp * S))
    return pa.table(cols, schema=SENDS_SCHEMA)


def polls(*rows: tuple[str, float]) -> pa.Table:
    cols: dict[str, list[Any]] = {n: [] for n in POLLS_SCHEMA.names}
    for i, (key, t) in enumerate(rows):
        for n, v in (("value", i), ("key", key), ("offset", i), ("process", 99), ("op_index", i),
                     ("type", "ok"), ("time", int(t * S))):
            cols[n].append(v)
    return pa.table(cols, schema=POLLS_SCHEMA)


def steady(key: str, start: float, end: float, every: float = 0.1, latency: float = 0.01) -> list[Any]:
    n = round((end - start) / every)
    return [(key, start + i * every, start + i * every + latency, "ok") for i in range(n + 1)]


def spans(gaps: list[Any]) -> list[tuple[str | None, float, float]]:
    return [(g.key, round(g.start / S, 2), round(g.end / S, 2)) for g in gaps]


def fault(f: str, nodes: tuple[int, ...], start: float, end: float | None, heal: str = "restart") -> FaultWindow:
    return FaultWindow(f, {"nodes": list(nodes)}, nodes, int(start * S), None if end is None else int(end * S),
                       heal, 0)


def test_steady_sends_have_no_window() -> None:
    t = sends(*steady(K, 0, 10), *steady(K1, 0, 10))
    assert send_gaps(t, end_time=11 * S) == []
    a = availability(t, polls(), FaultWindows((), 11 * S), config=CONFIG)
    assert a["share"] == 1.0 and a["windows"] == []


def test_a_stall_on_one_key_is_a_key_window_not_a_whole_run_one() -> None:
    stalled = [*steady(K, 0, 3), (K, 3.05, 7.0, "ok"), *steady(K, 7.1, 10)]  # one send outstanding 3.05 → 7
    t = sends(*stalled, *steady(K1, 0, 10))
    assert spans(send_gaps(t, end_time=11 * S)) == [(K, 3.05, 7.0)]


def test_windows_at_the_start_and_the_end_and_whole_run() -> None:
    rows = [(K, 0.0, 3.0, "ok"), *steady(K, 3.1, 6), (K, 6.05, None, "info"),  # never completed
            (K1, 0.0, 3.2, "ok"), *steady(K1, 3.3, 6), (K1, 6.05, 9.0, "info")]
    got = spans(send_gaps(sends(*rows), end_time=10 * S))
    assert (None, 0.0, 3.0) in got, "no send succeeded anywhere before 3 s"
    assert (K, 0.0, 3.0) in got and (K1, 0.0, 3.2) in got
    assert (K, 6.05, 10.0) in got, "pending to the end of the history"
    assert (K1, 6.05, 9.0) in got, "to the last send's end"
    assert (None, 6.05, 10.0) in got


def test_a_lone_success_does_not_split_an_outage() -> None:
    t = sends(*steady(K, 0, 3), (K, 3.05, 5.0, "ok"), (K, 3.06, 5.05, "ok"), (K, 3.05, 8.0, "ok"),
              *steady(K, 8.1, 10))  # one batch of two acknowledged at 5.0 s amid the outage
    assert spans(send_gaps(t, end_time=11 * S)) == [(None, 3.05, 8.0), (K, 3.05, 8.0)]


def test_a_gap_with_no_send_outstanding_is_no_window() -> None:
    t = sends(*steady(K, 0, 2), *steady(K, 6, 8))  # the producer was idle between 2 and 6 s
    assert send_gaps(t, end_time=9 * S) == []


def test_poll_window_needs_data_waiting() -> None:
    t = sends(*steady(K, 0, 10, every=0.5), *steady(K1, 0, 10, every=0.5))
    p = polls(*[(K, x / 2 + 0.02) for x in range(8)], (K, 6.02), *[(K1, x / 2 + 0.02) for x in range(21)])
    assert spans(poll_gaps(t, p)) == [(K, 4.01, 6.02), (K, 6.51, 10.0)], "acked at 4.01 s, read only at 6.02 s"


def test_kill_window_within_prediction_lists_the_fault_and_recovery_times() -> None:
    t = sends(*steady(K, 0, 4), (K, 4.05, 8.0, "ok"), *steady(K, 8.1, 20))
    kill = fault("kill", (2,), 4.0, 12.0)
    a = availability(t, polls(), FaultWindows((kill,), 21 * S), config=CONFIG)
    (w,) = [w for w in a["windows"] if w["key"] == K]
    assert w["faults"] == ["kill [2] 4.0s–12.0s"]
    assert w["predicted_s"] is not None and w["duration_s"] <= w["predicted_s"]
    assert w["finding"] is None and w["expected"] == []
    (d,) = w["fault_details"]
    assert d["recovery_after_start_s"] == 4.0 and d["recovery_after_heal_s"] is None
    assert set(w) >= {"key", "kind", "start_s", "end_s", "duration_s", "faults", "predicted_s", "finding", "causes"}


def test_a_window_longer_than_predicted_is_a_finding_not_a_violation() -> None:
    t = sends(*steady(K, 0, 4), (K, 4.05, 30.0, "ok"), *steady(K, 30.1, 40))
    kill = fault("kill", (2,), 4.0, 10.0)
    a = availability(t, polls(), FaultWindows((kill,), 41 * S), config=CONFIG)
    (w,) = [w for w in a["windows"] if w["key"] == K]
    assert w["finding"] == FINDING and w["duration_s"] > w["predicted_s"]
    assert a["findings"] == 2  # the key's window and the whole run's
    assert expect_violations(a, None) == []
    violations = expect_violations(a, 10.0)
    assert {v["name"] for v in violations} == {FINDING} and {v["key"] for v in violations} == {K, None}


def test_two_overlapping_faults_and_quorum_loss_is_expected() -> None:
    t = sends(*steady(K, 0, 4), (K, 4.05, 30.0, "ok"), *steady(K, 30.1, 40))
    kills = (fault("kill", (1,), 4.0, 12.0), fault("kill", (3,), 5.0, 12.0))
    a = availability(t, polls(), FaultWindows(kills, 41 * S), config=CONFIG)
    (w,) = [w for w in a["windows"] if w["key"] == K]
    assert len(w["faults"]) == 2
    assert {"no-controller-quorum", "below-min-insync"} <= set(w["expected"])
    assert w["finding"] is None, "2 of 3 down: writes need not be available until a heal"
    assert [d["predicted_after"] for d in w["fault_details"]] == ["heal", "heal"]
    assert expect_violations(a, 1.0) == [], "expected unavailability never fails a run"


def test_recovery_after_a_quorum_loss_heal_is_bounded_from_the_heal() -> None:
    t = sends(*steady(K, 0, 4), (K, 4.05, 4.5, "ok"), *steady(K, 4.6, 12), (K, 12.05, 30.0, "ok"),
              *steady(K, 30.1, 40))
    kill = fault("kill", (1, 2), 8.0, 11.0)  # the window below starts after the heal
    a = availability(t, polls(), FaultWindows((kill,), 41 * S), config=CONFIG)
    (w,) = [w for w in a["windows"] if w["key"] == K]
    assert w["start_s"] > 11.0 and w["expected"] == []
    assert w["fault_details"][0]["predicted_after"] == "heal" and w["finding"] is None


def test_a_kill_healed_before_a_later_isolation_does_not_make_it_a_quorum_loss() -> None:
    # the demo's shape: a kill of node 2 healed at 21 s, then node 3 isolated at 28.7 s; a window at 28.1 s
    t = sends(*steady(K, 0, 28), (K, 28.1, 31.0, "ok"), *steady(K, 31.1, 50))
    faults = (fault("kill", (2,), 13.1, 21.0), fault("partition", (3,), 28.7, 36.6, heal="heal"))
    a = availability(t, polls(), FaultWindows(faults, 51 * S), config=CONFIG)
    (w,) = [w for w in a["windows"] if w["key"] == K]
    assert w["expected"] == []
    kill, partition = w["fault_details"]
    assert kill["predicted_after"] == "start", "alone, one dead broker of three never blocked writes"
    assert partition["predicted_after"] == "start"
    alone = availability(t, polls(), FaultWindows(faults[1:], 51 * S), config=CONFIG)
    (w_alone,) = [w for w in alone["windows"] if w["key"] == K]
    assert w["predicted_s"] == w_alone["predicted_s"], "the healed kill does not loosen the isolation's bound"


def test_expected_reasons() -> None:
    topo = RunConfig.from_scenario(CONFIG)
    assert expected_unavailability({2}, topo, (1, 2, 3)) == ()
    assert expected_unavailability({1, 2, 3}, topo, (1, 2, 3)) == ("no-controller-quorum", "no-live-isr-member")
    dedicated = RunConfig.from_scenario({**CONFIG, "cluster": {"nodes": 3, "controllers": 3}})
    assert expected_unavailability({101, 102}, dedicated, (1, 2, 3)) == ("no-controller-quorum",)
    assert expected_unavailability({}, topo, (1, 2, 3), link_nodes=(2,), leader=1) == ()
    assert expected_unavailability({}, topo, (1, 2, 3), link_nodes=(2,), leader=2) == ("client-link-fault",)


def test_timeouts_come_from_the_run_config_and_profiles() -> None:
    fast = RunConfig.from_scenario(CONFIG).timeouts
    assert (fast.session_s, fast.replica_lag_s, fast.request_timeout_s) == (3.0, 5.0, 5.0)
    defaults = RunConfig.from_scenario({**CONFIG, "kafka_settings": fast_test_settings(3, "kafka-defaults")}).timeouts
    assert (defaults.session_s, defaults.replica_lag_s) == (9.0, 30.0)
    assert "broker.session.timeout.ms" not in fast_test_settings(3, "kafka-defaults")


def test_the_kafka_defaults_profile_gives_the_client_its_own_timeouts_unless_the_workload_sets_them() -> None:
    fast = parse_scenario({"name": "t"}).workload
    assert (fast.request_timeout_ms, fast.delivery_timeout_ms) == (5000, 15000)
    defaults = parse_scenario({"name": "t", "cluster": {"timeouts": "kafka-defaults"}})
    assert (defaults.workload.request_timeout_ms, defaults.workload.delivery_timeout_ms) == (30000, 300000)
    chosen = parse_scenario({"name": "t", "cluster": {"timeouts": "kafka-defaults"},
                             "workload": {"request_timeout_ms": 7000}}).workload
    assert (chosen.request_timeout_ms, chosen.delivery_timeout_ms) == (7000, 300000)
    # a campaign axis over the profile: the derived client timeouts follow the override, both ways
    assert defaults.with_overrides(**{"cluster.timeouts": "fast"}).workload.request_timeout_ms == 5000
    assert parse_scenario({"name": "t"}).with_overrides(
        **{"cluster.timeouts": "kafka-defaults"}).workload.delivery_timeout_ms == 300000
    # what the run records (results.json's config) carries the values the clients used
    assert defaults.model_dump()["workload"]["request_timeout_ms"] == 30000
    timeouts = RunConfig.from_scenario({**CONFIG, "workload": defaults.model_dump()["workload"]}).timeouts
    assert timeouts.request_timeout_s == 30.0


@pytest.mark.parametrize(("table", "value", "says"), [
    ("expect", {"max_unavailable_s": -1}, "expect.max_unavailable_s"),
    ("expect", {"max_unavailable_s": "soon"}, "expect.max_unavailable_s"),
    ("expect", {"max_unavailable": 3}, "unknown field"),
    ("cluster", {"timeouts": "slow"}, "cluster.timeouts"),
])
def test_bad_expect_and_profile_values_are_clear_errors(table: str, value: Any, says: str) -> None:
    with pytest.raises(ScenarioError) as err:
        parse_scenario({"name": "x", table: value}, source="x.toml")
    assert says in str(err.value) and "Traceback" not in str(err.value)


def test_check_run_writes_availability_and_expect_fails_the_run(tmp_path: Path) -> None:
    h = History(run_start={**CONFIG, "expect": {"max_unavailable_s": 0.5}})
    for v in range(5):
        h.send(v, K, v, v)
    h.time += 2 * S  # a 2 s stall with a send outstanding
    i = h.event(9, "invoke", "send", [["send", K, 9]])
    h.time += 2 * S
    h.event(9, "ok", "send", [["send", K, [9, 9]]])
    assert i >= 0
    h.poll(1, {K: [(o, o) for o in range(5)] + [(9, 9)]})
    h.drain()
    result = check_run(h.write(tmp_path / "run"), write=False).to_json_dict()
    avail = result["availability"]
    assert avail["share"] < 1
    assert any(w["kind"] == "send" and w["key"] == K for w in avail["windows"])
    assert [v["name"] for v in result["violations"]] == [FINDING, FINDING]  # the key's and the whole run's


def test_without_node_logs_fencing_comes_from_the_sampled_registrations(tmp_path: Path) -> None:
    h = History(run_start=CONFIG)
    for v in range(5):
        h.send(v, K, v, v)
    stall = h.time
    h.event(9, "invoke", "send", [["send", K, 9]])
    h.time += 4 * S
    h.event(9, "ok", "send", [["send", K, [9, 9]]])
    h.poll(1, {K: [(o, o) for o in range(5)] + [(9, 9)]})
    h.drain()
    run = h.write(tmp_path / "run")
    assert not (run / "logs").exists()

    def sample(t: int, fenced: list[int], read_at: int) -> bytes:
        brokers = {"unfenced": sorted({1, 2, 3} - set(fenced)), "fenced": fenced, "time": read_at}
        return orjson.dumps({"time": t, "key": K, "leader": 1, "isr": [1, 2, 3], "brokers": brokers}) + b"\n"

    (run / "state.jsonl").write_bytes(
        sample(stall, [], stall) + sample(stall + S, [], stall)  # the same read repeated: no event
        + sample(stall + 2 * S, [2], stall + 2 * S) + sample(stall + 5 * S, [], stall + 5 * S))
    result = check_run(run, write=True).to_json_dict()
    window = next(w for w in result["availability"]["windows"] if w["key"] == K and w["kind"] == "send")
    assert any(c.startswith(f"{(stall + 2 * S) / S:.1f}s node 2: broker 2 fenced (DescribeCluster")
               for c in window["causes"]), window["causes"]
    events = [orjson.loads(line) for line in (run / "events.jsonl").read_bytes().splitlines()]
    assert [(e["kind"], e["node"], e["source"]) for e in events] == [
        ("broker-fenced", 2, "observer"), ("broker-unfenced", 2, "observer")]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), max_size=30), st.lists(st.integers(0, 50), max_size=30),
       st.integers(1, 60), st.integers(1, 10))
def test_poll_gaps_of_is_the_loop_it_replaced(reads: list[int], acked: list[int], end: int, min_gap: int) -> None:
    """The vectorised poll windows equal the per-interval loop they replaced (kept here as the reference)."""
    r, a = np.sort(np.array(reads, dtype=np.int64)), np.sort(np.array(acked, dtype=np.int64))
    want = []
    bounds = np.concatenate(([-1], r[r < end], [end]))
    for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
        i = int(np.searchsorted(a, lo, side="right"))
        if i >= len(a) or a[i] >= hi:
            continue
        start = max(lo, int(a[i]))
        if hi - start >= min_gap:
            want.append((start, hi))
    got = poll_gaps_of(r, a, key=K, workload_end=end, min_gap=min_gap)
    assert [(g.start, g.end) for g in got] == want


# The per-gap loops send_gaps and poll_gaps ran before they were vectorised, in plain Python: the reference.
Row = tuple[str, int, int | None, str]  # key, invoke, complete (None: never), type
Win = tuple[str | None, str, int, int]  # key, kind, start, end


def merged(gaps: list[Win]) -> list[Win]:
    out: list[Win] = []
    for g in gaps:
        if out and out[-1][3] + MERGE_WITHIN_NS >= g[2]:
            out[-1] = (g[0], g[1], out[-1][2], g[3])
        else:
            out.append(g)
    return out


def send_windows_loop(rows: list[Row], key: str | None, end: int, min_gap: int) -> list[Win]:
    if not rows:
        return []
    done = [end if c is None or c < 0 else c for _, _, c, _ in rows]
    oks = sorted(d for d, (_, _, _, type_) in zip(done, rows, strict=True) if type_ == "ok")
    bounds = [min(inv for _, inv, _, _ in rows), *oks, max(done)]
    out = []
    for a, b in itertools.pairwise(bounds):
        if b - a < min_gap:
            continue
        in_flight = [inv for (_, inv, _, _), d in zip(rows, done, strict=True) if inv < b and d > a]
        if in_flight and b - max(a, min(in_flight)) >= min_gap:
            out.append((key, "send", max(a, min(in_flight)), b))
    return out


def send_gaps_loop(rows: list[Row], end: int, min_gap: int) -> list[Win]:
    out = merged(send_windows_loop(rows, None, end, min_gap))
    for k in sorted({r[0] for r in rows}):
        out += merged(send_windows_loop([r for r in rows if r[0] == k], k, end, min_gap))
    return out


def poll_gaps_loop(rows: list[Row], reads: list[tuple[str, int]], min_gap: int) -> list[Win]:
    if not rows or not reads:
        return []
    workload_end = max(inv for _, inv, _, _ in rows)
    out = []
    for k in [None, *sorted({r[0] for r in rows})]:
        acked = sorted(-1 if c is None else c for key, _, c, type_ in rows if type_ == "ok" and k in (None, key))
        times = sorted(t for key, t in reads if k in (None, key) and t < workload_end)
        if not acked:
            continue
        for lo, hi in zip([-1, *times], [*times, workload_end], strict=True):
            first = next((a for a in acked if a > lo), None)
            if first is not None and first < hi and hi - max(lo, first) >= min_gap:
                out.append((k, "poll", max(lo, first), hi))
    return out


def sends_table(rows: list[Row], chunks: int) -> pa.Table:
    table = pa.table({"value": list(range(len(rows))), "key": [r[0] for r in rows],
                      "offset": [i if r[3] == "ok" else None for i, r in enumerate(rows)],
                      "process": [0] * len(rows), "op_index": list(range(len(rows))), "type": [r[3] for r in rows],
                      "invoke_time": [r[1] for r in rows], "complete_time": [r[2] for r in rows]}, schema=SENDS_SCHEMA)
    # several chunks: each has its own dictionary of keys
    cut = [len(rows) * i // chunks for i in range(chunks + 1)]
    return pa.concat_tables([table.slice(lo, hi - lo) for lo, hi in itertools.pairwise(cut)])


def polls_table(reads: list[tuple[str, int]]) -> pa.Table:
    return pa.table({"value": list(range(len(reads))), "key": [k for k, _ in reads], "offset": list(range(len(reads))),
                     "process": [0] * len(reads), "op_index": list(range(len(reads))), "type": ["ok"] * len(reads),
                     "time": [t for _, t in reads]}, schema=POLLS_SCHEMA)


TICK = 50_000_000  # ns: times are ticks plus a nanosecond or two, so gaps fall just under, on and over min_gap
KEYS = ("a/10", "a/9", "b")
tick_time = st.builds(lambda n, ns: n * TICK + ns, st.integers(0, 200), st.integers(-1, 1))
send_row = st.tuples(
    st.sampled_from(KEYS), tick_time,
    st.one_of(st.none(), st.builds(lambda n, ns: n * TICK + ns, st.integers(-2, 40), st.integers(-1, 1))),
    st.sampled_from(["ok", "ok", "ok", "fail", "info"]),
).map(lambda r: (r[0], r[1], None if r[2] is None else r[1] + r[2], r[3]))


@settings(max_examples=400, deadline=None)
@given(st.lists(send_row, max_size=40), st.lists(st.tuples(st.sampled_from((*KEYS, "unsent")), tick_time), max_size=40),
       tick_time, st.sampled_from([0.0, 0.05, 0.3, 1.0]), st.integers(1, 3))
def test_send_and_poll_gaps_are_the_loops_they_replaced(rows: list[Row], reads: list[tuple[str, int]], end: int,
                                                        min_gap_s: float, chunks: int) -> None:
    """Several keys, failed and never-completed sends (ok ones too), completions before invokes, an end before
    the last completion, polls of a key nobody sent to, tables in several chunks: the vectorised windows are
    those of the per-gap loops they replaced."""
    min_gap = int(min_gap_s * S)
    sends_t = sends_table(rows, chunks)
    got = [(g.key, g.kind, g.start, g.end) for g in send_gaps(sends_t, end_time=end, min_gap_s=min_gap_s)]
    assert got == send_gaps_loop(rows, end, min_gap)
    got = [(g.key, g.kind, g.start, g.end) for g in poll_gaps(sends_t, polls_table(reads), min_gap_s=min_gap_s)]
    assert got == poll_gaps_loop(rows, reads, min_gap)
    invoke = np.array([r[1] for r in rows], dtype=np.int64)
    complete = np.array([-1 if r[2] is None else r[2] for r in rows], dtype=np.int64)
    ok = np.array([r[3] == "ok" for r in rows], dtype=bool)
    got = [(g.key, g.kind, g.start, g.end) for g in send_gaps_of(invoke, complete, ok, key=None, end_time=end,
                                                                  min_gap=min_gap)]
    assert got == send_windows_loop(rows, None, end, min_gap)
