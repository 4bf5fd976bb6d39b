"""faults.windows: the one pairing of nemesis events into fault windows, read by the checker and the model."""

from __future__ import annotations

from typing import Any

from kafka_chaos.faults.registry import KINDS, OPERATIONS
from kafka_chaos.faults.windows import NemesisEvent, faults_from_history
from kafka_chaos.reference_model.verdicts import FaultSummary


def rows(*steps: tuple[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """An invoke then an info per step, one second apart."""
    out: list[dict[str, Any]] = []
    for f, value in steps:
        t = len(out) * 1000
        out.append({"process": "nemesis", "type": "invoke", "f": f, "value": {}, "time": t, "index": len(out)})
        out.append({"process": "nemesis", "type": "info", "f": f, "value": value, "time": t + 1, "index": len(out)})
    return out


def test_every_kinds_heal_comes_from_the_registry() -> None:
    for kind, info in [*KINDS.items(), *OPERATIONS.items()]:
        fs = faults_from_history(NemesisEvent.from_rows(rows((kind, {"nodes": [1]}), (info.heal, {"nodes": [1]}))))
        assert [(w.f, w.heal) for w in fs.windows] == [(kind, info.heal)], kind


def test_a_heal_on_other_nodes_leaves_the_fault_open() -> None:
    fs = faults_from_history(NemesisEvent.from_rows(rows(
        ("link-cut", {"nodes": [1]}), ("link-cut", {"nodes": [2]}), ("heal-links", {"nodes": [2]}))))
    assert [(w.nodes, w.end is None) for w in fs.windows] == [((1,), True), ((2,), False)]


def test_a_bare_heal_ends_partitions_but_not_crashes() -> None:
    fs = faults_from_history(NemesisEvent.from_rows(rows(
        ("kill", {"nodes": [1]}), ("partition", {"nodes": [2]}), ("heal", {}))))
    assert {w.f: w.heal for w in fs.windows} == {"kill": None, "partition": "heal"}


def test_the_models_summary_pairs_as_the_checker_does() -> None:
    """from_events and from_windows of faults_from_history are one pairing: they cannot disagree."""
    history = rows(("kill", {"nodes": [1]}), ("kill", {"nodes": [2]}), ("restart", {"nodes": [1]}),
                   ("power-loss", {"nodes": [3]}), ("kill", {"nodes": [1]}))
    from_rows = FaultSummary.from_events(history)
    assert from_rows == FaultSummary.from_windows(faults_from_history(NemesisEvent.from_rows(history)).windows)
    assert (from_rows.max_down, from_rows.distinct_down, from_rows.max_power_lost) == (3, 3, 1)


def test_rows_without_times_keep_their_order() -> None:
    history = [{"process": "nemesis", "type": "info", "f": f, "value": {"nodes": [n]}}
               for f, n in [("kill", 3), ("kill", 1), ("restart", 3), ("kill", 2)]]
    assert FaultSummary.from_events(history).max_down == 2
