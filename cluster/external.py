"""A cluster kafka-chaos did not start: a staging cluster, or one on Kubernetes (docs/architecture.md §2).

    [cluster]
    bootstrap_servers = "kafka-0.staging:9092,kafka-1.staging:9092"
    [cluster.control]                      # how to act on node {node}: any shell command
    kill = "kubectl delete pod kafka-{node} --grace-period=0 --force"
    start = "kubectl wait --for=condition=Ready pod/kafka-{node} --timeout=120s"

The workload, the observer, the checker and the report work as on a cluster of our own. Faults come only from
the commands given: `kill` needs `kill` and `start`, `stop` needs `stop` and `start`, `pause` needs `pause` and
`resume`. There are no partitions and no client-link faults (kafka-chaos cannot reach into the cluster's
network), no operations that re-create nodes, and node logs are saved only when a `logs` command is given.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.cluster.state import PartitionState, describe_partitions, quorum_leader
from kafka_chaos.errors import ClusterError

Action = Literal["kill", "start", "stop", "pause", "resume", "logs"]


class NodeControl(BaseModel):
    """Shell commands with a `{node}` placeholder (the broker id) that act on one node of an external cluster."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kill: str | None = Field(None, description="stop at once, no controlled shutdown (e.g. SIGKILL)")
    start: str | None = Field(None, description="start a killed or stopped node (and wait for it)")
    stop: str | None = Field(None, description="controlled shutdown")
    pause: str | None = Field(None, description="freeze the node's process")
    resume: str | None = Field(None, description="unfreeze it")
    logs: str | None = Field(None, description="print the node's log (saved with the run)")
    timeout_s: float = Field(120, gt=0)

    # The commands each fault kind needs: the fault and its heal.
    NEEDS: ClassVar[dict[str, tuple[Action, Action]]] = {"kill": ("kill", "start"), "stop": ("stop", "start"),
                                               "pause": ("pause", "resume")}

    def missing_for(self, kind: str) -> list[str]:
        needed = self.NEEDS.get(kind)
        if needed is None:
            return [f"{kind} (not possible on an external cluster)"]
        return [action for action in needed if getattr(self, action) is None]

    def run(self, action: Action, node_id: int) -> str:
        template = getattr(self, action)
        if template is None:
            raise ClusterError(f"the external cluster has no `{action}` command: set [cluster.control] {action}")
        command = template.format(node=node_id)
        proc = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=self.timeout_s)
        if proc.returncode != 0:
            raise ClusterError(f"`{command}` failed with exit {proc.returncode}: {proc.stderr.strip()[-500:]}")
        return proc.stdout


NO_DISKS = "disk faults need a cluster kafka-chaos starts (its disks are kafka-chaos's own)"


class ExternalNode:
    """A broker of the external cluster; faults are the user's commands. Its state is what we did to it."""

    def __init__(self, node_id: int, control: NodeControl) -> None:
        self.node_id, self.control = node_id, control
        self.state: Literal["running", "exited", "paused"] = "running"
        self.is_broker, self.is_controller, self.rack = True, False, None
        self.name = self.alias = f"node-{node_id}"

    def kill(self) -> None:
        self.control.run("kill", self.node_id)
        self.state = "exited"

    def stop(self, timeout_s: int = 30) -> None:
        self.control.run("stop", self.node_id)
        self.state = "exited"

    def start(self) -> None:
        self.control.run("start", self.node_id)
        self.state = "running"

    def pause(self) -> None:
        self.control.run("pause", self.node_id)
        self.state = "paused"

    def resume(self) -> None:
        self.control.run("resume", self.node_id)
        self.state = "running"

    def running(self) -> bool:
        return self.state == "running"

    disk_mode = None  # no volatile disk: the scenario refuses power-loss on an external cluster

    def lose_unsynced_writes(self, torn: str | None = None, torn_glob: str | None = None,
                             seed: int = 0) -> list[dict[str, Any]]:
        raise ClusterError("power-loss needs a cluster kafka-chaos starts (its disks are kafka-chaos's own)")

    def fill_disk(self, free_mb: float) -> dict[str, int]:
        raise ClusterError("disk-full needs a cluster kafka-chaos starts (its disks are kafka-chaos's own)")

    def free_disk(self) -> int:
        return 0

    def disk_faults(self, **settings: Any) -> dict[str, Any]:
        raise ClusterError(NO_DISKS)

    def disk_files(self, file_class: str, glob: str | None = None) -> list[str]:
        raise ClusterError(NO_DISKS)

    def corrupt_disk(self, file_class: str, bits: int, seed: int, glob: str | None = None) -> dict[str, Any]:
        raise ClusterError(NO_DISKS)

    def replace_disk(self) -> dict[str, Any]:
        raise ClusterError(NO_DISKS)

    def format_disk(self, flags: str) -> dict[str, Any]:
        raise ClusterError(NO_DISKS)

    def log_offsets(self, topic: str) -> dict[str, dict[str, int | None]]:
        raise ClusterError(NO_DISKS)

    def status(self) -> str:
        return self.state

    def drop_traffic(self, peers: Any, direction: str = "both") -> None:
        raise ClusterError("network partitions need a cluster kafka-chaos started (no access to an external "
                           "cluster's network)")

    def heal(self) -> None:
        pass  # no partition rules were ever set

    def logs(self) -> str:
        return self.control.run("logs", self.node_id) if self.control.logs else ""


class ExternalCluster:
    """The cluster interface the run uses (kafka_chaos.cluster.KafkaCluster's), over a cluster someone else runs."""

    def __init__(self, bootstrap_servers: str, control: NodeControl | None) -> None:
        self._bootstrap = bootstrap_servers
        self.control = control or NodeControl()
        self.nodes: dict[int, ExternalNode] = {}
        self.toxiproxy = None
        self.was_partitioned = False

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None) -> None:
        pass  # not ours to stop

    def start(self) -> Self:
        """Connect: the brokers are whatever the metadata lists."""
        try:
            ids = self.live_broker_ids()
        except Exception as err:
            raise ClusterError(f"cannot reach the external cluster at {self._bootstrap}: {err}. Check "
                               f"[cluster] bootstrap_servers and that this machine can connect to it.") from None
        self.nodes = {i: ExternalNode(i, self.control) for i in sorted(ids)}
        return self

    def stop(self) -> None:
        pass

    def bootstrap_servers(self, *, direct: bool = False) -> str:
        return self._bootstrap

    def admin_config(self) -> dict[str, Any]:
        return {"bootstrap.servers": self._bootstrap, "socket.timeout.ms": 5000, "logger": client_logger()}

    def live_broker_ids(self) -> set[int]:
        from confluent_kafka.admin import AdminClient

        return set(AdminClient(self.admin_config()).list_topics(timeout=10).brokers)

    @property
    def brokers(self) -> list[ExternalNode]:
        return list(self.nodes.values())

    def node(self, node_id: int) -> ExternalNode:
        try:
            return self.nodes[node_id]
        except KeyError:
            raise ClusterError(f"no broker {node_id}; brokers are {sorted(self.nodes)}") from None

    def create_topic(self, name: str, partitions: int, replication_factor: int,
                     configs: dict[str, str] | None = None) -> None:
        from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

        new = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor, config=configs or {})
        admin = AdminClient(self.admin_config())  # held until the future resolves: a freed handle cancels it
        try:
            admin.create_topics([new], request_timeout=30)[name].result(timeout=40)
        except Exception as err:
            raise ClusterError(f"creating topic {name!r} on the external cluster failed: {err}") from None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            states = self.partition_states(name)
            if states and all(s.leader is not None and len(s.isr) >= replication_factor for s in states):
                return
            time.sleep(0.5)
        raise ClusterError(f"topic {name!r}: not every partition has a leader and a full ISR after 60 s")

    def partition_states(self, topic: str) -> list[PartitionState]:
        return describe_partitions(self._bootstrap, topic)

    def replace_image(self, node_id: int, image: str) -> None:
        raise ClusterError("an external cluster's nodes cannot be re-created on another image")

    def add_broker(self, timeout_s: float | None = None) -> Any:
        raise ClusterError("kafka-chaos cannot start a broker in an external cluster")

    def remove_broker(self, node_id: int) -> None:
        raise ClusterError("kafka-chaos cannot remove a broker of an external cluster")

    def controller_id(self) -> int | None:
        return quorum_leader(self._bootstrap)

    def heal_all(self, timeout_s: float | None = None) -> None:
        """Start what we killed or stopped, resume what we paused; wait until every broker is in the metadata."""
        for node in self.nodes.values():
            if node.state == "paused":
                node.resume()
            elif node.state == "exited":
                node.start()
        deadline = time.monotonic() + (timeout_s or 120)
        while set(self.nodes) - self.live_broker_ids():
            if time.monotonic() > deadline:
                raise ClusterError(f"brokers {sorted(set(self.nodes) - self.live_broker_ids())} did not come back")
            time.sleep(1)

    def save_logs(self, directory: Path) -> None:
        if self.control.logs is None:
            return
        directory.mkdir(parents=True, exist_ok=True)
        for node in self.nodes.values():
            try:
                (directory / f"node-{node.node_id}.log").write_text(node.logs())
            except ClusterError as err:
                (directory / f"node-{node.node_id}.log").write_text(f"<logs unavailable: {err}>")
