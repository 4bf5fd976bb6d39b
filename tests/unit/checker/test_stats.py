"""Run statistics: op counts, throughput, longest gaps, realtime lag, and the segmented scans under them."""

from __future__ import annotations

import numpy as np
from checker_histories import K1, History, K
from hypothesis import given
from hypothesis import strategies as st

from kafka_chaos.checker.context import (
    dense_codes,
    group_codes,
    prepare,
    segmented_cummax,
    segmented_cummin_reverse,
    sort_by,
)
from kafka_chaos.checker.stats import run_stats
from kafka_chaos.checker.tables import parse_history


def stats_of(h: History) -> dict:
    t = parse_history(h.text().encode())
    m = t.meta
    ctx = prepare(t.sends, t.polls)
    return run_stats(ctx, end_time=m.end_time, op_counts=m.op_counts, ok_poll_times=m.ok_poll_times)


def test_realtime_lag_is_time_since_the_next_offset_was_known() -> None:
    h = History()
    h.send(0, K, 1, 0)  # acked at t=2000
    h.send(0, K, 2, 1)  # acked at t=4000: from now on offset 1 exists
    h.poll(1, {K: [(0, 1)]})  # completes at t=6000, has read up to offset 0: 2000 behind
    h.poll(1, {K: [(1, 2)]})  # t=8000, at the end of the log: no lag
    h.poll(2, {K1: []})
    lag = stats_of(h)["realtime_lag"]
    assert lag["samples"] == 2
    assert lag["max_ns"] == 2000 and lag["worst"] == {"time": 6000, "process": 1, "key": K, "lag_ns": 2000}


def test_lag_uses_the_processs_highest_offset_so_far() -> None:
    h = History()
    for v in range(4):
        h.send(0, K, v, v)  # offsets 0..3 acked at 2000, 4000, 6000, 8000
    h.poll(1, {K: [(2, 2)]})  # t=10000: read 2; offset 3 known since 8000 → 2000
    h.poll(1, {K: [(0, 0)]})  # t=12000: went back, but has seen 2 already → still 12000 - 8000
    lag = stats_of(h)["realtime_lag"]
    assert lag["worst"]["lag_ns"] == 4000 and lag["worst"]["time"] == 12000


def test_counts_throughput_and_gaps() -> None:
    h = History()
    h.time = 999_999_000  # the first send completes at 1.000001 s
    h.send(0, K, 1, 0)
    h.send(0, K, 2, None, type_="fail")
    h.time = 3_500_000_000
    h.poll(1, {K: [(0, 1)]})
    h.poll(2, {}, type_="fail")
    h.drain()
    s = stats_of(h)
    assert s["ops"] == {"send": {"ok": 1, "fail": 1, "info": 0}, "poll": {"ok": 1, "fail": 1, "info": 0}}
    assert s["throughput"]["send_ok"] == [0, 1, 0, 0]
    assert s["throughput"]["poll_ok"] == [0, 0, 0, 1]
    gap = s["longest_gap"]["send_ok"]
    assert gap == {"start": 1_000_001_000, "end": s["duration_ns"], "ns": s["duration_ns"] - 1_000_001_000}
    assert s["longest_gap"]["poll_ok"]["start"] == 0


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(-50, 50)), max_size=40))
def test_segmented_scans_match_a_loop(rows: list[tuple[int, int]]) -> None:
    rows.sort(key=lambda r: r[0])  # grouped by segment
    seg = np.array([r[0] for r in rows], dtype=np.int64)
    x = np.array([r[1] for r in rows], dtype=np.int64)
    want_max, want_min = [], []
    for i in range(len(rows)):
        same = [j for j in range(len(rows)) if seg[j] == seg[i]]
        want_max.append(max(int(x[j]) for j in same if j <= i))
        want_min.append(min(int(x[j]) for j in same if j >= i))
    assert segmented_cummax(x, seg).tolist() == want_max
    assert segmented_cummin_reverse(x, seg).tolist() == want_min


@given(st.lists(st.integers(-(2**62), 2**62), max_size=30), st.booleans())
def test_dense_codes_are_a_bijection(xs: list[int], small: bool) -> None:
    x = np.array([v % 50 if small else v for v in xs], dtype=np.int64)
    codes, n = dense_codes(x)
    assert n == len(set(x.tolist()))
    assert sorted(set(codes.tolist())) == list(range(n))
    pairs = set(zip(x.tolist(), codes.tolist(), strict=True))
    assert len(pairs) == n  # equal values ↔ equal codes


@given(
    st.lists(st.tuples(st.integers(0, 3), st.integers(-5, 5), st.integers(-(2**40), 2**40)), max_size=40),
    st.booleans(),
)
def test_sort_by_is_a_stable_lexsort(rows: list[tuple[int, int, int]], wide: bool) -> None:
    cols = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(3)]
    if wide:  # too wide to pack into one int64: the lexsort fallback
        cols[2] = cols[2] * (2**21)
    want = np.lexsort((np.arange(len(rows)), cols[2], cols[1], cols[0])).tolist()
    assert sort_by(*cols).tolist() == want
    assert sort_by(cols[0], cols[1]).tolist() == np.lexsort((np.arange(len(rows)), cols[1], cols[0])).tolist()


@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 20)), min_size=1, max_size=40), st.booleans())
def test_group_codes_number_key_offset_pairs_in_order(rows: list[tuple[int, int]], sparse: bool) -> None:
    k = np.array([r[0] for r in rows], dtype=np.int64)
    o = np.array([r[1] * (10**9 if sparse else 1) for r in rows], dtype=np.int64)  # sparse: the sort path
    codes, g_key, g_off = group_codes(k, o)
    distinct = sorted(set(zip(k.tolist(), o.tolist(), strict=True)))
    assert list(zip(g_key.tolist(), g_off.tolist(), strict=True)) == distinct
    assert codes.tolist() == [distinct.index((a, b)) for a, b in zip(k.tolist(), o.tolist(), strict=True)]
