"""What the reference model expects of one run, beside what the run measured: the single-run report's
"Expected (reference model) vs observed" section (docs/architecture.md, the report).

`expectations(config, windows, results)` is pure: the resolved scenario, the fault windows (results.json
`faults.windows`: `f`, `nodes`, `start`, `end` in ns, `value`) and results.json give one row per aspect —

- **durability**: whether an acknowledged write may be lost under this configuration and these faults
  (`verdicts.judge` on a lost write: the model's durability prediction), beside the lost and unseen
  acknowledged writes the checker found;
- **availability**: per fault, by when writes must be back (`availability.predict`, the leader assumed hit
  when the history does not say), beside the longest window without an acknowledged send that overlaps it;
- **ISR / ELR**: whether the ISR may fall below `min.insync.replicas` or a partition be left without a leader,
  and which replicas may lead, beside the observer's health totals and the conformance checks.

A row's `mismatch` marks an observation the prediction does not allow; an observation that falls short of
what is permitted (no loss where loss may happen) is not one.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_chaos.reference_model import availability as bounds
from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.verdicts import FaultSummary, judge

__all__ = ["Expectation", "Expectations", "expectations"]

NS = 1_000_000_000
# Conformance checks about which replica leads and who stays in the ISR (checker.conformance).
LEADERSHIP_CHECKS = ("leader-outside-isr-elr", "leader-epoch-regression", "ack-below-min-isr",
                     "follower-kept-in-isr", "follower-rejoined-while-cut")


@dataclass(frozen=True, slots=True)
class Expectation:
    """One aspect: what the model predicts, what the run showed, and whether they disagree."""

    aspect: str
    predicted: str
    observed: str
    mismatch: bool = False


@dataclass(frozen=True, slots=True)
class Expectations:
    config: str
    """The configuration the model read, in one line."""
    rows: tuple[Expectation, ...]

    @property
    def mismatches(self) -> int:
        return sum(1 for r in self.rows if r.mismatch)


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _count(results: Mapping[str, Any], name: str) -> int:
    counts = results.get("anomaly_counts")
    v = counts.get(name) if isinstance(counts, Mapping) else None
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _durability(cfg: RunConfig, faults: FaultSummary, results: Mapping[str, Any]) -> Expectation:
    verdict = judge("lost-write", {}, cfg, faults)
    may_lose = verdict.verdict == "permitted"
    lost, unseen = _count(results, "lost-write"), _count(results, "unseen")
    complete = results.get("complete")
    observed = f"{lost} lost write(s), {unseen} acknowledged value(s) unseen"
    if complete is False:
        observed += " (final drain incomplete: unseen is not loss)"
    counted = lost + (unseen if complete is not False else 0)
    head = "acknowledged writes may be lost" if may_lose else "no acknowledged write may be lost"
    return Expectation("acknowledged writes lost", f"{head}: {verdict.reason}", observed,
                       mismatch=not may_lose and counted > 0)


def _send_windows(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    availability = results.get("availability")
    windows = availability.get("windows") if isinstance(availability, Mapping) else None
    return [w for w in windows or () if isinstance(w, Mapping) and w.get("kind") == "send" and w.get("key") is None
            and isinstance(w.get("start_s"), int | float) and isinstance(w.get("end_s"), int | float)]


def _fault_label(w: Mapping[str, Any]) -> str:
    nodes = ",".join(str(n) for n in w.get("nodes") or ())
    end = w.get("end")
    until = f"{end / NS:.1f}" if isinstance(end, int | float) else "…"
    return f"{w.get('f')} [{nodes}] {float(w.get('start') or 0) / NS:.1f}–{until} s"


def _span(w: Mapping[str, Any]) -> tuple[float, float]:
    end = w.get("end")
    return float(w.get("start") or 0) / NS, float(end) / NS if isinstance(end, int | float) else float("inf")


def _impaired(w: Mapping[str, Any], everyone: tuple[int, ...]) -> set[int]:
    value = w.get("value")
    return bounds.impaired_by(str(w.get("f")), tuple(int(n) for n in w.get("nodes") or ()), value, everyone)


LEAD_S = 2.0
"""A window starts at the last acknowledged send before the stall, so up to a request's latency before the
fault that caused it."""


def _owner(send_window: Mapping[str, Any], every: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The fault a window without acknowledged sends is laid to: the latest one started by then."""
    started = [w for w in every if _span(w)[0] <= float(send_window["start_s"]) + LEAD_S]
    return max(started, key=lambda w: _span(w)[0], default=None)


def _availability(window: Mapping[str, Any], every: list[Mapping[str, Any]], cfg: RunConfig,
                  sends: list[Mapping[str, Any]]) -> Expectation:
    start_s, until = _span(window)
    end_s = None if until == float("inf") else until
    value = window.get("value") if isinstance(window.get("value"), Mapping) else {}
    nodes = tuple(int(n) for n in window.get("nodes") or ())
    selector = value.get("selector") if isinstance(value, Mapping) else None
    fault = bounds.TimedFault(str(window.get("f")), nodes, start_s, end_s,
                         selector if isinstance(selector, str) else None)
    everyone = tuple(sorted(set(cfg.brokers) | set(cfg.controllers)))
    # the faults open together with this one decide whether writes may wait for a heal (three kills in turn
    # leave no replica), as the checker's bound does
    impaired: set[int] = set()
    for other in every:
        o_start, o_end = _span(other)
        if o_start <= until and o_end >= start_s:
            impaired |= _impaired(other, everyone)
    # the partition's replicas are not known here: the first RF brokers stand for a partition the fault hits
    blocking = bounds.expected_unavailability(impaired, cfg, cfg.brokers[:cfg.rf])
    p = bounds.predict(fault, cfg.timeouts, hit_leader=None, hit_quorum_leader=None, expected=blocking)
    if p.deadline_s is None:
        predicted = f"need not be available (not healed): {p.note}"
    elif p.after == "heal":
        predicted = f"back by {p.deadline_s:.1f} s: {p.note}"
    else:
        predicted = f"back within {p.within_s:.1f} s of the fault, by {p.deadline_s:.1f} s ({p.note})"
    overlapping = [w for w in sends if _owner(w, every) is window]
    if not overlapping:
        return Expectation(f"writes during {_fault_label(window)}", predicted,
                           "no window without an acknowledged send")
    longest = max(overlapping, key=lambda w: float(w["end_s"]) - float(w["start_s"]))
    last_end = max(float(w["end_s"]) for w in overlapping)
    observed = (f"{len(overlapping)} window(s) without an acknowledged send, longest "
                f"{float(longest['end_s']) - float(longest['start_s']):.1f} s "
                f"({float(longest['start_s']):.1f}–{float(longest['end_s']):.1f} s); writes back at {last_end:.1f} s")
    late = p.deadline_s is not None and last_end > p.deadline_s
    return Expectation(f"writes during {_fault_label(window)}", predicted, observed, mismatch=late)


def _observed_s(value: Any, what: str, forced: bool) -> str:
    if not isinstance(value, int | float):
        return "not measured (no health in results.json)"
    text = f"{value} s {what} (observer)"
    if value > 0 and not forced:
        # Kafka lets a slow follower leave the ISR (replica.lag.time.max.ms): time the faults alone do not force
        # is unavailability, which the availability rows bound, not a broken promise
        text += "; more than the faults force: a follower fell behind (permitted)"
    return text


def _isr(cfg: RunConfig, faults: FaultSummary, health: Mapping[str, Any]) -> list[Expectation]:
    down = max(faults.max_affected, faults.max_down)
    below = cfg.rf - down < cfg.min_insync
    leaderless = down >= cfg.rf
    return [
        Expectation(
            "ISR below min.insync.replicas",
            (f"forced by the faults: up to {down} of RF={cfg.rf} replicas cut off at once, fewer than "
             f"min.insync.replicas={cfg.min_insync} left; acks=all sends fail NOT_ENOUGH_REPLICAS until a heal"
             if below else
             f"not forced by the faults: at most {down} of RF={cfg.rf} replicas cut off at once leaves "
             f"≥ min.insync.replicas={cfg.min_insync} once the controller drops them from the ISR"),
            _observed_s(health.get("under_min_isr_s"), "under min ISR", below),
        ),
        Expectation(
            "partitions without a leader",
            ("forced by the faults: every replica of a partition may be down at once"
             + ("; unclean election on lets a stale replica lead" if cfg.unclean else
                "; with unclean election off it waits for an ISR" + (" or ELR" if cfg.elr else "")
                + " member to return")
             if leaderless else
             f"not forced by the faults: at most {down} of RF={cfg.rf} replicas down, an ISR member is left to "
             "lead once the controller fences the faulted ones (broker.session.timeout.ms)"),
            _observed_s(health.get("offline_s"), "offline", leaderless),
        ),
    ]


def _leaders(cfg: RunConfig, results: Mapping[str, Any]) -> Expectation:
    who = ("ISR members, and with ELR (KIP-966) the eligible replicas when the ISR is empty" if cfg.elr else
           "ISR members only (ELR off: the last ISR member stays in the ISR and leads again on return)")
    if cfg.unclean:
        who += "; unclean election on: any live replica once no ISR member is left"
    checked = "conformance" in results or any(n in (results.get("anomaly_counts") or {}) for n in LEADERSHIP_CHECKS)
    found = {n: _count(results, n) for n in LEADERSHIP_CHECKS if _count(results, n)}
    if not checked:
        observed = "not checked (results.json has no conformance checks)"
    elif found:
        observed = ", ".join(f"{n} × {c}" for n, c in found.items())
    else:
        observed = "every leader and ISR change observed conforms (" + ", ".join(LEADERSHIP_CHECKS) + ": none)"
    return Expectation("who may lead", f"leaders come from {who}; the leader epoch only grows", observed,
                       mismatch=bool(found))


def expectations(config: Mapping[str, Any] | None, windows: Iterable[Mapping[str, Any]],
                 results: Mapping[str, Any] | None) -> Expectations:
    """The model's expectations for a run with this resolved scenario and these fault windows, beside what
    results.json measured (absent: the observed side says so)."""
    results = results or {}
    windows = [w for w in windows if isinstance(w, Mapping)]
    cfg = RunConfig.from_scenario(config or {})
    faults = FaultSummary.coerce({"windows": windows})
    health = results.get("health")
    rows = [_durability(cfg, faults, results)]
    sends = _send_windows(results)
    rows += [_availability(w, windows, cfg, sends) for w in windows]
    away = [w for w in sends if _owner(w, windows) is None]
    if away or not windows:
        longest = max((float(w["end_s"]) - float(w["start_s"]) for w in away), default=0.0)
        retry = bounds.baseline_s(cfg.timeouts)
        rows.append(Expectation("writes with no fault before", f"no window longer than {retry:.1f} s (a client retry)",
                                f"{len(away)} window(s) without an acknowledged send, longest {longest:.1f} s",
                                mismatch=longest > retry))
    rows += _isr(cfg, faults, health if isinstance(health, Mapping) else {})
    rows.append(_leaders(cfg, results))
    line = (f"acks={cfg.acks}, RF={cfg.rf}, min.insync.replicas={cfg.min_insync}, unclean election "
            f"{_on(cfg.unclean)}, ELR {_on(cfg.elr)}, idempotence {_on(cfg.idempotence)}; faults: "
            + (", ".join(sorted(faults.kinds)) or "none")
            + f" (at most {max(faults.max_affected, faults.max_down)} node(s) at once)")
    return Expectations(line, tuple(rows))
