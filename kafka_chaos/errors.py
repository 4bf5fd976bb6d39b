"""One exception tree for the whole project, with the exit codes the CLI turns it into (docs/architecture.md).

Every error kafka-chaos raises on purpose derives from `KafkaChaosError`; `str(err)` is a paragraph for a
person: what is wrong and what to do. The CLI prints it and exits with `exit_code` (2: bad input or a broken
environment; 1: the checker found violations). This module imports nothing, so every layer can use it.
"""

from __future__ import annotations


class KafkaChaosError(Exception):
    """Root of every error kafka-chaos raises on purpose. `str(err)` is a message for a person."""

    exit_code = 2


class EngineUnavailable(KafkaChaosError):
    """No Docker-API engine answers."""


class ImageMissing(KafkaChaosError):
    """A Kafka or Toxiproxy image is not built (or not pullable)."""


class ImageBuildError(KafkaChaosError):
    """Building an image failed."""


class ClusterError(KafkaChaosError):
    """A cluster failed to start or to reach a state in time."""


class ScenarioError(KafkaChaosError):
    """A scenario file is missing or invalid."""


class HistoryError(KafkaChaosError):
    """A run's history is missing or unreadable."""


class ResultsError(KafkaChaosError):
    """A run's results.json is missing, unreadable or does not fit the results model: the run was never
    checked, or the file was damaged after."""


class SparkReconcileError(KafkaChaosError):
    """Spark reconciliation could not run: no Java, a bad master URL, a missing or malformed table.

    No Java stack trace ever reaches the message; the JVM's own first line is kept only where it says something
    useful (a file name, a column).
    """


class RunFailed(KafkaChaosError):
    """The checker found anomalies the configuration does not permit."""

    exit_code = 1


class ShrinkError(KafkaChaosError):
    """`kafka-chaos shrink` was given nothing it can shrink: no run folder, a run that does not fail, an
    unknown anomaly name."""


class ClientUnavailable(KafkaChaosError):
    """A chosen Kafka client cannot be set up: no runtime for it (a JDK), or its registry does not serve the
    version."""
