"""results.json, the one model of it (docs/architecture.md §4): the checker (checker.check), Spark (spark.job) and
`kafka-chaos reconcile` build it and finish it with `RunResults.finish` (the one place `valid`, `violations` and
`complete` are computed, users' own checkers included); `RunResults.save` / `RunResults.load` are the only
writer and reader of the file (the report, campaigns, shrink, the pytest plugin, the CLI).

Sections other parts add (availability, health, checkers of a user's own, not_checked, model) are optional;
an anomaly instance carries at least its key, and its kind's own fields besides (kept as they are).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT
from kafka_chaos.checker.verdicts import is_bad
from kafka_chaos.errors import ResultsError
from kafka_chaos.rundir import RESULTS_FILE

EMPTY_HISTORY = "empty-history"
"""The violation `finish` adds for a history that held no client op (`stats.client_ops` 0)."""
NO_CLIENT_OPS = ("no client operation in the history (no send, poll or txn invoke): there is nothing to check, "
                 "and an empty check is no pass (Jepsen's Kafka checker calls such a history invalid: "
                 ":empty-transaction-graph)")


class AnomalyInstance(BaseModel):
    """One instance of a named anomaly: where (key), what (values, offsets), the ops involved (history indexes)
    and, once the model has judged it, its verdict and why."""

    model_config = ConfigDict(extra="allow")

    key: Any = None
    name: str | None = None  # set on the violations list, where kinds are mixed
    value: Any = None
    values: list[Any] | None = None
    offset: Any = None
    offsets: list[Any] | None = None
    ops: list[int] | None = None
    verdict: Literal["violation", "permitted", "known-defect", "unknown"] | None = None
    reason: str | None = None
    defect: str | None = None  # known-defect: the bug behind it (reference_model.verdicts.Verdict)
    fixed_in: str | None = None


class RunResults(BaseModel):
    model_config = ConfigDict(extra="allow")

    valid: bool  # Jepsen's: some client op was checked and no bad-by-default instance was found (finish)
    complete: bool  # every history read was a full record: its final drain finished, nothing cut (finish)
    anomaly_counts: dict[str, int] = Field(default_factory=dict)
    anomalies: dict[str, list[AnomalyInstance]] = Field(default_factory=dict)
    violations: list[AnomalyInstance] = Field(default_factory=list)  # instances judged violations (finish)
    known_defects: list[AnomalyInstance] = Field(default_factory=list)
    """Instances judged a known defect of the version in use (finish): reported apart, not failing the run."""
    stats: dict[str, Any] = Field(default_factory=dict)
    run: dict[str, Any] | None = None  # completeness details and op counts (checker)
    faults: dict[str, Any] | None = None  # the fault windows the verdicts used
    conformance: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    availability: dict[str, Any] | None = None
    not_checked: dict[str, str] | None = None  # checks that could not run on this history, and why
    checkers: dict[str, Any] | None = None  # a user's own checkers' outputs, by class name
    model: dict[str, Any] | None = None
    histories: dict[str, Any] | None = None  # Spark: what each run's history said besides its rows
    keys: dict[str, Any] | None = None  # Spark: per-key counts
    runs: dict[str, Any] | None = None  # Spark: per-run anomaly counts

    @classmethod
    def of(cls, sections: Mapping[str, Any]) -> RunResults:
        """A producer's sections (anomalies, stats, …), not yet finished: `valid` and `complete` stay false
        until `finish` computes them."""
        return cls.model_validate({**sections, "valid": False, "complete": False})

    def finish(self, *, complete: Iterable[bool] | None = None, checkers: Mapping[str, Mapping[str, Any]] | None = None,
               findings: Sequence[Mapping[str, Any]] | None = None) -> RunResults:
        """The one finishing step, for the checker, Spark and `reconcile` alike: `complete` from the completeness
        of each history read (None keeps the current value); `checkers`, a user's own checkers' outputs by
        name, kept under `checkers` with their `violations` joining the run's; `findings`, violations found
        beside the anomalies (availability against the scenario's `[expect]`; None keeps those listed before,
        so a result finished again after new verdicts loses none). `violations` are the instances
        (conformance ones included) whose verdict is a violation, then the findings, then the checkers'; `valid`
        is Jepsen's, from the anomalies alone: false when an instance is bad, or when an anomaly bad by default
        has more instances than are listed (an engine that caps its lists may hide bad ones).

        A history with no client op (`stats.client_ops` is 0, or 0 for some run when it maps runs to counts) is
        not valid either, as in Jepsen's Kafka checker, and its `EMPTY_HISTORY` violation (`key`: the run, when
        several were read; `reason`: `NO_CLIENT_OPS`) comes first, so that no verdict reads it as a pass."""
        if complete is not None:
            self.complete = all(complete)
        if checkers:
            self.checkers = {**(self.checkers or {}), **{name: dict(out) for name, out in checkers.items()}}
        conformance = (self.conformance or {}).get("anomalies") or {}
        if findings is None:
            judged_here = {*self.anomalies, *conformance, *(self.checkers or {})}
            found = [v for v in self.violations if v.name not in judged_here and v.name != EMPTY_HISTORY]
        else:
            found = [AnomalyInstance.model_validate(f) for f in findings]
        empty = empty_histories(self.stats)
        violations = [AnomalyInstance(name=EMPTY_HISTORY, key=run, verdict="violation", reason=NO_CLIENT_OPS,
                                      bad=True)
                      for run in empty]
        violations += [*_judged(self.anomalies, "violation"), *_judged(conformance, "violation"), *found]
        for name, out in (self.checkers or {}).items():
            violations += [AnomalyInstance.model_validate({"name": name, **v}) for v in out.get("violations", [])]
        self.violations = violations
        known = [*_judged(self.anomalies, "known-defect"), *_judged(conformance, "known-defect")]
        if known or "known_defects" in self.model_fields_set:  # absent from results.json while there are none
            self.known_defects = known
        hidden = any(ANOMALIES_BAD_BY_DEFAULT.get(name, True) and count > len(self.anomalies.get(name, []))
                     for name, count in self.anomaly_counts.items())
        self.valid = not empty and not hidden and not any(_bad(name, inst) for name, insts in self.anomalies.items()
                                            for inst in insts)
        return self

    def count(self, anomaly: str) -> int:
        return self.anomaly_counts.get(anomaly, 0)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_json_dict(self) -> dict[str, Any]:
        """The dict written to results.json: the model's fields, and no optional section that is absent."""
        return self.model_dump(mode="json", exclude_unset=True)

    def save(self, path: Path) -> Path:
        """Write results.json (`path`: the file, or the run's folder), replaced in one step so a reader never
        sees half of it."""
        path = Path(path)
        if path.is_dir():
            path = path / RESULTS_FILE
        tmp = path.with_name(path.name + ".tmp")
        try:
            tmp.write_bytes(self.model_dump_json(exclude_unset=True).encode())
            os.replace(tmp, path)
        except OSError as e:
            raise ResultsError(f"cannot write {path}: {e.strerror or e}") from e
        return path

    @classmethod
    def load(cls, path: Path) -> RunResults:
        """Read results.json (`path`: the file, or the run's folder); ResultsError, saying what to do, when it is
        missing, is not JSON or does not fit this model."""
        path = Path(path)
        if path.is_dir():
            path = path / RESULTS_FILE
        try:
            raw = json.loads(path.read_bytes())
        except FileNotFoundError:
            raise ResultsError(f"{path} does not exist: the run was never checked. Run "
                               f"`kafka-chaos check {path.parent}` first.") from None
        except OSError as e:
            raise ResultsError(f"cannot read {path}: {e.strerror or e}") from None
        except ValueError as e:
            raise ResultsError(f"{path} is damaged (not JSON: {e}). Check the run again to rewrite it: "
                               f"`kafka-chaos check {path.parent}`.") from None
        try:
            return cls.model_validate(raw)
        except ValidationError as e:
            first = e.errors()[0]
            where = ".".join(str(x) for x in first["loc"]) or "the top level"
            raise ResultsError(f"{path} does not fit the results model at {where}: {first['msg']}. Check the run "
                               f"again to rewrite it: `kafka-chaos check {path.parent}`.") from None


def empty_histories(stats: Mapping[str, Any]) -> list[str | None]:
    """The histories a result read that held no client op, from its `stats.client_ops`: the count of client ops
    (send, poll, txn invokes, whatever their outcome) of the one history read, or `{run id: count}` for several
    runs; a run whose count is not known is left out (nothing says it was empty). None names the one history."""
    n = stats.get("client_ops")
    if isinstance(n, Mapping):
        return [*sorted(str(run) for run, c in n.items() if _is_zero(c))]
    return [None] if _is_zero(n) else []


def _is_zero(n: Any) -> bool:
    return isinstance(n, int) and not isinstance(n, bool) and n == 0


def _judged(anomalies: Mapping[str, Any], verdict: str) -> list[AnomalyInstance]:
    out = []
    for name, insts in anomalies.items():
        for inst in insts:
            inst = inst if isinstance(inst, AnomalyInstance) else AnomalyInstance.model_validate(inst)
            if inst.verdict == verdict:
                out.append(inst.model_copy(update={"name": name}))
    return out


def _bad(name: str, inst: AnomalyInstance) -> bool:
    """The instance's `bad` as its verdicts set it; Jepsen's policy where none did (Spark before `reconcile`)."""
    extra = inst.model_extra or {}
    return bool(extra["bad"]) if "bad" in extra else is_bad(name, extra)
