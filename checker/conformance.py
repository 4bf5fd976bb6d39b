"""Conformance: observed behaviour that the reference model of Kafka's ISR protocol forbids (docs/architecture.md §4).

`conformance(state_samples, sends, polls, config)` is pure. It reads the observer's samples (state.jsonl)
and the sends/polls tables, and returns one list of instances per named anomaly (every name present, empty
lists meaning none):

- `leader-outside-isr-elr`: a sample whose leader is in neither its ISR nor its ELR, with unclean leader
  election off (the model elects only from ISR, ELR or the last known leader, and every election leaves the
  leader in the ISR).
- `leader-epoch-regression`: a key's leader epoch going backwards.
- `ack-below-min-isr`: an acks=all send acknowledged while the observed ISR was below min.insync.replicas.
- `vanished-read`: a record a consumer read that the log later shows is gone.
- `follower-kept-in-isr`: a follower whose fetches from its leader were cut (a `link-cut` or `link-timeout` on
  its replication link, faults.node_links) still in the ISR well after `replica.lag.time.max.ms`, while the
  leader had new records to give it.
- `follower-rejoined-while-cut`: such a follower back in the same leader's ISR before its link was healed.

The observer samples every ~250 ms through whichever broker answers, and a broker's metadata can lag the
controller's (by milliseconds normally, for as long as it is cut off from the controller in a partition).
Every rule below is written so that stale or sparse samples do not raise false alarms; each docstring says
how, and what that costs in sensitivity.

Every instance carries `key` and `samples` (the state samples that show it), plus values, offsets, ops and
times as they apply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from kafka_chaos.faults.registry import silencing
from kafka_chaos.reference_model.config import RunConfig

__all__ = ["CONFORMANCE_NAMES", "DEFAULT_STALENESS_NS", "conformance"]

CONFORMANCE_NAMES = (
    "leader-outside-isr-elr",
    "leader-epoch-regression",
    "ack-below-min-isr",
    "vanished-read",
    "follower-kept-in-isr",
    "follower-rejoined-while-cut",
)
CUTTING_LINK_FAULTS = silencing()
"""Faults that stop a link's data for their whole window (faults.registry `silences`)."""
DEFAULT_STALENESS_NS = 2_000_000_000
"""How long a broker's metadata may lag the controller's in normal operation (metadata propagation is
milliseconds; this leaves a wide margin)."""
MAX_SAMPLES_PER_INSTANCE = 12

Sample = dict[str, Any]


def _clean(samples: Iterable[Mapping[str, Any]]) -> dict[str, list[Sample]]:
    """Samples with a key and a time, per key, in time order; a leader of -1 reads as None."""
    by_key: dict[str, list[Sample]] = {}
    for s in samples:
        key, t = s.get("key"), s.get("time")
        if not isinstance(key, str) or not isinstance(t, int):
            continue
        row = dict(s)
        if isinstance(row.get("leader"), int) and row["leader"] < 0:
            row["leader"] = None
        by_key.setdefault(key, []).append(row)
    for rows in by_key.values():
        rows.sort(key=lambda r: r["time"])
    return by_key


def _epoch(s: Mapping[str, Any]) -> int | None:
    e = s.get("leader_epoch")
    return e if isinstance(e, int) and e >= 0 else None


def _transitions(rows: list[Sample], start: int, end: int) -> list[Sample]:
    """The samples in [start, end] where leader, epoch or ISR changed (and the first one), capped."""
    out: list[Sample] = []
    prev: tuple[Any, ...] | None = None
    for s in rows:
        if s["time"] < start or s["time"] > end:
            continue
        state = (s.get("leader"), s.get("leader_epoch"), tuple(s.get("isr") or ()))
        if state != prev:
            out.append(s)
            prev = state
    return out[:MAX_SAMPLES_PER_INSTANCE]


# ------------------------------------------------------------------------------------------------ rules


def leader_outside_isr_elr(by_key: dict[str, list[Sample]], cfg: RunConfig) -> list[dict[str, Any]]:
    """Samples whose leader is in neither ISR nor ELR while unclean leader election is off.

    A sample's leader, ISR and ELR come from one metadata snapshot of one broker, so even a stale sample
    shows a state the partition really was in: staleness cannot cause a false alarm here. Consecutive
    samples showing the same (leader, epoch) make one instance. Samples without an ISR are skipped.
    """
    if cfg.unclean:
        return []
    out: list[dict[str, Any]] = []
    for key, rows in by_key.items():
        current: dict[str, Any] | None = None
        for s in rows:
            leader, isr = s.get("leader"), s.get("isr")
            if leader is None or not isinstance(isr, list):
                current = None
                continue
            eligible = set(isr) | set(s.get("elr") or ())
            if leader in eligible:
                current = None
                continue
            ident = (leader, s.get("leader_epoch"))
            if current is not None and (current["leader"], current["leader_epoch"]) == ident:
                current["last_time"] = s["time"]
                if len(current["samples"]) < MAX_SAMPLES_PER_INSTANCE:
                    current["samples"].append(s)
                continue
            current = {
                "key": key,
                "leader": leader,
                "leader_epoch": s.get("leader_epoch"),
                "isr": isr,
                "elr": s.get("elr"),
                "time": s["time"],
                "last_time": s["time"],
                "samples": [s],
            }
            out.append(current)
    return out


def leader_epoch_regression(by_key: dict[str, list[Sample]], staleness_ns: int) -> list[dict[str, Any]]:
    """A key's leader epoch going backwards.

    A single broker's metadata never goes back, but the observer asks whichever broker answers, and one that
    lags shows an older epoch after a newer one was seen elsewhere. Such a stale sample repeats a state that
    really existed, so a regression counts only when the older epoch comes with a (epoch, leader) pair never
    observed before for that key, and the newer epoch had been observed for longer than `staleness_ns`.
    The cost: a true regression back to a previously observed (epoch, leader) is not reported.
    """
    out: list[dict[str, Any]] = []
    for key, rows in by_key.items():
        seen: set[tuple[int, Any]] = set()
        max_epoch: int | None = None
        max_sample: Sample | None = None
        for s in rows:
            e = _epoch(s)
            if e is None:
                continue
            pair = (e, s.get("leader"))
            if (
                max_epoch is not None
                and max_sample is not None
                and e < max_epoch
                and pair not in seen
                and s["time"] - max_sample["time"] > staleness_ns
            ):
                out.append(
                    {
                        "key": key,
                        "leader_epoch": e,
                        "max_epoch": max_epoch,
                        "leader": s.get("leader"),
                        "time": s["time"],
                        "samples": [max_sample, s],
                    }
                )
            seen.add(pair)
            if max_epoch is None or e > max_epoch:
                max_epoch, max_sample = e, s
    return out


def _column(table: pa.Table, name: str, null: int = -1) -> np.ndarray[Any, Any]:
    col = table.column(name).combine_chunks()
    if col.null_count:
        col = col.fill_null(null)
    return np.asarray(col.to_numpy(zero_copy_only=False))


def ack_below_min_isr(
    by_key: dict[str, list[Sample]], sends: pa.Table, cfg: RunConfig, known: bool, staleness_ns: int
) -> list[dict[str, Any]]:
    """acks=all sends acknowledged while the observed ISR was below min.insync.replicas.

    Kafka checks the leader's ISR when it appends an acks=all write and again when the high watermark passes
    it; a legitimate acknowledgement therefore had at least min.insync.replicas members at some moment
    between the send's invoke and its completion. Samples can miss that moment or lag it, so a send counts
    only if

    1. some sample lies inside [invoke, complete], and
    2. every sample in the wider window [invoke − staleness, complete + staleness] shows an ISR below
       min.insync.replicas (a lagging broker would show a grown ISR within `staleness` of the moment), and
    3. none of those samples is visibly stale (its leader epoch behind the newest epoch already observed).

    What this cannot see: an ISR that grew to min.insync.replicas and shrank back, both between two samples.
    Sends that share evidence samples are grouped into one instance. Unknown configuration or acks other
    than all: nothing to check.
    """
    if not known or cfg.acks != "all" or sends.num_rows == 0:
        return []
    acked = _AckedSends.of(sends)
    if acked is None:
        return []
    out: list[dict[str, Any]] = []
    for key, samples in by_key.items():
        rows = [s for s in samples if isinstance(s.get("isr"), list)]
        if rows:
            out.extend(_group_by_evidence(key, rows, acked, cfg.min_insync, staleness_ns))
    return out


@dataclass(frozen=True)
class _AckedSends:
    """The sends table's columns ack_below_min_isr reads, and which rows are acknowledged."""

    ok: np.ndarray[Any, Any]
    keys: np.ndarray[Any, Any]
    values: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    ops: np.ndarray[Any, Any]
    invoke: np.ndarray[Any, Any]
    complete: np.ndarray[Any, Any]

    @classmethod
    def of(cls, sends: pa.Table) -> _AckedSends | None:
        complete = _column(sends, "complete_time")
        ok = (np.asarray(sends.column("type").to_pylist(), dtype=object) == "ok") & (complete >= 0)
        if not ok.any():
            return None
        return cls(ok, np.asarray(sends.column("key").to_pylist(), dtype=object), _column(sends, "value"),
                   _column(sends, "offset"), _column(sends, "op_index"), _column(sends, "invoke_time"), complete)


def _fresh_below(rows: list[Sample], min_isr: int) -> np.ndarray[Any, Any]:
    """Per sample: its ISR is below min ISR and it is not stale (its epoch not behind one already seen)."""
    newest = -1
    out = np.zeros(len(rows), dtype=bool)
    for i, s in enumerate(rows):
        e = _epoch(s)
        stale = e is not None and e < newest
        if e is not None:
            newest = max(newest, e)
        out[i] = len(s["isr"]) < min_isr and not stale
    return out


def _group_by_evidence(key: str, rows: list[Sample], acked: _AckedSends, min_isr: int,
                       staleness_ns: int) -> list[dict[str, Any]]:
    """The key's acknowledged sends whose evidence window shows only fresh samples below min ISR, grouped while
    their windows overlap (one instance per stretch of evidence)."""
    sel = np.nonzero(acked.ok & (acked.keys == key))[0]
    if len(sel) == 0:
        return []
    times = np.array([s["time"] for s in rows], dtype=np.int64)
    # prefix count of samples that are NOT fresh-and-below, to test "all in range" in O(1)
    bad_prefix = np.concatenate([[0], np.cumsum(~_fresh_below(rows, min_isr))])
    inv, comp = acked.invoke[sel], acked.complete[sel]
    in_lo, in_hi = np.searchsorted(times, inv, "left"), np.searchsorted(times, comp, "right")
    w_lo = np.searchsorted(times, inv - staleness_ns, "left")
    w_hi = np.searchsorted(times, comp + staleness_ns, "right")
    flagged = (in_hi > in_lo) & (bad_prefix[w_hi] - bad_prefix[w_lo] == 0)
    groups: list[dict[str, Any]] = []
    lo_hi: list[tuple[int, int]] = []
    for j in np.nonzero(flagged)[0]:
        row, lo, hi = int(sel[j]), int(w_lo[j]), int(w_hi[j])
        if not groups or lo >= lo_hi[-1][1]:
            groups.append({"key": key, "values": [], "offsets": [], "ops": [], "min_insync": min_isr,
                           "invoke_time": int(acked.invoke[row]), "complete_time": int(acked.complete[row])})
            lo_hi.append((lo, hi))
        g = groups[-1]
        g["values"].append(int(acked.values[row]))
        g["offsets"].append(int(acked.offsets[row]) if acked.offsets[row] >= 0 else None)
        g["ops"].append(int(acked.ops[row]))
        g["complete_time"] = max(g["complete_time"], int(acked.complete[row]))
        lo_hi[-1] = (lo_hi[-1][0], max(lo_hi[-1][1], hi))
    for g, (lo, hi) in zip(groups, lo_hi, strict=True):
        g["value"], g["offset"] = g["values"][0], g["offsets"][0]
        evidence = rows[lo:hi]
        g["isr_sizes"] = sorted({len(s["isr"]) for s in evidence})
        g["samples"] = evidence[:MAX_SAMPLES_PER_INSTANCE]
    return groups


def vanished_read(
    by_key: dict[str, list[Sample]], polls: pa.Table, staleness_ns: int
) -> list[dict[str, Any]]:
    """A record a consumer read (value v at offset o of key k, at time t) that the log later shows is gone:

    - `overwritten`: a later ok poll (time > t) read offset o of k and found a different value; or
    - `below-log-start`: a sample later than t + staleness reports a `log_start_offset` above o (only when
      the observer records that field; the harness's topics have no retention during a run); or
    - `beyond-final-hw`: the key's last two samples with a high watermark, both later than t + staleness and
      in the same leader epoch, show a high watermark <= o: at the end of the run the log no longer reaches
      o. (A new leader's HW can lag briefly after an election; two samples in one epoch, well after the read,
      keep that from counting.)

    Consumers only ever see records below the high watermark, which Kafka never removes while unclean
    election is off, so each of these is a committed record that vanished. Instances are grouped per key
    and evidence (the later poll op, or the sample), with `values` and `offsets`.
    """
    if polls.num_rows == 0:
        return []
    reads = _Reads.of(polls)
    for key in sorted(set(reads.keys.tolist())):
        sel = np.nonzero(reads.keys == key)[0]
        rows = by_key.get(key, [])
        _overwritten(reads, key, sel, rows)
        _below_log_start(reads, key, sel, rows, staleness_ns)
        _beyond_final_hw(reads, key, sel, rows, staleness_ns)
    return reads.instances()


@dataclass
class _Reads:
    """The polls table's columns, and the vanished-read instances found so far, per (key, evidence kind, id)."""

    keys: np.ndarray[Any, Any]
    values: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    times: np.ndarray[Any, Any]
    ops: np.ndarray[Any, Any]
    groups: dict[tuple[str, str, int], dict[str, Any]] = field(default_factory=dict)

    @classmethod
    def of(cls, polls: pa.Table) -> _Reads:
        return cls(np.asarray(polls.column("key").to_pylist(), dtype=object), _column(polls, "value"),
                   _column(polls, "offset"), _column(polls, "time"), _column(polls, "op_index"))

    def add(self, key: str, kind: str, evidence: int, row: int, extra: dict[str, Any]) -> dict[str, Any]:
        g = self.groups.get((key, kind, evidence))
        if g is None:
            g = {"key": key, "evidence": kind, "values": [], "offsets": [], "ops": [], "times": [], **extra}
            self.groups[(key, kind, evidence)] = g
        if int(self.values[row]) in g["values"] and int(self.offsets[row]) in g["offsets"]:
            return g
        g["values"].append(int(self.values[row]))
        g["offsets"].append(int(self.offsets[row]))
        g["ops"].append(int(self.ops[row]))
        g["times"].append(int(self.times[row]))
        return g

    def instances(self) -> list[dict[str, Any]]:
        out = list(self.groups.values())
        for g in out:
            g["ops"] = sorted(set(g["ops"]))
            g["value"], g["offset"] = g["values"][0], g["offsets"][0]
        return out


def _overwritten(reads: _Reads, key: str, sel: np.ndarray[Any, Any], rows: list[Sample]) -> None:
    """Within one offset of the key, a later read that found another value."""
    t, o, v = reads.times, reads.offsets, reads.values
    order = sel[np.lexsort((t[sel], o[sel]))]
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and o[order[end + 1]] == o[order[start]]:
            end += 1
        block = order[start : end + 1]
        if len(set(v[block].tolist())) > 1:
            for a in block:
                rereads = [b for b in block if t[b] > t[a] and v[b] != v[a]]
                if rereads:
                    b = int(rereads[0])
                    g = reads.add(key, "overwritten", int(reads.ops[b]), int(a), {
                        "later_value": int(v[b]), "samples": _transitions(rows, int(t[a]), int(t[b]))})
                    g["ops"].append(int(reads.ops[b]))
        start = end + 1


def _below_log_start(reads: _Reads, key: str, sel: np.ndarray[Any, Any], rows: list[Sample],
                     staleness_ns: int) -> None:
    """A later sample (past the staleness margin) whose log start offset is above the offset read."""
    starts = [s for s in rows if isinstance(s.get("log_start_offset"), int)]
    for row in sel:
        t, o = int(reads.times[row]), int(reads.offsets[row])
        moved = next((s for s in starts if s["time"] > t + staleness_ns and s["log_start_offset"] > o), None)
        if moved is not None:
            reads.add(key, "below-log-start", int(moved["time"]), int(row), {"samples": [moved]})


def _beyond_final_hw(reads: _Reads, key: str, sel: np.ndarray[Any, Any], rows: list[Sample],
                     staleness_ns: int) -> None:
    """The key's last two high-watermark samples, in one epoch and past the staleness margin, end at or below
    the offset read: at the end of the run the log no longer reaches it."""
    with_hw = [s for s in rows if isinstance(s.get("hw"), int) and s["hw"] >= 0]
    if len(with_hw) < 2:
        return
    last2 = with_hw[-2:]
    if _epoch(last2[0]) != _epoch(last2[1]):
        return
    final_hw = max(s["hw"] for s in last2)
    for row in sel:
        t, o = int(reads.times[row]), int(reads.offsets[row])
        if o >= final_hw and last2[0]["time"] > t + staleness_ns:
            reads.add(key, "beyond-final-hw", int(last2[1]["time"]), int(row), {"final_hw": final_hw,
                                                                              "samples": last2})


@dataclass(frozen=True)
class _CutFollower:
    """A follower whose fetches from its partition's leader a link fault cut, and the samples of that key taken
    under the same leader and leader epoch as at the cut (with an ISR)."""

    fault: Any
    key: str
    follower: int
    leader: int
    same_leader: list[Sample]


def _cut_followers(by_key: dict[str, list[Sample]], faults: Iterable[Any]) -> Iterable[_CutFollower]:
    """Every (fault, key, follower) where a cutting link fault (healed within the run) cut the follower's
    connections to the inter-broker listener of the key's leader at the time of the cut."""
    for w in faults:
        if w.f not in CUTTING_LINK_FAULTS or w.end is None or not isinstance(w.value, Mapping):
            continue
        cut = {(a, b) for a, b, listener, *_ in (w.value.get("links") or []) if listener == "internal"}
        for key, rows in by_key.items():
            at_cut = [s for s in rows if s["time"] <= w.start]
            if not at_cut or at_cut[-1].get("leader") is None:
                continue
            leader, epoch = at_cut[-1]["leader"], at_cut[-1].get("leader_epoch")
            followers = sorted({f for f, b in cut if b == leader})
            if not followers:
                continue
            same_leader = [s for s in rows if s.get("leader") == leader and s.get("leader_epoch") == epoch
                           and isinstance(s.get("isr"), list)]
            for follower in followers:
                yield _CutFollower(w, key, follower, leader, same_leader)


def follower_kept_in_isr(by_key: dict[str, list[Sample]], sends: pa.Table, faults: Iterable[Any], lag_ns: int,
                         staleness_ns: int) -> list[dict[str, Any]]:
    """A follower whose fetches from the leader were cut, still in the ISR after the model's deadline.

    The model (Kafka's `Partition.maybeShrinkIsr`, run every replica.lag.time.max.ms / 2): a follower that has not
    reached the leader's log end for replica.lag.time.max.ms leaves the ISR, unless its log end equals the
    leader's (nothing new to fetch). So a follower F of leader L counts when a fault cut F's connections to L's
    inter-broker listener (`[F, L, "internal"]` in the fault's links) for its whole window, a send to the key was
    invoked in the window's first part (the leader appended something F cannot have), and a sample at least
    1.5 × lag + `staleness_ns` after the cut still shows F in the ISR with the same leader and epoch as at the cut.
    The tolerance (lag/2 for the shrink schedule, staleness for the sample's broker) is the model's; samples
    from a broker that is itself cut off could show a stale ISR, which `staleness_ns` does not cover: such
    faults (the cut leader's own view) are the reason only the partition leader's samples with an unchanged
    epoch are used.
    """
    out: list[dict[str, Any]] = []
    if sends.num_rows == 0:
        return out
    keys = np.asarray(sends.column("key").to_pylist(), dtype=object)
    invoked = sends.column("invoke_time").to_numpy(zero_copy_only=False)
    for c in _cut_followers(by_key, faults):
        w = c.fault
        deadline = w.start + lag_ns + lag_ns // 2 + staleness_ns
        if deadline >= w.end:
            continue
        fed = bool(np.any((keys == c.key) & (invoked >= w.start) & (invoked <= deadline - lag_ns)))
        kept = [s for s in c.same_leader if deadline <= s["time"] < w.end and c.follower in s["isr"]]
        if fed and kept:
            out.append({"key": c.key, "follower": c.follower, "leader": c.leader, "fault": w.f,
                        "cut_at": w.start, "deadline": deadline, "time": kept[0]["time"],
                        "samples": kept[:MAX_SAMPLES_PER_INSTANCE]})
    return out


def follower_rejoined_while_cut(by_key: dict[str, list[Sample]], faults: Iterable[Any],
                                staleness_ns: int) -> list[dict[str, Any]]:
    """A follower back in its leader's ISR while its fetches from that leader were still cut.

    The model (Kafka's `Partition.maybeExpandIsr`): a follower rejoins only once its log end has reached the
    leader's high watermark, which it cannot while it cannot fetch; so after the heal, not before. Counted
    per leader epoch (under a new leader the follower may fetch again); the follower must first be seen out of
    the ISR, and back in it in two samples at least `staleness_ns` after that (a lagging broker's metadata can
    show the ISR of before the shrink for that long).
    """
    out: list[dict[str, Any]] = []
    for c in _cut_followers(by_key, faults):
        during = [s for s in c.same_leader if c.fault.start < s["time"] < c.fault.end]
        left = next((s["time"] for s in during if c.follower not in s["isr"]), None)
        if left is None:
            continue
        back = [s for s in during if s["time"] >= left + staleness_ns and c.follower in s["isr"]]
        if len(back) >= 2:
            out.append({"key": c.key, "follower": c.follower, "leader": c.leader, "fault": c.fault.f,
                        "left_at": left, "time": back[0]["time"], "samples": back[:MAX_SAMPLES_PER_INSTANCE]})
    return out


def conformance(
    state_samples: list[dict[str, Any]],
    sends: pa.Table,
    polls: pa.Table,
    config: RunConfig | None,
    *,
    staleness_ns: int = DEFAULT_STALENESS_NS,
    faults: Iterable[Any] = (),
    replica_lag_ns: int = 30_000_000_000,
) -> dict[str, list[dict[str, Any]]]:
    """Every conformance anomaly of a run, by name (see the module docstring).

    `config` may be a `RunConfig`, a resolved scenario dict, or None (then Kafka's defaults: unclean
    election off, and the acks=all check is skipped because acks are unknown). `faults`: the run's fault
    windows (faults.windows.FaultWindow); `replica_lag_ns`: the run's replica.lag.time.max.ms.
    """
    cfg, known = RunConfig.coerce(config)
    by_key = _clean(state_samples)
    return {
        "leader-outside-isr-elr": leader_outside_isr_elr(by_key, cfg),
        "leader-epoch-regression": leader_epoch_regression(by_key, staleness_ns),
        "ack-below-min-isr": ack_below_min_isr(by_key, sends, cfg, known, staleness_ns),
        "vanished-read": vanished_read(by_key, polls, staleness_ns),
        "follower-kept-in-isr": follower_kept_in_isr(by_key, sends, faults, replica_lag_ns, staleness_ns),
        "follower-rejoined-while-cut": follower_rejoined_while_cut(by_key, faults, staleness_ns),
    }
