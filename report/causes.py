"""An availability window's cause in one line, from the cluster events the checker attached to it
(`checker.cluster_events.causes_for`: `"12.3s node 1: …"`), e.g. "controller failover: node 3 won epoch 3 at
45.4 s; broker 1 fenced at 48.5 s". The events themselves stay listed below the line in the report."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Cause", "cause_line", "parse_cause"]

_CAUSE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)s node (\S+): (.*)$")
# (event text pattern, the kind of cause it shows, how the line says it); the first kind found names the line
_RULES: tuple[tuple[re.Pattern[str], str, str], ...] = (
    (re.compile(r"^node (\d+) won epoch (\d+)"), "controller failover", "node {0} won epoch {1}"),
    (re.compile(r"^Raft Leader at epoch (\d+)"), "controller failover", "node {node} won epoch {0}"),
    (re.compile(r"^\d+ NotControllerException"), "controller failover", "node {node} answered NotController"),
    (re.compile(r"^fenced broker (\d+)"), "broker fenced", "broker {0} fenced"),
    (re.compile(r"^unfenced broker (\d+)"), "broker back", "broker {0} unfenced"),
    (re.compile(r"^(\S+): ISR \S+ → (\S+)"), "ISR change", "ISR of {0} now {1}"),
    (re.compile(r"^(\S+): truncated to offset (\d+)"), "truncation", "{0} truncated to {1}"),
    (re.compile(r"^Kafka Server started"), "node restart", "node {node} started"),
    # the active controller of an epoch is the node that won it: said once when both are logged
    (re.compile(r"^controller became active at epoch (\d+)"), "controller failover", "node {node} won epoch {0}"),
)
MAX_PARTS = 3


@dataclass(frozen=True, slots=True)
class Cause:
    """One cluster event of a window: when (s since the run started), on which node, what."""

    time_s: float
    node: str
    text: str


def parse_cause(s: str) -> Cause | None:
    m = _CAUSE.match(str(s))
    return None if m is None else Cause(float(m.group(1)), m.group(2), m.group(3))


def cause_line(causes: Iterable[str], faults: Sequence[str] = ()) -> str:
    """The window's cause in one line: the kind of the first telling event (a controller failover outranks a
    fencing, which outranks an ISR change), then up to three events in time order with their times; without
    events, the faults then; without either, says so."""
    parsed = sorted((c for c in map(parse_cause, causes) if c is not None), key=lambda c: c.time_s)
    kinds: list[tuple[int, str]] = []
    parts: list[str] = []
    said_before: set[str] = set()
    for c in parsed:
        for rank, (pattern, kind, phrase) in enumerate(_RULES):
            m = pattern.match(c.text)
            if m is None:
                continue
            kinds.append((rank, kind))
            said = phrase.format(*m.groups(), node=c.node)
            if said not in said_before:
                said_before.add(said)
                parts.append(f"{said} at {c.time_s:.1f} s")
            break
    if not parts:
        if parsed:
            first = parsed[0]
            return f"cluster event: node {first.node} {first.text} at {first.time_s:.1f} s"
        return f"fault: {', '.join(faults)}; no cluster event logged" if faults else \
            "no fault and no cluster event near it"
    kind = min(kinds)[1]
    if not faults and any(k == "node restart" for _, k in kinds):
        kind = "cluster start-up"  # nodes starting with no fault near: the run's own start
    more = len(parts) - MAX_PARTS
    return f"{kind}: " + "; ".join(parts[:MAX_PARTS]) + (f" (+{more} more)" if more > 0 else "")
