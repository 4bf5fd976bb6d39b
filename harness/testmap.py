"""A run as Jepsen's test map: a cluster, workloads, a nemesis and checkers, each a small replaceable part.

    run_scenario("scenarios/kill-leader.toml", workloads=[MyWorkload()], checkers=[MyChecker()])

`harness.run` builds the default parts from the scenario (the queue workload, the scheduled nemesis, the
Jepsen checker) and drives any parts through these protocols: start everything, let the run last
`duration_s`, stop the nemesis (which heals every fault), stop the workloads, let each read back what it needs
(the final drain), then check the stored run. Parts meet only in the history (docs/architecture.md §1, §7).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from rich.console import Console

from kafka_chaos.cluster import KafkaCluster
from kafka_chaos.cluster.external import ExternalCluster
from kafka_chaos.history import History
from kafka_chaos.rundir import RunDir

if TYPE_CHECKING:
    from kafka_chaos.harness.scenario import Scenario


@dataclass(frozen=True)
class RunContext:
    """What every part of a run may use: the scenario as resolved, the live cluster, the run's topic, the
    history to record into and the run's folder."""

    scenario: Scenario
    cluster: KafkaCluster | ExternalCluster
    topic: str
    history: History
    run: RunDir
    console: Console

    @property
    def keys(self) -> list[str]:
        return [f"{self.topic}/{p}" for p in range(self.scenario.topic.partitions)]


@runtime_checkable
class Workload(Protocol):
    """Clients that record every op they invoke and complete in `ctx.history` (docs/architecture.md §3)."""

    def start(self, ctx: RunContext) -> None: ...

    def progress(self) -> str:
        """One short line for the progress bar (e.g. counts of ok/info/fail ops)."""
        ...

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        """Stop invoking ops; complete or give up on those in flight."""
        ...

    def final_read(self, ctx: RunContext) -> dict[str, Any] | None:
        """After every fault is healed: read back what the checker needs (None: nothing to read)."""
        ...


@runtime_checkable
class Nemesis(Protocol):
    """Injects faults and records each one and its heal in the history."""

    def start(self, ctx: RunContext) -> None: ...

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        """Stop injecting and heal every fault still active."""
        ...


@runtime_checkable
class Ongoing(Protocol):
    """A nemesis whose scheduled work may outlast `duration_s` (the operator: an operation late because an
    earlier one took long); the run's load goes on until it is no longer busy."""

    def busy(self) -> bool:
        """Work scheduled within the run's duration is not yet done."""
        ...


@runtime_checkable
class Checker(Protocol):
    """Reads a stored run (also one cut short) and says what it found; pure: no cluster needed."""

    def check(self, run_dir: Path) -> dict[str, Any]: ...
