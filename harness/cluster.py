"""A real KRaft cluster in containers: lifecycle object, node handles and the partition primitive.

    with KafkaCluster(ClusterSpec(nodes=3)) as cluster:
        cluster.create_topic("chaos", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
        cluster.node(2).kill(); cluster.node(2).start()

Shape taken from testcontainers-python: a builder-like frozen spec, a context manager that removes whatever it
started when start-up fails half way, readiness as wait objects whose timeouts carry the node logs.

Everything created carries the label `io.kafka-chaos.run=<run id>` so `kafka-chaos clean` finds leftovers.
Node ids: combined nodes are 1..N; with dedicated controllers, brokers are 1..N and controllers 101..100+C.
Brokers reach each other and the quorum by network alias (`node-<id>`); clients reach brokers on 127.0.0.1.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Self, TypeVar

import docker
import docker.errors
from docker.models.containers import Container
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafka_chaos.faults.link import LinkFaults
from kafka_chaos.harness import settings
from kafka_chaos.harness.engine import docker_client
from kafka_chaos.harness.errors import ClusterError
from kafka_chaos.harness.images import BASE_IMAGE, TOXIPROXY_IMAGE, kafka_image, require_image
from kafka_chaos.harness.state import PartitionState, describe_partitions, forget, quorum_leader
from kafka_chaos.workloads.recorder import client_logger

RUN_LABEL = "io.kafka-chaos.run"
ROLE_LABEL = "io.kafka-chaos.role"
NODE_LABEL = "io.kafka-chaos.node-id"
PORT_LABEL = "io.kafka-chaos.client-port"
DATA_DIR = "/var/lib/kafka/data"
CONFIG_PATH = "/etc/kafka-chaos/server.properties"

NodeRole = Literal["combined", "broker", "controller"]
T = TypeVar("T")


def new_run_id(name: str = "cluster", seed: int = 0) -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{name}-{seed}"


def bind_loopback(container: DockerContainer, container_port: int, host_port: int | None) -> None:
    """Publish on 127.0.0.1 only. testcontainers' with_bind_ports binds every interface; docker-py takes a tuple."""
    container.ports[f"{container_port}/tcp"] = ("127.0.0.1", host_port)  # type: ignore[assignment]


def new_cluster_id() -> str:
    """A random cluster id (a base64url UUID). Like Kafka's own Uuid.randomUuid, never one that starts with '-':
    kafka-storage's argument parser reads `-t -abc…` as a missing value, and the node never starts."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


class Wait:
    """Poll `probe` until it returns a truthy value; on timeout raise ClusterError with the node logs attached."""

    def __init__(self, what: str, timeout_s: float, interval_s: float = 0.25) -> None:
        self.what, self.timeout_s, self.interval_s = what, timeout_s, interval_s

    def until(self, probe: Callable[[], T | None], logs: Callable[[], str] | None = None) -> T:
        deadline = time.monotonic() + self.timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = probe()
                if result:
                    return result
            except Exception as err:  # probes talk to brokers that may be down; keep the last reason
                last_error = err
            time.sleep(self.interval_s)
        timeout = ClusterError(
            f"Timed out after {self.timeout_s:.0f}s waiting for {self.what}"
            + (f" (last error: {last_error})" if last_error else "")
        )
        if logs is not None:
            timeout.add_note(logs())
        raise timeout


class KafkaNode:
    """One Kafka process in its container, and the faults that act on it."""

    def __init__(self, cluster: KafkaCluster, node_id: int, role: NodeRole) -> None:
        self.cluster = cluster
        self.node_id = node_id
        self.role = role
        self.alias = f"node-{node_id}"
        self.name = f"kc-{cluster.run_id}-{self.alias}"
        self.volume = f"{self.name}-data"
        self.client_port = free_port() if role != "controller" else None
        self.direct_port = free_port() if role != "controller" and cluster.spec.toxiproxy else None
        self.proxy_port: int | None = None  # set by the cluster when Toxiproxy fronts the client listener
        self._container: DockerContainer | None = None
        self._sidecar: Container | None = None

    def __repr__(self) -> str:
        return f"KafkaNode({self.node_id}, {self.role})"

    @property
    def is_broker(self) -> bool:
        return self.role in ("combined", "broker")

    @property
    def is_controller(self) -> bool:
        return self.role in ("combined", "controller")

    @property
    def container(self) -> Container:
        if self._container is None:
            raise ClusterError(f"{self!r} has not been created")
        return self._container.get_wrapped_container()

    # -- configuration -------------------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        spec = self.cluster.spec
        voters = ",".join(f"{i}@node-{i}:{settings.CONTROLLER_PORT}" for i in spec.controller_ids())
        roles = {"combined": "broker,controller", "broker": "broker", "controller": "controller"}[self.role]
        props: dict[str, str] = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            "controller.quorum.voters": voters,
            "controller.listener.names": "CONTROLLER",
            "log.dirs": DATA_DIR,
        }
        listeners, advertised, protocols = [], [], ["CONTROLLER:PLAINTEXT"]
        if self.is_broker:
            advertised_client = self.proxy_port if spec.toxiproxy else self.client_port
            listeners += [f"CLIENT://0.0.0.0:{settings.CLIENT_PORT}", f"INTERNAL://0.0.0.0:{settings.INTERNAL_PORT}"]
            advertised += [f"CLIENT://127.0.0.1:{advertised_client}", f"INTERNAL://{self.alias}:{settings.INTERNAL_PORT}"]
            protocols += ["CLIENT:PLAINTEXT", "INTERNAL:PLAINTEXT"]
            if self.direct_port:
                listeners.append(f"DIRECT://0.0.0.0:{settings.DIRECT_PORT}")
                advertised.append(f"DIRECT://127.0.0.1:{self.direct_port}")
                protocols.append("DIRECT:PLAINTEXT")
            props["inter.broker.listener.name"] = "INTERNAL"
        if self.is_controller:
            listeners.append(f"CONTROLLER://0.0.0.0:{settings.CONTROLLER_PORT}")
            if self.role == "combined":
                advertised.append(f"CONTROLLER://{self.alias}:{settings.CONTROLLER_PORT}")
        props["listeners"] = ",".join(listeners)
        if advertised:
            props["advertised.listeners"] = ",".join(advertised)
        props["listener.security.protocol.map"] = ",".join(protocols)
        props.update(spec.settings())
        return props

    def _entrypoint(self) -> str:
        """Write our server.properties, format storage once (a restart keeps its data), exec the server."""
        spec = self.cluster.spec
        features = ""
        if spec.elr is not None:
            features = f" --feature eligible.leader.replicas.version={1 if spec.elr else 0}"
        return (
            "set -e; mkdir -p /etc/kafka-chaos; "
            f'echo "$KAFKA_CHAOS_PROPERTIES" | base64 -d > {CONFIG_PATH}; '
            f"if [ ! -f {DATA_DIR}/meta.properties ]; then "
            f"kafka-storage.sh format -t {self.cluster.cluster_id} -c {CONFIG_PATH}{features} --ignore-formatted; fi; "
            f"exec kafka-server-start.sh {CONFIG_PATH}"
        )

    # -- lifecycle -----------------------------------------------------------------------------------------

    def create(self, network: Network) -> None:
        props = "\n".join(f"{k}={v}" for k, v in self.server_properties().items()) + "\n"
        labels = self.cluster.labels(role=self.role, **{NODE_LABEL: str(self.node_id)})
        if self.client_port:
            labels[PORT_LABEL] = str(self.direct_port or self.client_port)
        c = (
            DockerContainer(self.cluster.spec.image)
            .with_name(self.name)
            .with_network(network)
            .with_network_aliases(self.alias)
            .with_env("KAFKA_CHAOS_PROPERTIES", base64.b64encode(props.encode()).decode())
            .with_env("KAFKA_HEAP_OPTS", self.cluster.spec.heap_opts)
            .with_env("KAFKA_JVM_PERFORMANCE_OPTS", settings.NODE_JVM_OPTS)
            .with_command(["sh", "-c", self._entrypoint()])
            .with_kwargs(
                labels=labels,
                hostname=self.alias,
                entrypoint=[],
            )
            .with_volume_mapping(self.volume, DATA_DIR, "rw")  # a named volume: kill + start keeps the log
        )
        if self.is_broker and not self.cluster.spec.toxiproxy:
            bind_loopback(c, settings.CLIENT_PORT, self.client_port)
        if self.direct_port:
            bind_loopback(c, settings.DIRECT_PORT, self.direct_port)
        self._container = c
        self.cluster.client.volumes.create(self.volume, labels=self.cluster.labels(role="data"))
        c.start()

    def status(self) -> str:
        self.container.reload()
        return str(self.container.status)

    def running(self) -> bool:
        return self.status() == "running"

    def kill(self) -> None:
        """SIGKILL: no controlled shutdown, no flush; the data volume stays."""
        self._drop_sidecar()
        self.container.kill(signal="SIGKILL")
        self._wait_status({"exited", "stopped"})

    def stop(self, timeout_s: int = 30) -> None:
        """Clean shutdown (SIGTERM, controlled shutdown), then the container stops."""
        self._drop_sidecar()
        self.container.stop(timeout=timeout_s)

    def start(self) -> None:
        """Start a killed or stopped node with its data."""
        self.container.start()
        self._wait_status({"running"})

    def pause(self) -> None:
        """Freeze every process of the node (cgroup freezer): sockets stay open, nothing answers."""
        self.container.pause()

    def resume(self) -> None:
        self.container.unpause()

    def _wait_status(self, wanted: set[str]) -> None:
        Wait(f"{self.name} to be {'/'.join(sorted(wanted))}", 30, 0.1).until(lambda: self.status() in wanted)

    def logs(self) -> str:
        try:
            return self.container.logs().decode(errors="replace")
        except docker.errors.APIError as err:
            return f"<logs of {self.name} unavailable: {err}>"

    def started(self) -> bool:
        return "Kafka Server started" in self.logs()

    def started_count(self) -> int:
        return self.logs().count("Kafka Server started")

    def ip(self) -> str:
        self.container.reload()
        nets = self.container.attrs["NetworkSettings"]["Networks"]
        net = nets.get(self.cluster.network_name) or next(iter(nets.values()))
        return str(net["IPAddress"])

    # -- network partitions --------------------------------------------------------------------------------

    def _sidecar_exec(self, script: str) -> None:
        """Run iptables in this node's network namespace from a side-car that alone holds NET_ADMIN."""
        if self._sidecar is None:
            self._sidecar = self.cluster.client.containers.run(
                BASE_IMAGE,
                ["sleep", "infinity"],
                name=f"{self.name}-netfault-{uuid.uuid4().hex[:6]}",
                network_mode=f"container:{self.container.id}",
                cap_add=["NET_ADMIN"],
                labels=self.cluster.labels(role="sidecar", **{NODE_LABEL: str(self.node_id)}),
                detach=True,
            )
        code, out = self._sidecar.exec_run(["sh", "-c", script])
        if code != 0:
            text = out.decode(errors="replace") if isinstance(out, bytes) else ""
            raise ClusterError(f"iptables on {self.name} failed ({code}): {text}")

    def _drop_sidecar(self) -> None:
        # A restarted container gets a new network namespace (and no rules); the old side-car would hold the
        # stale one, and Podman will not stop a container that has a dependent side-car.
        if self._sidecar is not None:
            with contextlib.suppress(docker.errors.APIError):
                self._sidecar.remove(force=True)
            self._sidecar = None

    def drop_traffic(self, peers: Iterable[KafkaNode], direction: Literal["both", "in", "out"] = "both") -> None:
        """Drop packets between this node and `peers` (by container IP). `in`: this node hears nothing from them."""
        rules = []
        for peer in peers:
            ip = peer.ip()
            if direction in ("both", "in"):
                rules.append(f"iptables -A INPUT -s {ip} -j DROP")
            if direction in ("both", "out"):
                rules.append(f"iptables -A OUTPUT -d {ip} -j DROP")
        if rules:
            self.cluster.was_partitioned = True
            self._sidecar_exec(" && ".join(rules))

    def heal(self) -> None:
        """Remove every partition rule of this node (a no-op when none were set)."""
        if self._sidecar is not None and self.status() == "running":
            self._sidecar_exec("iptables -F INPUT && iptables -F OUTPUT")
            self._drop_sidecar()

    def remove(self) -> None:
        self._drop_sidecar()
        if self._container is not None and self._container._container is not None:
            with contextlib.suppress(docker.errors.APIError, docker.errors.NotFound):
                self.container.remove(force=True, v=True)


class KafkaCluster:
    """N KRaft nodes (+ optional Toxiproxy) on their own network. A context manager; `start()`/`stop()` too."""

    def __init__(self, spec: ClusterSpec | None = None, *, run_id: str | None = None) -> None:
        self.spec = spec or ClusterSpec()
        self.run_id = run_id or new_run_id()
        self.cluster_id = new_cluster_id()
        self.client: docker.DockerClient = docker_client()
        self.network_name = f"kc-{self.run_id}"
        self._network: Network | None = None
        self.was_partitioned = False
        """Set by any iptables partition; a shared pool replaces such a cluster rather than reuse it."""
        self.toxiproxy: Toxiproxy | None = None
        self.nodes: dict[int, KafkaNode] = {}
        if self.spec.controllers:
            for i in self.spec.controller_ids():
                self.nodes[i] = KafkaNode(self, i, "controller")
            for i in self.spec.broker_ids():
                self.nodes[i] = KafkaNode(self, i, "broker")
        else:
            for i in self.spec.broker_ids():
                self.nodes[i] = KafkaNode(self, i, "combined")

    def labels(self, role: str, **extra: str) -> dict[str, str]:
        return {RUN_LABEL: self.run_id, ROLE_LABEL: role, **extra}

    # -- lifecycle -----------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def start(self) -> Self:
        """Start every node and wait until ready; a partial start is removed before the error is raised."""
        require_image(self.client, self.spec.image)
        require_image(self.client, BASE_IMAGE)
        if self.spec.toxiproxy:
            require_image(self.client, TOXIPROXY_IMAGE)
        try:
            self._network = Network(docker_network_kw={"labels": self.labels(role="network")})
            self._network.name = self.network_name
            self._network.create()
            if self.spec.toxiproxy:
                self.toxiproxy = Toxiproxy(self)
                self.toxiproxy.start(self._network)
            for node in self.nodes.values():
                node.create(self._network)
            self.wait_ready()
            if self.toxiproxy:
                self.toxiproxy.create_proxies()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Remove every container, the network and the data volumes. Safe to call twice."""
        forget(self.bootstrap_servers(direct=True))  # its cached admin connection dies with it
        for node in self.nodes.values():
            node.remove()
        if self.toxiproxy is not None:
            self.toxiproxy.remove()
        remove_labelled(self.client, self.run_id)

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Every node logged `Kafka Server started` and the metadata shows every broker."""
        timeout = timeout_s or self.spec.start_timeout_s
        Wait("every node to log 'Kafka Server started'", timeout).until(
            lambda: all(n.started() for n in self.nodes.values()), self.all_logs
        )
        want = set(self.spec.broker_ids())
        Wait(f"metadata to show brokers {sorted(want)}", timeout).until(
            lambda: want <= self.live_broker_ids(), self.all_logs
        )

    def heal_all(self, timeout_s: float | None = None) -> None:
        """Undo every fault: resume paused nodes, start stopped ones, drop partition rules and link toxics;
        then wait until every broker is back in the metadata."""
        for node in self.nodes.values():
            status = node.status()
            if status == "paused":
                node.resume()
            elif status in ("exited", "stopped", "created"):
                node.start()
        for node in self.nodes.values():
            node.heal()
        if self.toxiproxy is not None:
            self.toxiproxy.reset()
        self.wait_ready(timeout_s)

    # -- access --------------------------------------------------------------------------------------------

    def node(self, node_id: int) -> KafkaNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ClusterError(f"no node {node_id}; nodes are {sorted(self.nodes)}") from None

    @property
    def brokers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.is_broker]

    @property
    def controllers(self) -> list[KafkaNode]:
        return [n for n in self.nodes.values() if n.is_controller]

    def bootstrap_servers(self, *, direct: bool = False) -> str:
        """What clients use (through Toxiproxy when it is on); `direct=True` bypasses it for the harness."""
        ports = []
        for b in self.brokers:
            if self.spec.toxiproxy and not direct:
                ports.append(b.proxy_port)
            else:
                ports.append(b.direct_port or b.client_port)
        return ",".join(f"127.0.0.1:{p}" for p in ports)

    def admin_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self.bootstrap_servers(direct=True), "socket.timeout.ms": 5000,
                "logger": client_logger()}

    def live_broker_ids(self) -> set[int]:
        from confluent_kafka.admin import AdminClient

        md = AdminClient(self.admin_config()).list_topics(timeout=5)
        return set(md.brokers)

    def all_logs(self, tail_lines: int = 60) -> str:
        parts = []
        for n in self.nodes.values():
            lines = n.logs().splitlines()[-tail_lines:]
            parts.append(f"--- {n.name} (last {len(lines)} lines) ---\n" + "\n".join(lines))
        return "\n".join(parts)

    def save_logs(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        for n in self.nodes.values():
            (directory / f"node-{n.node_id}.log").write_text(n.logs())

    # -- topics and state ----------------------------------------------------------------------------------

    def create_topic(
        self, name: str, partitions: int, replication_factor: int, configs: dict[str, str] | None = None
    ) -> None:
        from confluent_kafka import KafkaError, KafkaException
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        admin = AdminClient(self.admin_config())
        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=configs or {})
        for attempt in range(3):  # a controller that just took over can time the first request out
            try:
                admin.create_topics([new], request_timeout=20)[name].result(timeout=30)
                break
            except KafkaException as err:
                code = err.args[0].code() if err.args else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 0:
                    break
                if code not in (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT) or attempt == 2:
                    raise ClusterError(f"creating topic {name!r} failed: {err}") from None
        self.wait_for_isr(name, replication_factor)

    def partition_states(self, topic: str) -> list[PartitionState]:
        return describe_partitions(self.bootstrap_servers(direct=True), topic)

    def wait_for_state(
        self, topic: str, predicate: Callable[[PartitionState], bool], what: str, timeout_s: float = 60
    ) -> list[PartitionState]:
        """Wait until every partition of `topic` satisfies `predicate`; return those states."""

        def probe() -> list[PartitionState] | None:
            states = self.partition_states(topic)
            return states if states and all(predicate(s) for s in states) else None

        return Wait(f"{topic}: {what}", timeout_s, 0.5).until(probe, self.all_logs)

    def wait_for_isr(self, topic: str, size: int, timeout_s: float = 60, node_id: int | None = None) -> None:
        """Every partition has a leader and an ISR of `size` (containing `node_id` when given)."""
        self.wait_for_state(
            topic,
            lambda s: s.leader is not None and len(s.isr) >= size and (node_id is None or node_id in s.isr),
            f"every partition with a leader and ISR of {size}" + (f" incl. {node_id}" if node_id else ""),
            timeout_s,
        )

    def controller_id(self) -> int | None:
        return quorum_leader(self.bootstrap_servers(direct=True))


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

    def remove(self) -> None:
        if self._container is not None:
            with contextlib.suppress(Exception):
                self._container.get_wrapped_container().remove(force=True, v=True)


def labelled(client: docker.DockerClient, run_id: str | None = None) -> dict[str, list[str]]:
    """Names of every container, network and volume kafka-chaos labelled (for one run, or all)."""
    flt: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    return {
        "containers": [str(c.name) for c in client.containers.list(all=True, filters=flt)],
        "networks": [str(n.name) for n in client.networks.list(filters=flt)],
        "volumes": [str(v.name) for v in client.volumes.list(filters=flt)],
    }


def remove_labelled(client: docker.DockerClient, run_id: str | None = None) -> dict[str, list[str]]:
    """Remove what `labelled` lists: side-cars first (Podman refuses to remove a node they depend on)."""
    flt: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    removed: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}
    containers = client.containers.list(all=True, filters=flt)
    containers.sort(key=lambda c: c.labels.get(ROLE_LABEL) != "sidecar")
    for c in containers:
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True, v=True)
            removed["containers"].append(str(c.name))
    for net in client.networks.list(filters=flt):
        with contextlib.suppress(docker.errors.NotFound):
            net.remove()
            removed["networks"].append(str(net.name))
    for vol in client.volumes.list(filters=flt):
        with contextlib.suppress(docker.errors.NotFound):
            vol.remove(force=True)
            removed["volumes"].append(str(vol.name))
    return removed


def spec_key(spec: ClusterSpec) -> str:
    return repr(sorted(asdict(spec).items()))


class ClusterPool:
    """At most one live cluster; a request for another spec replaces it."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.current: KafkaCluster | None = None
        self._key: str | None = None

    def get(self, spec: ClusterSpec) -> KafkaCluster:
        key = spec_key(spec)
        if self.current is not None and self._key == key:
            return self.current
        self.release()
        cluster = KafkaCluster(spec)
        cluster.start()
        self.current, self._key = cluster, key
        return cluster

    def heal_or_drop(self) -> None:
        """Heal the shared cluster after a test; one that cannot be healed is replaced on next use, and so is one
        that was partitioned: after the rules are gone, new inter-broker connections were seen to stall for
        ~10 s (a replica fetcher's connection setup timed out), enough to starve the next test's writes."""
        if self.current is None:
            return
        if self.current.was_partitioned and not self.keep:  # a kept cluster stays, for the user to look at
            self.release()
            return
        try:
            self.current.heal_all(timeout_s=60)
        except Exception:
            self.release()

    def release(self) -> None:
        if self.current is not None and not self.keep:
            self.current.stop()
        self.current, self._key = None, None
