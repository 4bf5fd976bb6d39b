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
import uuid
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import docker
import docker.errors
from testcontainers.core.network import Network

from kafka_chaos.cluster import host_names
from kafka_chaos.cluster.engine import docker_client, engine_url
from kafka_chaos.cluster.images import BASE_IMAGE, TOXIPROXY_IMAGE, require_image
from kafka_chaos.cluster.labels import (
    ROLE_LABEL,
    RUN_LABEL,
    labelled_of,
    new_run_id,
    remove_labelled,
    started_run_ids,
    track,
)
from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.cluster.node import KafkaNode
from kafka_chaos.cluster.node_links import LinkProxies
from kafka_chaos.cluster.sized_disk import missing_requirements as sized_disk_problems
from kafka_chaos.cluster.sized_disk import remove_sized_disks
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.cluster.state import PartitionState, describe_partitions, forget, quorum_leader
from kafka_chaos.cluster.toxiproxy import Toxiproxy
from kafka_chaos.cluster.volatile_disk import missing_requirements, remove_disks
from kafka_chaos.cluster.waits import Wait
from kafka_chaos.errors import ClusterError
from kafka_chaos.interrupts import deferred, outcome


def new_cluster_id() -> str:
    """A random cluster id (a base64url UUID). Like Kafka's own Uuid.randomUuid, never one that starts with '-':
    kafka-storage's argument parser reads `-t -abc…` as a missing value, and the node never starts."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id



def remove_started() -> dict[str, list[str]]:
    """Remove whatever is left of every cluster this process started (a thread may have created a container
    after its cluster was stopped, or a stop may have failed half way), then list what is still there."""
    run_ids = started_run_ids()
    if not run_ids:
        return {"containers": [], "networks": [], "volumes": []}
    client = docker_client()
    with deferred():
        for run_id in sorted(run_ids):
            remove_labelled(client, run_id)
            remove_disks(run_id)
            remove_sized_disks(run_id)
        host_names.remove_blocks(run_ids)
    return labelled_of(client, run_ids)


def sweep_after_interrupt() -> str:
    """After an interrupt: remove what is left of every cluster this process started, check the engine, and
    say only what that check found (interrupts.outcome) — the CLI and the pytest plugin print this."""
    left: dict[str, list[str]] | None = None
    error: str | None = None
    try:
        left = remove_started()
    except KeyboardInterrupt:
        error = "interrupted while checking"
    except Exception as err:  # the engine went away: say that nothing was checked
        error = f"{type(err).__name__}: {err}"
    return outcome(left, error)


class KafkaCluster:
    """N KRaft nodes (+ optional Toxiproxy) on their own network. A context manager; `start()`/`stop()` too."""

    def __init__(self, spec: ClusterSpec | None = None, *, run_id: str | None = None) -> None:
        self.spec = spec or ClusterSpec()
        self.run_id = run_id or new_run_id()
        self.cluster_id = new_cluster_id()
        self.directory_ids = {i: new_cluster_id() for i in self.spec.controller_ids()} if self.spec.dynamic_quorum \
            else {}
        """KIP-853: each controller's log directory id, which --initial-controllers names beside its endpoint."""
        self.client: docker.DockerClient = docker_client()
        self.network_name = f"kc-{self.run_id}"
        self._network: Network | None = None
        self.was_partitioned = False
        """Set by any iptables partition; a shared pool replaces such a cluster rather than reuse it."""
        self.was_reshaped = False
        """Set when a broker was added or removed or a node moved to another image: the cluster no longer matches
        its spec, so a pool replaces it."""
        self.was_disk_damaged = False
        """Set when a node's disk failed writes (EIO) or had bits flipped: logs of that run stay damaged on the
        disk, and a later run's restart of the node would recover them too (Kafka 4.3.1 was seen to refuse to
        start on a segment a failed write left with a zero-filled record), so a pool replaces it."""
        self.toxiproxy: Toxiproxy | None = None
        self.link_proxies: LinkProxies | None = None
        self.nodes: dict[int, KafkaNode] = {}
        self.broken_names: dict[int, str | None] = {}
        """Brokers whose host name a dns-fail broke: the address it now resolves to (None: none)."""
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
        if self.spec.toxiproxy or self.spec.link_proxies:
            require_image(self.client, TOXIPROXY_IMAGE)
        if self.spec.volatile_disks:
            problems = missing_requirements(engine_url())
            if problems:
                raise ClusterError("power-loss cannot run here: " + "; ".join(problems) + ". Nothing was started.")
        if self.spec.disk_size_mb:
            problems = sized_disk_problems(engine_url())
            if problems:
                raise ClusterError("disk_size_mb cannot work here: " + "; ".join(problems) + ". Nothing was started.")
        if self.spec.host_names and (problem := host_names.problem()):
            raise ClusterError(problem)
        track(self.run_id)  # before anything exists: an interrupt's sweep finds what a half start left
        try:
            if self.spec.host_names:
                self._write_host_names()
            self._network = Network(docker_network_kw={"labels": self.labels(role="network")})
            self._network.name = self.network_name
            self._network.create()
            if self.spec.toxiproxy:
                self.toxiproxy = Toxiproxy(self)
                self.toxiproxy.start(self._network)
            if self.spec.link_proxies:
                self.link_proxies = LinkProxies(self)
                self.link_proxies.start(self._network)
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
        """Remove every container, the network and the data volumes. Safe to call twice. Runs whole: a signal
        arriving meanwhile is raised once it is done (a half-removed cluster would be left running)."""
        with deferred():
            forget(self.bootstrap_servers(direct=True))  # its cached admin connection dies with it
            try:
                for node in self.nodes.values():
                    node.remove()
                if self.toxiproxy is not None:
                    self.toxiproxy.remove()
                if self.link_proxies is not None:
                    self.link_proxies.remove()
            finally:  # by label: also what a handle above failed to remove
                remove_labelled(self.client, self.run_id)
                remove_disks(self.run_id)
                remove_sized_disks(self.run_id)
                if self.spec.host_names:
                    host_names.remove_blocks(frozenset({self.run_id}))

    # -- host names (cluster.host_names; the dns-fail fault) -------------------------------------------------

    def _write_host_names(self) -> None:
        host_names.set_block(self.run_id, {b.client_host: self.broken_names.get(b.node_id, host_names.LOOPBACK)
                                           for b in self.brokers})

    def break_host_name(self, node_id: int, mode: str) -> dict[str, str | None]:
        """Broker `node_id`'s name stops resolving (`unresolvable`) or resolves to an address where nothing
        answers (`dead-address`), for every client from its next lookup on; returns {name: address or None}."""
        node = self.node(node_id)
        if not self.spec.host_names or not node.is_broker:
            raise ClusterError(f"node {node_id} has no host name to break: dns-fail needs a broker of a cluster "
                               "started with cluster.host_names")
        if mode not in ("unresolvable", "dead-address"):
            raise ValueError(f"unknown dns-fail mode {mode!r}")
        self.broken_names[node_id] = host_names.DEAD_ADDRESS if mode == "dead-address" else None
        self._write_host_names()
        return {node.client_host: self.broken_names[node_id]}

    def restore_host_name(self, node_id: int) -> dict[str, str]:
        """Broker `node_id`'s name resolves to its listener again; returns {name: address}."""
        self.broken_names.pop(node_id, None)
        if self.spec.host_names:
            self._write_host_names()
        return {self.node(node_id).client_host: host_names.LOOPBACK}

    def settle_disks(self) -> dict[int, int]:
        """Volatile disks only: make everything written so far durable (the setup, earlier runs); per node, the
        files that were dirty. Without this, Kafka's own setup would be lost too: `kafka-storage format` writes
        bootstrap.checkpoint without fsync (BatchFileWriter.close), and a node that loses it cannot start."""
        return {n.node_id: n.disk.settle() for n in self.nodes.values() if n.disk is not None and n.disk.mounted}

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """Every node logged `Kafka Server started` and the metadata shows every broker."""
        timeout = timeout_s or self.spec.start_timeout_s
        pending = list(self.nodes.values())

        def all_started() -> bool:
            # a node seen started is not asked again: each ask reads its whole log, CPU the starting JVMs need
            while pending and pending[0].started():
                pending.pop(0)
            return not pending

        Wait("every node to log 'Kafka Server started'", timeout).until(all_started, self.all_logs)
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
        if self.link_proxies is not None:
            self.link_proxies.heal_all()
        if self.broken_names:
            self.broken_names.clear()
            self._write_host_names()
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
        servers = []
        for b in self.brokers:
            if direct:
                servers.append(f"{host_names.LOOPBACK}:{b.direct_port or b.client_port}")
            else:
                servers.append(f"{b.client_host}:{b.proxy_port if self.spec.toxiproxy else b.client_port}")
        return ",".join(servers)

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
        # a controller that just took over can time the first request out; librdkafka (2.10+, KIP-899) destroys
        # its bootstrap broker handle once it learns the brokers, failing a request still waiting on it
        retried = (KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._DESTROY_BROKER)
        for attempt in range(3):
            try:
                admin.create_topics([new], request_timeout=20)[name].result(timeout=30)
                break
            except KafkaException as err:
                code = err.args[0].code() if err.args else None
                if code == KafkaError.TOPIC_ALREADY_EXISTS and attempt > 0:
                    break
                if code not in retried or attempt == 2:
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

    def replace_image(self, node_id: int, image: str) -> None:
        """Move one node to another Kafka image, keeping its data (see KafkaNode.replace_image)."""
        if self._network is None:
            raise ClusterError("the cluster is not started")
        # no longer the version its spec names (and its metadata.version may have been raised past it): a pool
        # must not hand it to the next run as a fresh cluster of that spec
        self.was_reshaped = True
        self.node(node_id).replace_image(image, self._network)

    def add_broker(self, timeout_s: float | None = None) -> KafkaNode:
        """A broker-only node with the next free id joins the running cluster (brokers are not quorum voters, so
        nothing else changes); returns it once the metadata shows it registered."""
        if self._network is None:
            raise ClusterError("the cluster is not started")
        node_id = max(n.node_id for n in self.brokers) + 1  # dedicated controllers start far above (node_ids)
        node = KafkaNode(self, node_id, "broker")
        self.nodes[node_id] = node
        self.was_reshaped = True
        if self.spec.host_names:  # clients must resolve its name from its first metadata on
            self._write_host_names()
        node.create(self._network)
        timeout = timeout_s or self.spec.start_timeout_s
        Wait(f"node {node_id} to log 'Kafka Server started'", timeout).until(node.started, self.all_logs)
        Wait(f"metadata to show broker {node_id}", timeout).until(lambda: node_id in self.live_broker_ids(),
                                                                   self.all_logs)
        return node

    def remove_broker(self, node_id: int) -> None:
        """Remove a broker's container and data for good (after it was decommissioned)."""
        node = self.node(node_id)
        self.was_reshaped = True
        node.remove()
        del self.nodes[node_id]

    def controller_id(self) -> int | None:
        return quorum_leader(self.bootstrap_servers(direct=True))

    def txn_coordinator_id(self, transactional_id: str) -> int | None:
        """The transaction coordinator of `transactional_id`, asked now (the `txn-coordinator` fault target)."""
        from kafka_chaos.cluster.state import txn_coordinator

        return txn_coordinator(self.bootstrap_servers(direct=True), transactional_id)
