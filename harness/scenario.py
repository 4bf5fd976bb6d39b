"""Scenario files (TOML): cluster + topic + workload + faults + duration + seed, validated with pydantic.

A bad file never produces a traceback: `load_scenario` raises ScenarioError whose message names the file, the
field, the bad value and what is allowed.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import tomli_w
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from kafka_chaos.cluster.external import NodeControl
from kafka_chaos.cluster.node_links import listeners_between
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.kafka_apis import UnknownApi, api_key, api_name, served_by
from kafka_chaos.faults.node_links import LinkSelectorError, check_pairs
from kafka_chaos.faults.operations import OperationSpec, validate_against
from kafka_chaos.faults.registry import KINDS
from kafka_chaos.faults.schedule import FaultsConfig
from kafka_chaos.workloads.clients import starting_clients
from kafka_chaos.workloads.config import CLIENT_TIMEOUT_PROFILES, WorkloadConfig
from kafka_chaos.workloads.drivers import out_of_process


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopicSpec(Strict):
    name: str = "chaos"
    partitions: int = Field(3, ge=1, le=64)
    replication_factor: int = Field(3, ge=1)
    min_insync_replicas: int = Field(2, ge=1)
    unclean_leader_election: bool = False
    configs: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _min_isr_fits(self) -> TopicSpec:
        if self.min_insync_replicas > self.replication_factor:
            raise ValueError(
                f"min_insync_replicas ({self.min_insync_replicas}) cannot exceed replication_factor "
                f"({self.replication_factor})"
            )
        return self

    def kafka_configs(self) -> dict[str, str]:
        return {
            "min.insync.replicas": str(self.min_insync_replicas),
            "unclean.leader.election.enable": str(self.unclean_leader_election).lower(),
            **self.configs,
        }


class ExpectConfig(Strict):
    """What the scenario expects beyond safety. `max_unavailable_s`: fail the run when a window with no
    successful send lasts longer, unless the reference model says writes need not be available then
    (checker.availability.expect_violations)."""

    max_unavailable_s: float | None = Field(None, gt=0, le=24 * 3600,
                                            description="longest allowed window with no successful send, s")


class Scenario(Strict):
    name: str
    description: str = ""
    seed: int = 0
    duration_s: float = Field(30, gt=0, le=24 * 3600)
    cluster: ClusterSpec = Field(default_factory=lambda: ClusterSpec())
    topic: TopicSpec = Field(default_factory=lambda: TopicSpec())
    workload: WorkloadConfig = Field(default_factory=lambda: WorkloadConfig())
    faults: FaultsConfig = Field(default_factory=lambda: FaultsConfig())
    operations: list[OperationSpec] = Field(default_factory=list)
    expect: ExpectConfig = Field(default_factory=lambda: ExpectConfig())
    # Written by the harness into results/<run>/scenario.toml; ignored when a scenario is run.
    run_id: str | None = None
    kafka_settings: dict[str, str] = Field(default_factory=dict)
    # Written into scenario.resolved.toml (the Kafka image the run used); informative when replayed.
    image_id: str | None = None

    @model_validator(mode="after")
    def _client_timeouts_of_the_profile(self) -> Scenario:
        profile = CLIENT_TIMEOUT_PROFILES[self.cluster.timeouts]
        unset = {k: v for k, v in profile.items() if k not in self.workload.model_fields_set}
        if unset:
            workload = self.workload.model_copy(update=unset)
            # Still "unset": with_overrides re-derives them when an override changes the profile.
            object.__setattr__(workload, "__pydantic_fields_set__", set(self.workload.model_fields_set))
            object.__setattr__(self, "workload", workload)  # frozen model; this is its own validation
        return self

    @model_validator(mode="after")
    def _host_names_for_name_faults(self) -> Scenario:
        """A fault on the brokers' names (dns-fail) needs names to break: the cluster then gives each broker one
        (cluster.host_names), as if the scenario had asked for it."""
        names = sorted(k for k in self.faults.kinds() if "host-names" in KINDS[k].needs)
        if not names or self.cluster.host_names:
            return self
        if self.cluster.bootstrap_servers:
            raise ValueError(
                f"{', '.join(names)} breaks the host name clients resolve a broker by, and the names it breaks are "
                "the ones kafka-chaos gives the brokers it starts (kept in this host's /etc/hosts); an external "
                "cluster's brokers advertise names of their own, which kafka-chaos does not control. Remove "
                "bootstrap_servers to run it on a cluster kafka-chaos starts, or remove these faults")
        cluster = self.cluster.model_copy(update={"host_names": True})
        object.__setattr__(cluster, "__pydantic_fields_set__", self.cluster.model_fields_set | {"host_names"})
        object.__setattr__(self, "cluster", cluster)  # frozen model; this is its own validation
        return self

    @model_validator(mode="after")
    def _fits_cluster(self) -> Scenario:
        validate_against(self.operations, self.cluster.broker_ids(), self.topic.replication_factor,
                         self.cluster.controller_ids(), self.cluster.dynamic_quorum,
                         None if self.cluster.bootstrap_servers else self.cluster.kafka_version)
        if self.cluster.bootstrap_servers:
            self._fits_external_cluster()
        targets = [f.target for f in self.faults.schedule] + list(self.faults.generator.targets
                                                                  if self.faults.generator else [])
        racks = sorted({t.removeprefix("rack:") for t in targets if isinstance(t, str) and t.startswith("rack:")})
        if racks and not self.cluster.racks:
            raise ValueError(f"rack targets {[f'rack:{r}' for r in racks]} need racks: set cluster.racks, "
                             f'e.g. racks = ["a", "b"]')
        unknown = set(racks) - set(self.cluster.racks)
        if unknown:
            raise ValueError(f"rack targets name racks {sorted(unknown)} that no broker is in; "
                             f"cluster.racks = {self.cluster.racks}")
        if self.topic.replication_factor > self.cluster.nodes:
            raise ValueError(
                f"topic.replication_factor ({self.topic.replication_factor}) needs at least that many brokers; "
                f"cluster.nodes = {self.cluster.nodes}"
            )
        link = {k for k in self.faults.kinds() if "toxiproxy" in KINDS[k].needs}
        kinds = self.faults.kinds()
        if kinds & link and not self.cluster.toxiproxy:
            raise ValueError(f"client-link faults {sorted(kinds & link)} need cluster.toxiproxy = true")
        node_links = sorted(k for k in kinds if "link-proxies" in KINDS[k].needs)
        if node_links and not self.cluster.link_proxies:
            raise ValueError(f"faults on links between nodes {node_links} need cluster.link_proxies = true (every "
                             "link through a proxy of its own)")
        if self.cluster.link_proxies and "partition" in kinds:
            raise ValueError("partition drops packets by node address, but with cluster.link_proxies the nodes talk "
                             'through their proxies: use kind = "link-cut" with links = [[from, to], …] instead')
        if any(op.kind == "add-broker" for op in self.operations) and (self.cluster.toxiproxy
                                                                       or self.cluster.link_proxies):
            raise ValueError("add-broker starts a plain broker: it has no client proxy (cluster.toxiproxy) or link "
                             "proxies (cluster.link_proxies); remove those, or the add-broker operation")
        if self.cluster.link_proxies and self.cluster.bootstrap_servers:
            raise ValueError("cluster.link_proxies needs a cluster kafka-chaos starts; remove it for bootstrap_servers")
        for i, f in enumerate(self.faults.schedule):
            if f.kind in node_links and isinstance(f.links, list):
                try:
                    check_pairs(f.links, self.cluster.broker_ids(), self.cluster.controller_ids())
                except LinkSelectorError as e:
                    raise ValueError(f"faults.schedule[{i}].links: {e}") from None
        self._fits_request_faults()
        sized = sorted(k for k in kinds if "sized-disks" in KINDS[k].needs)
        if sized and not self.cluster.disk_size_mb:
            raise ValueError(f"{', '.join(sized)} needs the nodes' data on disks of a known size: set "
                             "cluster.disk_size_mb (e.g. 256)")
        torn = [i for i, f in enumerate(self.faults.schedule) if f.torn and f.kind != "power-loss"]
        if torn or (self.faults.generator and self.faults.generator.torn
                    and set(self.faults.generator.kinds) != {"power-loss"}):
            where = f"faults.schedule[{torn[0]}]" if torn else "faults.generator"
            raise ValueError(f"{where}: torn tears the last write of a power loss: it needs kind = \"power-loss\" "
                             "(and only power-loss among a generator's kinds); remove torn for other kinds")
        disk = {k for k in kinds if "volatile-disks" in KINDS[k].needs}
        if disk and not self.cluster.volatile_disks:
            raise ValueError(f"{', '.join(sorted(disk))} needs the nodes' data on volatile disks: set "
                             'cluster.volatile_disks = "unsynced" (lose every write not fsynced) or "last:30s" '
                             "(lose what Linux had not yet written back)")
        self._disk_replace_leaves_a_quorum()
        return self

    def _disk_replace_leaves_a_quorum(self) -> None:
        """A replaced controller rebuilds its metadata log from the other voters (Kafka's operations guide:
        format it only while a majority holds the committed log): with fewer than 3 controllers, or a target
        that can wipe a majority of them at once, nothing would hold it."""
        voters = len(self.cluster.controller_ids())
        targets = [(f"faults.schedule[{i}]", [f.target]) for i, f in enumerate(self.faults.schedule)
                   if f.kind == "disk-replace"]
        gen = self.faults.generator
        if gen is not None and "disk-replace" in gen.kinds:
            targets.append(("faults.generator", list(gen.targets)))
        for where, rules in targets:
            can_hit_controller = any(t == "controller" or not self.cluster.controllers
                                     or (isinstance(t, list) and set(t) & set(self.cluster.controller_ids()))
                                     for t in rules)
            majority = any(t in ("majority", "all") for t in rules) and not self.cluster.controllers
            if can_hit_controller and (voters < 3 or majority):
                why = (f"the quorum has {voters} controller{'s' if voters != 1 else ''}" if voters < 3
                       else "target majority/all would wipe a majority of the combined nodes' controllers at once")
                raise ValueError(f"{where} (disk-replace): {why}, so no majority would hold the metadata log the "
                                 "replaced controller has to fetch again and the cluster's metadata would be lost; "
                                 "use cluster.nodes (combined) or cluster.controllers of 3 or more, and a target "
                                 "that replaces one controller at a time (one, leader, follower, controller)")

    def _fits_request_faults(self) -> None:
        """Request faults (faults.kinds.RequestFault) act through proxies: the client proxies (cluster.toxiproxy)
        unless `links` names links between nodes (cluster.link_proxies). Each named API must exist and be one
        the chosen links can carry; `clients` must name processes of the workload that own clients."""
        self._fits_client_faults()
        for i, spec in enumerate(self.faults.schedule):
            if spec.clients and KINDS[spec.kind].family not in ("request", "client-process"):
                request_kinds = ", ".join(k for k, info in KINDS.items() if info.family == "request")
                raise ValueError(f"faults.schedule[{i}] ({spec.kind}): clients = {spec.clients} picks the Kafka "
                                 f"requests of those processes' clients, which only request faults ({request_kinds}) "
                                 "act on; remove clients, or use one of those kinds")
        entries: list[tuple[str, Any]] = [(f"faults.schedule[{i}]", f) for i, f in enumerate(self.faults.schedule)]
        gen = self.faults.generator
        if gen is not None:
            entries += [("faults.generator", gen)]
        for where, f in entries:
            kinds = [f.kind] if hasattr(f, "kind") else list(f.kinds)
            requests = sorted({k for k in kinds if KINDS[k].family == "request"})
            if not requests:
                continue
            what = f"{where} ({', '.join(requests)})"
            if not f.api:
                raise ValueError(f'{what} needs api, the Kafka requests it acts on: e.g. api = ["EndTxn"] or '
                                 'api = ["Produce"] (names as in Kafka, or key numbers)')
            try:
                keys = sorted({api_key(a) for a in f.api})
            except UnknownApi as e:
                raise ValueError(f"{what}.api: {e}") from None
            try:
                [api_key(a) for a in getattr(f, "release_after", [])]
            except UnknownApi as e:
                raise ValueError(f"{what}.release_after: {e}") from None
            on_node_links = "links" in f.model_fields_set
            if on_node_links:
                listeners = self._proxied_listeners(what, f.links, f.direction)
                carried = {"internal": "broker", "controller": "controller"}
                useless = [k for k in keys if not {carried[x] for x in listeners} & set(served_by(k))]
                if useless:
                    raise ValueError(f"{what}: links = {f.links!r} carry requests to "
                                     f"{' and '.join(sorted(listeners))} listeners, and no node sends "
                                     f"{', '.join(api_name(k) for k in useless)} there; pick links that carry them "
                                     "(replication: brokers' inter-broker listeners; controller, quorum: "
                                     "controllers) or other APIs")
            else:
                if not self.cluster.toxiproxy:
                    raise ValueError(f"{what} on client links needs the client proxies: set cluster.toxiproxy = "
                                     "true (or give links = … with cluster.link_proxies = true for links between "
                                     "nodes)")
                controller_only = [k for k in keys if "broker" not in served_by(k)]
                if controller_only:
                    raise ValueError(f"{what}: clients never send {', '.join(api_name(k) for k in controller_only)}"
                                     " (only nodes send it, to controllers): set links = \"controller\" or "
                                     '"quorum" with cluster.link_proxies = true')
            self._fits_clients(what, getattr(f, "clients", []), on_node_links)

    def _fits_client_faults(self) -> None:
        """client-pause freezes the worker processes of chosen client processes: it needs `clients`, processes
        that own a client, and clients that run in worker processes of their own (workloads.drivers)."""
        gen = self.faults.generator
        pauses = sorted(k for k in (gen.kinds if gen else []) if KINDS[k].family == "client-process")
        if pauses:
            raise ValueError(f"faults.generator: {', '.join(pauses)} freezes chosen client processes, which a "
                             "generator cannot name (it has no clients): give it in [[faults.schedule]] with "
                             "clients = [process ids]")
        for i, f in enumerate(self.faults.schedule):
            what = f"faults.schedule[{i}] ({f.kind})"
            if KINDS[f.kind].family != "client-process":
                if f.during != "now":
                    raise ValueError(f"{what}: during is client-pause's (when it freezes); remove it")
                continue
            if not f.clients:
                raise ValueError(f"{what} needs clients = [process ids], the history processes whose client "
                                 "workers it freezes (e.g. clients = [0] for the queue workload's first consumer)")
            if not out_of_process(self.workload):
                raise ValueError(f"{what} freezes a client's own process, and the workload's clients run inside "
                                 "kafka-chaos (the installed confluent-kafka): set [workload] client_version (e.g. "
                                 '"2.6.1", run in worker processes of its own) or client = "java"')
            if f.during == "transaction" and self.workload.kind != "txn":
                raise ValueError(f'{what}: during = "transaction" waits for a transaction, and only the txn '
                                 'workload has any: set [workload] kind = "txn", or remove during')
            self._fits_clients(what, f.clients, False)

    def _fits_clients(self, what: str, clients: list[int], on_node_links: bool) -> None:
        """`clients` selects client processes' requests by client id (workloads.clients): only on client links,
        and only processes the workload starts with that own a client."""
        if not clients:
            return
        if on_node_links:
            raise ValueError(f"{what}: clients = {clients} picks the requests of client processes, which travel on "
                             "the client links only, not on links between nodes: remove links (the fault then acts "
                             "on the client proxies, cluster.toxiproxy = true), or remove clients")
        owners = starting_clients(self.workload)
        unknown = [p for p in clients if p not in owners]
        if unknown:
            listed = "; ".join(f"{p}: {', '.join(ids)}" for p, ids in sorted(owners.items())) or "none"
            raise ValueError(f"{what}: clients = {clients} names processes {unknown} that own no client of this "
                             f"{self.workload.kind} workload. The processes it starts with that own one are "
                             f"numbered before it runs (with their client ids: {listed}); name those, or change "
                             "[workload] (producers, consumers, in_flight) so the process exists")

    def _proxied_listeners(self, what: str, selector: Any, direction: str) -> set[str]:
        """The listeners of the proxied links a request fault's selector can name; none is an error."""
        if not self.cluster.link_proxies:
            raise ValueError(f"{what} on links between nodes (links = {selector!r}) needs cluster.link_proxies = "
                             "true (every link through a proxy of its own)")
        brokers, controllers = self.cluster.broker_ids(), self.cluster.controller_ids()
        found: set[str]
        if isinstance(selector, list):
            try:
                check_pairs(selector, brokers, controllers)
            except LinkSelectorError as e:
                raise ValueError(f"{what}.links: {e}") from None
            pairs = [(a, b) for a, b in selector] + ([(b, a) for a, b in selector] if direction == "both" else [])
            found = {x for a, b in pairs for x in listeners_between(a, b, brokers, controllers)}
        elif selector == "replication":
            found = {"internal"} if len(brokers) > 1 else set()
        else:
            voters = set(controllers) if selector == "quorum" else set(controllers) | set(brokers)
            found = {"controller"} if len(voters) > 1 and controllers else set()
        if not found:
            raise ValueError(f"{what}: links = {selector!r} names no proxied link in this cluster (brokers "
                             f"{sorted(brokers)}, controllers {sorted(controllers)}); a controller-only node talks "
                             "only to controllers, and a link needs two nodes")
        return found

    def _fits_external_cluster(self) -> None:
        on_disks = sorted(k for k in self.faults.kinds() if "volatile-disks" in KINDS[k].needs)
        if on_disks:
            raise ValueError(f"{', '.join(on_disks)} act on the disks kafka-chaos mounts under the nodes it starts "
                             "(cluster.volatile_disks): not possible against an external cluster; remove "
                             "bootstrap_servers to run them on a cluster kafka-chaos starts, or remove these faults")
        control = self.cluster.control or NodeControl()
        for kind in sorted(self.faults.kinds()):
            missing = control.missing_for(kind)
            if missing:
                raise ValueError(f"faults of kind {kind} on an external cluster need [cluster.control] commands: "
                                 f"{', '.join(missing)}")
        if self.cluster.toxiproxy:
            raise ValueError("cluster.toxiproxy needs a cluster kafka-chaos starts; remove it for bootstrap_servers")
        if any(op.kind == "rolling-upgrade" for op in self.operations):
            raise ValueError("rolling-upgrade re-creates nodes: not possible on an external cluster")
        if any(op.kind in ("add-broker", "decommission-broker") for op in self.operations):
            raise ValueError("add-broker and decommission-broker start or remove containers: not possible on an "
                             "external cluster")
        restarts = [op for op in self.operations if op.kind == "rolling-restart"]
        if restarts and control.missing_for("kill" if not restarts[0].clean else "stop"):
            raise ValueError("rolling-restart on an external cluster needs [cluster.control] stop (or kill) and "
                             "start commands")

    def with_overrides(self, **overrides: Any) -> Scenario:
        """A copy with dotted overrides applied, e.g. {"workload.acks": "1", "seed": 3}; validated again. Fields
        the scenario left unset stay unset, so what derives from another field (the client timeouts from
        `cluster.timeouts`) follows an override of it."""
        data = self.model_dump(exclude_unset=True)
        for dotted, value in overrides.items():
            node = data
            *parents, leaf = dotted.replace("__", ".").split(".")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = value
        return parse_scenario(data, source="overrides")


def _format_errors(err: ValidationError, source: str) -> str:
    lines = [f"{source}: invalid scenario"]
    for e in err.errors():
        loc = ".".join(str(p) for p in e["loc"])
        given = e.get("input")
        msg = e["msg"].removeprefix("Value error, ")
        if e["type"] == "extra_forbidden":
            msg = "unknown field"
        shown = f" (got {given!r})" if given is not None and not isinstance(given, dict) else ""
        lines.append(f"  {loc or '<top>'}: {msg}{shown}")
    return "\n".join(lines)


def parse_scenario(data: dict[str, Any], source: str = "<scenario>") -> Scenario:
    try:
        return Scenario.model_validate(data)
    except ValidationError as err:
        raise ScenarioError(_format_errors(err, source)) from None


def load_scenario(path: Path) -> Scenario:
    if not path.exists():
        raise ScenarioError(f"{path}: no such scenario file. Ready-made ones are in scenarios/*.toml")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as err:
        raise ScenarioError(f"{path}: not valid TOML: {err}") from None
    data.setdefault("name", path.stem)
    return parse_scenario(data, source=str(path))


def to_toml(data: dict[str, Any]) -> str:
    """The one TOML writer for scenarios (a run's scenario.resolved.toml, replays, the shrinker's minimal.toml).
    TOML holds no None (such values are left out) and only string keys (a reassignment's partition numbers
    become "0", "1")."""
    return tomli_w.dumps(_toml_ready(data))


def _toml_ready(v: Any) -> Any:
    if isinstance(v, dict):
        return {str(k): _toml_ready(x) for k, x in v.items() if x is not None}
    if isinstance(v, list | tuple):
        return [_toml_ready(x) for x in v]
    return v
