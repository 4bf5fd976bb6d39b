"""One exception tree. The CLI turns every KafkaChaosError into a short message and an exit code."""

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


class RunFailed(KafkaChaosError):
    """The checker found anomalies the configuration does not permit."""

    exit_code = 1
