"""Fault kinds. Each brings its own heal (Jepsen's packages carry their :final-generator).

A fault acts on node ids already resolved from a symbolic target; `start` returns the history value of the
fault (at least {"nodes": [...]}) and `heal` undoes it. The kinds, their heals and families are in
faults.registry; this module holds what each family does.
"""

from __future__ import annotations

import random
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from kafka_chaos.cluster import kafka_toxic
from kafka_chaos.cluster.disk_corruption import describe
from kafka_chaos.cluster.links import LinkFaults
from kafka_chaos.cluster.node_links import proxy_name
from kafka_chaos.errors import ClusterError
from kafka_chaos.faults.kafka_apis import api_keys, api_name
from kafka_chaos.faults.node_links import links_of
from kafka_chaos.faults.partitions import Shape, grudge
from kafka_chaos.faults.registry import KINDS
from kafka_chaos.faults.targets import LiveCluster
from kafka_chaos.workloads.clients import process_of
from kafka_chaos.workloads.drivers import IN_PROCESS

NODE_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "process")
LINK_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "client-link")
NODE_LINK_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "node-link")
REQUEST_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "request")
DISK_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "disk")
NAME_FAULTS = tuple(k for k, info in KINDS.items() if info.family == "client-name")
HEAL_NAMES = {k: info.heal for k, info in KINDS.items()}


class Fault(Protocol):
    @property
    def name(self) -> str: ...

    def start(self, nodes: list[int]) -> dict[str, Any]: ...
    def heal(self, nodes: list[int]) -> dict[str, Any]: ...


@dataclass
class NodeFault:
    """kill/restart (SIGKILL, then start with its data), stop/start (clean shutdown), pause/resume (freezer)."""

    name: str
    cluster: LiveCluster

    def start(self, nodes: list[int]) -> dict[str, Any]:
        effect = KINDS[self.name].effect
        for n in nodes:
            node = self.cluster.nodes[n]
            {"crash": node.kill, "stop": node.stop, "freeze": node.pause}[str(effect)]()
        return {"nodes": nodes}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        effect = KINDS[self.name].effect
        for n in nodes:
            node = self.cluster.nodes[n]
            {"crash": node.start, "stop": node.start, "freeze": node.resume}[str(effect)]()
        return {"nodes": nodes}


@dataclass
class PowerLossFault:
    """power-loss/power-on: every target node's processes die first (all at once, as when a rack loses power),
    then each disk loses its unsynced writes; power-on starts the nodes on what is left. The history value
    says what each node lost: per log segment, the offset after its last whole batch before and after.
    With `torn` ("page" or "byte"), each file's last unsynced write (of files matching `torn_glob`) keeps a
    prefix instead of going whole; the value then says per file how many of its bytes were kept."""

    cluster: LiveCluster
    name: str = "power-loss"
    torn: str | None = None
    torn_glob: str | None = None
    seed: int = 0

    def start(self, nodes: list[int]) -> dict[str, Any]:
        for n in nodes:
            self.cluster.nodes[n].kill()
        lost: dict[str, Any] = {}
        for n in nodes:
            node = self.cluster.nodes[n]
            files = (node.lose_unsynced_writes(self.torn, self.torn_glob, self.seed + n) if self.torn
                     else node.lose_unsynced_writes())
            lost[str(n)] = crash_summary(files)
        modes = {self.cluster.nodes[n].disk_mode for n in nodes}
        value = {"nodes": nodes, "lose": modes.pop() if len(modes) == 1 else sorted(map(str, modes)), "lost": lost}
        if self.torn:
            value.update({"torn": self.torn, "glob": self.torn_glob})
        return value

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for n in nodes:
            self.cluster.nodes[n].start()
        return {"nodes": nodes}


def crash_summary(files: list[dict[str, Any]]) -> dict[str, Any]:
    """What one node's power loss took: bytes, files, and per partition directory the log end before/after."""
    segments: dict[str, list[int | None]] = {}
    for f in files:
        if "end_offset_before" in f or "end_offset_after" in f:
            partition = f["path"].rsplit("/", 1)[0]
            before, after = f.get("end_offset_before"), f.get("end_offset_after")
            seen = segments.setdefault(partition, [before, after])
            seen[0] = max((x for x in (seen[0], before) if x is not None), default=None)
            seen[1] = max((x for x in (seen[1], after) if x is not None), default=None)
    torn = [{"path": f["path"], "offset": f["torn_offset"], "length": f["torn_length"], "kept": f["torn_kept"]}
            for f in files if "torn_kept" in f]
    return {
        **({"torn_writes": torn} if torn else {}),
        "files": len(files),
        # record bytes only: preallocated index files shrink by megabytes of zeros
        "log_bytes": sum(max(0, f["size_before"] - f["size_after"]) for f in files if f["path"].endswith(".log")),
        "partitions": {p: {"end_offset_before": b, "end_offset_after": a} for p, (b, a) in sorted(segments.items())},
    }


@dataclass
class DiskFull:
    """disk-full/disk-freed: a ballast file fills each target's sized disk until `free_mb` is left, so the
    broker's next writes fail with ENOSPC (cluster.sized_disk); the heal deletes the ballast and starts the
    node if it stopped (a broker whose only log directory fails shuts down)."""

    cluster: LiveCluster
    free_mb: float = 0.0
    name: str = "disk-full"

    def start(self, nodes: list[int]) -> dict[str, Any]:
        disks = {str(n): self.cluster.nodes[n].fill_disk(self.free_mb) for n in nodes}
        return {"nodes": nodes, "free_mb": self.free_mb, "disks": disks}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        freed, started = _undo_and_start(self.cluster, nodes, lambda node: node.free_disk())
        return {"nodes": nodes, "freed": freed, "started": started}



def _undo_and_start(cluster: LiveCluster, nodes: list[int],
                    undo: Callable[[Any], Any]) -> tuple[dict[str, Any], list[int]]:
    """The heal of a disk fault on each node: `undo` what it did (its answer kept by node id), then start the node
    if Kafka stopped it meanwhile (a broker halts when its only log directory fails). Returns the answers and the
    nodes started."""
    answers: dict[str, Any] = {}
    started: list[int] = []
    for n in nodes:
        node = cluster.nodes[n]
        answers[str(n)] = undo(node)
        if not node.running():
            node.start()
            started.append(n)
    return answers, started

@dataclass
class DiskFault:
    """slow-disk / disk-error on each target's volatile disk, armed through its daemon (cluster.volatile_disk);
    the heal disarms it, records what the disk did meanwhile (fsyncs delayed, EIO returned per operation) and
    starts a node that stopped (Kafka halts a broker whose only log directory failed)."""

    name: str
    cluster: LiveCluster
    params: dict[str, Any]

    def settings(self) -> dict[str, Any]:
        if self.name == "slow-disk":
            return {"fsync_delay_ms": int(self.params.get("delay_ms", 0))}
        return {"eio": {"ops": list(self.params.get("ops", ())), "glob": self.params.get("glob")}}

    def start(self, nodes: list[int]) -> dict[str, Any]:
        settings = self.settings()
        disks = {str(n): self.cluster.nodes[n].disk_faults(**settings) for n in nodes}
        return {"nodes": nodes, **self.params, "disks": disks}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        did, started = _undo_and_start(self.cluster, nodes,
                                       lambda node: node.disk_faults(fsync_delay_ms=0, eio=None))
        return {"nodes": nodes, "disks": did, "started": started}


@dataclass
class CorruptFault:
    """corrupt/corrupt-restart: each target node is killed (SIGKILL), `bits` bits of its newest file of a class
    that hold fsynced data are flipped (cluster.disk_corruption: seeded, recorded as file, offset and bit), and
    the heal starts it on the corrupted data. A node without such a file is an error before anything is killed."""

    cluster: LiveCluster
    params: dict[str, Any]
    seed: int = 0
    name: str = "corrupt"

    def start(self, nodes: list[int]) -> dict[str, Any]:
        files, bits, glob = str(self.params.get("files", "segment")), int(self.params.get("bits", 1)), \
            self.params.get("glob")
        for n in nodes:
            if not self.cluster.nodes[n].disk_files(files, glob):
                where = f" matching {glob!r}" if glob else ""
                raise ClusterError(f"node {n} has no {files} file{where} to corrupt ({describe(files)}); "
                                   "nothing was done")
        corrupted: dict[str, Any] = {}
        killed: list[int] = []
        try:
            for n in nodes:
                self.cluster.nodes[n].kill()
                killed.append(n)
                corrupted[str(n)] = self.cluster.nodes[n].corrupt_disk(files, bits, self.seed + n, glob)
        except Exception:
            for n in killed:  # the heal of a failed fault acts on no node: start what this one took down
                self.cluster.nodes[n].start()
            raise
        return {"nodes": nodes, "files": files, "bits": bits, "corrupted": corrupted}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for n in nodes:
            if not self.cluster.nodes[n].running():
                self.cluster.nodes[n].start()
        return {"nodes": nodes}


@dataclass
class PartitionFault:
    """iptables DROP between nodes per a grudge (see faults.partitions); heal flushes the rules."""

    cluster: LiveCluster
    shape: Shape
    rng: random.Random
    name: str = "partition"

    def start(self, nodes: list[int]) -> dict[str, Any]:
        everyone = sorted(self.cluster.nodes)
        g = grudge(self.shape, everyone, nodes, self.rng)
        for node_id, dropped in g.items():
            if dropped:
                self.cluster.nodes[node_id].drop_traffic([self.cluster.nodes[d] for d in sorted(dropped)])
        return {"nodes": nodes, "shape": self.shape, "grudge": {str(k): sorted(v) for k, v in g.items() if v}}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for node in self.cluster.nodes.values():
            node.heal()
        return {"nodes": sorted(self.cluster.nodes)}


@dataclass
class LinkFault:
    """A Toxiproxy toxic (or a disabled proxy) on the client links of the target brokers."""

    name: str
    links: LinkFaults
    params: dict[str, Any]
    """LinkFaults.apply's keyword arguments (latency_ms, jitter_ms, rate_kbps)."""

    def start(self, nodes: list[int]) -> dict[str, Any]:
        applied: dict[str, Any] = {}
        for n in nodes:
            applied = self.links.apply(_proxy_action(self.name), n, **self.params)
        return {"nodes": nodes, **applied}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for n in nodes:
            self.links.heal(n)
        return {"nodes": nodes}


@dataclass
class NodeLinkFault:
    """A Toxiproxy toxic, a cut or a flap on links between nodes (faults.node_links picks them from the selector;
    `proxies` is the cluster's cluster.node_links.LinkProxies)."""

    name: str
    proxies: Any
    params: dict[str, Any]

    def __post_init__(self) -> None:
        self._links: list[Any] = []

    def start(self, nodes: list[int]) -> dict[str, Any]:
        selector = self.params.get("links", "replication")
        direction = self.params.get("direction", "both")
        self._links = links_of(selector, nodes, self.proxies.brokers, self.proxies.controllers, direction)
        options = {k: v for k, v in self.params.items() if k in ("latency_ms", "jitter_ms", "rate_kbps", "period_ms")}
        applied = self.proxies.apply(_proxy_action(self.name), self._links, **options)
        touched = nodes if selector in ("replication", "controller") else sorted(
            {n for link in self._links for n in (link.source, link.dest)})
        return {"nodes": touched, "selector": selector, "direction": direction,
                "links": [link.as_list() for link in self._links], **applied}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        if self._links:
            self.proxies.heal(self._links)
        else:  # the fault failed before it knew its links: undo every link fault
            self.proxies.heal_all()
        return {"nodes": nodes, "links": [link.as_list() for link in self._links]}


def _proxy_action(kind: str) -> str:
    action = KINDS[kind].proxy
    if action is None:
        raise ValueError(f"{kind!r} is not a link fault")
    return action


@dataclass
class RequestFault:
    """The `kafka` toxic (cluster.kafka_toxic) on the proxies of the chosen links: the target brokers' client
    proxies, or, with `links` in the params, the links between nodes that selector names (faults.node_links).
    `clients` in the params (process ids) keeps it to those processes' clients, by the client ids `clients_of`
    gives them (workloads.clients). `fired`, after the heal: the toxic's firings (which API, correlation id,
    client id and the process it names, held from/to), for the history."""

    name: str
    client_links: LinkFaults | None
    link_proxies: Any  # cluster.node_links.LinkProxies, or None
    params: dict[str, Any]
    client_logs: Callable[[float], str] | None = None
    """The client proxies' container output since a time (cluster.toxiproxy.Toxiproxy.logs)."""
    clients_of: Mapping[int, list[str]] = field(default_factory=dict)
    """Process id → the client ids of its clients (workloads.clients.starting_clients of the run's workload)."""
    fired: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._added: list[tuple[Any, str]] = []  # (broker id or Link, toxic name), in the order added
        self._token = secrets.token_hex(4)
        self._since_s = time.time()

    def _targets(self, nodes: list[int]) -> list[tuple[Any, str]]:
        """(broker id or Link, proxy name) of every proxy the fault goes on."""
        if "links" in self.params:
            if self.link_proxies is None:
                raise RuntimeError(f"{self.name} on links between nodes needs cluster.link_proxies = true")
            links = links_of(self.params["links"], nodes, self.link_proxies.brokers, self.link_proxies.controllers,
                             self.params.get("direction", "both"))
            return [(link, proxy_name(link)) for link in links]
        if self.client_links is None:
            raise RuntimeError(f"{self.name} on client links needs cluster.toxiproxy = true")
        return [(n, f"broker-{n}") for n in nodes]

    def start(self, nodes: list[int]) -> dict[str, Any]:
        info = KINDS[self.name]
        keys = api_keys(self.params.get("api", []))
        targets = self._targets(nodes)
        options: dict[str, Any] = {k: self.params[k] for k in ("latency_ms", "hold_ms", "count", "release_on_connect",
                                                                "release_after_count") if k in self.params}
        after = api_keys(self.params.get("release_after", []))
        processes = [int(p) for p in self.params.get("clients", [])]
        client_ids = self.client_ids(processes)
        self._since_s = time.time()
        for where, proxy in targets:
            for stream, name, attributes in kafka_toxic.toxics(self.name, str(info.frames), str(info.action), keys,
                                                               proxy, self._token, release_after=after,
                                                               client_ids=client_ids, **options):
                self._proxies_of(where).add_toxic(where, name, kafka_toxic.TOXIC_TYPE, stream, attributes)
                self._added.append((where, name))
        value: dict[str, Any] = {"nodes": nodes, "api": [api_name(k) for k in keys], "api_keys": keys,
                                 "proxies": [proxy for _, proxy in targets], "fault": self._token, **options}
        if after:
            value["release_after"] = [api_name(k) for k in after]
        if processes:
            value.update(clients=processes, client_ids=client_ids)
        if "links" in self.params:
            selector = self.params["links"]
            value.update(selector=selector, direction=self.params.get("direction", "both"),
                         links=[where.as_list() for where, _ in targets])
            if selector not in ("replication", "controller"):  # as NodeLinkFault: the links' ends
                value["nodes"] = sorted({n for where, _ in targets for n in (where.source, where.dest)})
        return value

    def client_ids(self, processes: list[int]) -> list[str]:
        """The client ids of these processes' clients; a process that owns none is an error (the scenario's
        validation names the fix before a run starts)."""
        unknown = [p for p in processes if p not in self.clients_of]
        if unknown:
            raise ValueError(f"{self.name}: clients {unknown} own no client of this run's workload (processes "
                             f"owning one: {sorted(self.clients_of)})")
        return [c for p in processes for c in self.clients_of[p]]

    def _proxies_of(self, where: Any) -> Any:
        return self.client_links if isinstance(where, int) else self.link_proxies

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        """Remove the toxics (a held frame is delivered as its toxic goes), then read what they did."""
        for where, name in self._added:
            self._proxies_of(where).remove_toxic(where, name)
        # one container per node's side-car (node links), one for every client proxy (-1)
        containers = sorted({-1 if isinstance(where, int) else where.source for where, _ in self._added})
        self.fired = []
        for node in containers:
            text = self._client_logs() if node == -1 else self.link_proxies.logs(node, self._since_s)
            self.fired += [{**f, "client": process_of(f.get("client_id")),
                            **({"api": api_name(f["api_key"])} if isinstance(f.get("api_key"), int) else {})}
                           for f in kafka_toxic.firings(text, self._token)]
        self._added = []
        return {"nodes": nodes, "fault": self._token, "fired": len(self.fired)}

    def _client_logs(self) -> str:
        return self.client_logs(self._since_s) if self.client_logs is not None else ""


@dataclass
class DnsFault:
    """dns-fail/dns-restore: each target broker's host name, as clients resolve it (cluster.host_names), stops
    resolving or points at an address where nothing answers; the heal maps it to the broker again. The history
    value names each name and what it now resolves to, the run's client and version, and the librdkafka the
    clients run, None for another client (its handling of a failed lookup changed across versions:
    reference_model.dns_faults)."""

    cluster: Any  # cluster.kafka.KafkaCluster: break_host_name, restore_host_name
    mode: str = "unresolvable"
    client: Mapping[str, Any] | None = None
    """The run's client record (workloads.drivers.client_record); None: the in-process librdkafka."""
    name: str = "dns-fail"

    def start(self, nodes: list[int]) -> dict[str, Any]:
        names: dict[str, Any] = {}
        for n in nodes:
            names.update(self.cluster.break_host_name(n, self.mode))
        client, version = ((str(self.client["client"]), str(self.client["version"])) if self.client
                           else ("librdkafka", IN_PROCESS.version))
        return {"nodes": nodes, "mode": self.mode, "names": names, "client": client, "version": version,
                "librdkafka": version if client == "librdkafka" else None}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        names: dict[str, Any] = {}
        for n in nodes:
            names.update(self.cluster.restore_host_name(n))
        return {"nodes": nodes, "names": names}
