"""Link proxies: every link between nodes through Toxiproxy, one proxy per directed link (docs/architecture.md §5).

Each node gets a Toxiproxy side-car of its own (`links-<id>`). In the node's container every peer's name
(`node-<peer>`) resolves to that side-car (`extra_hosts`, kept across restarts), and the side-car listens on each
port of each peer (ports are per node with link proxies: cluster.settings.internal_port / controller_port) and
forwards to the real peer. So the connections node A opens to node B's inter-broker listener pass through A's
side-car's proxy `A-to-B-internal` and nothing else does: a toxic there degrades exactly the link A → B
(faults.node_links.Link). Nodes need no capability; peers are dialled by name at each connection, so a restarted
peer with a new address is found.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import requests
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafka_chaos.cluster import settings
from kafka_chaos.cluster.images import TOXIPROXY_IMAGE
from kafka_chaos.cluster.kafka_toxic import container_logs
from kafka_chaos.cluster.links import toxic_attributes
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


class ToxiproxyAPI:
    """Toxiproxy's REST API on one side-car. Written here rather than through toxiproxy-python (which the client
    links use, cluster.links): that library keeps the API's address in a class attribute, so it can talk to one
    Toxiproxy per process, and here every node has one."""

    def __init__(self, port: int) -> None:
        self.base = f"http://127.0.0.1:{port}"
        self.session = requests.Session()

    def _call(self, method: str, path: str, body: Any = None, ok: tuple[int, ...] = (200, 201, 204)) -> Any:
        response = self.session.request(method, self.base + path, json=body, timeout=5)
        if response.status_code not in ok:
            raise ClusterError(f"Toxiproxy {method} {path}: {response.status_code} {response.text.strip()}")
        return response.json() if response.content else None

    def answering(self) -> bool:
        try:
            return self.session.get(self.base + "/version", timeout=1).ok
        except requests.RequestException:
            return False

    def populate(self, proxies: list[dict[str, Any]]) -> None:
        self._call("POST", "/populate", proxies)

    def set_enabled(self, proxy: str, enabled: bool) -> None:
        self._call("POST", f"/proxies/{proxy}", {"enabled": enabled})

    def add_toxic(self, proxy: str, name: str, type_: str, stream: str, attributes: dict[str, Any]) -> None:
        self._call("POST", f"/proxies/{proxy}/toxics",
                   {"name": name, "type": type_, "stream": stream, "toxicity": 1.0, "attributes": attributes})

    def remove_toxic(self, proxy: str, name: str) -> None:
        self._call("DELETE", f"/proxies/{proxy}/toxics/{name}", ok=(200, 204, 404))

    def reset(self) -> None:
        self._call("POST", "/reset")


def proxy_name(link: Link) -> str:
    """`3-to-1-internal`: node 3's connections to node 1's inter-broker listener (safe in the API's URLs)."""
    return f"{link.source}-to-{link.dest}-{link.listener}"


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
        self._servers: dict[int, ToxiproxyAPI] = {}
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
            self._servers[n] = ToxiproxyAPI(self.api_ports[n])
        for n, server in self._servers.items():
            Wait(f"link proxies of node {n}", 30).until(server.answering)
            wrapped = self._containers[n].get_wrapped_container()
            wrapped.reload()
            nets = wrapped.attrs["NetworkSettings"]["Networks"]
            net = nets.get(self.cluster.network_name) or next(iter(nets.values()))
            self._ips[n] = str(net["IPAddress"])
        for n, server in self._servers.items():
            server.populate([{"name": proxy_name(link), "listen": f"0.0.0.0:{self.port(link.dest, link.listener)}",
                              "upstream": f"node-{link.dest}:{self.port(link.dest, link.listener)}", "enabled": True}
                             for link in self.all_links() if link.source == n])

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

    def _server(self, link: Link) -> ToxiproxyAPI:
        server = self._servers.get(link.source)
        if server is None:
            raise ClusterError(f"no link proxies for node {link.source}")
        return server

    def apply(self, action: str, links: Iterable[Link], *, latency_ms: int = 500, jitter_ms: int = 0,
              rate_kbps: int = 64, period_ms: int = 1000) -> dict[str, Any]:
        """Degrade every link: `action` is a Toxiproxy toxic type, `disable` or `flap` (the one a `link-*` kind
        uses is the registry's, faults.registry); returns what was applied."""
        links = list(links)
        if action == "disable":
            for link in links:
                self._server(link).set_enabled(proxy_name(link), False)  # closes its connections, refuses new ones
            return {"enabled": False}
        if action == "flap":
            for link in links:
                self._flap(link, period_ms / 1000)
            return {"period_ms": period_ms}
        attributes = toxic_attributes(action, latency_ms=latency_ms, jitter_ms=jitter_ms, rate_kbps=rate_kbps)
        for link in links:
            for stream in ("upstream", "downstream"):
                self._server(link).add_toxic(proxy_name(link), f"{TOXIC}-{stream}", action, stream, attributes)
        return {"toxic": action, **attributes}

    def heal(self, links: Iterable[Link]) -> None:
        for link in links:
            stop = self._flapping.pop(link, None)
            if stop is not None:
                stop.set()
            server = self._server(link)
            for stream in ("upstream", "downstream"):
                server.remove_toxic(proxy_name(link), f"{TOXIC}-{stream}")
            server.set_enabled(proxy_name(link), True)

    def add_toxic(self, link: Link, name: str, type_: str, stream: str, attributes: dict[str, Any]) -> None:
        """One toxic of a given type on a link's proxy (the request faults' `kafka` toxic)."""
        self._server(link).add_toxic(proxy_name(link), name, type_, stream, attributes)

    def remove_toxic(self, link: Link, name: str) -> None:
        self._server(link).remove_toxic(proxy_name(link), name)

    def logs(self, node_id: int, since_s: float | None = None) -> str:
        """Node `node_id`'s side-car's output from `since_s` on (the kafka toxic's firings among it)."""
        return container_logs(self._containers.get(node_id), since_s)

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
        server, name = self._server(link), proxy_name(link)

        def run() -> None:
            down = True
            while not stop.is_set():
                with contextlib.suppress(Exception):
                    server.set_enabled(name, not down)
                down = not down
                stop.wait(half_period_s)
            with contextlib.suppress(Exception):
                server.set_enabled(name, True)

        threading.Thread(target=run, name=f"flap-{name}", daemon=True).start()

