"""Synthetic histories from the model, in docs/architecture.md §3's JSONL format, with the anomalies they contain.

:func:`synthetic_history` runs the model with a seeded random scheduler: producer processes send unique
values (acks, idempotence and retries as configured), the protocol takes its steps in a random order, a
nemesis plays a fault script (faults in the first part of the run, heals after), an assigned consumer polls
committed records now and then, and after every fault is healed and the cluster has settled, a final drain
reads every partition to the end. The result is a list of history events (``index``, ``time``, ``process``,
``type``, ``f``, ``value``, ``error``) exactly as the harness writes them (with ``run-start``, ``topic``,
``assign`` and ``drain-complete`` events), and the anomalies the history contains:

* ``unseen``: acknowledged (``ok``) values no ok poll read. Because the final drain reads every log to the
  end, these are exactly the acknowledged values missing from the model's final logs (asserted).
* ``lost-write``: the subset Jepsen can prove lost — Jepsen's ``lost-write-cases`` rule over the history's
  version orders (offsets from ok polls and from must-have-committed sends with known offsets, positions
  dense over observed offsets): values whose last position is at or below the highest first-position of
  any read value, that no ok poll read, and whose send was ok (or info and read).
* ``duplicate``: values observed at two or more offsets of their key.
* ``inconsistent-offsets``: every value observed at an offset of its key where two or more values were
  observed (list of values, not offsets).
* ``nonmonotonic-send``: both values of every pair of successive non-failed sends of one process to one key
  where the later one does not sit at a later position (Jepsen's rule: a value's position is the last
  position where it is the offset's representative, the smallest value observed there; unknown positions
  make no claim). It appears when a truncated offset is reused by the same producer.
* ``int-poll-skip`` / ``int-nonmonotonic-poll`` / ``poll-skip`` / ``nonmonotonic-poll``: both values of
  every pair of records read in succession (inside one poll / across a process's successive polls of a key)
  whose positions differ by more than one / less than one, by the same rule. The consumer reads its log in
  offset order, so these only appear where ``duplicate`` puts a value's position at its later copy.

Every one of these names is in the returned dict (empty lists meaning none), and they are all the client
anomalies such a history can contain (no transactions are generated).

Mid-run polls only happen with unclean election off: they read below the high watermark, which the model
proves is never lost then, so they add no anomalies of their own (a consumer whose position an unclean
election truncated would reset, and its poll anomalies depend on client policy the model does not have).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.explore import FaultScript, fault_scripts
from kafka_chaos.reference_model.model import (
    CONTROLLER,
    Cluster,
    Cut,
    Event,
    Heal,
    Isolate,
    Kill,
    Pause,
    Produce,
    Restart,
    Resume,
    ShrinkIsr,
    Stop,
    Timeout,
    TopicConfig,
)

__all__ = ["ANOMALY_KEYS", "synthetic_history"]

ANOMALY_KEYS = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "nonmonotonic-send",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "poll-skip",
    "nonmonotonic-poll",
)
DEFAULT_RETRIES = 3  # retries=None (Kafka's "until the delivery timeout") is modelled as this many resends
TIMEOUT_STEPS = 80  # a client gives up on an acks=all request after this many scheduler steps


@dataclass
class _Op:
    process: int
    slot: int
    key: str
    value: int
    attempts: int
    started: int  # scheduler step of the latest attempt
    ambiguous: bool = False  # an earlier attempt may have been written, so a later failure is not definite


class _Writer:
    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.time = 0

    def tick(self, rng: random.Random) -> None:
        self.time += rng.randint(200_000, 3_000_000)

    def emit(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int:
        event: dict[str, Any] = {
            "index": len(self.events),
            "time": self.time,
            "process": process,
            "type": type_,
            "f": f,
            "value": value,
        }
        if error is not None:
            event["error"] = error
        self.events.append(event)
        return len(self.events) - 1


def _script(
    faults: str | FaultScript | Sequence[Event], replicas: tuple[int, ...], rng: random.Random
) -> FaultScript:
    if isinstance(faults, FaultScript):
        return faults
    if isinstance(faults, str):
        return rng.choice(fault_scripts(faults, replicas))
    events = tuple(faults)
    heal: list[Event] = []
    for ev in events:  # heal whatever the listed faults leave behind
        match ev:
            case Kill(broker=b) | Stop(broker=b):
                heal.append(Restart(b))
            case Pause(broker=b):
                heal.append(Resume(b))
            case Cut() | Isolate():
                heal.append(Heal())
    return FaultScript("custom", events, tuple(dict.fromkeys(heal)))


def _topic_name(key: str) -> str:
    return key.rsplit("/", 1)[0] if "/" in key else key


def synthetic_history(
    config: RunConfig | Mapping[str, Any] | None = None,
    faults: str | FaultScript | Sequence[Event] = "leader-down",
    n_values: int = 100,
    seed: int = 0,
    *,
    partitions: int = 1,
    topic: str = "chaos",
    producers: int = 2,
    mid_run_polls: bool = True,
) -> tuple[list[dict[str, Any]], dict[str, list[int]]]:
    """A history of ``n_values`` sends under ``faults`` (a fault set name from
    ``reference_model.explore.FAULT_SETS``, a :class:`FaultScript`, or a list of fault events whose heals
    are added), and the anomalies it contains by name (see the module docstring). Deterministic in
    ``seed``. Keys are ``f"{topic}/{p}"``; partition p's replicas are rotated by p, so leaders differ, and a
    fault on broker b hits every partition's replica on b at once."""
    cfg, _known = RunConfig.coerce(config)
    sim = _Simulation(cfg, faults, n_values, seed, partitions, topic, producers, mid_run_polls)
    sim.start()
    sim.run()
    sim.settle_and_drain()
    return sim.w.events, _expected(sim.w.events, sim.clusters)


class _Simulation:
    """The model cluster per key, the producers' Jepsen processes and one consumer, stepped at random: the
    steps of `synthetic_history`, each a method. The order of random draws is part of the output (a seed
    replays a history), so the methods draw in the order the loop calls them."""

    def __init__(self, cfg: RunConfig, faults: str | FaultScript | Sequence[Event], n_values: int, seed: int,
                 partitions: int, topic: str, producers: int, mid_run_polls: bool) -> None:
        self.cfg, self.n_values, self.seed, self.mid_run_polls = cfg, n_values, seed, mid_run_polls
        self.partitions, self.topic, self.producers = partitions, topic, producers
        self.rng = random.Random(seed)
        replicas = tuple(range(1, cfg.rf + 1))
        self.keys = [f"{topic}/{p}" for p in range(partitions)]
        self.clusters = {
            k: Cluster(
                TopicConfig(
                    replicas=replicas[p % len(replicas):] + replicas[: p % len(replicas)],
                    min_insync=cfg.min_insync,
                    unclean=cfg.unclean,
                    elr=cfg.elr,
                ),
                eager=True,
            )
            for p, k in enumerate(self.keys)
        }
        self.script = _script(faults, replicas, self.rng)
        self.w = _Writer()
        self.consumer = producers
        self.next_process = producers + 1
        self.slots = list(range(producers))  # slot -> current process number
        self.idle = list(range(producers))
        self.ops: dict[int, _Op] = {}
        self.positions = dict.fromkeys(self.keys, 0)
        self.max_attempts = 1 + (DEFAULT_RETRIES if cfg.retries is None else cfg.retries)
        k_faults, k_heal = len(self.script.faults), len(self.script.heal)
        self.due = [int(n_values * (0.2 + 0.35 * i / max(k_faults, 1))) for i in range(k_faults)]
        self.due += [int(n_values * (0.7 + 0.2 * i / max(k_heal, 1))) for i in range(k_heal)]
        self.script_pos = self.sent = self.step = 0

    def start(self) -> None:
        w = self.w
        w.emit("harness", "info", "run-start",
               _scenario(self.cfg, self.seed, self.partitions, self.topic, self.producers))
        w.emit("harness", "info", "topic", {"topic": self.topic, "keys": self.keys})
        w.emit(self.consumer, "invoke", "assign", self.keys)
        w.emit(self.consumer, "ok", "assign", self.keys)

    def run(self) -> None:
        """Until every value is sent and settled and the fault script has played, or the step limit."""
        limit = 200 * self.n_values + 20_000
        while self.step < limit:
            self.step += 1
            self.w.tick(self.rng)
            if self.script_pos < len(self.script.events) and self.sent >= self.due[self.script_pos]:
                _nemesis(self.w, self.clusters, self.script.events[self.script_pos])
                self.script_pos += 1
                continue
            for op in list(self.ops.values()):
                self.resolve(op)
            if self.sent >= self.n_values and self.script_pos == len(self.script.events) and not self.ops:
                break
            self.random_step()

    def random_step(self) -> None:
        """One thing happens: a replication protocol step, a new send, or a consumer poll."""
        rng = self.rng
        r = rng.random()
        if r < 0.55:
            k = rng.choice(self.keys)
            steps = [ev for ev in self.clusters[k].enabled_protocol_events() if _realistic(self.clusters[k], ev)]
            if steps:
                self.clusters[k].apply(rng.choice(steps))
        elif r < 0.85 and self.sent < self.n_values and self.idle:
            slot = self.idle.pop(0)
            self.sent += 1
            op = _Op(self.slots[slot], slot, rng.choice(self.keys), self.sent, 1, self.step)
            self.ops[op.value] = op
            self.w.emit(op.process, "invoke", "send", [["send", op.key, op.value]])
            self.send(op)
            if op.value in self.ops:
                self.resolve(op)
        elif r < 0.9 and self.mid_run_polls and not self.cfg.unclean:
            self.poll(read_all=False)

    def send(self, op: _Op) -> None:
        c = self.clusters[op.key]
        believers = [b for b in c.config.replicas if c.brokers[b].believes_leader()]
        legit = c.reg.leader if c.reg.leader in believers else None
        if not believers:
            c.outcomes.pop(op.value, None)
            error = ["NOT_LEADER_OR_FOLLOWER", "no broker leads the partition"]
            self.finish(op, "info" if op.ambiguous else "fail", None, error)
            return
        target = legit if legit is not None and self.rng.random() < 0.85 else self.rng.choice(believers)
        c.apply(Produce(op.value, self.cfg.acks, target, idempotent=self.cfg.idempotence))
        op.started = self.step

    def finish(self, op: _Op, type_: str, offset: int | None, error: list[str] | None) -> None:
        value = [[("send"), op.key, [offset, op.value]]]
        self.w.emit(op.process, type_, "send", value, error)
        del self.ops[op.value]
        if type_ == "info":  # Jepsen: a process whose op ended unknown never runs again
            self.slots[op.slot] = self.next_process
            self.next_process += 1
        self.idle.append(op.slot)

    def resolve(self, op: _Op) -> None:
        c = self.clusters[op.key]
        if op.value in c.pending:
            if self.step - op.started > TIMEOUT_STEPS:
                c.apply(Timeout(op.value))
            else:
                return
        outcome = c.outcomes.get(op.value)
        if outcome is None:
            return
        if outcome.type == "info" and op.attempts < self.max_attempts and self.cfg.acks != "0":
            op.attempts += 1
            op.ambiguous = True
            self.send(op)
            return
        error = [outcome.error, outcome.error.lower().replace("_", " ")] if outcome.error else None
        type_ = "info" if outcome.type == "fail" and op.ambiguous else outcome.type
        self.finish(op, type_, outcome.offset if type_ == "ok" else None, error)

    def poll(self, read_all: bool) -> None:
        records: dict[str, list[list[int]]] = {}
        for k in self.keys:
            c = self.clusters[k]
            lb = c.leader_broker()
            if lb is None or not lb.believes_leader() or lb.view is None or lb.view.epoch != c.reg.epoch:
                continue
            pos = self.positions[k]
            end = lb.hw if read_all else min(lb.hw, pos + self.rng.randint(1, 20))
            if end > pos:
                records[k] = [[o, lb.log[o][0]] for o in range(pos, end)]
                self.positions[k] = end
        self.w.emit(self.consumer, "invoke", "poll", [["poll"]])
        self.w.tick(self.rng)
        self.w.emit(self.consumer, "ok", "poll", [["poll", records]])

    def settle_and_drain(self) -> None:
        """The end of the run: everything healed, the cluster settled, open requests time out, the drain reads."""
        for c in self.clusters.values():
            _heal_everything(c)
        for op in list(self.ops.values()):
            c = self.clusters[op.key]
            if op.value in c.pending:
                c.apply(Timeout(op.value))
            outcome = c.outcomes.get(op.value)
            self.finish(op, outcome.type if outcome else "info", outcome.offset if outcome else None, None)
        self.w.tick(self.rng)
        self.poll(read_all=True)
        self.w.emit("harness", "info", "drain-complete", True)


def _realistic(c: Cluster, ev: Event) -> bool:
    """Followers that can still fetch stay in the ISR (only faults take replicas out)."""
    return not (isinstance(ev, ShrinkIsr) and c.follower_can_reach_leader(ev.follower))


def _heal_everything(c: Cluster) -> None:
    for b in c.config.replicas:
        for ev in (Restart(b), Resume(b)):
            if c.enabled(ev):
                c.apply(ev)
    if c.enabled(Heal()):
        c.apply(Heal())
    for _ in range(10_000):
        steps = [ev for ev in c.enabled_protocol_events() if _realistic(c, ev)]
        if not steps:
            return
        c.apply(steps[0])
    raise RuntimeError("the cluster did not settle")


_NEMESIS_NAMES = {
    Kill: "kill",
    Stop: "stop",
    Restart: "restart",
    Pause: "pause",
    Resume: "resume",
    Isolate: "partition",
    Cut: "partition",
    Heal: "heal",
}


def _nemesis(w: _Writer, clusters: Mapping[str, Cluster], ev: Event) -> None:
    """Apply a fault to every partition's model and record it as the nemesis does (invoke, then info)."""
    first = next(iter(clusters.values()))
    leader_before = first.reg.leader  # symbolic target "leader" means the first key's leader, as in faults/
    if type(ev) not in _NEMESIS_NAMES:
        raise ValueError(f"synthetic histories do not model {type(ev).__name__} yet; use a fault set of "
                         f"{', '.join(t.__name__ for t in _NEMESIS_NAMES)}")
    f = _NEMESIS_NAMES[type(ev)]
    if isinstance(ev, Restart) and not first.brokers[ev.broker].unclean_shutdown:
        f = "start"  # the heal of a clean stop
    applied = False
    for c in clusters.values():
        if c.enabled(ev):
            c.apply(ev)
            applied = True
    if not applied:
        return
    match ev:
        case Kill(broker=b) | Stop(broker=b) | Pause(broker=b) | Isolate(broker=b):
            target: Any = "leader" if b == leader_before else [b]
            invoke: dict[str, Any] = {"target": target}
            info: dict[str, Any] = {"nodes": [b]}
            if isinstance(ev, Isolate):
                others = [o for o in first.config.replicas if o != b]
                invoke["shape"] = info["shape"] = "isolate"
                info["grudge"] = {str(b): sorted([*others, CONTROLLER])}
        case Restart(broker=b) | Resume(broker=b):
            invoke = info = {"nodes": [b]}
        case Cut(a=a, b=b):
            invoke = {"target": [a, b], "shape": "bridge"}
            info = {"nodes": [a, b], "shape": "bridge", "grudge": {str(a): [b]}}
        case _:
            invoke, info = {"nodes": []}, {"nodes": sorted(first.config.replicas)}
    w.emit("nemesis", "invoke", f, invoke)
    w.emit("nemesis", "info", f, info)


def _scenario(cfg: RunConfig, seed: int, partitions: int, topic: str, producers: int) -> dict[str, Any]:
    workload: dict[str, Any] = {
        "producers": producers,
        "consumers": 1,
        "consumer_mode": "assign",
        "acks": cfg.acks,
        "idempotence": cfg.idempotence,
    }
    if cfg.retries is not None:
        workload["retries"] = cfg.retries
    cluster: dict[str, Any] = {"nodes": cfg.rf, "elr": cfg.elr}
    if cfg.kafka_version is not None:
        cluster["kafka_version"] = cfg.kafka_version
    return {
        "name": "synthetic",
        "description": "generated by reference_model.synthetic",
        "seed": seed,
        "cluster": cluster,
        "topic": {
            "name": topic,
            "partitions": partitions,
            "replication_factor": cfg.rf,
            "min_insync_replicas": cfg.min_insync,
            "unclean_leader_election": cfg.unclean,
        },
        "workload": workload,
    }


def _expected(events: Iterable[dict[str, Any]], clusters: Mapping[str, Cluster]) -> dict[str, list[int]]:
    observed: dict[str, dict[int, set[int]]] = {}  # key -> offset -> values
    read: set[int] = set()
    ok: set[int] = set()
    info: set[int] = set()
    key_of: dict[int, str] = {}
    ok_offsets: list[tuple[str, int, int]] = []
    for e in events:
        if e["f"] == "send" and e["type"] in ("ok", "info"):
            _, key, (offset, value) = e["value"][0]
            key_of[value] = key
            (ok if e["type"] == "ok" else info).add(value)
            if e["type"] == "ok" and offset is not None:
                ok_offsets.append((key, offset, value))
        elif e["f"] == "poll" and e["type"] == "ok":
            for key, records in e["value"][0][1].items():
                for offset, value in records:
                    observed.setdefault(key, {}).setdefault(offset, set()).add(value)
                    read.add(value)
                    key_of[value] = key
    for key, offset, value in ok_offsets:
        observed.setdefault(key, {}).setdefault(offset, set()).add(value)
    committed = ok | (info & read)

    lost: list[int] = []
    duplicate: list[int] = []
    inconsistent: set[int] = set()
    for log in observed.values():
        position = {o: i for i, o in enumerate(sorted(log))}
        first: dict[int, int] = {}
        last: dict[int, int] = {}
        for o in sorted(log):
            for v in log[o]:
                first.setdefault(v, position[o])
                last[v] = position[o]
            if len(log[o]) > 1:
                inconsistent |= log[o]
        bound = max((first[v] for v in first if v in read), default=-1)
        lost += [v for v in last if last[v] <= bound and v not in read and v in committed]
        offsets_of: dict[int, set[int]] = {}
        for o, vs in log.items():
            for v in vs:
                offsets_of.setdefault(v, set()).add(o)
        duplicate += [v for v, os in offsets_of.items() if len(os) > 1]
    by_value = _representatives(observed)
    unseen = sorted(v for v in ok if v not in read)
    truth = sorted(v for c in clusters.values() for v in c.lost_acked())
    if unseen != truth:
        raise AssertionError(f"unseen {unseen} differ from the model's lost acknowledged values {truth}")
    return {
        "lost-write": sorted(lost),
        "unseen": unseen,
        "duplicate": sorted(duplicate),
        "inconsistent-offsets": sorted(inconsistent),
        "nonmonotonic-send": _nonmonotonic_sends(events, by_value),
        **_poll_orders(events, by_value),
    }


def _representatives(observed: Mapping[str, dict[int, set[int]]]) -> dict[int, int]:
    """Jepsen's ``:by-value``: the last position at which a value is its offset's representative (the
    smallest value observed there); values never chosen have no position."""
    by_value: dict[int, int] = {}
    for log in observed.values():
        for i, o in enumerate(sorted(log)):
            by_value[min(log[o])] = i
    return by_value


def _delta(by_value: Mapping[int, int], v1: int, v2: int) -> int:
    return by_value[v2] - by_value[v1] if v1 in by_value and v2 in by_value else 1


def _nonmonotonic_sends(events: Iterable[dict[str, Any]], by_value: Mapping[int, int]) -> list[int]:
    invoked: dict[Any, tuple[int, str, int]] = {}  # process -> (op index, key, value) of its open send
    done: list[tuple[str, str, int, int]] = []  # (process, key, op index, value) of non-failed sends
    for e in events:
        if e["f"] != "send":
            continue
        if e["type"] == "invoke":
            _, key, value = e["value"][0]
            invoked[e["process"]] = (e["index"], key, value)
        elif e["process"] in invoked:
            op, key, value = invoked.pop(e["process"])
            if e["type"] != "fail":
                done.append((str(e["process"]), key, op, value))
    done.sort()
    found: set[int] = set()
    for (p1, k1, _o1, v1), (p2, k2, _o2, v2) in itertools.pairwise(done):
        if p1 == p2 and k1 == k2 and _delta(by_value, v1, v2) < 1:
            found |= {v1, v2}
    return sorted(found)


def _poll_orders(events: Iterable[dict[str, Any]], by_value: Mapping[int, int]) -> dict[str, list[int]]:
    """Jepsen's poll checks: inside one poll (``int-…``) and between a process's successive polls of a
    key, a position delta above one is a skip and below one goes backwards."""
    found: dict[str, set[int]] = {
        name: set() for name in ("int-poll-skip", "int-nonmonotonic-poll", "poll-skip", "nonmonotonic-poll")
    }
    groups: list[tuple[str, str, int, list[int]]] = []  # (process, key, op index, values in read order)
    for e in events:
        if e["f"] == "poll" and e["type"] == "ok":
            for key, records in e["value"][0][1].items():
                if records:
                    groups.append((str(e["process"]), key, e["index"], [v for _o, v in records]))
    for _p, _k, _op, values in groups:
        for v1, v2 in itertools.pairwise(values):
            d = _delta(by_value, v1, v2)
            if d != 1:
                found["int-poll-skip" if d > 1 else "int-nonmonotonic-poll"] |= {v1, v2}
    groups.sort(key=lambda g: (g[0], g[1], g[2]))
    for (p1, k1, _o1, vs1), (p2, k2, _o2, vs2) in itertools.pairwise(groups):
        if p1 == p2 and k1 == k2:
            d = _delta(by_value, vs1[-1], vs2[0])
            if d != 1:
                found["poll-skip" if d > 1 else "nonmonotonic-poll"] |= {vs1[-1], vs2[0]}
    return {name: sorted(vs) for name, vs in found.items()}
