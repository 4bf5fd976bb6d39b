"""The fault-kind registry: the one place a fault kind is defined (docs/architecture.md §5).

In the style of Jepsen's nemesis packages, each kind names its heal (the history's `f` for the end of the
fault), its family (what it acts on), what it needs from the cluster, and the colour the report draws it in.
The nemesis, the scenario validation, the checker's fault windows, the reference model's verdicts and the
report all read this table; none of them spells a kind out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

FaultKind = Literal["kill", "power-loss", "disk-full", "stop", "pause", "partition", "latency", "bandwidth", "timeout",
                    "reset_peer", "link-down", "link-latency", "link-bandwidth", "link-timeout", "link-reset",
                    "link-slicer", "link-cut", "link-flap", "request-delay", "response-delay", "request-hold",
                    "request-drop", "response-drop", "request-duplicate", "slow-disk", "disk-error", "corrupt",
                    "disk-replace", "dns-fail", "client-pause"]
Family = Literal["process", "network", "client-link", "node-link", "request", "operation", "disk", "client-name",
                 "client-process"]
"""`disk`: the node's disk misbehaves while the node runs (cluster.volatile_disk's faults); the node is not taken
down by the fault itself, though Kafka may stop a broker whose only log directory fails.
`client-name`: what clients resolve a broker's name to (cluster.host_names); nothing between nodes changes.
`client-process`: the workload's own client processes (out-of-process clients, workloads.drivers); no node is
touched."""
Need = Literal["toxiproxy", "volatile-disks", "sized-disks", "link-proxies", "host-names"]
NodeEffect = Literal["crash", "power-loss", "disk-full", "stop", "freeze", "corrupt", "disk-replace"]
"""What a process kind does to its node: SIGKILL; SIGKILL and the unsynced writes lost; writes failing; a clean
shutdown; frozen (the same JVM resumes, acting on a stale view); SIGKILL and bits flipped in fsynced data; SIGKILL
and the whole data directory emptied (a new disk, formatted again)."""
ProxyAction = Literal["latency", "bandwidth", "timeout", "reset_peer", "slicer", "disable", "flap"]
"""What a link kind does to a Toxiproxy proxy: add that toxic, disable the proxy, or disable and enable it in turn."""
FrameAction = Literal["delay", "hold", "drop", "duplicate"]
"""What a request kind does to each matching Kafka frame (Toxiproxy's `kafka` toxic, images/toxiproxy/kafkatoxic)."""


@dataclass(frozen=True)
class FaultKindInfo:
    name: str
    heal: str  # the history name of its heal
    family: Family
    description: str
    colour: str  # fill of its band in the report
    needs: frozenset[Need] = frozenset()
    restarts: bool = False
    """Process kinds: the heal starts the node again (a JVM restart, not a resume)."""
    blocks: bool = False
    """Link kinds: the link carries nothing useful while it is on (cut, black-holed, reset, throttled to a
    trickle), rather than only slower; the availability model owes no progress across it."""
    silences: bool = False
    """Link kinds: no data crosses the link for the whole window (a flap or a reset lets fetches through
    between): a follower cut so cannot have caught up while it lasted."""
    effect: NodeEffect | None = None
    """Process kinds: what it does to the node."""
    proxy: ProxyAction | None = None
    """Link kinds: what it does to each link's proxy."""
    frames: Literal["request", "response"] | None = None
    """Request kinds: whether it acts on the requests of the chosen APIs or on their responses."""
    action: FrameAction | None = None
    """Request kinds: what it does to each matching frame."""

    @property
    def takes_down(self) -> bool:
        """The node stops serving (killed, stopped, paused, out of disk): the model counts it down."""
        return self.family == "process"

    @property
    def cuts_off(self) -> bool:
        """Nodes lose their peers (a partition, links between nodes): the model counts them cut off."""
        return self.family in ("network", "node-link")

    @property
    def brokers_only(self) -> bool:
        """Client links and client names exist only for brokers; process faults pick among every node."""
        return self.family in ("client-link", "client-name")


def _link(name: str, description: str, colour: str, *, blocks: bool, proxy: ProxyAction) -> FaultKindInfo:
    return FaultKindInfo(name, "heal-link", "client-link", description, colour, frozenset({"toxiproxy"}),
                         blocks=blocks, proxy=proxy)


def _node_link(name: str, description: str, colour: str, *, blocks: bool, proxy: ProxyAction,
               silences: bool = False) -> FaultKindInfo:
    return FaultKindInfo(name, "heal-links", "node-link", description, colour, frozenset({"link-proxies"}),
                         blocks=blocks, silences=silences, proxy=proxy)


def _request(name: str, description: str, colour: str, *, action: FrameAction) -> FaultKindInfo:
    """A fault on the frames of chosen Kafka APIs, on client links (no `links`) or links between nodes (`links`):
    what it needs depends on which, so the scenario's validation checks it (harness.scenario)."""
    return FaultKindInfo(name, "heal-requests", "request", description, colour,
                         frames="response" if name.startswith("response-") else "request", action=action)


KINDS: dict[str, FaultKindInfo] = {
    info.name: info
    for info in (
        FaultKindInfo("kill", "restart", "process", "SIGKILL; restarted later on the data it had", "#d62728",
                      restarts=True, effect="crash"),
        # A torn write is an option of power-loss (torn = "page" | "byte"), not a kind of its own: it is a power
        # loss whose last write per file half-reached the disk, and every reader of power losses (the model's
        # verdicts, availability, the fault windows) holds for it unchanged; the history value names what tore.
        FaultKindInfo("power-loss", "power-on", "process",
                      "SIGKILL, then every write not fsynced is lost (volatile disk); with torn = \"page\" or "
                      "\"byte\" the last unsynced write of each file keeps a prefix; started later on what is left",
                      "#4a0d0d", frozenset({"volatile-disks"}), restarts=True, effect="power-loss"),
        FaultKindInfo("disk-full", "disk-freed", "process",
                      "the node's data disk filled until free_mb is left: its writes fail (ENOSPC); freed and the "
                      "node started again later", "#a55194", frozenset({"sized-disks"}), restarts=True,
                      effect="disk-full"),
        FaultKindInfo("stop", "start", "process", "clean shutdown (SIGTERM); started later", "#ff7f0e",
                      restarts=True, effect="stop"),
        FaultKindInfo("pause", "resume", "process", "every process frozen (cgroup freezer); resumed later", "#9467bd",
                      effect="freeze"),
        FaultKindInfo("partition", "heal", "network", "iptables DROP between nodes by a shape; rules flushed later",
                      "#1f77b4"),
        _link("latency", "client link delayed (Toxiproxy latency)", "#bcbd22", blocks=False, proxy="latency"),
        _link("bandwidth", "client link throttled (Toxiproxy bandwidth)", "#17becf", blocks=True, proxy="bandwidth"),
        _link("timeout", "client link black-holed: data dropped, connections hang", "#8c564b", blocks=True,
              proxy="timeout"),
        _link("reset_peer", "client connections reset (TCP RST)", "#e377c2", blocks=True, proxy="reset_peer"),
        _link("link-down", "client proxy disabled: connections refused", "#7f7f7f", blocks=True, proxy="disable"),
        # links between nodes (faults.node_links selects which; cluster.node_links proxies each one)
        _node_link("link-latency", "links between nodes delayed (latency ± jitter)", "#8c6d31", blocks=False,
                   proxy="latency"),
        _node_link("link-bandwidth", "links between nodes throttled", "#6b6ecf", blocks=False, proxy="bandwidth"),
        _node_link("link-timeout", "links between nodes black-holed: data dropped, connections hang", "#843c39",
                   blocks=True, silences=True, proxy="timeout"),
        _node_link("link-reset", "connections between nodes reset (TCP RST)", "#d6616b", blocks=True,
                   proxy="reset_peer"),
        _node_link("link-slicer", "data between nodes cut into small delayed slices", "#9c9ede", blocks=False,
                   proxy="slicer"),
        _node_link("link-cut", "links between nodes down: connections closed and refused", "#393b79", blocks=True,
                   silences=True, proxy="disable"),
        _node_link("link-flap", "links between nodes down and up every period_ms", "#637939", blocks=True,
                   proxy="flap"),
        # one kind of Kafka request (or its response) on client links or links between nodes (faults.kinds)
        _request("request-delay", "requests of the chosen APIs each held latency_ms (later ones wait behind)",
                 "#e7ba52", action="delay"),
        _request("response-delay", "responses to the chosen APIs each held latency_ms (later ones wait behind)",
                 "#e7cb94", action="delay"),
        _request("request-hold", "the first `count` requests of the chosen APIs held until hold_ms, the client's "
                 "next connection, the release_after_count-th frame of the release_after APIs on the proxy's other "
                 "connections (delivered ahead of it) or the heal, then delivered, even when their client closed the "
                 "connection", "#ad494a", action="hold"),
        _request("request-drop", "requests of the chosen APIs removed; the connection stays open", "#7b4173",
                 action="drop"),
        _request("response-drop", "responses to the chosen APIs removed; the connection stays open", "#de9ed7",
                 action="drop"),
        _request("request-duplicate", "requests of the chosen APIs delivered twice", "#ce6dbd", action="duplicate"),
        # the node's volatile disk misbehaving under a running node (cluster.volatile_disk.DiskFaults)
        FaultKindInfo("slow-disk", "slow-disk-heal", "disk",
                      "every fsync of the node's data directory takes delay_ms more; back to normal at the heal",
                      "#e6550d", frozenset({"volatile-disks"})),
        FaultKindInfo("disk-error", "disk-error-heal", "disk",
                      "reads, writes and/or fsyncs (ops) of the node's data directory, or of the paths matching "
                      "glob, fail with EIO (KIP-112: the log directory goes offline; with one directory the broker "
                      "stops); the heal ends the errors and starts the node if it stopped", "#636363",
                      frozenset({"volatile-disks"})),
        FaultKindInfo("corrupt", "corrupt-restart", "process",
                      "SIGKILL, then `bits` bits flipped at random (seeded) offsets in fsynced data of the node's "
                      "newest file of a class (files = segment: inside record batches, index, checkpoint, "
                      "metadata-log); started later on the corrupted data, where Kafka's CRC checks and log "
                      "recovery stand between the flip and a reader", "#5254a3", frozenset({"volatile-disks"}),
                      restarts=True, effect="corrupt"),
        # what clients resolve a broker's name to (cluster.host_names: per-broker names in /etc/hosts)
        FaultKindInfo("dns-fail", "dns-restore", "client-name",
                      "the broker's host name stops resolving for clients (mode = \"unresolvable\") or resolves to an "
                      "address where nothing answers (mode = \"dead-address\"); its mapping restored at the heal",
                      "#31a354", frozenset({"host-names"})),
        FaultKindInfo("disk-replace", "disk-replaced", "process",
                      "SIGKILL, then the node's data directory (its log dirs and, on a controller, the metadata "
                      "log) emptied, as when its disk is replaced; later formatted again with the cluster id as an "
                      "operator would (a dynamic quorum's controller with --no-initial-controllers, then removed "
                      "and added back as a voter: KIP-853) and started with the same node id", "#b5cf6b",
                      frozenset({"volatile-disks"}), restarts=True, effect="disk-replace"),
        # the workload's client processes (workloads.drivers: out-of-process clients, one worker per process)
        FaultKindInfo("client-pause", "client-resume", "client-process",
                      "the client worker(s) of the chosen history processes (clients = [process ids]) frozen with "
                      "SIGSTOP, as a long GC pause or a stopped application; SIGCONT at the heal", "#fdae6b"),
    )
}
assert set(KINDS) == set(get_args(FaultKind)), "FaultKind and KINDS must name the same kinds"

# What an operator does on purpose (faults/operations.py): drawn in a band of their own, ended by `<kind>-done`.
OPERATIONS: dict[str, FaultKindInfo] = {
    info.name: info
    for info in (
        FaultKindInfo("rolling-restart", "rolling-restart-done", "operation",
                      "one broker at a time: shutdown, start, wait until fully replicated", "#2ca02c"),
        FaultKindInfo("rolling-upgrade", "rolling-upgrade-done", "operation",
                      "one node at a time onto a new version's image, then the features raised", "#dbdb8d"),
        FaultKindInfo("preferred-election", "preferred-election-done", "operation",
                      "leadership back to each partition's preferred replica", "#98df8a"),
        FaultKindInfo("reassign", "reassign-done", "operation",
                      "replica sets changed through the Admin API (KIP-455)", "#aec7e8"),
        FaultKindInfo("remove-controller", "remove-controller-done", "operation",
                      "a controller taken out of the KRaft voters (KIP-853); it stays as an observer", "#c5b0d5"),
        FaultKindInfo("add-controller", "add-controller-done", "operation",
                      "a controller added to the KRaft voters (KIP-853)", "#c49c94"),
        FaultKindInfo("add-broker", "add-broker-done", "operation",
                      "a new broker joins the running cluster", "#17becf"),
        FaultKindInfo("decommission-broker", "decommission-broker-done", "operation",
                      "a broker's replicas moved off, then it is shut down and unregistered", "#9edae5"),
    )
}

HEALS: dict[str, frozenset[str]] = {}
for _info in [*KINDS.values(), *OPERATIONS.values()]:
    HEALS[_info.heal] = HEALS.get(_info.heal, frozenset()) | {_info.name}


def kinds_of(family: Family, *, restarts: bool | None = None, blocks: bool | None = None) -> frozenset[str]:
    """The kinds of a family, optionally only those that restart the node / block their link (or do not)."""
    return frozenset(k for k, info in KINDS.items() if info.family == family
                     and restarts in (None, info.restarts) and blocks in (None, info.blocks))


def with_effect(*effects: NodeEffect) -> frozenset[str]:
    """The process kinds that do one of these to their node."""
    return frozenset(k for k, info in KINDS.items() if info.effect in effects)


def taking_down() -> frozenset[str]:
    """Kinds the model counts as nodes down."""
    return frozenset(k for k, info in KINDS.items() if info.takes_down)


def cutting_off() -> frozenset[str]:
    """Kinds the model counts as nodes cut off from their peers."""
    return frozenset(k for k, info in KINDS.items() if info.cuts_off)


def silencing() -> frozenset[str]:
    """Link kinds across which no data passes for their whole window."""
    return frozenset(k for k, info in KINDS.items() if info.silences)


def heal_of(kind: str) -> str:
    """The history name of a kind's heal."""
    return KINDS[kind].heal


def is_heal(f: str) -> bool:
    """Whether a nemesis event ends faults rather than starting one."""
    return f in HEALS


def healed_by(heal: str) -> frozenset[str]:
    """The kinds a heal event ends."""
    return HEALS.get(heal, frozenset())


def is_operation(f: str) -> bool:
    return f in OPERATIONS


def colour(kind: str) -> str:
    info = KINDS.get(kind) or OPERATIONS.get(kind)
    return info.colour if info else "#999999"
