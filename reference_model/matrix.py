"""The durability matrix, computed from the model: what can each configuration lose, and can it still write?

Nothing here is typed by hand. Every cell is the answer of :func:`reference_model.explore.explore` (can
an acknowledged value be lost once everything heals, over every interleaving of sends, faults and protocol
steps) and :func:`reference_model.explore.writes_available` (is a send acknowledged once the cluster has
settled under the faults), over every concrete variant of the fault set (which broker dies, in which
order).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from rich.table import Table

from kafka_chaos.reference_model.explore import (
    MATRIX_FAULT_SETS,
    POWER_LOSS_FAULT_SETS,
    explore,
    fault_scripts,
    writes_available,
)
from kafka_chaos.reference_model.model import Acks, Event, TopicConfig

__all__ = ["POWER_LOSS_FAULT_SETS", "DurabilityPrediction", "MatrixRow", "durability_matrix", "predict",
           "render_matrix"]

ACKS: tuple[Acks, ...] = ("0", "1", "all")


@dataclass(frozen=True, slots=True)
class DurabilityPrediction:
    """The model's answer for one configuration under one fault set."""

    acks: Acks
    min_insync: int
    rf: int
    unclean: bool
    elr: bool
    fault_set: str
    loss_possible: bool
    """Some interleaving loses an acknowledged value (it is gone once every fault has healed)."""
    clean_loss_possible: bool
    """... even without an unclean leader election."""
    writes_available: bool
    """In every variant of the fault set, a send with these acks is acknowledged once the cluster settles."""
    witness: tuple[Event, ...] | None
    """A replayable event trace that loses an acknowledged value (one without unclean election if any)."""
    lagging: bool = False
    exhaustive: bool = True
    """False if the search hit its state budget (then "no loss" is not a proof)."""

    @property
    def reason(self) -> str:
        """One sentence naming the rule behind the answer."""
        if not self.loss_possible:
            if self.acks == "all":
                return (
                    f"acks=all: an acknowledged write is on every in-sync replica (at least "
                    f"min.insync.replicas={self.min_insync}) and only a replica that had it can be elected"
                    + ("" if self.unclean else " with unclean election off")
                    + f", so '{self.fault_set}' cannot lose it"
                )
            return (
                f"'{self.fault_set}' never removes the leader that acknowledged the write, so nothing is lost"
            )
        if not self.clean_loss_possible:
            return (
                "unclean.leader.election.enable=true: once every in-sync replica is down a stale replica may "
                "be elected, and committed data it lacks is lost"
            )
        if self.acks in ("0", "1"):
            return (
                f"acks={self.acks}: the leader acknowledged before replication; a leader crash or isolation "
                "may lose it"
            )
        return f"acks=all under '{self.fault_set}': the model found a trace that loses acknowledged data"


@dataclass(frozen=True, slots=True)
class MatrixRow:
    """One cell of the durability matrix."""

    acks: Acks
    min_insync: int
    rf: int
    unclean: bool
    elr: bool
    fault_set: str
    loss_possible: bool
    writes_available: bool
    reason: str


def _topic(rf: int, min_insync: int, unclean: bool, elr: bool) -> TopicConfig:
    return TopicConfig(replicas=tuple(range(1, rf + 1)), min_insync=min_insync, unclean=unclean, elr=elr)


@functools.lru_cache(maxsize=4096)
def predict(
    acks: Acks,
    min_insync: int,
    rf: int,
    unclean: bool,
    fault_set: str,
    elr: bool = False,
    lagging: bool = False,
    n_values: int = 1,
) -> DurabilityPrediction:
    """The model's prediction for one configuration under one fault set (see
    :data:`reference_model.explore.FAULT_SETS` for the names; ``lagging`` lets healthy followers fall out of
    the ISR for being slow, as Kafka permits). Cached: the same question is explored once per process."""
    if acks not in ACKS:
        raise ValueError(f"acks must be one of {ACKS}, got {acks!r}")
    config = _topic(rf, min_insync, unclean, elr)
    loss = clean = False
    witness: tuple[Event, ...] | None = None
    exhaustive = True
    available = True
    for script in fault_scripts(fault_set, config.replicas):
        available = available and writes_available(config, acks, script)
        if clean:
            continue  # already answered; availability still needs every variant
        found = explore(config, acks, script, n_values=n_values, lagging=lagging)
        exhaustive = exhaustive and not found.truncated
        if found.loss_possible and (witness is None or (found.clean_loss_possible and not clean)):
            witness = found.witness
        loss = loss or found.loss_possible
        clean = clean or found.clean_loss_possible
    return DurabilityPrediction(
        acks=acks,
        min_insync=min_insync,
        rf=rf,
        unclean=unclean,
        elr=elr,
        fault_set=fault_set,
        loss_possible=loss,
        clean_loss_possible=clean,
        writes_available=available,
        witness=witness,
        lagging=lagging,
        exhaustive=exhaustive,
    )


@functools.lru_cache(maxsize=8)
def _matrix(rf: int, elr: bool, fault_sets: tuple[str, ...], lagging: bool) -> tuple[MatrixRow, ...]:
    rows = []
    for acks in ACKS:
        for min_insync in (1, 2, 3):
            for unclean in (False, True):
                for fault_set in fault_sets:
                    p = predict(acks, min_insync, rf, unclean, fault_set, elr=elr, lagging=lagging)
                    rows.append(
                        MatrixRow(
                            acks, min_insync, rf, unclean, elr, fault_set, p.loss_possible,
                            p.writes_available, p.reason,
                        )
                    )
    return tuple(rows)


def durability_matrix(
    rf: int = 3, elr: bool = False, fault_sets: tuple[str, ...] = MATRIX_FAULT_SETS, lagging: bool = False
) -> list[MatrixRow]:
    """acks ∈ {0, 1, all} × min.insync.replicas ∈ {1, 2, 3} × unclean ∈ {off, on} × ``fault_sets``, each
    cell computed by the model for a partition of ``rf`` replicas (with or without ELR). By default only the
    faults take replicas out of the ISR; ``lagging=True`` also lets healthy followers fall behind."""
    return list(_matrix(rf, elr, tuple(fault_sets), lagging))


def _yes_no(flag: bool, good_when: bool) -> str:
    colour = "green" if flag == good_when else "red"
    return f"[{colour}]{'yes' if flag else 'no'}[/{colour}]"


def render_matrix(rows: list[MatrixRow]) -> Table:
    """A rich table: one row per (acks, min.insync.replicas, unclean election), one column per fault set;
    each cell says whether acknowledged data can be lost and whether writes stay available."""
    fault_sets = list(dict.fromkeys(r.fault_set for r in rows))
    rf = {r.rf for r in rows}
    elr = {r.elr for r in rows}
    title = (
        f"Durability matrix from the reference model (RF={'/'.join(map(str, sorted(rf)))}, "
        f"ELR {'/'.join('on' if e else 'off' for e in sorted(elr))})"
    )
    table = Table(title=title, caption="each cell: acknowledged data can be lost? / writes available?")
    for name in ("acks", "min.insync", "unclean"):
        table.add_column(name, justify="center")
    for fs in fault_sets:
        table.add_column(fs, justify="center")
    cells: dict[tuple[str, int, bool], dict[str, MatrixRow]] = {}
    for r in rows:
        cells.setdefault((r.acks, r.min_insync, r.unclean), {})[r.fault_set] = r
    for (acks, min_insync, unclean), by_fs in cells.items():
        row = [acks, str(min_insync), "on" if unclean else "off"]
        for fs in fault_sets:
            cell = by_fs.get(fs)
            if cell is None:
                row.append("—")
                continue
            lost = _yes_no(cell.loss_possible, good_when=False)
            writes = _yes_no(cell.writes_available, good_when=True)
            row.append(f"lost: {lost} / writes: {writes}")
        table.add_row(*row)
    return table
