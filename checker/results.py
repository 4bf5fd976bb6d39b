"""results.json, the one model of it (docs/architecture.md §4): the checker (checker.check) and Spark (spark.job)
build it, the report, campaigns and the pytest plugin read it.

Sections other parts add (availability, health, checkers of a user's own, not_checked, model) are optional;
an anomaly instance carries at least its key, and its kind's own fields besides (kept as they are).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


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
    verdict: Literal["violation", "permitted", "unknown"] | None = None
    reason: str | None = None


class RunResults(BaseModel):
    model_config = ConfigDict(extra="allow")

    valid: bool
    complete: bool
    anomaly_counts: dict[str, int] = Field(default_factory=dict)
    anomalies: dict[str, list[AnomalyInstance]] = Field(default_factory=dict)
    violations: list[AnomalyInstance] = Field(default_factory=list)
    stats: dict[str, Any] = Field(default_factory=dict)
    run: dict[str, Any] | None = None  # completeness details and op counts (checker)
    faults: dict[str, Any] | None = None  # the fault windows the verdicts used
    conformance: dict[str, Any] | None = None
    health: dict[str, Any] | None = None
    availability: dict[str, Any] | None = None
    not_checked: dict[str, str] | None = None  # checks that could not run on this history, and why
    checkers: dict[str, Any] | None = None  # a user's own checkers' outputs, by class name
    model: dict[str, Any] | None = None

    def count(self, anomaly: str) -> int:
        return self.anomaly_counts.get(anomaly, 0)

    @property
    def passed(self) -> bool:
        return not self.violations

    def to_json_dict(self) -> dict[str, Any]:
        """The dict written to results.json: the model's fields, and no optional section that is absent."""
        return self.model_dump(mode="json", exclude_unset=True)


def results_dict(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate a producer's result against RunResults and return what results.json holds."""
    return RunResults.model_validate(raw).to_json_dict()
