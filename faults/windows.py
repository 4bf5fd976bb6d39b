"""The fault schedule as it happened, from the nemesis events in the history: the one pairing of faults with
their heals, which the checker's fault windows and the model's fault summary both read.

The nemesis records an `invoke` when it asks for a fault or a heal and an `info` when that took effect
(docs/architecture.md §3). A *fault window* runs from the moment a fault took effect to the moment its heal took effect
(or to the end of the history if it was never healed). Which event heals which fault:

- each kind's heal is the registry's (faults.registry: `restart` heals `kill`, `heal-link` the client-link
  faults, `<op>-done` an operation…) — on the same nodes when both events name nodes (`value["nodes"]`), else
  every open fault of those kinds;
- `heal` heals every open partition (it flushes every rule) and any open fault of a kind the registry lacks;
- `heal-<f>` and `<f>-heal` heal open faults of kind `<f>`;
- any other f starts a fault.

An event with only an `invoke` (the run stopped before it took effect) is taken to act at its invoke time,
the conservative reading for a verdict. The `info`'s value is laid over the `invoke`'s, so a window keeps the
symbolic target (`leader`, `all`) the invoke named beside the nodes the info resolved.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_chaos.faults.registry import HEALS, KINDS

KNOWN = frozenset(KINDS)


@dataclass(frozen=True)
class NemesisEvent:
    """One nemesis event as recorded (`invoke` when a fault or heal was asked for, `info` once it took effect),
    or an action (an invoke and its info merged); also read from history rows (dicts) for callers that hold rows
    rather than tables."""

    index: int
    time: int
    type: str
    f: str
    value: Any
    error: Any = None
    """The nemesis's error, when the fault (or heal) failed (it may still have done something)."""
    process: str = "nemesis"
    """`nemesis`, or `operator` for an operation's steps (recorded like faults)."""

    @classmethod
    def from_rows(cls, rows: Iterable[Any]) -> list[NemesisEvent]:
        """The nemesis rows among `rows`, in order. A row without a time takes its position, which keeps the
        order (all a summary of maxima needs)."""
        out: list[NemesisEvent] = []
        for i, row in enumerate(rows):
            if not isinstance(row, dict) or row.get("process") != "nemesis":
                continue
            time = row.get("time")
            out.append(cls(int(row.get("index", i)), time if isinstance(time, int) else i,
                           str(row.get("type", "")), str(row.get("f", "")), row.get("value"), row.get("error")))
        return out


@dataclass(frozen=True)
class FaultWindow:
    """One fault, from when it took effect to when its heal did."""

    f: str
    value: Any
    nodes: tuple[int, ...]
    start: int
    end: int | None
    """None: never healed within the history."""
    heal: str | None
    index: int
    """History index of the event that started it."""
    error: Any = None
    """The nemesis's error if starting the fault failed part way (it may still have done something)."""

    def overlaps(self, start: int, end: int | None) -> bool:
        """Whether the window intersects [start, end] (end None: until the end of the history)."""
        return (end is None or self.start <= end) and (self.end is None or start <= self.end)

    def to_dict(self) -> dict[str, Any]:
        return {
            "f": self.f,
            "value": self.value,
            "nodes": list(self.nodes),
            "start": self.start,
            "end": self.end,
            "heal": self.heal,
            "index": self.index,
            "error": self.error,
        }


@dataclass(frozen=True)
class FaultWindows:
    """What faults the run saw, and when: the input to the verdicts besides the configuration."""

    windows: tuple[FaultWindow, ...]
    end_time: int

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(w.f for w in self.windows)

    def active(self, start: int, end: int | None = None) -> tuple[FaultWindow, ...]:
        """Fault windows that intersect [start, end] (a point in time when end is None and start given)."""
        return tuple(w for w in self.windows if w.overlaps(start, start if end is None else end))

    def before(self, time: int) -> tuple[FaultWindow, ...]:
        """Faults that had taken effect by `time`."""
        return tuple(w for w in self.windows if w.start <= time)

    def to_dict(self) -> dict[str, Any]:
        return {"end_time": self.end_time, "windows": [w.to_dict() for w in self.windows]}


def _nodes(value: Any) -> tuple[int, ...]:
    if isinstance(value, dict):
        nodes = value.get("nodes")
        if isinstance(nodes, list):
            return tuple(n for n in nodes if isinstance(n, int))
    return ()


def _heals(f: str, open_kind: str) -> bool:
    """Whether an event named f heals an open fault of kind `open_kind`."""
    if f == "heal":  # histories of other tools heal their own kinds with a bare `heal`
        return open_kind == "partition" or open_kind not in KNOWN
    if f in HEALS:
        return open_kind in HEALS[f]
    return f in (f"heal-{open_kind}", f"{open_kind}-heal")


def _is_heal(f: str) -> bool:
    return f in HEALS or f == "heal" or f.startswith("heal-") or (f.endswith("-heal") and len(f) > 5)


def _merged(invoke: Any, info: Any) -> Any:
    """The info's value over the invoke's: the completion may not repeat the target or the shape."""
    if isinstance(invoke, dict) and isinstance(info, dict):
        return {**invoke, **info}
    return info if info is not None else invoke


def _effective(events: Iterable[NemesisEvent]) -> list[NemesisEvent]:
    """One action per nemesis action: its `info` (when it took effect), or its `invoke` if none followed."""
    out: list[NemesisEvent] = []
    pending: NemesisEvent | None = None
    for e in events:
        if e.type == "invoke":
            if pending is not None:
                out.append(pending)
            pending = e
        else:
            if pending is not None and pending.f == e.f:
                out.append(NemesisEvent(pending.index, e.time, e.type, e.f, _merged(pending.value, e.value), e.error))
            else:
                if pending is not None:
                    out.append(pending)
                out.append(e)
            pending = None
    if pending is not None:
        out.append(pending)
    return out


def faults_from_history(events: Sequence[NemesisEvent], *, end_time: int = 0) -> FaultWindows:
    """Fault windows from the nemesis events of a history (see the module docstring for the pairing)."""
    open_: list[tuple[NemesisEvent, tuple[int, ...]]] = []
    windows: list[FaultWindow] = []

    def close(ev: NemesisEvent, pick: list[tuple[NemesisEvent, tuple[int, ...]]]) -> None:
        for item in pick:
            start, nodes = item
            open_.remove(item)
            windows.append(
                FaultWindow(start.f, start.value, nodes, start.time, ev.time, ev.f, start.index, start.error)
            )

    for ev in _effective(events):
        if not _is_heal(ev.f):
            open_.append((ev, _nodes(ev.value)))
            continue
        same = [item for item in open_ if _heals(ev.f, item[0].f)]
        if ev.f != "heal":  # `heal` flushes every rule; other heals undo the fault on some nodes
            healed = set(_nodes(ev.value))
            if healed:
                targeted = [item for item in same if not item[1] or set(item[1]) & healed]
            else:  # e.g. the heal of a fault that failed to start, on no node
                targeted = [item for item in same if not item[1]]
            same = targeted or same
        close(ev, same)
    for start, nodes in open_:
        windows.append(
            FaultWindow(start.f, start.value, nodes, start.time, None, None, start.index, start.error)
        )
    windows.sort(key=lambda w: (w.start, w.index))
    last = max([end_time, *(e.time for e in events)])
    return FaultWindows(windows=tuple(windows), end_time=last)
