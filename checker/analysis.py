"""`analyse(sends, polls) -> Analysis`: Jepsen's Kafka checker (jepsen.tests.kafka) over the two tables.

Pure: no I/O. The steps follow Jepsen's `analysis`:

1. `prepare` (checker.context): reads by type, writer-of, must-have-committed?, and the version orders —
   per key, the log of offsets → values seen there, from every poll (ok, info or fail) and every send that
   must have committed with a known offset; positions are dense indexes over the offsets observed. What
   polls returned besides ok records at known offsets, and the assign / subscribe resets and rebalances
   that Jepsen's rules read, come in `extras` (checker.tables.PollExtras, from the history).
2. One function per anomaly (checker.anomalies.*), each with its reasoning in its docstring.
3. Policy (checker.verdicts): which instances are bad by default, and the reference model's verdict on
   each (violation / permitted).

Output: `Analysis`, each instance labelled with its verdict; `Analysis.results()` is its finished `RunResults`
(docs/architecture.md §4), where `valid`, `violations` and `complete` are computed (checker.results). Names absent
from `anomaly_counts` mean zero.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from kafka_chaos.checker.anomalies.cycles import TxnHistory
from kafka_chaos.checker.anomalies.garbage import garbage_read_cases
from kafka_chaos.checker.anomalies.log import duplicate_cases, inconsistent_offsets_cases
from kafka_chaos.checker.anomalies.lost import lost_write_cases, unseen_cases, unseen_series
from kafka_chaos.checker.anomalies.polls import int_poll_skip_nonmonotonic_cases, poll_skip_nonmonotonic_cases
from kafka_chaos.checker.anomalies.sends import int_send_skip_nonmonotonic_cases, nonmonotonic_send_cases
from kafka_chaos.checker.anomalies.txn import (
    cycle_cases,
    g1a_cases,
    precommitted_read_cases,
    with_isolation,
    with_reused_sequences,
    with_uncommitted_skips,
)
from kafka_chaos.checker.context import I64, Context, prepare
from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT
from kafka_chaos.checker.stats import run_stats
from kafka_chaos.checker.verdicts import Judge, apply_verdicts, load_judge, verdict_inputs
from kafka_chaos.faults.windows import FaultWindows

if TYPE_CHECKING:
    from kafka_chaos.checker.tables import PollExtras

ANOMALY_NAMES: tuple[str, ...] = tuple(ANOMALIES_BAD_BY_DEFAULT)


@dataclass
class Analysis:
    """The checker's findings, judged; `results()` finishes them into docs/architecture.md §4's RunResults."""

    complete: bool
    anomaly_counts: dict[str, int]
    anomalies: dict[str, list[dict[str, Any]]]
    stats: dict[str, Any] = field(default_factory=dict)
    not_checked: dict[str, str] = field(default_factory=dict)
    """Checks that could not run on this history, with why (never a zero count: absent is not checked)."""
    conformance: dict[str, Any] | None = None
    """Behaviour the reference model forbids, seen in the state samples (`checker.conformance`):
    `{"anomaly_counts", "anomalies"}`; None when there were no samples to check."""

    def to_dict(self) -> dict[str, Any]:
        """The sections it found, before `RunResults.finish` adds `valid`, `complete` and `violations`."""
        return {
            "anomaly_counts": self.anomaly_counts,
            "anomalies": self.anomalies,
            "stats": self.stats,
            **({"conformance": self.conformance} if self.conformance is not None else {}),
            **({"not_checked": self.not_checked} if self.not_checked else {}),
        }

    def results(self, *, findings: list[dict[str, Any]] | None = None) -> RunResults:
        """These findings as a finished RunResults (`findings`: see `RunResults.finish`)."""
        return RunResults.of(self.to_dict()).finish(complete=[self.complete], findings=findings or [])


def find_anomalies(
    sends: pa.Table, polls: pa.Table, *, subscribe_processes: frozenset[int] = frozenset(),
    txns: TxnHistory | None = None, not_checked: dict[str, str] | None = None, extras: PollExtras | None = None,
) -> tuple[dict[str, list[dict[str, Any]]], Context]:
    """Every anomaly instance by name (empty lists included), and the Context they were found in. `txns`: the
    history's transactions (cycles need them); checks that could not run are added to `not_checked`;
    `extras`: what else the history's polls said (`HistoryTables.extras`)."""
    ctx = prepare(sends, polls, extras.reads if extras else None)
    resets = extras.resets if extras else ()
    cycles, skipped = cycle_cases(txns)
    if not_checked is not None:
        not_checked.update(skipped)
    found: dict[str, list[dict[str, Any]]] = {
        "lost-write": lost_write_cases(ctx),
        "unseen": unseen_cases(ctx),
        "duplicate": duplicate_cases(ctx),
        "inconsistent-offsets": inconsistent_offsets_cases(ctx),
        "garbage-read": garbage_read_cases(ctx),
        **poll_skip_nonmonotonic_cases(ctx, subscribe_processes, resets, extras.empty if extras else ()),
        **int_poll_skip_nonmonotonic_cases(ctx, extras.rebalanced if extras else None),
        "nonmonotonic-send": nonmonotonic_send_cases(ctx, resets),
        **int_send_skip_nonmonotonic_cases(ctx),
        "G1a": with_isolation(g1a_cases(ctx), txns),
        "precommitted-read": precommitted_read_cases(ctx),
        **cycles,
    }
    for name in ("poll-skip", "int-poll-skip"):
        with_uncommitted_skips(found[name], txns)
    with_reused_sequences(found, txns)
    return {name: found[name] for name in ANOMALY_NAMES}, ctx


def analyse(
    sends: pa.Table,
    polls: pa.Table,
    *,
    subscribe_processes: frozenset[int] = frozenset(),
    config: Any = None,
    faults: FaultWindows | Any = None,
    complete: bool = True,
    end_time: int | None = None,
    op_counts: dict[str, dict[str, int]] | None = None,
    ok_poll_times: I64 | None = None,
    state_samples: list[dict[str, Any]] | None = None,
    judge: Judge | None = None,
    drain_start: int | None = None,
    txns: TxnHistory | None = None,
    extras: PollExtras | None = None,
) -> Analysis:
    """Check a run's sends and polls tables.

    `subscribe_processes`: consumers in subscribe mode (their poll-skips / nonmonotonic polls are allowed).
    `config`: the run's configuration, passed to the reference model's verdicts as is.
    `faults`: the FaultWindows of the run (`faults_from_history`); an empty one if None.
    `complete`, `end_time`, `op_counts`, `ok_poll_times`: what only the history knows (see HistoryMeta);
    without them, completeness is assumed and the statistics are derived from the tables alone.
    `state_samples`: the observer's samples (state.jsonl): with them, the verdicts know whether an unclean
    election happened, and `checker.conformance` checks them against the model (its instances are
    judged too and count among the violations, but not against Jepsen's `valid`).
    `judge`: the verdict function; by default `reference_model.verdicts.judge` if it exists.
    `txns`: the history's transactions (`checker.anomalies.cycles.read_txn_history`); without them G0 and G1c
    are listed under `not_checked`.
    `extras`: the history's `PollExtras` (fail / info polls, records at unknown offsets, assign / subscribe
    resets, rebalance logs); without them only the two tables are read.
    """
    not_checked: dict[str, str] = {}
    found, ctx = find_anomalies(sends, polls, subscribe_processes=subscribe_processes, txns=txns,
                                not_checked=not_checked, extras=extras)
    stats = run_stats(ctx, end_time=end_time, op_counts=op_counts, ok_poll_times=ok_poll_times,
                      drain_start=drain_start)
    stats["unseen_series"] = unseen_series(ctx, end_time=stats["duration_ns"])
    if faults is None:
        faults = FaultWindows(windows=(), end_time=int(stats["duration_ns"]))
    judge = judge or load_judge()
    v_config, v_faults = verdict_inputs(config, faults, state_samples)
    anomalies = {name: inst for name, inst in found.items() if inst}
    apply_verdicts(anomalies, config=v_config, faults=v_faults, judge=judge, complete=complete)
    conformance = None
    if state_samples is not None:
        found_c = check_conformance(state_samples, sends, polls, config, faults)
        if found_c is not None:
            c_anomalies = {name: insts for name, insts in found_c.items() if insts}
            apply_verdicts(c_anomalies, config=v_config, faults=v_faults, judge=judge)
            conformance = {
                "anomaly_counts": {name: len(insts) for name, insts in c_anomalies.items()},
                "anomalies": c_anomalies,
            }
    return Analysis(
        complete=complete,
        anomaly_counts={name: len(inst) for name, inst in anomalies.items()},
        anomalies=anomalies,
        stats=stats,
        not_checked=not_checked,
        conformance=conformance,
    )


def check_conformance(
    state_samples: list[dict[str, Any]], sends: pa.Table, polls: pa.Table, config: Any,
    faults: FaultWindows | None = None,
) -> dict[str, list[dict[str, Any]]] | None:
    """`checker.conformance.conformance`: the observed partition states against the model's rules."""
    from kafka_chaos.checker.conformance import conformance
    from kafka_chaos.reference_model.config import RunConfig

    lag_s = RunConfig.coerce(config if isinstance(config, dict) else None)[0].timeouts.replica_lag_s
    result: dict[str, list[dict[str, Any]]] = conformance(
        state_samples, sends, polls, config, faults=faults.windows if faults is not None else (),
        replica_lag_ns=int(lag_s * 1e9))
    return result
