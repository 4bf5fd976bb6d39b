"""The nemesis: runs a fault plan against a live cluster and writes every fault to the history.

Each fault is recorded Jepsen-style by process "nemesis": `invoke` when it is about to act (value: kind and
symbolic target), `info` when it took effect (value: the resolved nodes and what was done); its heal likewise,
under the heal's name (restart, resume, heal, …). `stop()` ends the plan early and heals whatever is still
active, so everything is healed before the final read.
"""

from __future__ import annotations

import contextlib
import heapq
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Protocol

from kafka_chaos.cluster.links import LinkFaults
from kafka_chaos.faults.client_pause import ClientPause
from kafka_chaos.faults.disk_replace import DiskReplaceFault
from kafka_chaos.faults.kinds import (
    HEAL_NAMES,
    LINK_FAULTS,
    NODE_FAULTS,
    NODE_LINK_FAULTS,
    REQUEST_FAULTS,
    CorruptFault,
    DiskFault,
    DiskFull,
    DnsFault,
    Fault,
    LinkFault,
    NodeFault,
    NodeLinkFault,
    PartitionFault,
    PowerLossFault,
    RequestFault,
)
from kafka_chaos.faults.registry import KINDS
from kafka_chaos.faults.schedule import PlannedFault
from kafka_chaos.faults.targets import LiveCluster, TargetError, resolve
from kafka_chaos.interrupts import join
from kafka_chaos.workloads.clients import starting_clients
from kafka_chaos.workloads.drivers import client_record

if TYPE_CHECKING:  # types only: the nemesis never imports the harness at run time
    from kafka_chaos.harness.testmap import RunContext


FRAME_FAULT = "frame-fault"
"""The history's f of one firing of a request fault (process `harness`: a record of what happened, not a fault)."""

PLAN_GRACE_S = 60.0
"""How long the end of a run waits for a plan that runs late (every fault of a plan starts and heals within the
run's duration when on time)."""


class Recorder(Protocol):
    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int: ...


class Nemesis:
    def __init__(
        self,
        cluster: LiveCluster,
        topic: str,
        plan: list[PlannedFault],
        recorder: Recorder,
        seed: int,
        links: LinkFaults | None = None,
        clock: Callable[[], float] = time.monotonic,
        clients: Mapping[int, list[str]] | None = None,
        client: Mapping[str, Any] | None = None,
    ) -> None:
        """`clients`: process id → its clients' ids (workloads.clients), for request faults' `clients`; `client`:
        the run's client (workloads.drivers.client_record; None: the in-process librdkafka), for the faults whose
        effect depends on it."""
        self.cluster, self.topic, self.plan, self.recorder = cluster, topic, plan, recorder
        self.client = client
        self.rng = random.Random(seed)
        self.links = links
        self.clients = clients or {}
        self.clock = clock
        self._stop = threading.Event()
        self._active: dict[int, tuple[Fault, list[int]]] = {}
        self._previous: list[int] = []
        self._thread = threading.Thread(target=self._run, name="nemesis", daemon=True)
        self.errors: list[str] = []
        self.fired: dict[int, list[int]] = {}  # plan index → the node ids its target resolved to

    def resolved_plan(self) -> list[PlannedFault]:
        """The plan with every fired fault's node ids filled in (what scenario.resolved.toml records)."""
        return [replace(p, nodes=tuple(self.fired[i])) if i in self.fired else p for i, p in enumerate(self.plan)]

    def _fault(self, p: PlannedFault) -> Fault:
        info = KINDS.get(p.kind)
        if info is None:
            raise ValueError(f"unknown fault kind {p.kind!r}")
        if info.effect == "power-loss":
            if p.params.get("torn"):  # drawn only when tearing: other plans keep their seed's draws
                return PowerLossFault(self.cluster, torn=p.params["torn"], torn_glob=p.params.get("glob"),
                                      seed=self.rng.randrange(2**31))
            return PowerLossFault(self.cluster)
        if info.effect == "corrupt":
            return CorruptFault(self.cluster, p.params, seed=self.rng.randrange(2**31))
        if info.effect == "disk-replace":
            return DiskReplaceFault(self.cluster, topic=self.topic, rejoin=p.params.get("rejoin", "isr"))
        if info.effect == "disk-full":
            return DiskFull(self.cluster, float(p.params.get("free_mb", 0.0)))
        if info.family == "disk":
            return DiskFault(p.kind, self.cluster, p.params)
        if info.family == "client-process":
            return ClientPause(p.params, stop=self._stop)
        if info.family == "client-name":
            if not hasattr(self.cluster, "break_host_name"):
                raise RuntimeError(f"{p.kind} needs a cluster kafka-chaos starts (cluster.host_names)")
            return DnsFault(self.cluster, str(p.params.get("mode", "unresolvable")), self.client)
        if info.family == "process":
            return NodeFault(p.kind, self.cluster)
        if info.family == "network":
            return PartitionFault(self.cluster, p.shape, self.rng)
        if info.family == "request":
            toxiproxy = getattr(self.cluster, "toxiproxy", None)
            return RequestFault(p.kind, self.links, getattr(self.cluster, "link_proxies", None), p.params,
                                client_logs=toxiproxy.logs if toxiproxy is not None else None,
                                clients_of=self.clients)
        if info.family == "client-link":
            if self.links is None:
                raise RuntimeError(f"{p.kind} needs Toxiproxy (cluster.toxiproxy = true)")
            return LinkFault(p.kind, self.links, p.params)
        proxies = getattr(self.cluster, "link_proxies", None)
        if proxies is None:
            raise RuntimeError(f"{p.kind} needs proxies on the links between nodes (cluster.link_proxies = true)")
        return NodeLinkFault(p.kind, proxies, p.params)

    def start(self) -> None:
        self._t0 = self.clock()
        self._thread.start()

    def _run(self) -> None:
        events: list[tuple[float, int, str]] = [(p.at_s, i, "start") for i, p in enumerate(self.plan)]
        heapq.heapify(events)
        while events and not self._stop.is_set():
            at, i, what = heapq.heappop(events)
            if self._stop.wait(max(0.0, at - (self.clock() - self._t0))):
                break
            if what == "start":
                if self._start(i):
                    heapq.heappush(events, (self.plan[i].heal_at_s, i, "heal"))
            else:
                self._heal(i)

    def _start(self, i: int) -> bool:
        p = self.plan[i]
        self.recorder.record("nemesis", "invoke", p.kind, {"target": p.target, "shape": p.shape}
                             if KINDS[p.kind].family == "network" else {"target": p.target})
        try:
            on_client_links = p.kind in LINK_FAULTS or (p.kind in REQUEST_FAULTS and "links" not in p.params)
            brokers_only = (p.kind in NODE_FAULTS or on_client_links or KINDS[p.kind].brokers_only
                            or (p.kind in (*NODE_LINK_FAULTS, *REQUEST_FAULTS)
                                and p.params.get("links") == "replication"))
            # a client fault touches no node
            nodes = [] if KINDS[p.kind].family == "client-process" else self._resolve_live(p, brokers_only)
            self.fired[i] = nodes
            fault = self._fault(p)
            value = fault.start(nodes)
            self._previous = nodes
        except Exception as err:
            self.errors.append(f"{p.kind}: {err}")
            self.recorder.record("nemesis", "info", p.kind, {"target": p.target, "nodes": []},
                                 error=[type(err).__name__, str(err)])
            # a fault that failed half way may still have done something: heal it with the others
            self._active[i] = (self._fault(p), [])
            return True
        self._active[i] = (fault, nodes)
        self.recorder.record("nemesis", "info", p.kind, value)
        return True

    def _resolve_live(self, p: PlannedFault, brokers_only: bool, patience_s: float = 15.0) -> list[int]:
        """Resolve the target; `leader`/`follower` are re-read until they name running nodes, because the
        metadata keeps naming a dead leader until the controller fences it (broker session timeout)."""
        deadline = self.clock() + patience_s
        while True:
            nodes = resolve(p.target, self.cluster, self.topic, self.rng, brokers_only=brokers_only,
                            previous=self._previous)
            if p.target not in ("leader", "follower") or all(self.cluster.nodes[n].running() for n in nodes):
                return nodes
            if self.clock() > deadline or self._stop.wait(0.5):
                raise TargetError(f"`{p.target}` named stopped nodes {nodes} for {patience_s:.0f}s")

    def _heal(self, i: int) -> None:
        fault, nodes = self._active.pop(i)
        name = HEAL_NAMES[fault.name]
        self.recorder.record("nemesis", "invoke", name, {"nodes": nodes})
        try:
            value = fault.heal(nodes)
            self.recorder.record("nemesis", "info", name, value)
        except Exception as err:
            self.errors.append(f"{name}: {err}")
            self.recorder.record("nemesis", "info", name, {"nodes": nodes}, error=[type(err).__name__, str(err)])
        # what a request fault did to each frame, as the proxies logged it: read at the heal, when every held
        # frame has been delivered (docs/architecture.md §3)
        for fired in getattr(fault, "fired", []):
            self.recorder.record("harness", "info", FRAME_FAULT, fired)

    def stop(self, wait_for_plan_s: float = 0.0) -> None:
        """End the plan and heal every fault still active (in start order). `wait_for_plan_s`: first let a
        plan that runs behind its times (a slow step delays every later one: the nemesis acts one fault at a
        time) fire what it has left, for at most that long, so a fault the scenario asked for is not dropped
        because the run's duration ran out while an earlier step was slow."""
        if wait_for_plan_s > 0 and self._thread.is_alive():
            self._thread.join(wait_for_plan_s)
        self._stop.set()
        join(self._thread)  # bounded once interrupted: a fault step stuck on the engine must not hold the exit
        for i in sorted(self._active):
            self._heal(i)


class ScheduledNemesis:
    """The scenario's `[faults]` as a run part (harness.testmap.Nemesis): the plan, fired on time; at the end
    every fault still active is healed and the cluster is brought back to health before the final read."""

    def __init__(self, planned: list[PlannedFault]) -> None:
        self.planned = planned
        self._nemesis: Nemesis | None = None

    def resolved_plan(self) -> list[PlannedFault]:
        """The plan with the node ids each fault hit (the plan as it stands until the run has started)."""
        return self._nemesis.resolved_plan() if self._nemesis is not None else self.planned

    def start(self, ctx: RunContext) -> None:
        links = ctx.cluster.toxiproxy.links if ctx.cluster.toxiproxy else None
        self._nemesis = Nemesis(ctx.cluster, ctx.topic, self.planned, ctx.history, ctx.scenario.seed, links=links,
                                clients=starting_clients(ctx.scenario.workload),
                                client=client_record(ctx.scenario.workload))
        self._nemesis.start()

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        if self._nemesis is not None:
            self._nemesis.stop(wait_for_plan_s=0.0 if interrupted else PLAN_GRACE_S)
        if not interrupted:
            with contextlib.suppress(Exception):  # the final read waits for health itself; it has the deadline
                ctx.cluster.heal_all(timeout_s=90)
