"""An executable model of Kafka's ISR replication for one partition under KRaft.

The model is a state machine. :class:`Cluster` holds the state; every change is one *event* — a small frozen
dataclass whose ``repr()`` is valid Python, so a failing sequence prints as a program you can replay::

    c = Cluster(TopicConfig(replicas=(1, 2, 3), min_insync=2))
    c.apply(Produce(value=1, acks="1", broker=1))
    c.apply(Kill(broker=1))
    c.apply(Fence(broker=1))          # the controller notices the lost session and elects from the ISR

What is modelled, and where it comes from
-----------------------------------------
* Replica logs: offset → (value, leader epoch), the log end offset (LEO) is the log's length, a per-replica
  high watermark (HW) and a leader-epoch cache (epoch, start offset) as in ``LeaderEpochFileCache``.
* The controller's partition registration: leader, leader epoch, ISR, ELR and last-known ELR, and the set of
  fenced brokers (lost controller session). Changes follow ``PartitionChangeBuilder`` and
  ``ReplicationControlManager.generateLeaderAndIsrUpdates``: election order ISR member → unfenced ELR member
  (ISR empty, ELR on) → the last known leader (ELR on, ISR and ELR empty, leader unfenced) → with unclean
  election on, any unfenced replica. Without ELR the controller never empties the ISR: the last member stays
  in it while the partition is leaderless. With ELR (KIP-966) the ISR may become empty; replicas leaving the
  ISR while it is below ``min.insync.replicas`` enter the ELR, and the leader's HW only advances while
  ``|ISR| >= min.insync.replicas`` ("strict min ISR"); a broker that re-registers after an unclean shutdown is
  struck from ISR and ELR.
* Brokers learn the registration only through :class:`SyncMetadata` (so a leader cut off from the controller
  keeps acting on its stale view — a *zombie*), except for the ISR changes the leader itself asked for
  (``AlterPartition`` answers the leader directly).
* Produce with acks 0/1/all: acks=all is refused with ``NOT_ENOUGH_REPLICAS`` when the leader's ISR is
  below ``min.insync.replicas``; otherwise it completes when the leader's HW passes it (and, as Kafka
  re-checks then, the ISR is still at least ``min.insync.replicas``; else
  ``NOT_ENOUGH_REPLICAS_AFTER_APPEND``).
* Follower fetch: divergence check by leader epoch first (KIP-101/KIP-279/KIP-320: the follower truncates
  to the end offset the leader reports for its latest epoch, repeatedly, before appending), then the leader
  records the follower's fetch offset, may expand the ISR (follower caught up to the HW and to the start of
  the current leader epoch, unfenced, leader reaches the controller), advances HW = min LEO over its ISR,
  and answers with
  the records and its HW (so followers learn the HW one fetch later, and the leader learns a follower's LEO
  one fetch later).
* ISR shrink (:class:`ShrinkIsr`), broker fencing on session loss (:class:`Fence`), re-registration and
  unfencing (:class:`Unfence`), crash (:class:`Kill`, SIGKILL: the log survives in the page cache but the
  shutdown is unclean), controlled shutdown (:class:`Stop`), :class:`Restart`, :class:`Pause` /
  :class:`Resume`, and network partitions between any replicas and the controller (:class:`Cut`,
  :class:`Isolate`, :class:`Heal`). The controller quorum is one node, :data:`CONTROLLER`, that never fails
  (the harness runs dedicated controllers for multi-broker failures).

Not modelled: loss of unflushed data on power failure (the harness's faults never lose the page cache),
retention and log start offsets, reassignment, transactions, client-link (Toxiproxy) faults, one-way
partitions.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Literal, NamedTuple

CONTROLLER = 0
"""Node id of the (always available) controller quorum in link cuts."""

Acks = Literal["0", "1", "all"]
Entry = tuple[int, int]
"""One log record: (value, leader epoch)."""


class InvariantViolation(AssertionError):
    """A state the protocol forbids: the model (or a test driving it) is wrong."""


class EventNotEnabled(ValueError):
    """An event was applied in a state where its precondition does not hold."""


@dataclass(frozen=True, slots=True)
class TopicConfig:
    """The partition's replica assignment and the topic settings that shape replication."""

    replicas: tuple[int, ...] = (1, 2, 3)
    min_insync: int = 2
    unclean: bool = False
    elr: bool = False

    def __post_init__(self) -> None:
        if not self.replicas or len(set(self.replicas)) != len(self.replicas) or CONTROLLER in self.replicas:
            raise ValueError(f"replicas must be distinct non-zero broker ids, got {self.replicas!r}")
        if self.min_insync < 1:
            raise ValueError(f"min_insync must be >= 1, got {self.min_insync}")


# ---------------------------------------------------------------------------------------------- events


@dataclass(frozen=True, slots=True)
class Produce:
    """A client sends ``value`` to ``broker`` (which must believe it leads). ``idempotent`` producers carry
    sequence numbers, so a resend of a value the leader's log already holds is answered with that offset."""

    value: int
    acks: Acks
    broker: int
    idempotent: bool = False


@dataclass(frozen=True, slots=True)
class Fetch:
    """``follower`` fetches from the leader it believes in (truncating first if its log diverged)."""

    follower: int


@dataclass(frozen=True, slots=True)
class ShrinkIsr:
    """The current leader removes ``follower`` from the ISR (AlterPartition): it has not caught up to the
    leader's LEO within ``replica.lag.time.max.ms`` (slow, down, or cut off)."""

    follower: int


@dataclass(frozen=True, slots=True)
class Fence:
    """The controller fences ``broker``: its session expired (down, paused, cut off, or re-registering)."""

    broker: int


@dataclass(frozen=True, slots=True)
class Unfence:
    """``broker`` (re-)registers with the controller and is unfenced; a leaderless partition holds an
    election."""

    broker: int


@dataclass(frozen=True, slots=True)
class SyncMetadata:
    """``broker`` receives the controller's current partition registration."""

    broker: int


@dataclass(frozen=True, slots=True)
class Kill:
    """SIGKILL: the process dies at once; its log survives (page cache) but the shutdown is unclean."""

    broker: int


@dataclass(frozen=True, slots=True)
class PowerLoss:
    """The node loses power: the process dies as with :class:`Kill`, and the log loses what was not fsynced.
    Kafka fsyncs a segment only when it rolls (``log.flush.interval.messages`` is Long.MAX_VALUE), so within
    the model's short logs nothing was: the whole log, its leader-epoch cache and its high watermark are gone."""

    broker: int


@dataclass(frozen=True, slots=True)
class Stop:
    """Clean shutdown: controlled shutdown through the controller (if reachable), then the process exits."""

    broker: int


@dataclass(frozen=True, slots=True)
class Restart:
    """A killed or stopped broker starts again with its log; it must re-register (:class:`Unfence`)."""

    broker: int


@dataclass(frozen=True, slots=True)
class Pause:
    """The process is frozen (cgroup freezer): it neither serves nor heartbeats, and forgets nothing."""

    broker: int


@dataclass(frozen=True, slots=True)
class Resume:
    """A paused broker continues where it stopped, with whatever (possibly stale) view it had."""

    broker: int


@dataclass(frozen=True, slots=True)
class Cut:
    """Drop traffic between nodes ``a`` and ``b`` (either may be :data:`CONTROLLER`)."""

    a: int
    b: int


@dataclass(frozen=True, slots=True)
class Isolate:
    """Cut ``broker`` off from every other broker and from the controller (clients still reach it)."""

    broker: int


@dataclass(frozen=True, slots=True)
class Heal:
    """Repair every network cut."""


@dataclass(frozen=True, slots=True)
class Timeout:
    """The client gives up waiting for the acks=all request carrying ``value`` (outcome unknown: info)."""

    value: int


Event = (
    Produce | Fetch | ShrinkIsr | Fence | Unfence | SyncMetadata | Kill | PowerLoss | Stop | Restart | Pause
    | Resume | Cut | Isolate | Heal | Timeout
)
FAULT_EVENTS = (Kill, PowerLoss, Stop, Restart, Pause, Resume, Cut, Isolate, Heal)
"""Event types a nemesis causes; the others are the protocol's own steps (and the client's)."""


# ----------------------------------------------------------------------------------------------- state


class View(NamedTuple):
    """A broker's copy of the partition registration."""

    leader: int | None
    epoch: int
    isr: tuple[int, ...]


class Outcome(NamedTuple):
    """What the client learned about one send: ``ok`` (offset, None for acks=0), ``fail`` or ``info``."""

    type: Literal["ok", "fail", "info"]
    offset: int | None
    acks: Acks
    error: str | None = None


class Pending(NamedTuple):
    broker: int
    offset: int
    epoch: int


def end_offset_for(epochs: list[tuple[int, int]], leo: int, epoch: int) -> tuple[int | None, int]:
    """The answer to ``OffsetsForLeaderEpoch(epoch)`` from a replica with this epoch cache and LEO."""
    floor: int | None = None
    for e, start in epochs:
        if e > epoch:
            return floor, start if floor is not None else 0
        floor = e
    return floor, leo


@dataclass(slots=True)
class Broker:
    id: int
    process: Literal["up", "down", "paused"] = "up"
    log: list[Entry] = field(default_factory=list)
    epochs: list[tuple[int, int]] = field(default_factory=list)  # leader-epoch cache: (epoch, start offset)
    hw: int = 0
    view: View | None = None
    follower_leo: dict[int, int] = field(default_factory=dict)  # leader side: last fetch offset per follower
    unclean_shutdown: bool = False  # killed, and not yet re-registered
    needs_registration: bool = False  # restarted: its old controller session belongs to a dead incarnation
    first_offset: dict[int, int] = field(default_factory=dict)  # value -> first offset holding it

    @property
    def leo(self) -> int:
        return len(self.log)

    @property
    def serving(self) -> bool:
        return self.process == "up"

    def believes_leader(self) -> bool:
        return self.serving and self.view is not None and self.view.leader == self.id

    def latest_epoch(self) -> int | None:
        return self.epochs[-1][0] if self.epochs else None

    def end_offset_for(self, epoch: int) -> tuple[int | None, int]:
        """``OffsetsForLeaderEpoch`` as answered by this replica (KIP-279): the largest epoch <= ``epoch`` it
        knows and the offset where the next epoch starts (its LEO for its latest epoch)."""
        return end_offset_for(self.epochs, self.leo, epoch)

    def assign_epoch(self, epoch: int, start: int) -> None:
        """``LeaderEpochFileCache.assign``: unless the latest entry already is this epoch (starting no later),
        drop every entry whose epoch or start offset is >= the new one's, then add it."""
        if self.epochs and self.epochs[-1][0] == epoch and self.epochs[-1][1] <= start:
            return
        while self.epochs and (self.epochs[-1][0] >= epoch or self.epochs[-1][1] >= start):
            self.epochs.pop()
        self.epochs.append((epoch, start))

    def append(self, entries: list[Entry]) -> None:
        for entry in entries:
            if not self.epochs or entry[1] != self.epochs[-1][0]:
                self.assign_epoch(entry[1], self.leo)
            self.first_offset.setdefault(entry[0], self.leo)
            self.log.append(entry)

    def truncate(self, offset: int) -> None:
        for value, _epoch in self.log[offset:]:
            if self.first_offset.get(value, -1) >= offset:
                del self.first_offset[value]
        del self.log[offset:]
        self.epochs = [(e, s) for e, s in self.epochs if s < offset]
        self.hw = min(self.hw, offset)

    def clone(self) -> Broker:
        return Broker(
            self.id,
            self.process,
            list(self.log),
            list(self.epochs),
            self.hw,
            self.view,
            dict(self.follower_leo),
            self.unclean_shutdown,
            self.needs_registration,
            dict(self.first_offset),
        )

    def signature(self) -> tuple[object, ...]:
        return (
            self.process,
            tuple(self.log),
            tuple(self.epochs),
            self.hw,
            self.view,
            tuple(sorted(self.follower_leo.items())),
            self.unclean_shutdown,
            self.needs_registration,
        )


@dataclass(slots=True)
class Registration:
    """The controller's record of the partition (``PartitionRegistration``)."""

    leader: int | None
    epoch: int
    isr: tuple[int, ...]
    elr: tuple[int, ...] = ()
    last_known_elr: tuple[int, ...] = ()

    def view(self) -> View:
        return View(self.leader, self.epoch, self.isr)

    def clone(self) -> Registration:
        return Registration(self.leader, self.epoch, self.isr, self.elr, self.last_known_elr)

    def signature(self) -> tuple[object, ...]:
        return (self.leader, self.epoch, self.isr, self.elr, self.last_known_elr)


def _ordered(members: set[int] | frozenset[int], replicas: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(r for r in replicas if r in members)


class Cluster:
    """The whole partition: brokers, controller, network, client outcomes, and the facts the invariants need.

    The initial state is healthy: every replica up, registered and in sync, the first replica leading epoch 0.
    """

    def __init__(self, config: TopicConfig, eager: bool = False) -> None:
        self.config = config
        self.eager = eager
        replicas = config.replicas
        self.reg = Registration(leader=replicas[0], epoch=0, isr=replicas)
        self.brokers: dict[int, Broker] = {b: Broker(b, view=self.reg.view()) for b in replicas}
        self.brokers[replicas[0]].epochs.append((0, 0))
        self.fenced: set[int] = set()
        self.cuts: set[frozenset[int]] = set()
        self.pending: dict[int, Pending] = {}
        self.outcomes: dict[int, Outcome] = {}
        self.committed: dict[int, int] = {}  # offset -> value below the highest HW any leader reached
        self.unclean_elected = False  # a replica outside ISR/ELR/last-known-leader was elected at some point
        self.elections: list[tuple[int, int | None, str]] = []  # (new epoch, leader, kind)
        self.trace: list[Event] = []

    # ------------------------------------------------------------------------------------ copying/keys

    def clone(self) -> Cluster:
        c = Cluster.__new__(Cluster)
        c.config = self.config
        c.eager = self.eager
        c.reg = self.reg.clone()
        c.brokers = {b: br.clone() for b, br in self.brokers.items()}
        c.fenced = set(self.fenced)
        c.cuts = set(self.cuts)
        c.pending = dict(self.pending)
        c.outcomes = dict(self.outcomes)
        c.committed = dict(self.committed)
        c.unclean_elected = self.unclean_elected
        c.elections = list(self.elections)
        c.trace = list(self.trace)
        return c

    def signature(self) -> tuple[object, ...]:
        """Everything that decides the future (and the verdict), hashable — for memoised exploration."""
        return (
            self.reg.signature(),
            tuple(self.brokers[b].signature() for b in self.config.replicas),
            tuple(sorted(self.fenced)),
            tuple(sorted(tuple(sorted(c)) for c in self.cuts)),
            tuple(sorted(self.pending.items())),
            tuple(sorted(self.outcomes.items())),
            self.unclean_elected,
        )

    # ----------------------------------------------------------------------------------------- queries

    def linked(self, a: int, b: int) -> bool:
        return frozenset((a, b)) not in self.cuts

    def reaches_controller(self, b: int) -> bool:
        return self.brokers[b].serving and self.linked(b, CONTROLLER)

    def can_fetch(self, follower: int) -> bool:
        """``follower`` can fetch from the leader its view names, which answers in the same epoch."""
        fb = self.brokers[follower]
        if not fb.serving or fb.view is None or fb.view.leader in (None, follower):
            return False
        leader = fb.view.leader
        lb = self.brokers[leader]
        return (
            self.linked(follower, leader)
            and lb.believes_leader()
            and lb.view is not None
            and lb.view.epoch == fb.view.epoch
        )

    def acked(self) -> dict[int, Outcome]:
        return {v: o for v, o in self.outcomes.items() if o.type == "ok"}

    def leader_broker(self) -> Broker | None:
        """The controller's leader, if any."""
        return None if self.reg.leader is None else self.brokers[self.reg.leader]

    def final_log(self) -> list[Entry]:
        """What a consumer can read from the controller's leader: its log below its HW."""
        lb = self.leader_broker()
        return [] if lb is None else lb.log[: lb.hw]

    def lost_acked(self) -> list[int]:
        """Acknowledged values absent from the controller leader's log (any offset)."""
        lb = self.leader_broker()
        present = set() if lb is None else {v for v, _e in lb.log}
        return sorted(v for v in self.acked() if v not in present)

    # ----------------------------------------------------------------------------------- preconditions

    def enabled(self, ev: Event) -> bool:
        """Whether ``ev``'s precondition holds (and, for protocol steps, whether it would change anything)."""
        cfg = self.config
        match ev:
            case Produce(value=v, broker=b):
                return b in self.brokers and self.brokers[b].believes_leader() and v not in self.pending
            case Fetch(follower=f):
                return f in self.brokers and self.can_fetch(f) and self._fetch_would_change(f)
            case ShrinkIsr(follower=f):
                return self._shrinkable(f)
            case Fence(broker=b):
                if b not in self.brokers or b in self.fenced:
                    return False
                br = self.brokers[b]
                return not br.serving or not self.linked(b, CONTROLLER) or br.needs_registration
            case Unfence(broker=b):
                return b in self.fenced and self.reaches_controller(b)
            case SyncMetadata(broker=b):
                return (
                    b in self.brokers
                    and self.reaches_controller(b)
                    and self.brokers[b].view != self.reg.view()
                )
            case Kill(broker=b) | PowerLoss(broker=b) | Stop(broker=b) | Pause(broker=b):
                return b in self.brokers and self.brokers[b].process == "up"
            case Restart(broker=b):
                return b in self.brokers and self.brokers[b].process == "down"
            case Resume(broker=b):
                return b in self.brokers and self.brokers[b].process == "paused"
            case Cut(a=a, b=b):
                nodes = set(cfg.replicas) | {CONTROLLER}
                return a != b and a in nodes and b in nodes and self.linked(a, b)
            case Isolate(broker=b):
                return b in self.brokers and any(self.linked(b, o) for o in self._others(b))
            case Heal():
                return bool(self.cuts)
            case Timeout(value=v):
                return v in self.pending
        return False  # pragma: no cover

    def enabled_protocol_events(self) -> Iterator[Event]:
        """Every enabled protocol step (not client or fault events), in a fixed order."""
        current = self.reg.view()
        for b in self.config.replicas:
            br = self.brokers[b]
            reachable = br.serving and self.linked(b, CONTROLLER)
            if b not in self.fenced and (not reachable or br.needs_registration):
                yield Fence(b)
            if b in self.fenced and reachable:
                yield Unfence(b)
            if reachable and br.view != current:
                yield SyncMetadata(b)
            if self._shrinkable(b):
                yield ShrinkIsr(b)
            if self.can_fetch(b) and self._fetch_would_change(b):
                yield Fetch(b)

    def _others(self, b: int) -> list[int]:
        return [o for o in (*self.config.replicas, CONTROLLER) if o != b]

    def _shrinkable(self, f: int) -> bool:
        leader = self.reg.leader
        if leader is None or f == leader or f not in self.brokers:
            return False
        lb = self.brokers[leader]
        if not lb.believes_leader() or lb.view is None or lb.view.epoch != self.reg.epoch:
            return False
        # Any follower may be dropped: one that has not fetched up to the leader's LEO within
        # replica.lag.time.max.ms is out of sync, and the scheduler may simply not let it fetch for that long.
        return f in lb.view.isr and self.linked(leader, CONTROLLER)

    def follower_can_reach_leader(self, f: int) -> bool:
        """``f`` is running and connected to the controller's leader (it would keep fetching in sync)."""
        leader = self.reg.leader
        return leader is not None and self.brokers[f].serving and self.linked(f, leader)

    def _fetch_would_change(self, f: int) -> bool:
        fb = self.brokers[f]
        assert fb.view is not None and fb.view.leader is not None
        lb = self.brokers[fb.view.leader]
        point = self._truncation_point(fb, lb)
        if point < fb.leo or (fb.epochs and fb.epochs[-1][1] >= point):
            return True
        if fb.leo < lb.leo:
            return True
        if lb.follower_leo.get(f, -1) != fb.leo:
            return True
        if fb.hw != min(lb.hw, fb.leo):
            return True
        return self._can_expand(lb, f, fb.leo)

    # ------------------------------------------------------------------------------------------ apply

    def apply(self, ev: Event) -> None:
        """Apply one event (raising :class:`EventNotEnabled` if its precondition fails)."""
        if not self.enabled(ev):
            raise EventNotEnabled(repr(ev))
        self.trace.append(ev)
        match ev:
            case Produce():
                self._produce(ev)
            case Fetch(follower=f):
                self._fetch(f)
            case ShrinkIsr(follower=f):
                assert self.reg.leader is not None
                self._alter_isr(self.reg.leader, tuple(r for r in self.reg.isr if r != f))
            case Fence() | Unfence() | SyncMetadata():
                self._apply_protocol(ev)
            case Kill(broker=b):
                br = self.brokers[b]
                br.process, br.unclean_shutdown = "down", True
                self._forget_memory(br)
            case PowerLoss(broker=b):
                br = self.brokers[b]
                br.process, br.unclean_shutdown = "down", True
                self._forget_memory(br)
                br.log, br.epochs, br.hw, br.first_offset = [], [], 0, {}
            case Stop(broker=b):
                self._stop(b)
            case Restart(broker=b):
                br = self.brokers[b]
                br.process, br.needs_registration = "up", True
                br.hw = min(br.hw, br.leo)
            case Pause(broker=b):
                self.brokers[b].process = "paused"
            case Resume(broker=b):
                self.brokers[b].process = "up"
            case Cut(a=a, b=b):
                self.cuts.add(frozenset((a, b)))
            case Isolate(broker=b):
                self.cuts.update(frozenset((b, o)) for o in self._others(b))
            case Heal():
                self.cuts.clear()
            case Timeout(value=v):
                self.pending.pop(v)
                self.outcomes[v] = Outcome("info", None, "all", "REQUEST_TIMED_OUT")
        self._complete_pending()
        if self.eager:
            self._eager_steps()

    def _eager_steps(self) -> None:
        """Control-plane steps that take milliseconds in Kafka, applied at once (and recorded in the trace):
        a restarted broker's re-registration (fencing its old incarnation, then unfencing), unfencing a
        broker that reaches the controller again, and metadata propagation to every reachable broker."""
        changed = True
        while changed:
            changed = False
            for b in self.config.replicas:
                br = self.brokers[b]
                if not br.serving or not self.linked(b, CONTROLLER):
                    continue
                steps: list[Event] = []
                if br.needs_registration and b not in self.fenced:
                    steps.append(Fence(b))
                if br.needs_registration or b in self.fenced:
                    steps.append(Unfence(b))
                for ev in steps:
                    self.trace.append(ev)
                    self._apply_protocol(ev)
                    self._complete_pending()
                    changed = True
                if br.view != self.reg.view():
                    ev = SyncMetadata(b)
                    self.trace.append(ev)
                    self._sync(b)
                    self._complete_pending()
                    changed = True

    def _apply_protocol(self, ev: Event) -> None:
        match ev:
            case Fence(broker=b):
                self.fenced.add(b)
                self._controller_change(remove=b)
            case Unfence(broker=b):
                self._unfence(b)
            case SyncMetadata(broker=b):
                self._sync(b)
            case _:
                raise AssertionError(ev)

    def trace_text(self, limit: int = 80) -> str:
        """The events so far as Python (the last ``limit`` of them, for error messages)."""
        shown = self.trace[-limit:]
        more = f"[... {len(self.trace) - limit} earlier events ...] + " if len(self.trace) > limit else ""
        return more + repr(shown)

    def run(self, events: list[Event]) -> Cluster:
        for ev in events:
            self.apply(ev)
        return self

    # ---------------------------------------------------------------------------------------- produce

    def _produce(self, ev: Produce) -> None:
        lb = self.brokers[ev.broker]
        assert lb.view is not None
        if ev.idempotent and ev.value in lb.first_offset:
            # the producer state (rebuilt from the log) knows this sequence number: no second append
            offset = lb.first_offset[ev.value]
            self._after_append(ev, lb, offset, lb.log[offset][1])
            return
        if ev.acks == "all" and len(lb.view.isr) < self.config.min_insync:
            self.outcomes[ev.value] = Outcome("fail", None, ev.acks, "NOT_ENOUGH_REPLICAS")
            return
        offset = lb.leo
        lb.append([(ev.value, lb.view.epoch)])
        self._advance_hw(lb)
        self._after_append(ev, lb, offset, lb.view.epoch)

    def _after_append(self, ev: Produce, lb: Broker, offset: int, epoch: int) -> None:
        if ev.acks == "0":
            self.outcomes[ev.value] = Outcome("ok", None, ev.acks)
        elif ev.acks == "1":
            self.outcomes[ev.value] = Outcome("ok", offset, ev.acks)
        else:
            self.pending[ev.value] = Pending(lb.id, offset, epoch)

    def _complete_pending(self) -> None:
        for value, p in list(self.pending.items()):
            lb = self.brokers[p.broker]
            if lb.process == "paused":
                continue
            error: str | None = None
            if lb.process == "down":
                error = "REQUEST_TIMED_OUT"
            elif (
                lb.view is None
                or lb.view.leader != lb.id
                or lb.view.epoch != p.epoch
                or lb.leo <= p.offset
                or lb.log[p.offset][0] != value
            ):
                error = "NOT_LEADER_OR_FOLLOWER"
            elif lb.hw > p.offset:
                if len(lb.view.isr) >= self.config.min_insync:
                    del self.pending[value]
                    self.outcomes[value] = Outcome("ok", p.offset, "all")
                    continue
                error = "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
            if error is not None:
                del self.pending[value]
                self.outcomes[value] = Outcome("info", None, "all", error)

    # ------------------------------------------------------------------------------------ replication

    def _advance_hw(self, lb: Broker) -> None:
        view = lb.view
        assert view is not None and view.leader == lb.id
        if self.config.elr and len(view.isr) < self.config.min_insync:
            return  # KIP-966 strict min ISR: the HW waits for min.insync.replicas members
        new_hw = min([lb.leo] + [lb.follower_leo.get(f, -1) for f in view.isr if f != lb.id])
        if new_hw <= lb.hw:
            return
        for offset in range(lb.hw, new_hw):
            value = lb.log[offset][0]
            if self.committed.get(offset, value) != value and not self.unclean_elected:
                raise InvariantViolation(
                    f"offset {offset} committed twice: {self.committed[offset]} then {value}; "
                    f"trace={self.trace_text()}"
                )
            self.committed[offset] = value
        lb.hw = new_hw

    def _truncation_point(self, fb: Broker, lb: Broker) -> int:
        """Where ``fb`` must truncate to agree with ``lb`` (its LEO if it need not), by repeated
        ``OffsetsForLeaderEpoch`` exchanges as in KIP-279 (``AbstractFetcherThread``'s truncation):

        the follower asks for its latest epoch E; the leader answers with the largest epoch E' <= E it has
        and where E' ends in its log. If the follower has E' too, it truncates to the smaller of the two
        end offsets and is done. If not, it truncates to the end of its own largest epoch below E' (which
        also drops its later epochs from its cache) and asks again. Only the epoch cache and the LEO take
        part.
        """
        epochs = list(fb.epochs)
        leo = fb.leo
        while leo > 0 and epochs:
            latest = epochs[-1][0]
            leader_epoch, leader_end = lb.end_offset_for(latest)
            if leader_epoch is None:
                return 0  # the leader has nothing as old as this: the logs diverge from the start
            follower_epoch, follower_end = end_offset_for(epochs, leo, leader_epoch)
            if follower_epoch == leader_epoch:
                return min(leader_end, follower_end, leo)
            # intermediate truncation: to the end of the follower's epochs below leader_epoch
            leo = min(follower_end, leo)
            epochs = [(e, start) for e, start in epochs if start < leo and e <= leader_epoch]
        return leo

    def _fetch(self, f: int) -> None:
        fb = self.brokers[f]
        assert fb.view is not None and fb.view.leader is not None
        lb = self.brokers[fb.view.leader]
        # UnifiedLog.truncateTo always truncates the epoch cache, even at the LEO: a replica that led an
        # epoch without appending anything keeps an empty entry that must not survive becoming a follower
        fb.truncate(self._truncation_point(fb, lb))
        fetch_offset = fb.leo
        lb.follower_leo[f] = fetch_offset
        if self._can_expand(lb, f, fetch_offset):
            assert lb.view is not None
            self._alter_isr(lb.id, _ordered({*lb.view.isr, f}, self.config.replicas))
        self._advance_hw(lb)
        fb.append(lb.log[fetch_offset:])
        fb.hw = min(lb.hw, fb.leo)

    def _can_expand(self, lb: Broker, f: int, follower_leo: int) -> bool:
        view = lb.view
        if view is None or view.leader != lb.id or f in view.isr:
            return False
        epoch_start = next((s for e, s in lb.epochs if e == view.epoch), lb.leo)
        return (
            follower_leo >= lb.hw
            and follower_leo >= epoch_start
            and f not in self.fenced
            and self.linked(lb.id, CONTROLLER)
            and view.epoch == self.reg.epoch
            and self.reg.leader == lb.id
        )

    def _alter_isr(self, leader: int, target_isr: tuple[int, ...]) -> None:
        """An ``AlterPartition`` from the current leader, accepted by the controller; the leader learns the
        result at once (other brokers on their next :class:`SyncMetadata`)."""
        self._change(target_isr=target_isr, acceptable=self._unfenced, unclean_replicas=())
        lb = self.brokers[leader]
        assert lb.view is not None
        lb.view = View(lb.view.leader, lb.view.epoch, self.reg.isr)
        self._advance_hw(lb)

    # ------------------------------------------------------------------------------------- controller

    def _unfenced(self, r: int) -> bool:
        return r not in self.fenced

    def _controller_change(
        self, remove: int | None = None, add: int | None = None, unclean: int | None = None
    ) -> None:
        """``generateLeaderAndIsrUpdates``: drop ``remove``/``unclean`` from the ISR, re-elect if needed."""

        def acceptable(r: int) -> bool:
            return r not in (remove, unclean) and (r == add or r not in self.fenced)

        target = tuple(r for r in self.reg.isr if r not in (remove, unclean))
        unclean_replicas = () if unclean is None else (unclean,)
        self._change(target_isr=target, acceptable=acceptable, unclean_replicas=unclean_replicas)

    def _change(
        self,
        target_isr: tuple[int, ...],
        acceptable: Callable[[int], bool],
        unclean_replicas: tuple[int, ...],
    ) -> None:
        """``PartitionChangeBuilder.build()`` restricted to the fields this model has (the default
        "balanced" recovery, where ``last_known_elr`` holds the last known leader)."""
        cfg, reg = self.config, self.reg
        isr = target_isr
        elr = set(reg.elr)
        if cfg.elr:  # maybePopulateTargetElr
            if len(isr) >= cfg.min_insync:
                elr = set()
            else:
                candidates = elr | set(reg.isr)
                elr = {r for r in candidates if r not in isr and r not in unclean_replicas}
        leader, kind = self._elect(isr, elr, acceptable)
        forced = False  # the election itself set the ISR to the new leader alone
        if leader != reg.leader and leader is not None:
            if leader in elr:
                isr, elr = (leader,), elr - {leader}
            if kind in ("unclean", "last-known-leader"):
                isr, forced = (leader,), True
        if forced or not cfg.elr:  # maybeUpdateRecordElr
            elr = set()
        if not isr and not cfg.elr:
            isr = reg.isr  # without ELR the controller never empties the ISR: the last member stays
        last_known = reg.last_known_elr
        if not cfg.elr:
            last_known = ()
        elif not isr and reg.isr:  # maybeUpdateLastKnownLeader: the partition just became leaderless
            if reg.leader is not None and last_known != (reg.leader,):
                last_known = (reg.leader,)
        elif leader is not None:
            last_known = ()
        epoch = reg.epoch
        if leader != reg.leader:
            epoch += 1
            self.elections.append((epoch, leader, kind))
            if kind == "unclean":
                self.unclean_elected = True
        self.reg = Registration(
            leader=leader,
            epoch=epoch,
            isr=_ordered(set(isr), cfg.replicas),
            elr=_ordered(elr, cfg.replicas),
            last_known_elr=last_known,
        )

    def _elect(
        self, target_isr: tuple[int, ...], elr: set[int], acceptable: Callable[[int], bool]
    ) -> tuple[int | None, str]:
        cfg, reg = self.config, self.reg

        def valid(r: int | None) -> bool:
            if r is None:
                return False
            in_set = r in target_isr or (not target_isr and cfg.elr and r in elr)
            return in_set and acceptable(r)

        if valid(reg.leader):
            return reg.leader, "kept"
        for r in cfg.replicas:
            if valid(r):
                return r, "elr" if r not in target_isr else "isr"
        if cfg.elr and not target_isr and not elr and len(reg.last_known_elr) == 1:
            last = reg.last_known_elr[0]
            if acceptable(last):  # "the last known leader if it is unfenced" (Kafka docs on ELR)
                return last, "last-known-leader"
        if cfg.unclean:
            for r in cfg.replicas:
                if acceptable(r):
                    return r, "unclean"
        return None, "none"

    def _unfence(self, b: int) -> None:
        br = self.brokers[b]
        if self.config.elr and br.unclean_shutdown:
            # handleBrokerUncleanShutdown: struck from ISR and ELR, not an acceptable leader meanwhile
            self._controller_change(unclean=b)
        br.unclean_shutdown = False
        br.needs_registration = False
        self.fenced.discard(b)
        if self.reg.leader is None:  # handleBrokerUnfenced: elections for leaderless partitions
            self._controller_change(add=b)

    def _stop(self, b: int) -> None:
        br = self.brokers[b]
        if self.reaches_controller(b) and b not in self.fenced:
            # controlled shutdown: the controller moves leadership away and drops b from the ISR
            self.fenced.add(b)
            self._controller_change(remove=b)
        br.process = "down"
        br.unclean_shutdown = False
        self._forget_memory(br)

    @staticmethod
    def _forget_memory(br: Broker) -> None:
        br.view = None
        br.follower_leo = {}

    def _sync(self, b: int) -> None:
        br = self.brokers[b]
        new = self.reg.view()
        old = br.view
        br.view = new
        if new.leader == b and (old is None or old.leader != b or old.epoch != new.epoch):
            # makeLeader: new epoch starts at the LEO; followers' positions are unknown until they fetch
            br.assign_epoch(new.epoch, br.leo)
            br.follower_leo = {}
        elif new.leader != b:
            br.follower_leo = {}

    # ------------------------------------------------------------------------------------- invariants

    def check_invariants(self) -> None:
        """Raise :class:`InvariantViolation` if the state breaks a rule from Kafka's replication design."""
        for problem in self.invariant_violations():
            raise InvariantViolation(f"{problem}; trace={self.trace_text()}")

    def invariant_violations(self) -> list[str]:
        cfg, reg = self.config, self.reg
        out: list[str] = []
        replicas = set(cfg.replicas)
        if reg.leader is not None and reg.leader not in reg.isr:
            out.append(f"leader {reg.leader} not in ISR {reg.isr}")
        if not set(reg.isr) <= replicas or not set(reg.elr) <= replicas:
            out.append(f"ISR {reg.isr} / ELR {reg.elr} not within replicas {cfg.replicas}")
        if set(reg.isr) & set(reg.elr):
            out.append(f"ISR {reg.isr} and ELR {reg.elr} overlap")
        if not cfg.elr and (reg.elr or not reg.isr):
            out.append(f"without ELR the ISR is never empty and the ELR stays empty: {reg}")
        if cfg.elr and reg.elr and len(reg.isr) >= cfg.min_insync:
            out.append(f"ELR {reg.elr} non-empty while ISR {reg.isr} meets min.insync.replicas")
        max_epoch = reg.epoch
        for br in self.brokers.values():
            if br.hw > br.leo:
                out.append(f"broker {br.id}: HW {br.hw} > LEO {br.leo}")
            epochs = [e for _v, e in br.log]
            if epochs != sorted(epochs):
                out.append(f"broker {br.id}: log epochs not monotonic {epochs}")
            if any(e > max_epoch for e in epochs) or (br.view is not None and br.view.epoch > max_epoch):
                out.append(f"broker {br.id} knows an epoch above the controller's {max_epoch}")
            cached = [e for e, _s in br.epochs]
            if cached != sorted(set(cached)) or [s for _e, s in br.epochs] != sorted(s for _e, s in br.epochs):
                out.append(f"broker {br.id}: epoch cache not increasing {br.epochs}")
            for offset, (_value, epoch) in enumerate(br.log):
                covering = [e for e, start in br.epochs if start <= offset]
                if not covering or covering[-1] != epoch:
                    out.append(f"broker {br.id}: epoch cache {br.epochs} disagrees with its log {br.log}")
                    break
        epochs_seen = [e for e, _l, _k in self.elections]
        if epochs_seen != sorted(set(epochs_seen)):
            out.append(f"leader epochs did not strictly increase: {epochs_seen}")
        # log matching: same (offset, epoch) on two replicas implies the same prefix
        logs = [br.log for br in self.brokers.values()]
        for i, a in enumerate(logs):
            for b in logs[i + 1 :]:
                for o in range(min(len(a), len(b)) - 1, -1, -1):
                    if a[o][1] == b[o][1]:
                        if a[: o + 1] != b[: o + 1]:
                            out.append(f"logs agree on the epoch at offset {o} but differ before: {a} / {b}")
                        break
        if not self.unclean_elected:
            lb = self.leader_broker()
            if lb is not None:
                for offset, value in self.committed.items():
                    if offset >= lb.leo or lb.log[offset][0] != value:
                        out.append(f"committed {value}@{offset} missing from leader {lb.id}'s log {lb.log}")
                        break
            for value, outcome in self.acked().items():
                at = outcome.offset
                if outcome.acks == "all" and at is not None and self.committed.get(at) != value:
                    out.append(f"acks=all value {value}@{at} acknowledged but not committed")
        return out
