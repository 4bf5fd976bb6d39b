"""Verdicts: whether Kafka, as configured, permits each anomaly instance (docs/architecture.md §4).

The checker says what happened; `reference_model.verdicts.judge` says whether Kafka's documented guarantees
allowed it. This module is the bridge and the policy kept apart (Jepsen's `allowed-error-types`):

- `is_bad(name, instance)`: Jepsen's bad-by-default rule (`ANOMALIES_BAD_BY_DEFAULT`), except that
  `poll-skip` and `nonmonotonic-poll` of subscribe-mode consumers are allowed (rebalances move partitions).
- `apply_verdicts`: asks `judge(anomaly, instance, config, faults)` for every instance and writes
  `verdict` ("violation" | "permitted" | "known-defect", with the bug's `defect` and `fixed_in`) and `reason`
  onto it. Without a reference model (not importable),
  every bad instance is a violation with reason "no reference model", and the others are permitted.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT

VIOLATION = "violation"
PERMITTED = "permitted"
KNOWN_DEFECT = "known-defect"
SUBSCRIBE_ALLOWED = frozenset({"poll-skip", "nonmonotonic-poll"})


class VerdictLike(Protocol):
    @property
    def verdict(self) -> str: ...

    @property
    def reason(self) -> str: ...


Judge = Callable[[str, dict[str, Any], Any, Any], VerdictLike]


def is_bad(name: str, instance: dict[str, Any]) -> bool:
    """Whether Jepsen's policy counts this instance against validity."""
    if name in SUBSCRIBE_ALLOWED and instance.get("subscribe"):
        return False
    if instance.get("skipped_uncommitted") and instance.get("isolation") == "read_committed":
        return False  # read_committed skips records of transactions that did not commit (KIP-98)
    if name == "G1a" and instance.get("writer_txn") and instance.get("isolation") == "read_uncommitted":
        return False  # read_uncommitted returns aborted transactions' records (KIP-98)
    return ANOMALIES_BAD_BY_DEFAULT.get(name, True)


def load_judge() -> Judge | None:
    """`reference_model.verdicts.judge`: the model's verdict for each anomaly instance.

    Imported when called (not at import time) so a test can stand a policy of its own in for the model."""
    from kafka_chaos.reference_model.verdicts import judge

    return judge  # type: ignore[no-any-return]


def _default(name: str, instance: dict[str, Any]) -> tuple[str, str]:
    if instance["bad"]:
        return VIOLATION, "no reference model"
    if name in SUBSCRIBE_ALLOWED and instance.get("subscribe"):
        return PERMITTED, "subscribe-mode consumer: rebalances may move its position"
    return PERMITTED, "not bad by default"


def verdict_inputs(
    config: Any, faults: Any, state_samples: list[dict[str, Any]] | None = None
) -> tuple[Any, Any]:
    """The configuration and fault summary in the reference model's own types, converted once per run
    rather than once per instance; the state samples tell it whether an unclean election happened.
    Anything it cannot read is passed on as is (its `judge` then explains, per instance)."""
    from kafka_chaos.reference_model.config import RunConfig
    from kafka_chaos.reference_model.verdicts import FaultSummary

    try:
        fs = FaultSummary.coerce(faults)
        if state_samples:
            fs = fs.with_state_samples(state_samples)
        faults = fs
        if config is not None:  # None stays None: the model then says Kafka's defaults were assumed
            config = RunConfig.coerce(config)[0]
    except (TypeError, ValueError, AttributeError):
        pass
    return config, faults


INCOMPLETE_UNSEEN = (
    "the run is incomplete (its final drain read did not finish): acknowledged values not read yet are "
    "expected; lost-write still reports those below what readers reached"
)


def apply_verdicts(
    anomalies: dict[str, list[dict[str, Any]]],
    *,
    config: Any,
    faults: Any,
    judge: Judge | None = None,
    complete: bool = True,
) -> list[dict[str, Any]]:
    """Label every instance (`bad`, `verdict`, `reason`); return the violations, each tagged with `name`.

    In an incomplete run `unseen` is permitted without asking the model: the history cannot tell a lost
    value from one the interrupted drain had not reached yet.
    """
    violations: list[dict[str, Any]] = []
    for name, instances in anomalies.items():
        for inst in instances:
            inst["bad"] = is_bad(name, inst)
            if name == "unseen" and not complete:
                verdict, reason = PERMITTED, INCOMPLETE_UNSEEN
            elif judge is None:
                verdict, reason = _default(name, inst)
            else:
                try:
                    v = judge(name, inst, config, faults)
                    verdict, reason = str(v.verdict), str(v.reason)
                    if verdict == KNOWN_DEFECT:
                        inst["defect"], inst["fixed_in"] = getattr(v, "defect", None), getattr(v, "fixed_in", None)
                except Exception as e:
                    verdict, reason = _default(name, inst)
                    reason = f"reference model failed ({type(e).__name__}: {e}); {reason}"
            inst["verdict"] = verdict
            inst["reason"] = reason
            if verdict == VIOLATION:
                violations.append({"name": name, **inst})
    return violations
