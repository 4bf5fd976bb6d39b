"""Operations: what an operator does to a cluster on purpose, performed while the workload runs and the nemesis
strikes (docs/architecture.md §5). Each is recorded like a fault, under its own process `operator`: the
operation's start and end (the registry's heal name, `<kind>-done`), and every node it stops and starts in
between as `stop`/`start` (or `kill`/`restart`) events, so the checker's fault windows and the model's verdicts
know which brokers were down and when.

- `rolling-restart` — Kafka's replication notes, scenario 4: one broker at a time, controlled shutdown (SIGTERM;
  `clean = false`: SIGKILL, the hard bounce), start, then wait until no partition of the run's topic is
  under-replicated before the next broker.
- `rolling-upgrade` — Kafka's upgrade procedure: one node at a time, controlled shutdown and a restart on the new
  version's image with the same data, waiting for full replication; then, once every node runs it, the cluster's
  finalized features are raised (`kafka-features.sh upgrade --release-version`, then any `features`; a command
  the quorum refuses until every restarted voter has reported its new range is run again, up to
  `healthy_timeout_s`): the ELR document's path, where ELR state appears only after
  `eligible.leader.replicas.version` is raised. To an older version it is a rolling downgrade, which Kafka
  allows only while the finalized metadata.version is one the older release knows: before the features were
  raised (metadata.version downgrades, KIP-1155, are in no release).
- `preferred-election` — move leadership back to each partition's first replica (Admin API ElectLeaders, KIP-460),
  once no partition is under-replicated (up to `healthy_timeout_s`), as an operator runs it.
- `reassign` — change a partition's replica set through the Admin API (KIP-455 AlterPartitionReassignments):
  explicit `replicas`, or raise/lower the replication factor to `replication_factor`; optional replication
  throttle while it runs. Waits until the reassignment is done and the new replicas are in sync.
- `remove-controller` / `add-controller` — KIP-853, a dynamic KRaft quorum (`[cluster] dynamic_quorum = true`):
  `kafka-metadata-quorum.sh remove-controller` takes `controller_id` (with its log directory's id, from its
  meta.properties) out of the voters, leaving it running as an observer; `add-controller`, run on that node with
  its own configuration, adds it back. Each waits until DescribeQuorum's current voters show the change.
- `add-broker` — a broker-only node with the next free id joins the running cluster (nothing moves to it: a
  later `reassign` naming it does that, as an operator would).
- `decommission-broker` — Kafka's procedure for retiring `node`: every replica it holds (the run's topic and the
  internal ones) moved to a broker without one (Admin API reassignment), waited for, then a controlled shutdown
  and `kafka-cluster.sh unregister --id` (its class, ClusterTool); its container and data are removed.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kafka_chaos import versions
from kafka_chaos.cluster.images import kafka_image

if TYPE_CHECKING:  # types only: faults never import the harness at run time
    from kafka_chaos.harness.testmap import RunContext

OperationKind = Literal["rolling-restart", "rolling-upgrade", "preferred-election", "reassign", "remove-controller",
                        "add-controller", "add-broker", "decommission-broker"]
CONTROLLER_MEMBERSHIP = ("remove-controller", "add-controller")
OPERATOR = "operator"  # the history process of every operation event
_LOG_LINE = re.compile(r"^\[\d{4}-\d\d-\d\d ")  # a log4j line the tools print beside their answer
_LOG_TAIL = re.compile(r"^\s*\(org\.apache\.[\w.$]+\)$")  # the logger name ending a multi-line log message


def _split(key: str) -> tuple[str, int]:
    topic, partition = key.rsplit("/", 1)
    return topic, int(partition)


VOTERS_NOT_READY = "because not all of the voters support it"
"""kafka-features.sh's answer while the quorum's leader has not yet heard every restarted voter's new range."""


def _answer(out: str) -> str:
    """What a Kafka tool said: its answer without the log4j lines (and their indented configs) around it."""
    said = [line for line in out.splitlines()
            if line.strip() and not _LOG_LINE.match(line) and not _LOG_TAIL.match(line) and not line.startswith("\t")]
    return "\n".join(said)[-4000:]


class OperationSpec(BaseModel):
    """One `[[operations]]` entry of a scenario."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: OperationKind
    at_s: float = Field(0, ge=0, description="seconds after the workload starts")
    clean: bool = Field(True, description="rolling-restart: controlled shutdown (true) or SIGKILL (false)")
    nodes: list[int] | None = Field(None, description="rolling-restart: the brokers, in order (default: all)")
    healthy_timeout_s: float = Field(60, gt=0, description="per step: how long to wait for no under-replication")
    replication_factor: int | None = Field(None, ge=1, description="reassign: the new replication factor")
    replicas: dict[int, list[int]] | None = Field(None, description="reassign: partition → its new replica list")
    throttle_bytes_per_s: int | None = Field(None, ge=1024, description="reassign: replication throttle")
    to_version: str | None = Field(None, description="rolling-upgrade: the Kafka version to move every node to")
    release_version: str | None = Field(None, description="rolling-upgrade: finalize features of this release")
    features: dict[str, int] = Field(default_factory=dict, description="rolling-upgrade: feature levels to set")
    controller_id: int | None = Field(None, description="remove-controller/add-controller: the controller's node id")
    node: int | None = Field(None, description="decommission-broker: the broker to retire")

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> OperationSpec:
        if self.kind == "reassign" and (self.replication_factor is None) == (self.replicas is None):
            raise ValueError("a reassign operation needs exactly one of replication_factor or replicas")
        if self.kind != "reassign" and (self.replication_factor, self.replicas, self.throttle_bytes_per_s) != (
                None, None, None):
            raise ValueError(f"replication_factor, replicas and throttle_bytes_per_s belong to reassign, "
                             f"not to {self.kind}")
        if self.kind not in ("rolling-restart", "rolling-upgrade") and self.nodes is not None:
            raise ValueError(f"nodes belongs to rolling-restart and rolling-upgrade, not to {self.kind}")
        if self.kind == "rolling-upgrade" and not self.to_version:
            raise ValueError("a rolling-upgrade operation needs to_version (e.g. \"4.3.1\")")
        if (self.kind == "decommission-broker") != (self.node is not None):
            raise ValueError("a decommission-broker operation needs node (the broker to retire)"
                             if self.node is None else f"node belongs to decommission-broker, not to {self.kind}")
        if self.kind in CONTROLLER_MEMBERSHIP and self.controller_id is None:
            raise ValueError(f"a {self.kind} operation needs controller_id (the controller's node id)")
        if self.kind not in CONTROLLER_MEMBERSHIP and self.controller_id is not None:
            raise ValueError(f"controller_id belongs to remove-controller and add-controller, not to {self.kind}")
        if self.kind != "rolling-upgrade" and (self.to_version or self.release_version or self.features):
            raise ValueError(f"to_version, release_version and features belong to rolling-upgrade, not to {self.kind}")
        return self


def release(version: str) -> tuple[int, int]:
    """A Kafka version or release version ("4.0.1", "4.3", "4.3-IV1") as (major, minor)."""
    major, minor = [*version.split("-")[0].split("."), "0"][:2]
    return int(major), int(minor)


def validate_against(ops: Sequence[OperationSpec], broker_ids: Sequence[int], replication_factor: int,
                     controller_ids: Sequence[int] = (), dynamic_quorum: bool = False,
                     kafka_version: str | None = None) -> None:
    """What can be checked before any container starts: node ids exist, a new replication factor fits, controller
    membership changes have a dynamic quorum to change, a rolling downgrade goes to a release that still knows the
    finalized metadata.version (`kafka_version`: what the cluster is formatted with, at its latest)."""
    brokers = set(broker_ids)
    metadata = release(kafka_version) if kafka_version else None  # kafka-storage format finalizes the latest
    for i, op in sorted(enumerate(ops), key=lambda pair: pair[1].at_s):  # the brokers there are at each one
        where = f"operations.{i}"
        if op.kind == "rolling-upgrade" and op.to_version and metadata is not None:
            if release(op.to_version) < metadata:
                raise ValueError(
                    f"{where}: a rolling downgrade to {op.to_version} needs metadata.version at most "
                    f"{release(op.to_version)[0]}.{release(op.to_version)[1]}, but it is finalized at "
                    f"{metadata[0]}.{metadata[1]} by then, and Kafka cannot lower it (KIP-1155 is in no release). "
                    "Start the cluster on the older version, upgrade without release_version, then roll back")
            if op.release_version:
                metadata = max(metadata, release(op.release_version))
        if op.kind == "add-broker":
            brokers.add(max(brokers) + 1)  # the next free id, as KafkaCluster.add_broker takes it
            continue
        if op.kind == "decommission-broker":
            if op.node in controller_ids:
                raise ValueError(f"{where} (decommission-broker): node {op.node} is also a controller; retire "
                                 "broker-only nodes (added with kind = \"add-broker\", or cluster.controllers > 0)")
            if op.node not in brokers:
                raise ValueError(f"{where} (decommission-broker): node {op.node} is not a broker then; brokers are "
                                 f"{sorted(brokers)}")
            if len(brokers) <= replication_factor:
                raise ValueError(f"{where} (decommission-broker): its replicas need another broker to move to, but "
                                 f"only {len(brokers)} brokers hold a replication factor of {replication_factor}; add "
                                 "one first (kind = \"add-broker\")")
            brokers.discard(op.node)
            continue
        if op.kind in CONTROLLER_MEMBERSHIP:
            if not dynamic_quorum:
                raise ValueError(f"{where} ({op.kind}) needs a dynamic KRaft quorum (KIP-853): set "
                                 "cluster.dynamic_quorum = true")
            if op.controller_id not in controller_ids:
                raise ValueError(f"{where} ({op.kind}): controller_id {op.controller_id} is not a controller; "
                                 f"controllers are {sorted(controller_ids)}")
        named = set(op.nodes or []) | {b for replicas in (op.replicas or {}).values() for b in replicas}
        if named - brokers:
            raise ValueError(f"{where} ({op.kind}) names brokers {sorted(named - brokers)} that do not exist; "
                             f"brokers are {sorted(brokers)}")
        if op.replication_factor is not None and op.replication_factor > len(brokers):
            raise ValueError(f"{where}: replication_factor {op.replication_factor} needs that many brokers; "
                             f"the cluster has {len(brokers)}")
        if op.replication_factor == replication_factor:
            raise ValueError(f"{where}: replication_factor {op.replication_factor} is the topic's already")


class Recorder(Protocol):
    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int: ...


class OperatedCluster(Protocol):
    """What operations need of a cluster (kafka_chaos.cluster.KafkaCluster has it)."""

    @property
    def nodes(self) -> Mapping[int, Any]: ...
    def node(self, node_id: int) -> Any: ...
    def replace_image(self, node_id: int, image: str) -> None: ...
    def partition_states(self, topic: str) -> Sequence[Any]: ...
    def bootstrap_servers(self, *, direct: bool = False) -> str: ...
    @property
    def brokers(self) -> list[Any]: ...
    def add_broker(self, timeout_s: float | None = None) -> Any: ...
    def remove_broker(self, node_id: int) -> None: ...


@dataclass
class OperationRunner:
    """Performs one operation on a cluster and records each step. `stopping` ends waits early at run end."""

    cluster: OperatedCluster
    topic: str
    history: Recorder
    stopping: threading.Event = field(default_factory=threading.Event)
    sleep: Callable[[float], None] = time.sleep

    def perform(self, op: OperationSpec) -> dict[str, Any]:
        self.history.record(OPERATOR, "invoke", op.kind, op.model_dump(exclude_none=True))
        self.history.record(OPERATOR, "info", op.kind, op.model_dump(exclude_none=True))
        outcome: dict[str, Any]
        error: str | None = None
        try:
            outcome = {"rolling-restart": self._rolling_restart, "rolling-upgrade": self._rolling_upgrade,
                       "preferred-election": self._preferred_election, "reassign": self._reassign,
                       "remove-controller": self._controller_membership,
                       "add-controller": self._controller_membership, "add-broker": self._add_broker,
                       "decommission-broker": self._decommission_broker}[op.kind](op)
        except Exception as err:  # an operation that fails is a finding of the run, not a crash of the harness
            outcome, error = {"done": False}, f"{type(err).__name__}: {err}"
        self.history.record(OPERATOR, "info", f"{op.kind}-done", outcome, error=error)
        return outcome

    # -- rolling restart ------------------------------------------------------------------------------------

    def _rolling_restart(self, op: OperationSpec) -> dict[str, Any]:
        order = op.nodes or sorted(b.node_id for b in self.cluster.brokers)
        steps = []
        down, up = ("stop", "start") if op.clean else ("kill", "restart")
        for node_id in order:
            if self.stopping.is_set():
                break
            node = self.cluster.node(node_id)
            self.history.record(OPERATOR, "info", down, {"nodes": [node_id]})
            node.stop() if op.clean else node.kill()
            node.start()
            self.history.record(OPERATOR, "info", up, {"nodes": [node_id]})
            waited, healthy = self._wait_fully_replicated(op.healthy_timeout_s)
            steps.append({"node": node_id, "healthy": healthy, "waited_s": round(waited, 2)})
        return {"done": len(steps) == len(order) and all(s["healthy"] for s in steps), "steps": steps}

    # -- rolling upgrade ------------------------------------------------------------------------------------

    def _rolling_upgrade(self, op: OperationSpec) -> dict[str, Any]:
        assert op.to_version is not None
        image = kafka_image(op.to_version)
        order = op.nodes or sorted(self.cluster.nodes)
        steps = []
        for node_id in order:
            if self.stopping.is_set():
                break
            self.history.record(OPERATOR, "info", "stop", {"nodes": [node_id]})
            self.cluster.replace_image(node_id, image)
            self.history.record(OPERATOR, "info", "start", {"nodes": [node_id], "image": image})
            waited, healthy = self._wait_fully_replicated(op.healthy_timeout_s)
            steps.append({"node": node_id, "image": image, "healthy": healthy, "waited_s": round(waited, 2)})
        outcome: dict[str, Any] = {"steps": steps, "to_version": op.to_version}
        finalized = len(steps) == len(order)
        if finalized and (op.release_version or op.features):
            outcome["features"] = self._upgrade_features(order[-1], op)
            finalized = all(step["code"] == 0 for step in outcome["features"])
        outcome["done"] = finalized and all(s["healthy"] for s in steps)
        return outcome

    def _upgrade_features(self, node_id: int, op: OperationSpec) -> list[dict[str, Any]]:
        """kafka-features.sh on an upgraded broker, as an operator would run it; each command and its output kept."""
        node = self.cluster.node(node_id)
        base = ["kafka-features.sh", "--bootstrap-server", f"{node.alias}:{node.internal_port}"]
        commands = []
        if op.release_version:
            commands.append([*base, "upgrade", "--release-version", op.release_version])
        for name, level in sorted(op.features.items()):
            commands.append([*base, "upgrade", "--feature", f"{name}={level}"])
        commands.append([*base, "describe"])
        steps = []
        for argv in commands:
            deadline = time.monotonic() + op.healthy_timeout_s
            attempts = 0
            while True:
                attempts += 1
                code, out = node.run_tool(*argv)
                answer = _answer(out)
                # A voter restarted on the new release tells the quorum's leader what it supports by an
                # UpdateRaftVoter request after it starts; kraft.version can be raised only once every voter's has
                # arrived (raft's LeaderState, KRaftVersionUpgrade), so a cluster just rolled refuses it for a
                # moment. An operator runs the command again; so does this, within the operation's patience.
                if code == 0 or VOTERS_NOT_READY not in answer or time.monotonic() >= deadline \
                        or self.stopping.is_set():
                    break
                self.sleep(1.0)
            steps.append({"command": " ".join(argv[3:]), "code": code, "output": answer, "attempts": attempts})
        return steps

    def _under_replicated(self) -> list[str]:
        return [s.key for s in self.cluster.partition_states(self.topic) if set(s.isr) != set(s.replicas)]

    def _wait_fully_replicated(self, timeout_s: float) -> tuple[float, bool]:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and not self.stopping.is_set():
            with contextlib.suppress(Exception):  # a broker still starting may not answer metadata yet
                if not self._under_replicated():
                    return time.monotonic() - start, True
            self.sleep(0.5)
        return time.monotonic() - start, False

    # -- preferred election ---------------------------------------------------------------------------------

    def _preferred_election(self, op: OperationSpec) -> dict[str, Any]:
        from confluent_kafka import ElectionType, TopicPartition
        from confluent_kafka.admin import AdminClient

        # As an operator does: wait until no partition is under-replicated first. Kafka elects a preferred replica
        # only while it is in the ISR (the controller's PartitionChangeBuilder, Election.PREFERRED), so an
        # election asked while a restarted broker still catches up answers PREFERRED_LEADER_NOT_AVAILABLE.
        waited, in_sync = self._wait_fully_replicated(op.healthy_timeout_s)
        states = self.cluster.partition_states(self.topic)
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers(direct=True)})
        partitions = [TopicPartition(self.topic, s.partition) for s in states]
        results = admin.elect_leaders(ElectionType.PREFERRED, partitions).result(timeout=30)
        # Per partition: None, or a KafkaError value (ELECTION_NOT_NEEDED when the preferred replica leads).
        outcome = {f"{tp.topic}/{tp.partition}": (err.name() if err is not None else "elected")
                   for tp, err in results.items()}
        return {"done": True, "partitions": outcome, "waited_for_isr_s": round(waited, 2), "in_sync_first": in_sync}

    # -- controller membership (KIP-853) --------------------------------------------------------------------

    def _controller_membership(self, op: OperationSpec) -> dict[str, Any]:
        """remove-controller / add-controller with kafka-metadata-quorum.sh, as the KIP-853 procedure runs them:
        removal from another controller, naming the controller's directory id; addition on the node itself, with
        its own configuration. Then wait until the current voters show the change."""
        assert op.controller_id is not None
        node = self.cluster.node(op.controller_id)
        peers = [n for i, n in sorted(self.cluster.nodes.items()) if n.is_controller and i != op.controller_id]
        bootstrap = ",".join(f"{n.alias}:{n.controller_port}" for n in peers)
        tool = ["kafka-metadata-quorum.sh", "--bootstrap-controller", bootstrap]
        before = self._voters(peers[0], tool)
        if op.kind == "remove-controller":
            directory_id = self._directory_id(node)
            argv = [*tool, "remove-controller", "--controller-id", str(op.controller_id),
                    "--controller-directory-id", directory_id]
            code, out = peers[0].run_tool(*argv)
            want = before - {op.controller_id}
        else:
            argv = [*tool, "--command-config", node.config_path, "add-controller"]
            code, out = node.run_tool(*argv)
            want = before | {op.controller_id}
        after = before
        start = time.monotonic()
        while code == 0 and after != want and time.monotonic() - start < op.healthy_timeout_s \
                and not self.stopping.is_set():
            self.sleep(0.5)
            with contextlib.suppress(RuntimeError):  # a controller election in between: ask again
                after = self._voters(peers[0], tool)
        return {"done": code == 0 and after == want, "controller": op.controller_id,
                "voters_before": sorted(before), "voters_after": sorted(after),
                "waited_s": round(time.monotonic() - start, 2), "command": " ".join(argv[3:]), "code": code,
                "output": _answer(out)}

    @staticmethod
    def _voters(node: Any, tool: list[str]) -> set[int]:
        """The quorum's current voters, from `kafka-metadata-quorum.sh describe --status` (3.9+ prints each voter
        as an object with its id; older versions a list of ids)."""
        code, out = node.run_tool(*tool, "describe", "--status")
        line = next((ln for ln in out.splitlines() if ln.startswith("CurrentVoters:")), None)
        if code != 0 or line is None:
            raise RuntimeError(f"describe --status failed ({code}): {_answer(out)[-500:]}")
        ids = re.findall(r'"id":\s*(\d+)', line) or re.findall(r"\d+", line.split(":", 1)[1])
        return {int(i) for i in ids}

    @staticmethod
    def _directory_id(node: Any) -> str:
        """The node's metadata log directory id, as `kafka-storage format` wrote it into meta.properties."""
        code, out = node.run_tool("cat", f"{node.data_dir}/meta.properties")
        found = re.search(r"^directory\.id=(\S+)$", out, re.MULTILINE)
        if code != 0 or found is None:
            raise RuntimeError(f"no directory.id in node {node.node_id}'s meta.properties: {out[-300:]}")
        return found.group(1)

    # -- brokers joining and leaving -------------------------------------------------------------------------

    def _add_broker(self, op: OperationSpec) -> dict[str, Any]:
        start = time.monotonic()
        node = self.cluster.add_broker(timeout_s=op.healthy_timeout_s)
        self.history.record(OPERATOR, "info", "start", {"nodes": [node.node_id]})
        return {"done": True, "node": node.node_id, "waited_s": round(time.monotonic() - start, 2)}

    def _decommission_broker(self, op: OperationSpec) -> dict[str, Any]:
        """Move every replica off the broker, wait, shut it down cleanly, unregister it, remove it."""
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        assert op.node is not None
        others = sorted(b.node_id for b in self.cluster.brokers if b.node_id != op.node)
        admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap_servers(direct=True),
                                 request_timeout_ms=15000)
        try:
            moves: dict[str, list[int]] = {}
            for topic in admin.describe_topics():  # MetadataResponse fields, every topic (internal ones too)
                for p in topic["partitions"]:
                    replicas, key = list(p["replica_nodes"]), f"{topic['name']}/{p['partition_index']}"
                    if op.node in replicas:
                        spare = [b for b in others if b not in replicas]
                        if not spare:
                            return {"done": False, "error": f"{key} has no broker to move its replica on {op.node} to"}
                        pick = spare[len(moves) % len(spare)]  # rotating: the moves spread over the spare brokers
                        moves[key] = [pick if r == op.node else r for r in replicas]
            if moves:
                accepted = admin.alter_partition_reassignments(
                    {TopicPartition(*_split(key)): replicas for key, replicas in moves.items()}, timeout_ms=15000)
                errors = {f"{tp.topic}/{tp.partition}": str(e) for tp, e in accepted.items() if e is not None}
                if errors:
                    return {"done": False, "moves": moves, "errors": errors}
            waited, moved = self._wait_moved_off(admin, op.node, op.healthy_timeout_s)
        finally:
            admin.close()
        outcome: dict[str, Any] = {"node": op.node, "moves": len(moves), "waited_s": round(waited, 2),
                                   "moved": moved}
        if not moved:
            return {**outcome, "done": False}
        self.history.record(OPERATOR, "info", "stop", {"nodes": [op.node]})
        self.cluster.node(op.node).stop()
        peer = self.cluster.node(others[0])
        # kafka-cluster.sh's class, through the generic launcher: images built before that launcher was added run it
        tool = versions.tool_class("kafka-cluster.sh", peer.version)  # kafka.tools.ClusterTool before 3.5
        code, out = peer.run_tool("kafka-run-class.sh", tool, "unregister",
                                  "--bootstrap-server", f"{peer.alias}:{peer.internal_port}", "--id", str(op.node))
        self.cluster.remove_broker(op.node)
        return {**outcome, "done": code == 0, "unregister_code": code, "unregister_output": _answer(out)}

    def _wait_moved_off(self, admin: Any, node_id: int, timeout_s: float) -> tuple[float, bool]:
        """Until no reassignment is in progress and no partition of any topic has a replica on `node_id`."""
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and not self.stopping.is_set():
            with contextlib.suppress(Exception):
                if not admin.list_partition_reassignments(timeout_ms=10000) and not any(
                        node_id in p["replica_nodes"] or set(p["isr_nodes"]) != set(p["replica_nodes"])
                        for t in admin.describe_topics() for p in t["partitions"]):
                    return time.monotonic() - start, True
            self.sleep(0.5)
        return time.monotonic() - start, False

    # -- reassignment ---------------------------------------------------------------------------------------

    def target_replicas(self, op: OperationSpec) -> dict[int, list[int]]:
        if op.replicas is not None:
            return {int(p): list(r) for p, r in op.replicas.items()}
        assert op.replication_factor is not None
        brokers = sorted(b.node_id for b in self.cluster.brokers)
        target = {}
        for s in self.cluster.partition_states(self.topic):
            current = list(s.replicas)
            spare = [b for b in brokers if b not in current]
            spare = spare[s.partition % len(spare):] + spare[: s.partition % len(spare)] if spare else []
            target[s.partition] = (current + spare)[: op.replication_factor]
        return target

    def _reassign(self, op: OperationSpec) -> dict[str, Any]:
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        target = self.target_replicas(op)
        admin = KafkaAdminClient(bootstrap_servers=self.cluster.bootstrap_servers(direct=True),
                                 request_timeout_ms=15000)
        try:
            if op.throttle_bytes_per_s:
                self._throttle(op.throttle_bytes_per_s)
            accepted = admin.alter_partition_reassignments(
                {TopicPartition(self.topic, p): replicas for p, replicas in target.items()}, timeout_ms=15000)
            errors = {f"{tp.topic}/{tp.partition}": str(e) for tp, e in accepted.items() if e is not None}
            if errors:
                return {"done": False, "target": target, "errors": errors}
            waited, done = self._wait_reassigned(admin, target, op.healthy_timeout_s)
        finally:
            if op.throttle_bytes_per_s:
                with contextlib.suppress(Exception):
                    self._throttle(None)
            admin.close()
        return {"done": done, "target": {str(p): r for p, r in target.items()}, "waited_s": round(waited, 2)}

    def _wait_reassigned(self, admin: Any, target: dict[int, list[int]], timeout_s: float) -> tuple[float, bool]:
        start = time.monotonic()
        while time.monotonic() - start < timeout_s and not self.stopping.is_set():
            with contextlib.suppress(Exception):
                ongoing = admin.list_partition_reassignments({self.topic: sorted(target)}, timeout_ms=10000)
                states = {s.partition: s for s in self.cluster.partition_states(self.topic)}
                if not ongoing and all(set(states[p].replicas) == set(r) and set(states[p].isr) == set(r)
                                       for p, r in target.items()):
                    return time.monotonic() - start, True
            self.sleep(0.5)
        return time.monotonic() - start, False

    def _throttle(self, rate: int | None) -> None:
        """Kafka's reassignment throttle: a rate on every broker, applied to every replica of the topic."""
        from confluent_kafka.admin import (  # type: ignore[attr-defined]  # public, but missing from its __all__
            AdminClient,
            AlterConfigOpType,
            ConfigEntry,
            ConfigResource,
            ResourceType,
        )

        op = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
        value = str(rate) if rate is not None else ""
        resources = [
            ConfigResource(ResourceType.BROKER, str(b.node_id), incremental_configs=[
                ConfigEntry(name, value, incremental_operation=op)
                for name in ("leader.replication.throttled.rate", "follower.replication.throttled.rate")])
            for b in self.cluster.brokers
        ]
        resources.append(ConfigResource(ResourceType.TOPIC, self.topic, incremental_configs=[
            ConfigEntry(name, "*" if rate is not None else "", incremental_operation=op)
            for name in ("leader.replication.throttled.replicas", "follower.replication.throttled.replicas")]))
        admin = AdminClient({"bootstrap.servers": self.cluster.bootstrap_servers(direct=True)})
        for resource in resources:  # librdkafka takes one broker resource per call
            for future in admin.incremental_alter_configs([resource]).values():
                future.result(timeout=30)


class Operator:
    """The scenario's `[[operations]]` as a run part (harness.testmap.Nemesis): each performed at its time, one
    after another, on a thread of its own. Every operation scheduled within the run's duration is performed
    under load, also one an earlier operation made late (the run waits while `busy`, up to `LATE_LIMIT_S`); at
    the run's end one under way is let finish (an operator does not walk away from a half-rolled cluster); on an
    interrupt its waits are cut."""

    LATE_LIMIT_S = 600.0

    def __init__(self, operations: Sequence[OperationSpec]) -> None:
        self.operations = sorted(operations, key=lambda op: op.at_s)
        self.outcomes: list[dict[str, Any]] = []
        self._no_more = threading.Event()
        self._abort = threading.Event()
        self._thread: threading.Thread | None = None
        self._within_run = 0
        self._run_end = float("inf")

    def busy(self) -> bool:
        """An operation scheduled within the run's duration is not yet performed (harness.testmap.Ongoing)."""
        alive = self._thread is not None and self._thread.is_alive()
        return (alive and len(self.outcomes) < self._within_run
                and time.monotonic() - self._run_end < self.LATE_LIMIT_S)

    def start(self, ctx: RunContext) -> None:
        runner = OperationRunner(ctx.cluster, ctx.topic, ctx.history, stopping=self._abort)
        t0 = time.monotonic()
        self._within_run = sum(op.at_s < ctx.scenario.duration_s for op in self.operations)
        self._run_end = t0 + ctx.scenario.duration_s

        def run() -> None:
            for op in self.operations:
                if self._no_more.wait(max(0.0, op.at_s - (time.monotonic() - t0))):
                    return
                self.outcomes.append(runner.perform(op))

        self._thread = threading.Thread(target=run, name="operator", daemon=True)
        self._thread.start()

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        self._no_more.set()
        if interrupted:
            self._abort.set()
        if self._thread is not None:
            self._thread.join(timeout=5 if interrupted else 600)
        self._abort.set()
