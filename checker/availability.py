"""Availability: windows with no successful send (or no successful read), measured, predicted and explained.

Pure functions over the `sends` and `polls` tables (DESIGN.md §3) and the fault windows; no I/O.

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

from kafka_chaos.checker.faults import FaultSummary, FaultWindow
from kafka_chaos.reference_model.availability import (
    LINK_BLOCKING,
    Fault,
    Timeouts,
    Topology,
    baseline_s,
    expected_unavailability,
    impaired_by,
    node_link_blocked,
    predict,
)

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


def _stalled_from(invoke: I64, complete: I64, a: int, b: int) -> int | None:
    """The first moment in (a, b) a send was in flight (invoked before b, not completed by a), or None: a
    gap in which the producer was idle is no window."""
    inflight = (invoke < b) & (complete > a)
    if not np.any(inflight):
        return None
    return max(a, int(invoke[inflight].min()))


def send_gaps_of(invoke: I64, complete: I64, ok: npt.NDArray[np.bool_], *, key: str | None, end_time: int,
                 min_gap: int) -> list[Gap]:
    """Send windows over one set of sends (one key, or all). `complete` uses -1 for never completed."""
    if len(invoke) == 0:
        return []
    done = np.where(complete < 0, end_time, complete)
    oks = np.sort(done[ok])
    first = int(invoke.min())
    last = int(done.max())
    bounds = np.concatenate(([first], oks, [last]))
    d = np.diff(bounds)
    out = []
    for i in np.flatnonzero(d >= min_gap):
        a, b = int(bounds[i]), int(bounds[i + 1])
        start = _stalled_from(invoke, done, a, b)
        if start is not None and b - start >= min_gap:
            out.append(Gap(key, "send", start, b))
    return out


def send_gaps(sends: pa.Table, *, end_time: int, min_gap_s: float = 1.0) -> list[Gap]:
    """Send windows per key and for the whole run (see the module docstring)."""
    if sends.num_rows == 0:
        return []
    keys = _col(sends, "key").astype(str)
    invoke = _col(sends, "invoke_time").astype(np.int64)
    comp = sends.column("complete_time").fill_null(-1).to_numpy().astype(np.int64)
    ok = _col(sends, "type").astype(str) == "ok"
    min_gap = int(min_gap_s * NS)
    out = _merge(send_gaps_of(invoke, comp, ok, key=None, end_time=end_time, min_gap=min_gap))
    for k in sorted(set(keys.tolist())):
        m = keys == k
        out += _merge(send_gaps_of(invoke[m], comp[m], ok[m], key=k, end_time=end_time, min_gap=min_gap))
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
    bounds = np.concatenate(([-1], reads[reads < workload_end], [workload_end])).astype(np.int64)
    a, b = bounds[:-1], bounds[1:]
    if len(acked) == 0:
        return []
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
    skeys = _col(sends, "key").astype(str)
    ok = _col(sends, "type").astype(str) == "ok"
    comp = sends.column("complete_time").fill_null(-1).to_numpy().astype(np.int64)
    workload_end = int(_col(sends, "invoke_time").max())
    pkeys = _col(polls, "key").astype(str) if polls.num_rows else np.array([], dtype=str)
    ptimes = _col(polls, "time").astype(np.int64) if polls.num_rows else np.array([], dtype=np.int64)
    min_gap = int(min_gap_s * NS)
    out = poll_gaps_of(np.sort(ptimes), np.sort(comp[ok]), key=None, workload_end=workload_end, min_gap=min_gap)
    for k in sorted(set(skeys.tolist())):
        out += poll_gaps_of(np.sort(ptimes[pkeys == k]), np.sort(comp[ok & (skeys == k)]), key=k,
                            workload_end=workload_end, min_gap=min_gap)
    return out


def _span(sends: pa.Table, end_time: int) -> tuple[int, int]:
    invoke = _col(sends, "invoke_time").astype(np.int64)
    comp = sends.column("complete_time").fill_null(end_time).to_numpy().astype(np.int64)
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


def judge_gap(gap: Gap, faults: FaultSummary, t: Timeouts, topo: Topology, view: ClusterView) -> dict[str, Any]:
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
        f = Fault(w.f, w.nodes, w.start / NS, None if w.end is None else w.end / NS,
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
    faults: FaultSummary,
    *,
    config: Mapping[str, Any] | None = None,
    end_time: int | None = None,
    state_samples: Sequence[Mapping[str, Any]] | None = None,
    events: Sequence[Mapping[str, Any]] | None = None,
    min_gap_s: float = 1.0,
) -> dict[str, Any]:
    """`results["availability"]`: `{"share", "windows": [...], ...}` (see the module docstring)."""
    end = int(end_time if end_time is not None else faults.end_time)
    t = Timeouts.from_config(config)
    topo = Topology.from_config(config)
    out: dict[str, Any] = {"share": 1.0, "share_whole_run": 1.0, "shares": {}, "span_s": 0.0, "min_gap_s": min_gap_s,
                           "windows": [], "findings": 0, "timeouts": t.__dict__,
                           "profile": ((config or {}).get("cluster") or {}).get("timeouts", "fast")}
    if sends.num_rows == 0:
        return out
    gaps = send_gaps(sends, end_time=end, min_gap_s=min_gap_s) + poll_gaps(sends, polls, min_gap_s=min_gap_s)
    view = ClusterView.of(state_samples)
    windows = [judge_gap(g, faults, t, topo, view) for g in gaps]
    if events:
        from kafka_chaos.checker.cluster_events import causes_for

        for w in windows:
            w["causes"] = causes_for(w, events)
    windows.sort(key=lambda w: (w["start_s"], w["key"] is not None, w["key"] or "", w["kind"]))
    lo, hi = _span(sends, end)
    span = max(hi - lo, 1)
    keys = sorted(set(_col(sends, "key").astype(str).tolist()))
    shares = {}
    for k in keys:
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
