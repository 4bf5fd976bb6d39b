"""A deterministic explorer over the model: which outcomes does the protocol permit under a fault schedule?

Given a topic configuration, the producer's ``acks`` and a :class:`FaultScript` (fault events in order, then
their heals), :func:`explore` enumerates *every* interleaving of

* the producer's sends (``n_values`` of them, in order, to whichever broker currently believes it leads),
* the script's fault and heal events (in order, each at any point),
* the protocol's own steps (fetches, metadata propagation, fencing, unfencing, ISR shrinks),

memoising on the full state, and after the last heal lets the cluster settle and asks whether any
acknowledged value is gone. The search is exhaustive within those bounds, so "no loss" is a proof for the
bounded schedule and "loss" comes with a replayable witness trace.

``lagging`` decides whether a follower that is up and connected may still fall out of the ISR for being
slow (Kafka allows it: ``replica.lag.time.max.ms``). With ``lagging=False`` only the scripted faults take
replicas out of the ISR — the question "what can *these* faults do?".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass, field

from kafka_chaos.reference_model.model import (
    Acks,
    Cluster,
    Event,
    Heal,
    Isolate,
    Kill,
    Pause,
    PowerLoss,
    Produce,
    Restart,
    Resume,
    ShrinkIsr,
    Timeout,
    TopicConfig,
)

__all__ = [
    "FAULT_SETS",
    "MATRIX_FAULT_SETS",
    "POWER_LOSS_FAULT_SETS",
    "Exploration",
    "FaultScript",
    "duplicates_possible",
    "explore",
    "fault_scripts",
    "replay",
    "settle",
    "writes_available",
]


@dataclass(frozen=True, slots=True)
class FaultScript:
    """One concrete fault schedule: ``faults`` happen in order, then ``heal`` brings everything back."""

    name: str
    faults: tuple[Event, ...]
    heal: tuple[Event, ...]

    @property
    def events(self) -> tuple[Event, ...]:
        return self.faults + self.heal


FAULT_SETS: dict[str, str] = {
    "none": "no faults",
    "leader-down": "the leader crashes (SIGKILL) and later restarts",
    "follower-down": "one follower crashes and later restarts",
    "one-down": "any one broker crashes and later restarts",
    "two-down": "two brokers crash, one after the other, and later restart",
    "leader-isolated": "the leader is cut off from the other brokers and the controller, then healed",
    "follower-isolated": "one follower is cut off from the other brokers and the controller, then healed",
    "leader-paused": "the leader's process is frozen, then resumed",
    "all-isr-down": (
        "a follower crashes and falls out of the ISR, then every ISR member crashes, then the stale replica "
        "returns before the others"
    ),
    "one-power-loss": "any one broker loses power (its unsynced log is gone) and later restarts",
    "last-isr-power-loss": (
        "the followers crash one after the other, then the leader (the last in-sync replica) loses power and "
        "returns first (KIP-966's case)"
    ),
    "all-power-loss": "every replica loses power at once, then they return in any order",
}
"""The fault sets the explorer knows, by name."""

MATRIX_FAULT_SETS = ("one-down", "two-down", "leader-isolated", "all-isr-down")
POWER_LOSS_FAULT_SETS = ("one-power-loss", "last-isr-power-loss", "all-power-loss")


def fault_scripts(name: str, replicas: tuple[int, ...]) -> list[FaultScript]:
    """Every concrete :class:`FaultScript` of fault set ``name`` for a partition whose first replica leads."""
    if name not in FAULT_SETS:
        raise ValueError(f"unknown fault set {name!r}; known: {', '.join(FAULT_SETS)}")
    leader, followers = replicas[0], replicas[1:]
    match name:
        case "none":
            return [FaultScript(name, (), ())]
        case "leader-down":
            return [FaultScript(name, (Kill(leader),), (Restart(leader),))]
        case "follower-down":
            return [FaultScript(name, (Kill(f),), (Restart(f),)) for f in followers]
        case "one-down":
            return fault_scripts("leader-down", replicas) + fault_scripts("follower-down", replicas)
        case "two-down":
            return [
                FaultScript(name, (Kill(a), Kill(b)), (Restart(a), Restart(b)))
                for a, b in itertools.permutations(replicas, 2)
            ]
        case "leader-isolated":
            return [FaultScript(name, (Isolate(leader),), (Heal(),))]
        case "follower-isolated":
            return [FaultScript(name, (Isolate(f),), (Heal(),)) for f in followers]
        case "leader-paused":
            return [FaultScript(name, (Pause(leader),), (Resume(leader),))]
        case "one-power-loss":
            return [FaultScript(name, (PowerLoss(r),), (Restart(r),)) for r in replicas]
        case "last-isr-power-loss":
            return [
                FaultScript(name, (*(Kill(f) for f in order), PowerLoss(leader), Restart(leader)),
                            tuple(Restart(f) for f in order))
                for order in itertools.permutations(followers)
            ]
        case "all-power-loss":
            return [
                FaultScript(name, tuple(PowerLoss(r) for r in replicas), tuple(Restart(r) for r in order))
                for order in itertools.permutations(replicas)
            ]
        case "all-isr-down":
            if not followers:
                return [FaultScript(name, (Kill(leader),), (Restart(leader),))]
            scripts = []
            for stale in followers:
                rest = [r for r in replicas if r != stale]
                for order in itertools.permutations(rest):
                    scripts.append(
                        FaultScript(
                            name,
                            (Kill(stale), *(Kill(r) for r in order), Restart(stale)),
                            tuple(Restart(r) for r in order),
                        )
                    )
            return scripts
    raise AssertionError(name)  # pragma: no cover


def _protocol_steps(c: Cluster, lagging: bool) -> Iterator[Event]:
    for ev in c.enabled_protocol_events():
        if isinstance(ev, ShrinkIsr) and not lagging and c.follower_can_reach_leader(ev.follower):
            continue
        yield ev


def settle(c: Cluster, max_steps: int = 1000) -> Cluster:
    """Let time pass with no new faults: sessions expire or resume, metadata propagates, followers fetch
    until caught up, unreachable followers leave the ISR. Deterministic (a fixed order of steps)."""
    for _ in range(max_steps):
        ev = next(_protocol_steps(c, lagging=False), None)
        if ev is None:
            return c
        c.apply(ev)
    raise RuntimeError(f"the cluster did not settle in {max_steps} steps; trace={c.trace_text()}")


def writes_available(config: TopicConfig, acks: Acks, script: FaultScript) -> bool:
    """After the script's faults (not its heal), each followed by the cluster settling, does a send with
    ``acks`` to the controller's leader get acknowledged?"""
    c = settle(Cluster(config, eager=True))
    for ev in script.faults:
        if c.enabled(ev):
            c.apply(ev)
            settle(c)
    leader = c.reg.leader
    if leader is None or not c.brokers[leader].believes_leader():
        return False
    probe = -1
    c.apply(Produce(probe, acks, leader))
    settle(c)
    outcome = c.outcomes.get(probe)
    return outcome is not None and outcome.type == "ok"


@dataclass(slots=True)
class Exploration:
    """What :func:`explore` found."""

    loss_possible: bool = False
    clean_loss_possible: bool = False  # loss without any unclean election
    witness: tuple[Event, ...] | None = None  # a trace that loses an acknowledged value (clean one preferred)
    lost_values: tuple[int, ...] = ()
    states: int = 0
    truncated: bool = False  # the state budget ran out: "no loss" is then not a proof
    outcomes: set[tuple[int, ...]] = field(default_factory=set)  # distinct sets of lost acked values


def explore(
    config: TopicConfig,
    acks: Acks,
    script: FaultScript,
    n_values: int = 1,
    lagging: bool = False,
    max_states: int = 300_000,
    exhaustive: bool = False,
) -> Exploration:
    """Enumerate every interleaving (see the module docstring) and report whether acknowledged data can
    be lost once everything has healed.

    Outcomes are judged at *settled* states: after the last heal, with every value sent (or no leader to
    send to) and no protocol step left but optional ISR shrinks of healthy followers. Every outcome of
    :func:`settle` is such a state, because settling is itself one of the interleavings searched. Unless
    ``exhaustive``, the search stops at the first loss that needs no unclean election (which answers both
    questions :class:`Exploration` asks).
    """
    result = Exploration()
    seen: set[tuple[object, ...]] = set()
    script_events = script.events
    stack: list[tuple[Cluster, int, int]] = [(Cluster(config, eager=True), 0, 1)]
    while stack:
        c, pos, nxt = stack.pop()
        key = (c.signature(), pos, nxt)
        if key in seen:
            continue
        seen.add(key)
        result.states += 1
        if result.states > max_states:
            result.truncated = True
            break
        stack.extend(_successors(c, pos, nxt, acks, script_events, n_values, lagging))
        if _settled(c, pos == len(script_events), nxt > n_values):
            _evaluate(c, result)
            if result.clean_loss_possible and not exhaustive:
                break
    return result


def _successors(
    c: Cluster, pos: int, nxt: int, acks: Acks, script_events: tuple[Event, ...], n_values: int, lagging: bool
) -> Iterator[tuple[Cluster, int, int]]:
    def step(ev: Event, new_pos: int, new_nxt: int) -> tuple[Cluster, int, int]:
        succ = c.clone()
        succ.apply(ev)
        return succ, new_pos, new_nxt

    if nxt <= n_values:
        for b in c.config.replicas:
            ev: Event = Produce(nxt, acks, b)
            if c.enabled(ev):
                yield step(ev, pos, nxt + 1)
    if pos < len(script_events):
        ev = script_events[pos]
        if c.enabled(ev):
            yield step(ev, pos + 1, nxt)
        else:
            yield c.clone(), pos + 1, nxt
    for ev in _protocol_steps(c, lagging):
        yield step(ev, pos, nxt)


def _settled(c: Cluster, healed: bool, all_sent: bool) -> bool:
    if not healed or next(_protocol_steps(c, lagging=False), None) is not None:
        return False
    return all_sent or not any(c.brokers[b].believes_leader() for b in c.config.replicas)


def _evaluate(final: Cluster, result: Exploration) -> None:
    if final.reg.leader is None:
        return  # still offline after every heal: nothing readable, nothing provably lost
    lost = tuple(final.lost_acked())
    if not lost:
        return
    result.outcomes.add(lost)
    clean = not final.unclean_elected
    if not result.loss_possible or (clean and not result.clean_loss_possible):
        result.witness = tuple(final.trace)
        result.lost_values = lost
    result.loss_possible = True
    result.clean_loss_possible = result.clean_loss_possible or clean


def duplicates_possible(idempotent: bool, retries: int | None) -> bool:
    """Can one send be written twice? The model runs the classic case: the leader appends a batch, the
    response is lost and the client times out, then (if ``retries`` allows, None meaning Kafka's default of
    retrying until the delivery timeout) the producer sends the same batch again. An idempotent producer's
    batch carries its producer id and sequence, which the leader's producer state (rebuilt from the log)
    recognises."""
    if retries == 0:
        return False
    c = Cluster(TopicConfig(min_insync=1), eager=True)
    c.apply(Produce(1, "all", 1, idempotent=idempotent))
    c.apply(Timeout(1))
    c.apply(Produce(1, "all", 1, idempotent=idempotent))
    return sum(1 for value, _epoch in c.brokers[1].log if value == 1) > 1


def replay(config: TopicConfig, events: tuple[Event, ...] | list[Event]) -> Cluster:
    """Run ``events`` from the initial state (e.g. a witness trace) and return the final cluster."""
    return Cluster(config).run(list(events))

