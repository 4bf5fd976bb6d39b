"""One KRaft node in a container: its lifecycle and the faults the nemesis applies to it."""

from __future__ import annotations

import base64
import contextlib
import os
import random
import socket
import time
import uuid
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Literal

import docker
import docker.errors
from docker.models.containers import Container
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from kafka_chaos import versions
from kafka_chaos.cluster import settings
from kafka_chaos.cluster.disk_corruption import corrupt, files_of
from kafka_chaos.cluster.host_names import LOOPBACK, host_name
from kafka_chaos.cluster.images import BASE_IMAGE
from kafka_chaos.cluster.labels import NODE_LABEL, PORT_LABEL
from kafka_chaos.cluster.sized_disk import SIZED_ROOT, SizedDisk
from kafka_chaos.cluster.volatile_disk import DISKS_ROOT, VolatileDisk, segment_end_offset
from kafka_chaos.cluster.waits import Wait
from kafka_chaos.errors import ClusterError

if TYPE_CHECKING:
    from kafka_chaos.cluster.kafka import KafkaCluster

DATA_DIR = "/var/lib/kafka/data"
CONFIG_PATH = "/etc/kafka-chaos/server.properties"

NodeRole = Literal["combined", "broker", "controller"]
_WRITE_CONFIG = f'set -e; mkdir -p /etc/kafka-chaos; echo "$KAFKA_CHAOS_PROPERTIES" | base64 -d > {CONFIG_PATH}; '
"""The start of a node's shell command: its server.properties, from the environment, where the tools read it."""


def bind_loopback(container: DockerContainer, container_port: int, host_port: int | None) -> None:
    """Publish on 127.0.0.1 only. testcontainers' with_bind_ports binds every interface; docker-py takes a tuple."""
    container.ports[f"{container_port}/tcp"] = ("127.0.0.1", host_port)  # type: ignore[assignment]



def _directory_id(meta_properties: str) -> str | None:
    """The log directory's id (KIP-858) in a meta.properties; None before 3.7 (or on a broker formatted without)."""
    for line in meta_properties.splitlines():
        if line.startswith("directory.id="):
            return line.split("=", 1)[1].strip()
    return None


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])



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
        # the harness's own listener (admin, observer, target lookups): not through the client proxy, and not by
        # a host name a dns-fail may break
        self.direct_port = (free_port() if role != "controller" and (cluster.spec.toxiproxy or cluster.spec.host_names)
                            else None)
        self.proxy_port: int | None = None  # set by the cluster when Toxiproxy fronts the client listener
        self.image = cluster.spec.image  # a rolling upgrade moves a node to another image
        self._container: DockerContainer | None = None
        self._sidecar: Container | None = None
        # power loss: the data directory on a FUSE disk on the host instead of a named volume
        self.disk = (VolatileDisk(DISKS_ROOT / cluster.run_id / self.alias, cluster.spec.disk_writeback_s)
                     if cluster.spec.volatile_disks else None)
        # full disk: the data directory on a small tmpfs on the host (cluster.sized_disk)
        self.sized = (SizedDisk(SIZED_ROOT / cluster.run_id / self.alias, cluster.spec.disk_size_mb)
                      if cluster.spec.disk_size_mb else None)

    def __repr__(self) -> str:
        return f"KafkaNode({self.node_id}, {self.role})"

    @property
    def is_broker(self) -> bool:
        return self.role in ("combined", "broker")

    @property
    def rack(self) -> str | None:
        return self.cluster.spec.rack_of(self.node_id) if self.is_broker else None

    @property
    def is_controller(self) -> bool:
        return self.role in ("combined", "controller")

    @property
    def container(self) -> Container:
        if self._container is None:
            raise ClusterError(f"{self!r} has not been created")
        return self._container.get_wrapped_container()

    @property
    def version(self) -> str:
        """The Kafka version its image runs (a rolling upgrade moves a node to another one)."""
        return self.image.rsplit(":", 1)[-1]

    @property
    def client_host(self) -> str:
        """The host clients reach its client listener by: its own name with `host_names` (cluster.host_names:
        a `dns-fail` fault breaks it), else the loopback address."""
        return host_name(self.cluster.run_id, self.node_id) if self.cluster.spec.host_names else LOOPBACK

    config_path = CONFIG_PATH
    """Its server.properties inside the container (what a Kafka tool run on the node is given as its config)."""
    data_dir = DATA_DIR

    @property
    def controller_port(self) -> int:
        """Its controller listener's port (per node with link proxies: cluster.node_links)."""
        return settings.controller_port(self.node_id, self.cluster.spec.link_proxies)

    @property
    def internal_port(self) -> int:
        """Its inter-broker listener's port (per node with link proxies: cluster.node_links)."""
        return settings.internal_port(self.node_id, self.cluster.spec.link_proxies)

    # -- configuration -------------------------------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        spec = self.cluster.spec
        proxied = spec.link_proxies
        roles = {"combined": "broker,controller", "broker": "broker", "controller": "controller"}[self.role]
        props: dict[str, str] = {
            "process.roles": roles,
            "node.id": str(self.node_id),
            **self._quorum_properties(),
            "controller.listener.names": "CONTROLLER",
            "log.dirs": DATA_DIR,
        }
        listeners, advertised, protocols = [], [], ["CONTROLLER:PLAINTEXT"]
        if self.is_broker:
            advertised_client = self.proxy_port if spec.toxiproxy else self.client_port
            internal = self.internal_port
            listeners += [f"CLIENT://0.0.0.0:{settings.CLIENT_PORT}", f"INTERNAL://0.0.0.0:{internal}"]
            advertised += [f"CLIENT://{self.client_host}:{advertised_client}", f"INTERNAL://{self.alias}:{internal}"]
            protocols += ["CLIENT:PLAINTEXT", "INTERNAL:PLAINTEXT"]
            if self.direct_port:
                listeners.append(f"DIRECT://0.0.0.0:{settings.DIRECT_PORT}")
                advertised.append(f"DIRECT://127.0.0.1:{self.direct_port}")
                protocols.append("DIRECT:PLAINTEXT")
            props["inter.broker.listener.name"] = "INTERNAL"
        if self.is_controller:
            controller = settings.controller_port(self.node_id, proxied)
            listeners.append(f"CONTROLLER://0.0.0.0:{controller}")
            if self.role == "combined" and versions.at_least(self.version, versions.CONTROLLER_ADVERTISED_FROM):
                advertised.append(f"CONTROLLER://{self.alias}:{controller}")
        props["listeners"] = ",".join(listeners)
        if advertised:
            props["advertised.listeners"] = ",".join(advertised)
        props["listener.security.protocol.map"] = ",".join(protocols)
        props.update(spec.settings())
        if self.rack is not None:
            props["broker.rack"] = self.rack
        return props

    def _quorum_properties(self) -> dict[str, str]:
        """A static quorum names its voters; a dynamic one (KIP-853) only where to find the controllers: the voters
        are in the metadata log, from --initial-controllers at format time and add/remove-controller since."""
        spec = self.cluster.spec
        endpoints = {i: f"node-{i}:{settings.controller_port(i, spec.link_proxies)}" for i in spec.controller_ids()}
        if spec.dynamic_quorum:
            return {"controller.quorum.bootstrap.servers": ",".join(endpoints.values())}
        return {"controller.quorum.voters": ",".join(f"{i}@{e}" for i, e in endpoints.items())}

    def _format_flags(self) -> str:
        """kafka-storage format's quorum flags: with a dynamic quorum, every controller is formatted with the same
        initial voter set (id@host:port:directory-id; its own directory id taken from it), brokers with none."""
        spec = self.cluster.spec
        if not spec.dynamic_quorum:
            return ""
        if not self.is_controller:
            return " --no-initial-controllers"
        voters = ",".join(f"{i}@node-{i}:{settings.controller_port(i, spec.link_proxies)}:{d}"
                          for i, d in self.cluster.directory_ids.items())
        return f" --initial-controllers {voters}"

    def _entrypoint(self) -> str:
        """Write our server.properties, format storage once (a restart keeps its data), exec the server."""
        spec = self.cluster.spec
        flags = self._format_flags()
        if spec.elr is not None:
            flags += f" --feature eligible.leader.replicas.version={1 if spec.elr else 0}"
        if spec.transaction_version is not None:
            flags += f" --feature transaction.version={spec.transaction_version}"
        return (
            f"{_WRITE_CONFIG}if [ ! -f {DATA_DIR}/meta.properties ]; then "
            f"kafka-storage.sh format -t {self.cluster.cluster_id} -c {CONFIG_PATH}{flags} --ignore-formatted; fi; "
            f"exec kafka-server-start.sh {CONFIG_PATH}"
        )

    # -- lifecycle -----------------------------------------------------------------------------------------

    def _properties_env(self) -> str:
        props = "\n".join(f"{k}={v}" for k, v in self.server_properties().items()) + "\n"
        return base64.b64encode(props.encode()).decode()

    def create(self, network: Network) -> None:
        labels = self.cluster.labels(role=self.role, **{NODE_LABEL: str(self.node_id)})
        if self.client_port:
            labels[PORT_LABEL] = str(self.direct_port or self.client_port)
        c = (
            DockerContainer(self.image)
            .with_name(self.name)
            .with_network(network)
            .with_network_aliases(self.alias)
            .with_env("KAFKA_CHAOS_PROPERTIES", self._properties_env())
            .with_env("KAFKA_HEAP_OPTS", self.cluster.spec.heap_opts)
            .with_env("KAFKA_JVM_PERFORMANCE_OPTS", settings.NODE_JVM_OPTS)
            .with_command(["sh", "-c", self._entrypoint()])
            .with_kwargs(
                labels=labels,
                hostname=self.alias,
                entrypoint=[],
                # link proxies: every peer's name resolves to this node's own proxy side-car, which forwards
                # each of its ports to that peer (cluster.node_links); kept across restarts of the container
                extra_hosts=self.cluster.link_proxies.hosts_for(self.node_id) if self.cluster.link_proxies else None,
            )
        )
        if self.disk is not None:
            if not self.disk.mounted:
                self.disk.mount()
            c.with_volume_mapping(str(self.disk.mountpoint), DATA_DIR, "rw")
        elif self.sized is not None:
            self.sized.mount()
            c.with_volume_mapping(str(self.sized.path), DATA_DIR, "rw")
        else:
            c.with_volume_mapping(self.volume, DATA_DIR, "rw")  # a named volume: kill + start keeps the log
        if self.is_broker and not self.cluster.spec.toxiproxy:
            bind_loopback(c, settings.CLIENT_PORT, self.client_port)
        if self.direct_port:
            bind_loopback(c, settings.DIRECT_PORT, self.direct_port)
        self._container = c
        if self.disk is None and self.sized is None:
            try:
                self.cluster.client.volumes.get(self.volume)  # a node re-created on a new image keeps its data
            except docker.errors.NotFound:
                self.cluster.client.volumes.create(self.volume, labels=self.cluster.labels(role="data"))
        c.start()

    def replace_image(self, image: str, network: Network, timeout_s: float = 90) -> None:
        """Upgrade (or downgrade) this node's Kafka: controlled shutdown, the container re-created on `image` with
        the same name, ports and data volume, then wait for the server to start again."""
        self._drop_sidecar()
        self._stop_container(30)
        self._remove_container()
        self.image = image
        self.create(network)
        Wait(f"{self.name} to start on {image}", timeout_s).until(self.started)

    def run_tool(self, *argv: str) -> tuple[int, str]:
        """Run one of Kafka's command-line tools inside this node's container (the image's own launchers)."""
        result = self.container.exec_run(list(argv))
        output = result.output if isinstance(result.output, bytes) else b"".join(result.output)
        return int(result.exit_code or 0), output.decode(errors="replace")

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

    def power_loss(self) -> list[dict[str, Any]]:
        """The node loses power: its processes die (SIGKILL), then its disk loses every write that was not
        fsynced (docs/architecture.md §6). Returns the files the loss changed (sizes, segment end offsets)."""
        self.kill()
        return self.lose_unsynced_writes()

    def lose_unsynced_writes(self, torn: str | None = None, torn_glob: str | None = None,
                             seed: int = 0) -> list[dict[str, Any]]:
        """The disk's half of a power loss, for a node whose processes are already dead; `torn`: each file's last
        write is torn instead of lost whole (cluster.volatile_disk.UnsyncedWrites.lose)."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: power-loss needs cluster.volatile_disks")
        return self.disk.power_off(torn, torn_glob, seed)

    def disk_faults(self, **settings: Any) -> dict[str, Any]:
        """Arm or disarm faults of this node's volatile disk (cluster.volatile_disk.DiskFaults.arm); returns what
        is armed and what the faults did. A disk unmounted by a power loss has nothing armed: its next mount
        starts healthy."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: disk faults need cluster.volatile_disks")
        if not self.disk.mounted:
            return {"mounted": False}
        if settings.get("eio"):
            self.cluster.was_disk_damaged = True
        return self.disk.arm_faults(**settings)

    def disk_files(self, file_class: str, glob: str | None = None) -> list[str]:
        """This node's files of a class (cluster.disk_corruption), newest first."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: corrupt needs cluster.volatile_disks")
        return files_of(self.disk.backing, file_class, glob)

    def corrupt_disk(self, file_class: str, bits: int, seed: int, glob: str | None = None) -> dict[str, Any]:
        """Flip `bits` bits in fsynced data of this stopped node's newest file of a class, through its disk's mount
        so that the kernel's cached pages show them too (cluster.disk_corruption.corrupt)."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: corrupt needs cluster.volatile_disks")
        if not self.disk.mounted:
            self.disk.power_on()
        self.cluster.was_disk_damaged = True
        os.sync()  # what the killed JVM left in the kernel's write-back cache reaches the disk's bookkeeping first
        return corrupt(self.disk.mountpoint, file_class, bits, random.Random(seed), self.disk.synced_size, glob,
                       self.disk.flipped_at_rest)

    def replace_disk(self) -> dict[str, Any]:
        """Empty this stopped node's data directory, as a new disk would be: every log directory and, on a
        controller, the metadata log with it (one directory here). Returns what was on it
        (cluster.volatile_disk.VolatileDisk.replace) and the directory id (KIP-858) it had."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: disk-replace needs cluster.volatile_disks")
        meta = self.disk.backing / "meta.properties"
        before = _directory_id(meta.read_text()) if meta.exists() else None
        return {**self.disk.replace(), "directory_id": before}

    def log_offsets(self, topic: str) -> dict[str, dict[str, int | None]]:
        """Per partition of `topic` on this node's disk: the base offset of its first segment and the offset after
        its last whole record batch, read through the mount (the kernel's write-back cache holds what the running
        node wrote last; the backing files get it later)."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: disk-replace needs cluster.volatile_disks")
        out: dict[str, dict[str, int | None]] = {}
        for directory in sorted((self.disk.mountpoint if self.disk.mounted else self.disk.backing).glob(f"{topic}-*")):
            partition = directory.name.removeprefix(f"{topic}-")
            segments = sorted(directory.glob("*.log"))
            if not partition.isdigit() or not segments:
                continue
            ends = [e for e in (segment_end_offset(f) for f in segments) if e is not None]
            out[partition] = {"log_start": int(segments[0].stem), "log_end": max(ends, default=None)}
        return out

    def format_disk(self, flags: str) -> dict[str, Any]:
        """`kafka-storage format` on this stopped node's empty disk, with the cluster id and its own configuration,
        run in a one-off container of its image (as an operator formats a new disk before starting the node);
        `flags`: the quorum's (e.g. " --no-initial-controllers"). Returns the command, its output's tail and the
        new directory id; a failed format raises. The node's own start then finds meta.properties and keeps it."""
        if self.disk is None:
            raise ClusterError(f"{self.name} has no volatile disk: disk-replace needs cluster.volatile_disks")
        if not self.disk.mounted:
            self.disk.power_on()
        command = f"kafka-storage.sh format -t {self.cluster.cluster_id} -c {CONFIG_PATH}{flags}"
        tool = self.cluster.client.containers.run(
            self.image, ["sh", "-c", _WRITE_CONFIG + command], entrypoint=[], detach=True,
            environment={"KAFKA_CHAOS_PROPERTIES": self._properties_env(), "KAFKA_HEAP_OPTS": "-Xmx256m"},
            volumes={str(self.disk.mountpoint): {"bind": DATA_DIR, "mode": "rw"}},
            labels=self.cluster.labels(role="format", **{NODE_LABEL: str(self.node_id)}), name=f"{self.name}-format")
        try:
            code = int(tool.wait(timeout=120).get("StatusCode", 1))
            output = tool.logs().decode(errors="replace")
        finally:
            with contextlib.suppress(docker.errors.APIError):
                tool.remove(force=True)
        if code != 0:
            raise ClusterError(f"{command} on {self.name}'s new disk failed ({code}): {output.strip()[-600:]}")
        self.disk.settle()  # kafka-storage does not fsync what it writes: the new disk holds it as a real one would
        meta = (self.disk.backing / "meta.properties").read_text()
        return {"command": command.replace(f" -c {CONFIG_PATH}", ""), "output": output.strip()[-300:],
                "directory_id": _directory_id(meta)}

    def fill_disk(self, free_mb: float) -> dict[str, int]:
        """Fill this node's sized disk until `free_mb` MiB are left (cluster.sized_disk)."""
        if self.sized is None:
            raise ClusterError(f"{self.name} has no sized disk: disk-full needs cluster.disk_size_mb")
        return self.sized.fill(free_mb)

    def free_disk(self) -> int:
        """Delete the ballast of `fill_disk`; the bytes it held."""
        return self.sized.free() if self.sized is not None else 0

    @property
    def disk_mode(self) -> str | None:
        """What a power loss takes from this node: cluster.volatile_disks ('unsynced', 'last:N s') or None."""
        return self.cluster.spec.volatile_disks

    def stop(self, timeout_s: int = 30) -> None:
        """Clean shutdown (SIGTERM, controlled shutdown), then the container stops."""
        self._drop_sidecar()
        self._stop_container(timeout_s)

    def _stop_container(self, timeout_s: int) -> None:
        """`docker stop`, then wait until the engine says the container stopped. Podman (4.3 here) races its own
        cleanup with the container's exit: it may answer the stop with 500 "container state improper" ("is running
        or paused, refusing to clean up") although the stop goes on, or answer it before its state leaves
        `running` (a remove right after then fails); both seen in rolling upgrades here. If the container has not
        stopped within the stop's own timeout, it is killed, as `docker stop` would have done."""
        try:
            self.container.stop(timeout=timeout_s)
        except docker.errors.APIError as err:
            if "state improper" not in str(err):
                raise
        try:
            self._wait_status({"exited", "stopped"}, timeout_s=timeout_s)
        except ClusterError:
            self.container.kill(signal="SIGKILL")
            self._wait_status({"exited", "stopped"})

    def _remove_container(self, attempts: int = 20) -> None:
        """Remove the stopped container (its data volume stays), again while Podman still calls it running."""
        for _ in range(attempts - 1):
            try:
                self.container.remove(v=False)
                return
            except docker.errors.APIError as err:
                if "state improper" not in str(err):
                    raise
            time.sleep(0.5)
        self.container.remove(v=False, force=True)

    def start(self) -> None:
        """Start a killed or stopped node with its data (after a power loss: with what its disk kept)."""
        if self.disk is not None and not self.disk.mounted:
            self.disk.power_on()
        self.container.start()
        self._wait_status({"running"})

    def pause(self) -> None:
        """Freeze every process of the node (cgroup freezer): sockets stay open, nothing answers."""
        self.container.pause()

    def resume(self) -> None:
        self.container.unpause()

    def _wait_status(self, wanted: set[str], timeout_s: float = 30) -> None:
        Wait(f"{self.name} to be {'/'.join(sorted(wanted))}", timeout_s, 0.1).until(lambda: self.status() in wanted)

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
        if self.disk is not None:
            self.disk.close()
        if self.sized is not None:
            self.sized.close()
