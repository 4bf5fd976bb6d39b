"""The Toxiproxy side-car: one proxy per broker in front of its client listener."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafka_chaos.cluster import settings
from kafka_chaos.cluster.images import TOXIPROXY_IMAGE
from kafka_chaos.cluster.kafka_toxic import container_logs
from kafka_chaos.cluster.links import LinkFaults
from kafka_chaos.cluster.node import bind_loopback, free_port
from kafka_chaos.cluster.waits import Wait

if TYPE_CHECKING:
    from kafka_chaos.cluster.kafka import KafkaCluster


class Toxiproxy:
    """One Toxiproxy container; one proxy per broker in front of its client listener."""

    API_PORT = 8474

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.name = f"kc-{cluster.run_id}-toxiproxy"
        self.api_port = free_port()
        self.links = LinkFaults("127.0.0.1", self.api_port)  # the one adapter over toxiproxy-python
        for b in cluster.brokers:
            b.proxy_port = free_port()
        self._container: DockerContainer | None = None

    def start(self, network: Network) -> None:
        c = (
            DockerContainer(TOXIPROXY_IMAGE)
            .with_name(self.name)
            .with_network(network)
            .with_network_aliases("toxiproxy")
            .with_kwargs(labels=self.cluster.labels(role="toxiproxy"))
        )
        bind_loopback(c, self.API_PORT, self.api_port)
        for b in self.cluster.brokers:
            assert b.proxy_port is not None
            bind_loopback(c, b.proxy_port, b.proxy_port)
        self._container = c
        c.start()
        Wait("Toxiproxy API", 30).until(self.links.answering)

    def create_proxies(self) -> None:
        for b in self.cluster.brokers:
            self.links.create_proxy(b.node_id, f"0.0.0.0:{b.proxy_port}", f"{b.alias}:{settings.CLIENT_PORT}")

    def reset(self) -> None:
        """Remove every toxic and re-enable every proxy."""
        self.links.heal_all()

    def logs(self, since_s: float | None = None) -> str:
        """The container's output from `since_s` (seconds since the epoch) on: Toxiproxy's lines and the kafka
        toxic's firings (cluster.kafka_toxic)."""
        return container_logs(self._container, since_s)

    def remove(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.get_wrapped_container().remove(force=True, v=True)
