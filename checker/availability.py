"""Availability: windows with no successful send (or no successful read), measured, predicted and explained.

Pure functions over the `sends` and `polls` tables (docs/architecture.md §3) and the fault windows; no I/O.

- A **send window** on a key is a stretch of at least `min_gap_s` with a send outstanding on that key (invoked,
  not completed) and no successful (ok) send completion: it runs from the later of the last ok completion
  (or the first invoke) and the first outstanding send's invoke, to the next ok completion (or the last
  send's end). Windows separated by one burst of oks (within 100 ms: a batch) are one window. The whole run
  (`key` null) is the same over every key: no send succeeded anywhere.
- A **poll window** on a key starts when a record is acknowledged on that key (an ok send completes) and
  nothing on that key is read for `min_gap_s`; it ends with the next read, or when the workload ends (the
  final drain's reads are not availability). Windows with nothing to read are no windows.
- **Availability share**: per key, the share of the workload's span outside its send windows; `share` is the
  mean over keys (key-time available), `share_whole_run` the share outside whole-run send windows.

Each window lists the faults overlapping it (a fault counts until its heal plus the model's recovery time),
the time from each fault's start and heal to the window's end, and the reference model's prediction
(`reference_model.availability`): `predicted_s` is how long the window may last given the faults, and a
longer window gets the finding `unavailable-longer-than-expected` — an availability finding, never a safety
violation (a scenario's `[expect] max_unavailable_s` turns long windows into violations: `expect_violations`).
`causes` are the cluster's own events (`checker.cluster_events`) that explain it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_chaos.checker.context import dictionary_key_codes
from kafka_chaos.faults.windows import FaultWindow, FaultWindows
from kafka_chaos.reference_model.availability import (
    LINK_BLOCKING,
    TimedFault,
    baseline_s,
    expected_unavailability,
    impaired_by,
    node_link_blocked,
    predict,
)
from kafka_chaos.reference_model.config import RunConfig, Timeouts

FINDING = "unavailable-longer-than-expected"
NS = 1_000_000_000
I64 = npt.NDArray[np.int64]


@dataclass(frozen=True)
class Gap:
    """A window before it is judged: times in ns since the run started."""

    key: str | None
    kind: str
    start: int
    end: int


def _col(table: pa.Table, name: str) -> npt.NDArray[Any]:
    arr: npt.NDArray[Any] = table.column(name).to_numpy(zero_copy_only=False)
    return arr


def _key_codes(column: pa.ChunkedArray) -> tuple[list[str], npt.NDArray[np.integer]]:
    """The keys in sorted order, and each row's index into them. Strings are hashed once in Arrow: turning
    millions of them into Python or numpy strings was most of the time the windows took."""
    # each chunk encoded on its own (as it is when already encoded), then coded by the ranks of all its names
    keys, codes = dictionary_key_codes([pc.dictionary_encode(chunk) for chunk in column.chunks])
    dtype = np.min_scalar_type(len(keys))  # fewer bytes for the grouping to go over
    return keys, np.concatenate(codes).astype(dtype) if codes else np.empty(0, dtype=dtype)


def _group(codes: npt.NDArray[np.integer], n: int) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """The rows ordered by code (stable: each group keeps the rows' order) and each group's bounds in it."""
    # Arrow's sort is stable and counts a small range of integers: linear, and faster than numpy's radix sort
    order: npt.NDArray[np.intp] = pc.sort_indices(pa.array(codes)).to_numpy().view(np.intp)
    bounds = np.concatenate(([0], np.cumsum(np.bincount(codes, minlength=n)))).astype(np.intp)
    return order, bounds


@dataclass(frozen=True)
class _Sends:
    """What the windows read of the sends, read once for all of them: the columns, each key's rows, and the ok
    sends' completions sorted (both kinds of windows start from them)."""

    keys: list[str]
    invoke: I64
    complete: I64  # -1: never completed
    acked: I64  # the ok sends' `complete`, sorted
    by_key: list[tuple[I64, I64, I64]]  # invoke, complete and acked of each key's sends, in the order of keys

    @classmethod
    def of(cls, sends: pa.Table) -> _Sends:
        keys, codes = _key_codes(sends.column("key"))
        invoke = _col(sends, "invoke_time").astype(np.int64, copy=False)
        complete = sends.column("complete_time").fill_null(-1).to_numpy().astype(np.int64, copy=False)
        ok = _ok(sends)
        order, bounds = _group(codes, len(keys))
        invoke_k, complete_k, ok_k = invoke[order], complete[order], ok[order]
        by_key = []
        for lo, hi in zip(bounds[:-1].tolist(), bounds[1:].tolist(), strict=True):
            c = complete_k[lo:hi]
            by_key.append((invoke_k[lo:hi], c, _sorted(c[ok_k[lo:hi]])))
        return cls(keys, invoke, complete, _sorted(complete[ok]), by_key)


def _sorted(a: I64) -> I64:
    return np.sort(a, kind="stable")  # times come mostly in order, on which numpy's timsort is near linear


def _ok(sends: pa.Table) -> npt.NDArray[np.bool_]:
    ok: npt.NDArray[np.bool_] = pc.equal(sends.column("type"), "ok").fill_null(False).to_numpy()
    return ok


def _stalled_from(invoke: I64, complete: I64, a: I64, b: I64) -> tuple[I64, npt.NDArray[np.bool_]]:
    """For each gap (a[j], b[j]): the first moment in it a send was in flight (invoked before b, not completed
    by a), and whether one was: a gap in which the producer was idle is no window."""
    order = np.argsort(invoke, kind="stable")
    invoked = invoke[order]
    # The sends invoked before b are a prefix of `invoked`; the earliest of them still in flight after a is
    # the first whose completion, or an earlier one's, is after a: the first the running maximum passes a.
    reach = np.maximum.accumulate(complete[order])
    first = np.searchsorted(reach, a, side="right")
    found = first < np.searchsorted(invoked, b, side="left")
    return np.maximum(a, invoked[np.minimum(first, len(invoked) - 1)]), found


def send_gaps_of(invoke: I64, complete: I64, ok: npt.NDArray[np.bool_], *, key: str | None, end_time: int,
                 min_gap: int) -> list[Gap]:
    """Send windows over one set of sends (one key, or all). `complete` uses -1 for never completed."""
    if len(invoke) == 0:
        return []
    return _send_windows(invoke, complete, _sorted(complete[ok]), key=key, end_time=end_time, min_gap=min_gap)


def _send_windows(invoke: I64, complete: I64, acked: I64, *, key: str | None, end_time: int,
                  min_gap: int) -> list[Gap]:
    """`send_gaps_of` (`invoke` not empty) given the ok sends' `complete`, sorted."""
    never = complete < 0
    done = np.where(never, end_time, complete) if never.any() else complete
    oks = acked
    if len(acked) and acked[0] < 0:  # an ok send never completed: it counts as completing at the end
        oks = _sorted(np.where(acked < 0, end_time, acked))
    first = int(invoke.min())
    last = int(done.max())
    bounds = np.concatenate(([first], oks, [last]))
    i = np.flatnonzero(np.diff(bounds) >= min_gap)
    if len(i) == 0:
        return []
    a, b = bounds[i], bounds[i + 1]
    start, found = _stalled_from(invoke, done, a, b)
    keep = found & (b - start >= min_gap)
    return [Gap(key, "send", s, e) for s, e in zip(start[keep].tolist(), b[keep].tolist(), strict=True)]


def send_gaps(sends: pa.Table, *, end_time: int, min_gap_s: float = 1.0) -> list[Gap]:
    """Send windows per key and for the whole run (see the module docstring)."""
    if sends.num_rows == 0:
        return []
    return _send_gaps(_Sends.of(sends), end_time=end_time, min_gap_s=min_gap_s)


def _send_gaps(s: _Sends, *, end_time: int, min_gap_s: float) -> list[Gap]:
    min_gap = int(min_gap_s * NS)
    out = _merge(_send_windows(s.invoke, s.complete, s.acked, key=None, end_time=end_time, min_gap=min_gap))
    for k, (invoke, complete, acked) in zip(s.keys, s.by_key, strict=True):
        out += _merge(_send_windows(invoke, complete, acked, key=k, end_time=end_time, min_gap=min_gap))
    return out


MERGE_WITHIN_NS = 100_000_000
"""Windows closer than this (one batch's acknowledgements between them) are one window."""


def _merge(gaps: list[Gap]) -> list[Gap]:
    """Windows separated only by one burst of successes (one batch acknowledged at once) are one window: a
    lone batch amid an outage is not a recovery."""
    out: list[Gap] = []
    for g in gaps:
        if out and out[-1].end + MERGE_WITHIN_NS >= g.start:
            out[-1] = Gap(g.key, g.kind, out[-1].start, g.end)
        else:
            out.append(g)
    return out


def poll_gaps_of(reads: I64, acked: I64, *, key: str | None, workload_end: int, min_gap: int) -> list[Gap]:
    """Poll windows: an acknowledged record waits `min_gap` with no read (reads and acks sorted, ns)."""
    if len(acked) == 0:
        return []
    within = reads[:np.searchsorted(reads, workload_end)]  # reads are sorted: those before workload_end
    bounds = np.concatenate(([-1], within, [workload_end])).astype(np.int64, copy=False)
    # a window starts at or after its earlier read: reads closer than min_gap have none between them
    wide = np.flatnonzero(np.diff(bounds) >= min_gap)
    a, b = bounds[wide], bounds[wide + 1]
    # Between each two reads: the first record acknowledged after the earlier read, if it came before the later.
    i = np.searchsorted(acked, a, side="right")
    first_acked = acked[np.minimum(i, len(acked) - 1)]
    start = np.maximum(a, first_acked)
    keep = (i < len(acked)) & (first_acked < b) & (b - start >= min_gap)
    return [Gap(key, "poll", s, e) for s, e in zip(start[keep].tolist(), b[keep].tolist(), strict=True)]


def poll_gaps(sends: pa.Table, polls: pa.Table, *, min_gap_s: float = 1.0) -> list[Gap]:
    """Poll windows per key and for the whole run, within the workload (up to the last send's invoke); none
    when nothing was read at all (a run without consumers)."""
    if sends.num_rows == 0 or polls.num_rows == 0:
        return []
    return _poll_gaps(_Sends.of(sends), polls, min_gap_s=min_gap_s)


def _poll_gaps(s: _Sends, polls: pa.Table, *, min_gap_s: float) -> list[Gap]:
    if polls.num_rows == 0:
        return []
    workload_end = int(s.invoke.max())
    # polls of keys nobody sent to count for the whole run only (their code is len(s.keys))
    pkeys = pc.index_in(polls.column("key"), value_set=pa.array(s.keys, pa.string())).fill_null(len(s.keys))
    ptimes = _col(polls, "time").astype(np.int64, copy=False)
    min_gap = int(min_gap_s * NS)
    out = poll_gaps_of(_sorted(ptimes), s.acked, key=None, workload_end=workload_end, min_gap=min_gap)
    order, bounds = _group(pkeys.to_numpy(), len(s.keys) + 1)
    ptimes = ptimes[order]
    for i, (k, (_, _, acked)) in enumerate(zip(s.keys, s.by_key, strict=True)):
        out += poll_gaps_of(_sorted(ptimes[bounds[i]:bounds[i + 1]]), acked, key=k, workload_end=workload_end,
                            min_gap=min_gap)
    return out


def _span(sends: pa.Table, end_time: int) -> tuple[int, int]:
    invoke = _col(sends, "invoke_time").astype(np.int64, copy=False)
    comp = sends.column("complete_time").fill_null(end_time).to_numpy().astype(np.int64, copy=False)
    return int(invoke.min()), int(max(comp.max(), invoke.max()))


def _s(ns: int | float | None) -> float | None:
    return None if ns is None else round(float(ns) / NS, 3)


def _describe(w: FaultWindow) -> str:
    nodes = ",".join(map(str, w.nodes)) or "?"
    end = f"{w.end / NS:.1f}s" if w.end is not None else "end"
    return f"{w.f} [{nodes}] {w.start / NS:.1f}s–{end}"


@dataclass(frozen=True)
class ClusterView:
    """What the state samples say: each key's replicas, and who led each key and the quorum over time."""

    replicas: Mapping[str, tuple[int, ...]]
    samples: Sequence[Mapping[str, Any]]

    @classmethod
    def of(cls, samples: Sequence[Mapping[str, Any]] | None) -> ClusterView:
        replicas: dict[str, tuple[int, ...]] = {}
        for s in samples or ():
            if s.get("replicas") and s.get("key") not in replicas:
                replicas[str(s["key"])] = tuple(int(r) for r in s["replicas"])
        return cls(replicas, sorted(samples or (), key=lambda s: int(s.get("time") or 0)))

    def before(self, t: int, key: str | None) -> tuple[int | None, int | None] | None:
        """The (partition leader, quorum leader) of the last sample at or before t; None without one."""
        found = None
        for s in self.samples:
            if int(s.get("time") or 0) > t:
                break
            if key is None or s.get("key") == key:
                found = (s.get("leader"), s.get("controller"))
        return found


def judge_gap(gap: Gap, faults: FaultWindows, t: Timeouts, topo: RunConfig, view: ClusterView) -> dict[str, Any]:
    """The window's JSON: its faults, recovery times, prediction and finding (causes are added later)."""
    everyone = tuple(sorted(set(topo.brokers) | set(topo.controllers)))
    replicas = view.replicas.get(gap.key or "", topo.brokers)
    # a fault counts until its heal plus the model's recovery after a heal: a window may start just after it
    reach = (t.client_s + t.slack_s) * NS
    near = [w for w in faults.windows
            if w.start <= gap.end and (w.end is None or w.end + reach >= gap.start)]
    impaired: set[int] = set()
    links: set[int] = set()
    node_links: set[int] = set()
    for w in faults.active(gap.start, gap.end):
        impaired |= impaired_by(w.f, w.nodes, w.value, everyone)
        node_links |= node_link_blocked(w.f, w.nodes, w.value)
        if w.f in LINK_BLOCKING:
            links |= set(w.nodes)
    leaders = view.before(gap.start, gap.key)
    expected = expected_unavailability(impaired, topo, replicas, links, leaders[0] if leaders else None, node_links)
    details = []
    deadline: float | None = None
    unbounded = False
    for w in near:
        selector = w.value.get("selector") if isinstance(w.value, dict) else None
        f = TimedFault(w.f, w.nodes, w.start / NS, None if w.end is None else w.end / NS,
                  selector if isinstance(selector, str) else None if selector is None else "pairs")
        at = view.before(w.start, gap.key)
        hit_leader = None if at is None or at[0] is None else at[0] in w.nodes
        hit_quorum = None if at is None or at[1] is None else at[1] in w.nodes
        # a fault that blocks writes by itself or with the faults open at the same time as it is bounded from
        # its heal, also for a window that starts after the heal (the restarted nodes' recovery). Only faults
        # open together count: a kill healed before a later isolation did not take the quorum with it.
        together = faults.active(w.start, faults.end_time if w.end is None else w.end)
        together_impaired = set().union(*(impaired_by(o.f, o.nodes, o.value, everyone) for o in together))
        together_links = set().union(*(set(o.nodes) for o in together if o.f in LINK_BLOCKING))
        together_node_links = set().union(*(node_link_blocked(o.f, o.nodes, o.value) for o in together))
        blocking = expected_unavailability(together_impaired, topo, replicas, together_links,
                                           leaders[0] if leaders else None, together_node_links)
        p = predict(f, t, hit_leader=hit_leader, hit_quorum_leader=hit_quorum, expected=blocking)
        if p.deadline_s is None:
            unbounded = True
        else:
            deadline = p.deadline_s if deadline is None else max(deadline, p.deadline_s)
        details.append({
            "fault": _describe(w), "f": w.f, "nodes": list(w.nodes), "start_s": _s(w.start), "end_s": _s(w.end),
            "recovery_after_start_s": _s(gap.end - w.start),
            "recovery_after_heal_s": _s(gap.end - w.end) if w.end is not None and w.end <= gap.end else None,
            "predicted_after": p.after, "predicted_within_s": round(p.within_s, 3),
            "deadline_s": None if p.deadline_s is None else round(p.deadline_s, 3), "note": p.note,
        })
    if not near:
        deadline = gap.start / NS + baseline_s(t)
    predicted = None if unbounded or deadline is None else round(max(0.0, deadline - gap.start / NS), 3)
    duration = (gap.end - gap.start) / NS
    finding = FINDING if predicted is not None and duration > predicted else None
    return {
        "key": gap.key, "kind": gap.kind, "start_s": _s(gap.start), "end_s": _s(gap.end),
        "duration_s": round(duration, 3), "faults": [_describe(w) for w in near], "predicted_s": predicted,
        "finding": finding, "causes": [], "expected": list(expected), "fault_details": details,
    }


def availability(
    sends: pa.Table,
    polls: pa.Table,
    faults: FaultWindows,
    *,
    config: Mapping[str, Any] | None = None,
    end_time: int | None = None,
    state_samples: Sequence[Mapping[str, Any]] | None = None,
    events: Sequence[Mapping[str, Any]] | None = None,
    min_gap_s: float = 1.0,
) -> dict[str, Any]:
    """`results["availability"]`: `{"share", "windows": [...], ...}` (see the module docstring)."""
    end = int(end_time if end_time is not None else faults.end_time)
    topo = RunConfig.coerce(config)[0]
    t = topo.timeouts
    out: dict[str, Any] = {"share": 1.0, "share_whole_run": 1.0, "shares": {}, "span_s": 0.0, "min_gap_s": min_gap_s,
                           "windows": [], "findings": 0, "timeouts": t.__dict__,
                           "profile": ((config or {}).get("cluster") or {}).get("timeouts", "fast")}
    if sends.num_rows == 0:
        return out
    s = _Sends.of(sends)
    gaps = _send_gaps(s, end_time=end, min_gap_s=min_gap_s) + _poll_gaps(s, polls, min_gap_s=min_gap_s)
    view = ClusterView.of(state_samples)
    windows = [judge_gap(g, faults, t, topo, view) for g in gaps]
    if events:
        from kafka_chaos.checker.cluster_events import causes_for

        for w in windows:
            w["causes"] = causes_for(w, events)
    windows.sort(key=lambda w: (w["start_s"], w["key"] is not None, w["key"] or "", w["kind"]))
    lo, hi = _span(sends, end)
    span = max(hi - lo, 1)
    shares = {}
    for k in s.keys:
        down = sum(g.end - g.start for g in gaps if g.kind == "send" and g.key == k)
        shares[k] = round(max(0.0, 1 - down / span), 4)
    whole = sum(g.end - g.start for g in gaps if g.kind == "send" and g.key is None)
    out.update(share=round(float(np.mean(list(shares.values()))), 4) if shares else 1.0,
               share_whole_run=round(max(0.0, 1 - whole / span), 4), shares=shares, span_s=_s(span),
               windows=windows, findings=sum(1 for w in windows if w["finding"]))
    return out


def expect_violations(avail: Mapping[str, Any], max_unavailable_s: float | None) -> list[dict[str, Any]]:
    """With a scenario's `[expect] max_unavailable_s`: each send window longer than it that the model does not
    excuse (no quorum, below min.insync, no live replica, a client-link fault) is a violation."""
    if max_unavailable_s is None:
        return []
    out = []
    for w in avail.get("windows", []):
        if w["kind"] == "send" and w["duration_s"] > max_unavailable_s and not w.get("expected"):
            where = w["key"] or "every key"
            out.append({
                "name": FINDING, "key": w["key"], "bad": True, "verdict": "violation",
                "reason": (f"no successful send on {where} for {w['duration_s']:.1f}s ({w['start_s']:.1f}s–"
                           f"{w['end_s']:.1f}s); the scenario expects at most {max_unavailable_s:g}s"),
                "window": {k: w[k] for k in ("start_s", "end_s", "duration_s", "predicted_s", "faults")},
            })
    return out
