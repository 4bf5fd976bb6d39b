"""What cluster to start: the scenario's `[cluster]` table (docs/architecture.md, "The cluster")."""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_chaos.cluster import settings
from kafka_chaos.cluster.images import kafka_image
from kafka_chaos.errors import ClusterError


@dataclass(frozen=True)
class ClusterSpec:
    """What to start. `nodes` are combined broker+controller nodes, or brokers when `controllers` > 0."""

    nodes: int = 3
    controllers: int = 0
    kafka_version: str = "4.3.1"
    official_image: bool = False
    toxiproxy: bool = False
    elr: bool | None = None  # None: the version's default; True/False: set eligible.leader.replicas.version
    broker_overrides: dict[str, str] = field(default_factory=dict)
    heap_opts: str = settings.NODE_HEAP_OPTS
    start_timeout_s: float = 90.0

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ClusterError(f"nodes must be at least 1, got {self.nodes}")
        if self.controllers < 0:
            raise ClusterError(f"controllers must be 0 (combined nodes) or more, got {self.controllers}")

    @property
    def image(self) -> str:
        return kafka_image(self.kafka_version, official=self.official_image)

    def broker_ids(self) -> list[int]:
        return list(range(1, self.nodes + 1))

    def controller_ids(self) -> list[int]:
        if self.controllers:
            return list(range(101, 101 + self.controllers))
        return self.broker_ids()

    def settings(self) -> dict[str, str]:
        """Fast-test settings plus the user's overrides: what every node runs with."""
        return {**settings.fast_test_settings(self.nodes), **self.broker_overrides}
