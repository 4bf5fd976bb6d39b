"""Fault schedules: an explicit timed list, or a generator; both turn into the same deterministic plan.

The plan is a pure function of the spec, the run's duration and its seed, so `plan(...)` can be tested (and a
seed replayed) without a cluster — Jepsen's generators are testable with `simulate` in the same way.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

from kafka_chaos.cluster.disk_corruption import FileClass
from kafka_chaos.cluster.volatile_disk import DISK_OPS
from kafka_chaos.faults.node_links import Direction, Selector
from kafka_chaos.faults.partitions import Shape
from kafka_chaos.faults.registry import KINDS, FaultKind
from kafka_chaos.faults.targets import Target

DiskOp = Literal["fsync", "write", "read"]
ALL_DISK_OPS: tuple[DiskOp, ...] = get_args(DiskOp)
TornMode = Literal["page", "byte"]
DnsMode = Literal["unresolvable", "dead-address"]
Rejoin = Literal["isr", "unfenced"]
During = Literal["now", "transaction"]
assert ALL_DISK_OPS == DISK_OPS, "DiskOp and cluster.volatile_disk.DISK_OPS must name the same operations"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FaultSpec(_Strict):
    """One fault at a fixed time: `kind` on `target` from `at_s` for `duration_s`, then its heal."""

    kind: FaultKind
    at_s: float = Field(0, ge=0, description="seconds after the workload starts")
    duration_s: float = Field(10, gt=0, description="seconds until its heal")
    target: Target = "leader"
    shape: Shape = "isolate"
    latency_ms: int = Field(500, ge=0)
    jitter_ms: int = Field(0, ge=0)
    rate_kbps: int = Field(64, ge=1)
    # link faults between nodes (link-*: faults.node_links)
    links: Selector = Field("replication", description="replication, controller, quorum or [[from, to], …]")
    direction: Direction = Field("both", description="both: the links each way; one-way: only from → to")
    period_ms: int = Field(1000, ge=50, description="link-flap: down for period_ms, up for period_ms, …")
    free_mb: float = Field(0, ge=0, description="disk-full: MiB left free on the disk")
    mode: DnsMode = Field("unresolvable", description="dns-fail: the name resolves to nothing, or to an address "
                          "where nothing answers")
    # request faults (request-*, response-*: faults.kinds.RequestFault); on links between nodes when `links` is set
    api: list[str | int] = Field(default_factory=list, description="the Kafka APIs, by name (EndTxn) or key (26)")
    count: int = Field(0, ge=0, description="act on the first count matching frames only (0: every one)")
    hold_ms: int = Field(0, ge=0, description="request-hold: the longest a frame is held (0: until the heal)")
    release_on_connect: bool = Field(False, description="request-hold: the proxy's next connection releases it")
    release_after: list[str | int] = Field(default_factory=list, description=(
        "request-hold: APIs whose frames on the proxy's other connections release it, ahead of the "
        "release_after_count-th one since it was held"))
    release_after_count: int = Field(1, ge=1, description="request-hold: how many release_after frames release it")
    clients: list[int] = Field(default_factory=list, description=(
        "request faults on client links: only the requests (or their responses) of these history processes' "
        "clients, by the client.id each workload client carries (workloads.clients); empty: every client's. "
        "client-pause: the processes whose client workers are frozen"))
    during: During = Field("now", description=(
        "client-pause: freeze at once, or (transaction) once a chosen process's producer holds a transaction open "
        "whose sends were acknowledged, so the coordinator has it open ([workload] txn_commit_delay_ms holds it "
        "open between the sends and the commit); the heal stays at at_s + duration_s"))
    # disk faults on the volatile disk (cluster.volatile_disk)
    delay_ms: int = Field(100, ge=0, description="slow-disk: ms added to every fsync")
    ops: list[DiskOp] = Field(default_factory=lambda: list(ALL_DISK_OPS), min_length=1,
                              description="disk-error: which operations fail with EIO")
    glob: str | None = Field(None, description="disk-error, corrupt, a torn power-loss: only paths (relative to "
                             "the data directory) matching it")
    torn: TornMode | None = Field(None, description="power-loss: the last unsynced write of each file keeps a prefix "
                                  "cut at a page boundary or at any byte")
    files: FileClass = Field("segment", description="corrupt: which of Kafka's files (segment, index, checkpoint, "
                             "metadata-log)")
    bits: int = Field(1, ge=1, le=4096, description="corrupt: how many bits to flip")
    rejoin: Rejoin = Field("isr", description="disk-replace on a broker: the heal waits until it is back in the ISR "
                           "of its partitions, or only until it is registered again and unfenced (the metadata lists "
                           "it), so that later faults can act while its new log is still empty")
    # Written into scenario.resolved.toml: the node ids `target` resolved to when the recorded run fired it.
    # A run by rule ignores it; `kafka-chaos run --replay-nodes` aims the fault at these ids instead.
    nodes: list[int] | None = None


class FaultGenerator(_Strict):
    """Every `every_s` from `start_s`: a kind, target and shape drawn from the lists with the run's seed."""

    kinds: list[FaultKind] = Field(min_length=1)
    targets: list[Target] = Field(default_factory=lambda: list[Target](["leader"]), min_length=1)
    shapes: list[Shape] = Field(default_factory=lambda: list[Shape](["isolate"]), min_length=1)
    start_s: float = Field(3, ge=0)
    every_s: float = Field(10, gt=0)
    duration_s: float = Field(5, gt=0)
    latency_ms: int = Field(500, ge=0)
    rate_kbps: int = Field(64, ge=1)
    links: Selector = "replication"
    direction: Direction = "both"
    period_ms: int = Field(1000, ge=50)
    free_mb: float = Field(0, ge=0)
    mode: DnsMode = "unresolvable"
    api: list[str | int] = Field(default_factory=list)
    delay_ms: int = Field(100, ge=0)
    ops: list[DiskOp] = Field(default_factory=lambda: list(ALL_DISK_OPS), min_length=1)
    glob: str | None = None
    torn: TornMode | None = None
    files: FileClass = "segment"
    bits: int = Field(1, ge=1, le=4096)


class FaultsConfig(_Strict):
    schedule: list[FaultSpec] = Field(default_factory=list)
    generator: FaultGenerator | None = None

    def kinds(self) -> set[str]:
        return {f.kind for f in self.schedule} | set(self.generator.kinds if self.generator else [])

    @classmethod
    def from_plan(cls, planned: list[PlannedFault]) -> FaultsConfig:
        """The explicit schedule of a plan: `plan(FaultsConfig.from_plan(p), d, seed) == p` for a plan cut to d,
        so a shrunk or resolved plan is again a scenario's `faults`."""
        return cls(schedule=[FaultSpec.model_validate(p.to_spec()) for p in planned])


@dataclass(frozen=True)
class PlannedFault:
    """One fault of a run's plan: the type the generator produces, the nemesis consumes, the resolved scenario
    records and the shrinker cuts down. `target` is the rule; `nodes` the ids it resolved to in a recorded run
    (None until one fired it); `params` the kind's options (latency_ms, jitter_ms, rate_kbps)."""

    at_s: float
    duration_s: float
    kind: FaultKind
    target: Target
    shape: Shape = "isolate"
    params: dict[str, Any] = field(default_factory=dict)
    nodes: tuple[int, ...] | None = None

    @property
    def heal_at_s(self) -> float:
        return self.at_s + self.duration_s

    def to_spec(self) -> dict[str, Any]:
        """This fault as one `[[faults.schedule]]` entry (plain data, TOML-ready)."""
        spec: dict[str, Any] = {"kind": self.kind, "target": self.target, "shape": self.shape, "at_s": self.at_s,
                                "duration_s": self.duration_s}
        spec.update(self.params)
        if self.nodes is not None:
            spec["nodes"] = list(self.nodes)
        return spec

    def on_nodes(self) -> PlannedFault:
        """The same fault aimed at the node ids it hit (replay by node ids); unchanged if it never fired."""
        return self if self.nodes is None else replace(self, target=sorted(self.nodes))


def _link_params(kind: str, spec: FaultSpec | FaultGenerator, jitter_ms: int = 0) -> dict[str, Any]:
    """The options of a kind that take any: which links and how, delays, rates, a flap's period, free space."""
    params: dict[str, Any] = {}
    if kind == "slow-disk":
        return {"delay_ms": spec.delay_ms}
    if kind == "disk-error":
        return {"ops": list(spec.ops), "glob": spec.glob}
    if kind == "corrupt":
        return {"files": spec.files, "bits": spec.bits, "glob": spec.glob}
    if kind == "dns-fail":
        return {"mode": spec.mode}
    if KINDS[kind].family == "client-process":
        during = {"during": spec.during} if isinstance(spec, FaultSpec) and spec.during != "now" else {}
        return {"clients": list(getattr(spec, "clients", [])), **during}
    if kind == "disk-replace":  # only when asked: a plan's other disk-replaces keep their recorded params
        return {"rejoin": spec.rejoin} if isinstance(spec, FaultSpec) and spec.rejoin != "isr" else {}
    if kind == "power-loss" and spec.torn:
        return {"torn": spec.torn, "glob": spec.glob}
    if "sized-disks" in KINDS[kind].needs:
        return {"free_mb": spec.free_mb}
    if KINDS[kind].family == "request":
        return _request_params(kind, spec)
    if KINDS[kind].family == "node-link":
        params = {"links": spec.links, "direction": spec.direction}
        if kind == "link-flap":
            params["period_ms"] = spec.period_ms
    if kind in ("latency", "link-latency"):
        return {**params, "latency_ms": spec.latency_ms, "jitter_ms": jitter_ms}
    if kind in ("bandwidth", "link-bandwidth"):
        return {**params, "rate_kbps": spec.rate_kbps}
    return params


def _request_params(kind: str, spec: FaultSpec | FaultGenerator) -> dict[str, Any]:
    """A request kind's options; `links` only when the scenario gave it (without it: the client links)."""
    params: dict[str, Any] = {"api": list(spec.api)}
    if "links" in spec.model_fields_set:
        params.update(links=spec.links, direction=spec.direction)
    if isinstance(spec, FaultSpec):
        params["count"] = spec.count
        if spec.clients:
            params["clients"] = list(spec.clients)
        if KINDS[kind].action == "hold":
            params.update(hold_ms=spec.hold_ms, release_on_connect=spec.release_on_connect)
            if spec.release_after:
                params.update(release_after=list(spec.release_after), release_after_count=spec.release_after_count)
    if KINDS[kind].action == "delay":
        params["latency_ms"] = spec.latency_ms
    return params


def plan(config: FaultsConfig, duration_s: float, seed: int) -> list[PlannedFault]:
    """Every fault of the run, in start order. Faults whose heal would fall after the run are cut to end with it."""
    rng = random.Random(seed)
    out = [
        PlannedFault(f.at_s, f.duration_s, f.kind, f.target, f.shape, _link_params(f.kind, f, f.jitter_ms),
                     None if f.nodes is None else tuple(f.nodes))
        for f in config.schedule
        if f.at_s < duration_s
    ]
    gen = config.generator
    if gen is not None:
        t = gen.start_s
        while t < duration_s:
            kind = rng.choice(gen.kinds)
            out.append(
                PlannedFault(t, gen.duration_s, kind, rng.choice(gen.targets), rng.choice(gen.shapes),
                             _link_params(kind, gen))
            )
            t += gen.every_s
    cut = [replace(p, duration_s=min(p.duration_s, duration_s - p.at_s)) for p in out]
    return sorted(cut, key=lambda p: p.at_s)
