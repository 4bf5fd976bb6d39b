"""Link proxies: every link between nodes through Toxiproxy, one proxy per directed link (docs/architecture.md §5).

Each node gets a Toxiproxy side-car of its own (`links-<id>`). In the node's container every peer's name
(`node-<peer>`) resolves to that side-car (`extra_hosts`, kept across restarts), and the side-car listens on each
port of each peer (ports are per node with link proxies: cluster.settings.internal_port / controller_port) and
forwards to the real peer. So the connections node A opens to node B's inter-broker listener pass through A's
side-car's proxy `A>B:internal` and nothing else does: a toxic there degrades exactly the link A → B
(faults.node_links.Link). Nodes need no capability; peers are dialled by name at each connection, so a restarted
peer with a new address is found.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Literal

from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network
from toxiproxy import Toxiproxy

from kafka_chaos.cluster import settings
from kafka_chaos.cluster.images import TOXIPROXY_IMAGE
from kafka_chaos.cluster.node import bind_loopback, free_port
from kafka_chaos.cluster.waits import Wait
from kafka_chaos.errors import ClusterError

if TYPE_CHECKING:
    from kafka_chaos.cluster.kafka import KafkaCluster

Listener = Literal["internal", "controller"]


@dataclass(frozen=True, order=True)
class Link:
    """Node `source`'s connections to `dest`'s `listener` (faults.node_links selects them)."""

    source: int
    dest: int
    listener: Listener

    def as_list(self) -> list[int | str]:
        return [self.source, self.dest, self.listener]


def listeners_between(source: int, dest: int, brokers: Collection[int], controllers: Collection[int]) -> list[Listener]:
    """The listeners of `dest` that `source` opens connections to: a broker fetches from brokers and talks to
    controllers; a controller-only node talks to controllers alone."""
    out: list[Listener] = []
    if dest in brokers and source in brokers:
        out.append("internal")
    if dest in controllers:
        out.append("controller")
    return out


API_PORT = 8474
TOXIC = "kafka-chaos-link"


def proxy_name(link: Link) -> str:
    return f"{link.source}>{link.dest}:{link.listener}"


class LinkProxies:
    """The side-cars of one cluster and the faults on its links."""

    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        spec = cluster.spec
        self.brokers, self.controllers = set(spec.broker_ids()), set(spec.controller_ids())
        self.node_ids = sorted(self.brokers | self.controllers)
        self.api_ports = {n: free_port() for n in self.node_ids}
        self._containers: dict[int, DockerContainer] = {}
        self._ips: dict[int, str] = {}
        self._servers: dict[int, Toxiproxy] = {}
        self._flapping: dict[Link, threading.Event] = {}

    def container_name(self, node_id: int) -> str:
        return f"kc-{self.cluster.run_id}-links-{node_id}"

    def port(self, node_id: int, listener: str) -> int:
        if listener == "internal":
            return settings.internal_port(node_id, True)
        return settings.controller_port(node_id, True)

    def all_links(self) -> list[Link]:
        return sorted(Link(a, b, listener) for a in self.node_ids for b in self.node_ids if a != b
                      for listener in listeners_between(a, b, self.brokers, self.controllers))

    # -- lifecycle -----------------------------------------------------------------------------------------

    def start(self, network: Network) -> None:
        """Start every side-car (before the nodes: their names must resolve to the side-cars' addresses)."""
        for n in self.node_ids:
            c = (
                DockerContainer(TOXIPROXY_IMAGE)
                .with_name(self.container_name(n))
                .with_network(network)
                .with_network_aliases(f"links-{n}")
                .with_kwargs(labels=self.cluster.labels(role="link-proxy", node=str(n)))
            )
            bind_loopback(c, API_PORT, self.api_ports[n])
            self._containers[n] = c
            c.start()
            server = Toxiproxy()
            server.update_api_consumer("127.0.0.1", self.api_ports[n])
            self._servers[n] = server
        for n, server in self._servers.items():
            Wait(f"link proxies of node {n}", 30).until(partial(_answering, server))
            wrapped = self._containers[n].get_wrapped_container()
            wrapped.reload()
            nets = wrapped.attrs["NetworkSettings"]["Networks"]
            net = nets.get(self.cluster.network_name) or next(iter(nets.values()))
            self._ips[n] = str(net["IPAddress"])
        for link in self.all_links():
            port = self.port(link.dest, link.listener)
            self._servers[link.source].create(name=proxy_name(link), listen=f"0.0.0.0:{port}",
                                              upstream=f"node-{link.dest}:{port}", enabled=True)

    def hosts_for(self, node_id: int) -> dict[str, str]:
        """The node's extra /etc/hosts entries: every peer's name → this node's side-car."""
        if node_id not in self._ips:
            raise ClusterError(f"the link proxies of node {node_id} are not running")
        return {f"node-{peer}": self._ips[node_id] for peer in self.node_ids if peer != node_id}

    def remove(self) -> None:
        self.stop_flapping()
        for c in self._containers.values():
            with contextlib.suppress(Exception):
                c.get_wrapped_container().remove(force=True, v=True)
        self._containers.clear()

    # -- faults --------------------------------------------------------------------------------------------

    def _proxy(self, link: Link) -> Any:
        proxy = self._servers[link.source].get_proxy(proxy_name(link))
        if proxy is None:
            raise ClusterError(f"no proxy for link {proxy_name(link)}")
        return proxy

    def apply(self, kind: str, links: Iterable[Link], *, latency_ms: int = 500, jitter_ms: int = 0,
              rate_kbps: int = 64, period_ms: int = 1000) -> dict[str, Any]:
        """Start one link fault (`link-*`, faults.registry) on every link; returns what was applied."""
        links = list(links)
        if kind == "link-cut":
            for link in links:
                self._proxy(link).disable()  # closes its connections and refuses new ones
            return {"enabled": False}
        if kind == "link-flap":
            for link in links:
                self._flap(link, period_ms / 1000)
            return {"period_ms": period_ms}
        toxic, attributes = _toxic(kind, latency_ms=latency_ms, jitter_ms=jitter_ms, rate_kbps=rate_kbps)
        for link in links:
            proxy = self._proxy(link)
            for stream in ("upstream", "downstream"):
                proxy.add_toxic(type=toxic, stream=stream, name=f"{TOXIC}-{stream}", attributes=attributes)
        return {"toxic": toxic, **attributes}

    def heal(self, links: Iterable[Link]) -> None:
        for link in links:
            stop = self._flapping.pop(link, None)
            if stop is not None:
                stop.set()
            proxy = self._proxy(link)
            for stream in ("upstream", "downstream"):
                if proxy.get_toxic(f"{TOXIC}-{stream}") is not None:
                    proxy.destroy_toxic(f"{TOXIC}-{stream}")
            proxy.enable()

    def heal_all(self) -> None:
        self.stop_flapping()
        for server in self._servers.values():
            with contextlib.suppress(Exception):
                server.reset()  # every proxy enabled, every toxic removed

    def stop_flapping(self) -> None:
        for stop in self._flapping.values():
            stop.set()
        self._flapping.clear()

    def _flap(self, link: Link, half_period_s: float) -> None:
        """Down for a period, up for a period, … until healed; each down closes the link's connections."""
        stop = threading.Event()
        self._flapping[link] = stop
        proxy = self._proxy(link)

        def run() -> None:
            down = True
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    proxy.disable() if down else proxy.enable()
                down = not down
                stop.wait(half_period_s)
            with contextlib.suppress(Exception):
                proxy.enable()

        threading.Thread(target=run, name=f"flap-{proxy_name(link)}", daemon=True).start()


def _answering(server: Toxiproxy) -> bool:
    return server.version() is not None


def _toxic(kind: str, *, latency_ms: int, jitter_ms: int, rate_kbps: int) -> tuple[str, dict[str, Any]]:
    """Toxiproxy's toxic (type and attributes) for a link fault kind."""
    if kind == "link-latency":
        return "latency", {"latency": latency_ms, "jitter": jitter_ms}
    if kind == "link-bandwidth":
        return "bandwidth", {"rate": rate_kbps}
    if kind == "link-timeout":
        return "timeout", {"timeout": 0}  # a black hole: data dropped, connections hang until healed
    if kind == "link-reset":
        return "reset_peer", {"timeout": 0}
    if kind == "link-slicer":
        return "slicer", {"average_size": 64, "size_variation": 32, "delay": 10_000}  # bytes, bytes, µs
    raise ValueError(f"unknown link fault {kind!r}")
