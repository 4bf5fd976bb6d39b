"""Verdicts: did Kafka, configured as this run was, promise that this anomaly instance could not happen?

The checker calls :func:`judge` once per anomaly instance with the run's configuration and a summary of the
faults it saw. The answer is ``violation`` (a documented guarantee was broken) or ``permitted``, with a
one-sentence reason that names the rule. Where the question is about data — can an acknowledged write be
lost, can offsets diverge, can a consumer-visible record vanish, can a send be written twice — the answer
comes from the model (:func:`reference_model.matrix.predict`, :func:`reference_model.explore.
duplicates_possible`); only the rules that are pure client or transaction semantics are stated directly.

How faults map onto the model's fault sets (``reference_model.explore.FAULT_SETS``), relative to the
partition's replication factor RF:

* most nodes simultaneously down (killed, stopped, paused) or cut off by a partition >= RF → ``all-isr-down``;
  >= 2 → ``two-down``; 1 → ``leader-down`` / ``follower-down`` / ``one-down`` (when it is unknown which);
* distinct nodes ever down >= RF (rolling failures can exhaust an ISR that had not yet re-grown) → also
  ``all-isr-down``;
* a network partition → ``leader-isolated`` (or ``follower-isolated`` when the leader is known untouched);
  a pause → also ``leader-paused`` (the resumed leader acts on a stale view);
* client-link faults only → ``none`` (they delay clients, not replication).

When the run's state samples do not tell whether an unclean election happened, the model lets healthy
followers fall out of the ISR for being slow (``lagging=True``), as Kafka permits; that matters only with
unclean election on. The model explores at most three replicas: its rules are the same for every replica,
and whether the faults could exhaust the ISR is already decided by the fault-set choice above.
"""

from __future__ import annotations

import dataclasses
import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from kafka_chaos.faults.registry import cutting_off, kinds_of, taking_down, with_effect
from kafka_chaos.faults.windows import NemesisEvent, faults_from_history
from kafka_chaos.reference_model.client_defects import client_defect
from kafka_chaos.reference_model.client_faults import CLIENT_FAULT_KINDS
from kafka_chaos.reference_model.client_faults import rule_for as client_rule_for
from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.disk_faults import DISK_FAULT_KINDS, DiskFaultRule, power_loss_rule
from kafka_chaos.reference_model.disk_faults import rule_for as disk_rule_for
from kafka_chaos.reference_model.disk_replace import loss_rule, readmission_rule
from kafka_chaos.reference_model.dns_faults import NAME_FAULT_KINDS
from kafka_chaos.reference_model.dns_faults import rule_for as name_rule_for
from kafka_chaos.reference_model.explore import duplicates_possible
from kafka_chaos.reference_model.matrix import DurabilityPrediction, predict
from kafka_chaos.reference_model.request_faults import (
    LATE_REQUEST_KINDS,
    REQUEST_FAULT_KINDS,
    RequestFaultRule,
    rule_for,
)

__all__ = ["GARBAGE_READ", "GROUP_POSITION_MOVES", "FaultSummary", "RunConfig", "Verdict", "judge",
           "unclean_election_observed"]

PROCESS_FAULTS = taking_down()
LINK_FAULTS = kinds_of("client-link")
# Faults between nodes: a partition, or links between nodes cut or slowed (faults.node_links). For the model
# both isolate nodes from their peers (a slowed follower may leave the ISR as an isolated one does).
NETWORK_FAULTS = cutting_off()
CRASHES = with_effect("crash")
STOPS = with_effect("stop")
FREEZES = with_effect("freeze")
POWER_LOSSES = with_effect("power-loss")
MODEL_MAX_RF = 3


@dataclass(frozen=True, slots=True)
class Verdict:
    """``violation``: a documented promise was broken. ``permitted``: the configuration allows it.
    ``known-defect``: it breaks a promise, but the version in use has a known bug (``defect``, fixed in
    ``fixed_in``; None while unfixed) that makes exactly this shape; reported under the bug's name, apart from
    violations. The same shape at or past the fix is a regression, judged a violation."""

    verdict: Literal["violation", "permitted", "known-defect"]
    reason: str
    defect: str | None = None
    fixed_in: str | None = None


def _permitted(reason: str) -> Verdict:
    return Verdict("permitted", reason)


def _violation(reason: str) -> Verdict:
    return Verdict("violation", reason)


def _known_defect(defect: str, fixed_in: str | None, reason: str) -> Verdict:
    return Verdict("known-defect", reason, defect=defect, fixed_in=fixed_in)


# -------------------------------------------------------------------------------------------------- faults


@dataclass(frozen=True, slots=True)
class FaultSummary:
    """Which faults a run saw, reduced to what the verdicts need. Safe defaults: nothing happened."""

    kinds: frozenset[str] = frozenset()
    """Every fault kind that took effect (``kill``, ``pause``, ``partition``, ``latency``…)."""
    max_down: int = 0
    """Most nodes down at once (killed, stopped or paused)."""
    max_affected: int = 0
    """Most nodes down or cut off by a partition at once."""
    distinct_down: int = 0
    """Distinct nodes that were down or cut off at some point."""
    leader_affected: bool | None = False
    """Whether a partition leader was among the faulted nodes: True, False, or None for unknown."""
    unclean_election: bool | None = None
    """Whether an unclean election was observed (state samples): True, False, or None for unknown."""
    nodes: frozenset[int] = field(default_factory=frozenset)
    max_power_lost: int = 0
    """Most nodes without power at once (power-loss: their unsynced writes gone)."""
    requests: frozenset[tuple[str, str]] = frozenset()
    """Per-request faults seen: (kind, API name), e.g. ("request-hold", "EndTxn")."""
    names: frozenset[tuple[str, str | None]] = frozenset()
    """Broker names broken for clients (dns-fail): (mode, the librdkafka the clients ran, None if unrecorded)."""
    clients: frozenset[tuple[str, str | None, str | None]] = frozenset()
    """Client faults seen (client-pause): (kind, the client, its version), None where unrecorded."""
    disks: frozenset[tuple[str, str]] = frozenset()
    """Disk faults seen: (kind, detail), the detail being a power loss's torn mode or a corruption's file class
    ("" for none), e.g. ("power-loss", "page"), ("corrupt", "segment"), ("slow-disk", "")."""

    @property
    def crashed(self) -> bool:
        return bool(self.kinds & CRASHES)

    @property
    def stopped(self) -> bool:
        return bool(self.kinds & STOPS)

    @property
    def paused(self) -> bool:
        return bool(self.kinds & FREEZES)

    @property
    def partitioned(self) -> bool:
        return bool(self.kinds & NETWORK_FAULTS)

    @property
    def link_faults(self) -> bool:
        return bool(self.kinds & LINK_FAULTS)

    @property
    def replication_faults(self) -> bool:
        """Any fault that can disturb replication (process or network faults between nodes)."""
        return bool(self.kinds & (PROCESS_FAULTS | NETWORK_FAULTS))

    @classmethod
    def from_events(cls, events: Iterable[Mapping[str, Any]]) -> FaultSummary:
        """From history rows (only ``process == "nemesis"`` ones are read), paired into fault windows as the
        checker pairs them (faults.windows). A symbolic target ``leader`` or ``all`` (from the invoke's value)
        marks the leader as affected."""
        return cls.from_windows(faults_from_history(NemesisEvent.from_rows(events)).windows)

    @classmethod
    def from_windows(cls, windows: Iterable[Any]) -> FaultSummary:
        """From fault windows (``faults.windows.FaultWindow``: ``f``, ``nodes``, ``start``, ``end``,
        ``value``), as the checker hands them over."""
        marks: list[tuple[int, int, Any]] = []
        for i, w in enumerate(windows):
            marks.append((int(w.start), 1, (i, w)))
            if w.end is not None:
                marks.append((int(w.end), 0, (i, w)))
        marks.sort(key=lambda m: (m[0], m[1]))  # heals before faults at the same instant
        tracker = _Tracker()
        requests: set[tuple[str, str]] = set()
        names: set[tuple[str, str | None]] = set()
        disks: set[tuple[str, str]] = set()
        clients: set[tuple[str, str | None, str | None]] = set()
        for _t, is_start, (i, w) in marks:
            value = w.value if isinstance(w.value, Mapping) else {}
            nodes = tuple(int(n) for n in (w.nodes or ()))
            if is_start:
                tracker.apply(str(w.f), nodes, value.get("target"), window=i)
                if str(w.f) in REQUEST_FAULT_KINDS:
                    requests |= {(str(w.f), str(api)) for api in value.get("api") or ()}
                if str(w.f) in NAME_FAULT_KINDS:
                    lib = value.get("librdkafka")
                    names.add((str(value.get("mode", "unresolvable")), None if lib is None else str(lib)))
                if str(w.f) in CLIENT_FAULT_KINDS:
                    client, version = value.get("client"), value.get("version")
                    clients.add((str(w.f), None if client is None else str(client),
                                 None if version is None else str(version)))
                if str(w.f) in DISK_FAULT_KINDS:
                    disks.add((str(w.f), str(value.get("torn") or value.get("files") or "")))
            else:
                tracker.end_window(i)
        return dataclasses.replace(tracker.summary(), requests=frozenset(requests), names=frozenset(names),
                                   disks=frozenset(disks), clients=frozenset(clients))

    @classmethod
    def coerce(cls, faults: Any) -> FaultSummary:
        """Accept this class, None, a list of history events, or anything with ``windows``."""
        if isinstance(faults, FaultSummary):
            return faults
        if faults is None:
            return cls()
        windows = getattr(faults, "windows", None)
        if windows is not None:
            return cls.from_windows(windows)
        if isinstance(faults, Mapping) and isinstance(faults.get("windows"), list):
            return cls.from_windows(_DictWindow.wrap(w) for w in faults["windows"])
        if isinstance(faults, Iterable):
            return cls.from_events(e for e in faults if isinstance(e, Mapping))
        raise TypeError(f"cannot read a fault summary from {type(faults).__name__}")

    def with_state_samples(self, samples: Iterable[Mapping[str, Any]]) -> FaultSummary:
        """A copy whose ``unclean_election`` says what the observer's state samples show."""
        return dataclasses.replace(self, unclean_election=unclean_election_observed(samples))


@dataclass
class _DictWindow:
    f: str
    nodes: tuple[int, ...]
    start: int
    end: int | None
    value: Any

    @classmethod
    def wrap(cls, d: Mapping[str, Any]) -> _DictWindow:
        return cls(str(d.get("f")), tuple(d.get("nodes") or ()), int(d.get("start") or 0), d.get("end"),
                   d.get("value"))


class _Tracker:
    """Replays fault windows opening and closing, keeping the maxima FaultSummary reports."""

    def __init__(self) -> None:
        self.kinds: set[str] = set()
        self.down: dict[str, set[int]] = {k: set() for k in PROCESS_FAULTS}
        self.cut: set[int] = set()
        self.windows: dict[int, tuple[str, tuple[int, ...]]] = {}
        self.ever: set[int] = set()
        self.max_down = self.max_affected = self.max_power_lost = 0
        self.leader: bool | None = False
        self.unknown_extent = False  # a fault whose nodes were not recorded

    def apply(self, f: str, nodes: tuple[int, ...], target: Any, window: int) -> None:
        self.kinds.add(f)
        if f in PROCESS_FAULTS or f in NETWORK_FAULTS:
            if not nodes:
                self.unknown_extent = True
            (self.down[f] if f in PROCESS_FAULTS else self.cut).update(nodes)
            self.ever.update(nodes)
            if target in ("leader", "all"):
                self.leader = True
            elif self.leader is False:
                self.leader = None  # some node was hit; whether it led a given partition is unknown
            self.windows[window] = (f, nodes)
        self._measure()

    def end_window(self, window: int) -> None:
        f, nodes = self.windows.pop(window, ("", ()))
        if f in PROCESS_FAULTS:
            self.down[f] -= set(nodes)
        elif f in NETWORK_FAULTS:
            still = {n for g, ns in self.windows.values() if g in NETWORK_FAULTS for n in ns}
            self.cut = {n for n in self.cut if n in still}
        self._measure()

    def _measure(self) -> None:
        down = set().union(*self.down.values())
        self.max_down = max(self.max_down, len(down))
        self.max_affected = max(self.max_affected, len(down | self.cut))
        self.max_power_lost = max(self.max_power_lost, len(set().union(*(self.down[k] for k in POWER_LOSSES))))

    def summary(self) -> FaultSummary:
        big = 10**6 if self.unknown_extent else 0  # unknown extent: assume it could reach every node
        return FaultSummary(
            kinds=frozenset(self.kinds),
            max_down=max(self.max_down, 1 if self.unknown_extent and self.kinds & PROCESS_FAULTS else 0),
            max_affected=max(self.max_affected, big),
            distinct_down=max(len(self.ever), big),
            leader_affected=None if self.unknown_extent and self.leader is False else self.leader,
            nodes=frozenset(self.ever),
            max_power_lost=max(self.max_power_lost, big if self.kinds & POWER_LOSSES else 0),
        )


def unclean_election_observed(samples: Iterable[Mapping[str, Any]]) -> bool | None:
    """From state samples: True if some key's leader epoch went up by exactly one to a leader that the
    previous sample showed outside ISR ∪ ELR ∪ last-known ELR (an unclean election); False if every epoch
    change was seen step by step and each new leader came from that set; None if the samples cannot tell
    (missed epochs, missing fields)."""
    by_key: dict[str, list[Mapping[str, Any]]] = {}
    for s in samples:
        if isinstance(s.get("key"), str) and isinstance(s.get("leader_epoch"), int):
            by_key.setdefault(s["key"], []).append(s)
    if not by_key:
        return None
    certain = True
    for rows in by_key.values():
        rows.sort(key=lambda s: (s.get("leader_epoch", 0), s.get("time") or 0))
        for prev, cur in itertools.pairwise(rows):
            if cur["leader_epoch"] == prev["leader_epoch"]:
                continue
            leader = cur.get("leader")
            if leader is None or leader < 0:
                continue
            if cur["leader_epoch"] != prev["leader_epoch"] + 1 or prev.get("isr") is None:
                certain = False
                continue
            eligible = set(prev.get("isr") or ()) | set(prev.get("elr") or ()) | set(
                prev.get("last_known_elr") or ()
            )
            if leader not in eligible:
                return True
    return False if certain else None


# ------------------------------------------------------------------------------------------------ rules


def _fault_sets(faults: FaultSummary, rf: int) -> list[str]:
    """The model's fault sets that cover what the run saw, cheapest to explore first."""
    sets: list[str] = []
    if not faults.replication_faults:
        return ["none"]
    leader = faults.leader_affected
    count = max(faults.max_affected, faults.max_down)
    if count <= 1:
        sets.append("leader-down" if leader is True else "follower-down" if leader is False else "one-down")
    if faults.partitioned:
        sets.append("follower-isolated" if leader is False else "leader-isolated")
    if faults.paused and leader is not False:
        sets.append("leader-paused")
    if 2 <= count < rf:
        sets.append("two-down")
    if count >= rf or faults.distinct_down >= rf:
        sets.append("all-isr-down")
    return list(dict.fromkeys(sets))


def _describe(faults: FaultSummary) -> str:
    if not faults.replication_faults:
        return "no broker or network fault"
    kinds = "/".join(sorted(faults.kinds & (PROCESS_FAULTS | NETWORK_FAULTS)))
    n = faults.max_affected
    plural = "s" if n != 1 else ""
    extent = "nodes whose count was not recorded" if n >= 10**6 else f"at most {n} node{plural}"
    who = {True: "the leader among them", False: "no leader among them", None: "possibly a leader"}
    return f"{kinds} of {extent} at a time, {who[faults.leader_affected]}"


@dataclass(frozen=True, slots=True)
class _Loss:
    """The model's answer to "could an acknowledged write be lost here?", with the prediction behind it."""

    possible: bool
    clean: bool  # possible without an unclean election
    prediction: DurabilityPrediction | None
    fault_set: str | None


def _loss(cfg: RunConfig, faults: FaultSummary) -> _Loss:
    rf = max(1, min(cfg.rf, MODEL_MAX_RF))
    # min.insync.replicas above RF makes every acks=all write fail; otherwise scale it into the model's RF
    min_insync = rf + 1 if cfg.min_insync > cfg.rf else min(cfg.min_insync, rf)
    lagging = cfg.unclean and faults.unclean_election is not False
    first: _Loss | None = None
    for fault_set in _fault_sets(faults, cfg.rf):
        if fault_set == "two-down" and rf < 2:
            fault_set = "all-isr-down"
        p = predict(cfg.acks, min_insync, rf, cfg.unclean, fault_set, elr=cfg.elr, lagging=lagging)
        found = _Loss(p.loss_possible, p.clean_loss_possible, p, fault_set)
        if p.clean_loss_possible:
            return found
        if p.loss_possible and first is None:
            first = found
    return first or _Loss(False, False, None, None)


def _power_loss_permits(cfg: RunConfig, faults: FaultSummary) -> str | None:
    """Why a power loss may take committed records under this configuration, or None when it may not
    (reference_model.disk_faults.power_loss_rule: every replica at once, or the last in-sync one, KIP-966)."""
    if not faults.kinds & POWER_LOSSES:
        return None
    rule = power_loss_rule(rf=cfg.rf, max_power_lost=faults.max_power_lost, max_down=faults.max_down, elr=cfg.elr,
                           kafka_version=cfg.kafka_version, flush_every_message=cfg.flush_every_message)
    return rule.rule if rule.permits else None


def _config_note(known: bool) -> str:
    return "" if known else " (configuration unknown: Kafka's defaults assumed)"


def _loss_verdict(what: str, cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    note = _config_note(known)
    if cfg.acks == "0":
        return _permitted(
            f"acks=0: the producer never waits for the broker, so Kafka makes no delivery promise for the "
            f"{what}{note}"
        )
    if faults.unclean_election and cfg.unclean:
        return _permitted(
            "unclean.leader.election.enable=true and an unclean election was observed: a replica outside the "
            f"ISR became leader, so committed data may be lost{note}"
        )
    if faults.unclean_election and not cfg.unclean:
        return _violation(
            "an unclean leader election was observed although unclean.leader.election.enable=false, and the "
            f"{what} followed from it{note}"
        )
    power = _power_loss_permits(cfg, faults)
    if power:
        return _permitted(power + note)
    loss = _loss(cfg, faults)
    if loss.possible and loss.clean and cfg.acks == "1":
        return _permitted(
            f"acks=1: the leader acknowledged before replication; a leader crash or isolation may lose it "
            f"({_describe(faults)}){note}"
        )
    if loss.possible and loss.clean:
        return _permitted(f"{loss.prediction.reason if loss.prediction else 'the model permits it'}{note}")
    if loss.possible:
        return _permitted(
            "unclean.leader.election.enable=true: once the in-sync replicas are gone a stale replica may be "
            f"elected and committed data it lacks is lost ({_describe(faults)}){note}"
        )
    replaced = loss_rule(faults.kinds, cfg.kafka_version, cfg.rf, faults.max_down)
    if replaced is not None:
        if replaced.defect:
            return _known_defect(replaced.defect, replaced.fixed_in, replaced.reason + note)
        return _permitted(replaced.reason + note)
    if not faults.replication_faults:
        return _violation(
            f"no broker or network fault was injected, and Kafka loses no acknowledged write "
            f"(acks={cfg.acks}), so the {what} breaks its guarantee{note}"
        )
    if cfg.acks == "all":
        protection = (
            "only such a replica can lead"
            if not cfg.unclean
            else "with ELR (KIP-966) a replica that left the ISR below min.insync.replicas still leads first"
            if cfg.elr
            else "these faults cannot remove every in-sync replica"
        )
        return _violation(
            f"acks=all with min.insync.replicas={cfg.min_insync} and RF={cfg.rf}: an acknowledged write is "
            f"on every in-sync replica and {protection}, so the {what} is not explained by the faults "
            f"({_describe(faults)}){note}"
        )
    return _violation(
        f"acks={cfg.acks}: the model finds no way for {_describe(faults)} to lose an acknowledged write, so "
        f"the {what} breaks Kafka's guarantee{note}"
    )


LIBRDKAFKA_REUSED_SEQUENCE_DEFECT = "librdkafka: an aborted send's sequence reused"
LIBRDKAFKA_REUSED_SEQUENCE = (
    "librdkafka's abort_transaction purges the messages still queued and moves the partition's sequence base "
    "past them as if never sent (rd_kafka_toppar_purge_queues; a request that timed out counts as not persisted "
    "since v2.3.0, confluentinc/librdkafka#4438), but a timed-out request may have been appended; with transaction "
    "protocol v1 the abort bumps no producer epoch, so the next transaction's first message to that partition "
    "carries the aborted message's epoch and sequence, the leader takes its batch for a retry of the one it has "
    "and answers with that batch's offset (UnifiedLog: a duplicate batch returns the first one's offsets), and "
    "the committed value is never written. A client defect found by kafka-chaos (its client is librdkafka): "
    "Kafka kept its promise to the batches it was sent"
)


def _reused_sequence(i: Mapping[str, Any], what: str, cfg: RunConfig) -> Verdict | None:
    """The loss `checker.anomalies.txn.with_reused_sequences` traced to a sequence reused after an abort: a known
    defect of librdkafka. The Java client bumps its epoch after an abort that follows a timed-out batch (KIP-360:
    TransactionManager's epoch bump on an expired batch), so from it the same shape is judged by the general rules."""
    mark = i.get("reused_sequence")
    first = mark[0] if isinstance(mark, list) and mark else mark
    if not isinstance(first, Mapping) or cfg.client != "librdkafka":
        return None
    return _known_defect(LIBRDKAFKA_REUSED_SEQUENCE_DEFECT, None,
        f"the {what}: value {first.get('value')} was committed by op {first.get('op')} of process "
        f"{first.get('process')} and acknowledged at offset {first.get('offset')}, where the log holds value "
        f"{first.get('aborted_value')}, sent by the same producer's aborted op {first.get('aborted_op')} and "
        f"never acknowledged: {LIBRDKAFKA_REUSED_SEQUENCE}"
    )


def _lost_write(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _reused_sequence(i, "lost write", cfg) or _loss_verdict("lost write", cfg, known, faults)


def _unseen(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _reused_sequence(i, "unseen acknowledged write", cfg) or _loss_verdict(
        "unseen acknowledged write", cfg, known, faults)


def _inconsistent_offsets(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    reused = _reused_sequence(i, "inconsistent offset", cfg)
    if reused is not None:
        return reused
    v = _loss_verdict("inconsistent offset", cfg, known, faults)
    if v.verdict == "permitted" and cfg.acks in ("0", "1") and not faults.unclean_election:
        return _permitted(
            f"acks={cfg.acks}: after a leader failover the new leader truncated records the old one had "
            f"acknowledged without replicating, and wrote other values at those offsets{_config_note(known)}"
        )
    return v


def _duplicate(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    note = _config_note(known)
    if duplicates_possible(cfg.idempotence, cfg.retries):
        return _permitted(
            "idempotence off with retries: a send whose first attempt was appended but not acknowledged is "
            f"retried and written twice{note}"
        )
    send_ms = i.get("send_ms")
    if cfg.idempotence and isinstance(send_ms, int) and send_ms >= cfg.request_timeout_ms:
        # Kafka de-duplicates by producer id, epoch and sequence; a bumped epoch starts a new sequence.
        return _permitted(
            f"enable.idempotence=true, but the send took {send_ms} ms, past request.timeout.ms="
            f"{cfg.request_timeout_ms}: the client gave up on a request the leader may have appended (possibly "
            "persisted); librdkafka retries it with the same sequence, which the leader de-duplicates, unless the "
            "producer epoch was bumped in between (after a sequence error on any partition, e.g. when a killed "
            "leader lost in-flight batches): then the retry carries a new sequence the leader cannot recognise "
            f"(librdkafka INTRODUCTION.md and CHANGELOG v2.3.0, Idempotent Producer){note}"
        )
    if cfg.idempotence:
        return _violation(
            "enable.idempotence=true: the leader de-duplicates retried batches by producer id and sequence "
            f"number, so a value at two offsets breaks Kafka's exactly-once-per-partition guarantee{note}"
        )
    return _violation(f"retries=0: the producer never resends, so no retry put a value at two offsets{note}")


def _nonmonotonic_send(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    note = _config_note(known)
    if not cfg.idempotence and cfg.retries != 0:
        return _permitted(
            "idempotence off with retries: a retried batch can land after a later one (max.in.flight > 1), "
            f"so a later send may sit at an earlier position{note}"
        )
    loss = _loss_verdict("reordered send", cfg, known, faults)
    if loss.verdict == "permitted":
        return _permitted(
            "a leader failover truncated acknowledged records and later sends reused their offsets, so send "
            f"order and log order disagree ({loss.reason})"
        )
    return _violation(
        "enable.idempotence=true keeps one producer's sends to a partition in order, and no permitted "
        f"truncation explains a later send at an earlier position{note}"
    )


GROUP_POSITION_MOVES = _permitted("subscribe-mode consumer: a rebalance may move its position back or forward")
"""A group consumer resumes a partition from the group's committed offset after a rebalance or a restart: behind
what it had read (a re-read, at-least-once), or ahead (another member read the records in between, or records
returned to it, whose position auto offset store had stored, were committed before the history recorded them).
One process's reads cannot tell those from a skip, so the permission stands; a client release whose defect moves
the committed offset (reference_model.client_defects, `group_resume`) is named in its place (:func:`judge`)."""


def _consumer_order(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if i.get("skipped_uncommitted") and i.get("isolation", "read_committed") == "read_committed":
        return _permitted(
            f"a read_committed consumer skips records of transactions that did not commit ({KIP_98}): every "
            "skipped value is one"
        )
    if i.get("skipped_read_in_aborted_txn"):
        return _permitted(
            "the reader read the skipped records itself, in a transaction that then aborted: a consumer's position "
            f"is not moved back by an abort ({KIP_98}, KIP-447: only the offsets sent with the transaction "
            "commit or abort with it), so an application re-reads by seeking to its committed offsets"
        )
    if i.get("subscribe") or i.get("mode") == "subscribe":
        return GROUP_POSITION_MOVES
    offsets = i.get("offsets")
    delta = i.get("delta")
    if (
        isinstance(offsets, list | tuple)
        and len(offsets) == 2
        and all(isinstance(o, int) for o in offsets)
        and isinstance(delta, int)
        and ((delta < 1 and offsets[1] > offsets[0]) or (delta > 1 and offsets[1] == offsets[0] + 1))
    ):
        return _permitted(
            "the consumer read consecutive offsets in order; the version order places a value written twice "
            "(or an offset holding two values) elsewhere, which those anomalies report on their own"
        )
    loss = _loss(cfg, faults)
    if faults.unclean_election or (loss.possible and not loss.clean):
        return _permitted(
            "an unclean leader election can truncate the log below a consumer's position, which then resets "
            f"and re-reads or skips{_config_note(known)}"
        )
    return _violation(
        "an assigned consumer reads the committed log in offset order, and committed records are never "
        f"truncated without an unclean election{_config_note(known)}"
    )


def _vanished_read(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    power = _power_loss_permits(cfg, faults)
    if power:
        return _permitted(f"{power}; a record read below the high watermark went with them{_config_note(known)}")
    loss = _loss(dataclasses.replace(cfg, acks="all"), faults)
    if faults.unclean_election or (cfg.unclean and loss.possible):
        return _permitted(
            "consumers only see records below the high watermark (committed); only an unclean leader "
            f"election may remove them, and unclean election is on{_config_note(known)}"
        )
    return _violation(
        "consumers only see records below the high watermark, which Kafka never removes while unclean "
        f"leader election is off{_config_note(known)}"
    )


# ------------------------------------------------------------------------------ transactions
# Kafka's promises for transactions, each with its source:
# * KIP-98 (Exactly Once Delivery and Transactional Messaging) and the consumer's `isolation.level` docs: a
#   read_committed consumer returns only records of committed transactions (and non-transactional ones), and a
#   transaction's records on every partition become visible together once its commit marker is written
#   (atomic visibility); a read_uncommitted consumer returns every record, aborted transactions' included.
# * KIP-98 fencing: `init_transactions` bumps the producer epoch of the transactional.id; the coordinator
#   aborts the previous epoch's open transaction and brokers refuse the old epoch's writes (PRODUCER_FENCED /
#   INVALID_PRODUCER_EPOCH). A fenced producer's last transaction may still have committed if its EndTxn was
#   already accepted, so its outcome is unknown (`info`), never certainly aborted.
# * KIP-98 / the transaction coordinator: when the coordinator or a partition leader dies, open transactions
#   continue with the new coordinator (the transaction log is replicated) or are aborted after
#   transaction.timeout.ms; a transaction that has not committed is never shown to read_committed readers.
# * No isolation of writes (KIP-98 defines none): open transactions interleave their appends, and a
#   partition orders records by append, not by commit; so ww cycles among concurrent transactions, and ww+wr
#   cycles through an append that preceded a commit, are permitted. What the log does forbid is a cycle whose
#   every step is forced in time (`_cycle_forced`).
KIP_98 = "KIP-98"
KAFKA_17754_DEFECT = "KAFKA-17754"
KAFKA_17754_FIXED_IN = "4.0.0 with transaction version 2 (a client that speaks it; not librdkafka)"
KAFKA_17754 = (
    "KAFKA-17754 (Jepsen, Bufstream 0.1.0): transaction protocol v1 orders nothing across connections, so a request "
    "held back on a slowed client link — an EndTxn, or a Produce — can end or join a later transaction of the same "
    "producer epoch; KIP-890's fix (an epoch bump per transaction: transaction.version=2, Kafka 4.0+) needs a client "
    "that speaks it, and librdkafka, kafka-chaos's client, does not (confluentinc/librdkafka#5423), so the hazard is "
    "the same on every Kafka version here"
)


KAFKA_17754_V2 = (
    "the run's transactions use transaction version 2 (a 4.0+ broker finalizes it on a new cluster and the Java "
    "client from 4.0 speaks it), which bumps the producer epoch with every transaction, so a late request of an "
    "earlier transaction is fenced (KIP-890 part 2)"
)


def _writer_txn(i: Mapping[str, Any]) -> bool:
    return bool(i.get("writer_txn"))


def _g1a(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    isolation = i.get("isolation")
    if _writer_txn(i) and isolation == "read_uncommitted":
        return _permitted(
            f"the reader is read_uncommitted, which returns aborted transactions' records ({KIP_98}; consumer "
            "config isolation.level)"
        )
    if _writer_txn(i) and faults.link_faults and cfg.transaction_v2:
        return _violation(f"a regression of KAFKA-17754: an aborted transaction's record committed under a "
                          f"client-link fault, though {KAFKA_17754_V2}")
    if _writer_txn(i) and faults.link_faults:
        return _known_defect(KAFKA_17754_DEFECT, KAFKA_17754_FIXED_IN,
                             f"an aborted transaction's record committed under a client-link fault: {KAFKA_17754}")
    if _writer_txn(i):
        return _violation(
            f"a read_committed consumer returned a record of an aborted transaction: {KIP_98} promises it only "
            "records of committed transactions"
        )
    return _violation(
        "a send reported as failed (certainly not written) was read by a consumer: either Kafka wrote a "
        f"record it refused, or the client reported an ambiguous error as definite{_config_note(known)}"
    )


REAPPEND = "reappend"
"""An edge's point at a value's second append (checker.anomalies.cycles owns the edge format; the model reads it
and does not import the checker)."""


def _late_produce_copies(faults: FaultSummary) -> bool:
    """Whether a request fault could deliver a copy of a Produce after its send completed (a duplicated, delayed
    or held Produce): then a value's second append may come after its op was acknowledged."""
    return any(kind in LATE_REQUEST_KINDS and api == "Produce" for kind, api in faults.requests)


def _cycle_forced(edges: Any, *, late_copies: bool = False) -> bool:
    """Whether every step of the cycle is forced in time, so no execution of Kafka's log can produce it.

    Each edge orders a point of one transaction before a point of the next: `commit`, `invoke`, or a micro-op
    index (an append for a send, the poll's return for a read). Inside each transaction the cycle arrives at
    one point and leaves from another; the chain of "before"s continues only when the arrival certainly
    precedes the departure: it arrives at the invoke, leaves from the commit, arrives and leaves at the same
    micro-op, or arrives at a poll that returned before the micro-op it leaves from was produced. A chain
    that continues all the way round says a point precedes itself.

    A value's second append (`reappend`) normally happens while its send is still retrying, before the op
    completes; with `late_copies` (a Produce duplicated or held back on the wire) it may land after, so an arrival
    there orders nothing."""
    if not isinstance(edges, list) or not edges:
        return False
    for k, edge in enumerate(edges):
        nxt = edges[(k + 1) % len(edges)]
        arrive, depart = edge.get("to_point"), nxt.get("from_point")
        if late_copies and arrive == REAPPEND:
            return False
        if arrive == "invoke" or depart == "commit":
            continue
        if isinstance(arrive, int) and isinstance(depart, int) and arrive == depart:
            continue  # the same micro-op: one event
        if edge.get("kind") == "wr" and isinstance(arrive, int) and isinstance(depart, int) and arrive < depart:
            continue
        return False
    return True


def _g0(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if not i.get("edges"):  # an instance that does not say how its cycle closes: Jepsen's default policy
        return _not_bad(i, cfg, known, faults)
    return _cycle(i, cfg, known, faults)


def _g1c(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if not i.get("edges"):
        return _violation(f"{KIP_98} promises read_committed consumers see only committed transactions, atomically")
    return _cycle(i, cfg, known, faults)


def _cycle(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if not _cycle_forced(i.get("edges"), late_copies=_late_produce_copies(faults)):
        return _permitted(
            f"no isolation of writes ({KIP_98}): open transactions interleave appends and a partition orders "
            "records by append, not by commit, so this cycle needs no broken promise"
        )
    if faults.unclean_election or cfg.unclean:
        return _permitted("an unclean leader election may truncate a log and reuse its offsets, which can order "
                          "versions against time")
    if faults.link_faults and cfg.transaction_v2:
        return _violation(f"a regression of KAFKA-17754: a transaction torn by a delayed request under a client-link "
                          f"fault, though {KAFKA_17754_V2}")
    if faults.link_faults:
        return _known_defect(KAFKA_17754_DEFECT, KAFKA_17754_FIXED_IN,
                             f"a transaction torn by a delayed request under a client-link fault: {KAFKA_17754}")
    return _violation(
        f"every step of this cycle is forced in time ({KIP_98}: a committed transaction's records precede its "
        "commit marker, and a read_committed reader sees them only after it), so it orders a transaction "
        "before itself"
    )


def _txn(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _violation(
        f"a transaction read its own uncommitted record through its read_committed consumer; {KIP_98} promises "
        "read_committed consumers see only committed transactions"
    )


# ------------------------------------------------------------------------------ end of transactions


def _not_bad(i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _permitted("not an anomaly Kafka rules out: it promises no contiguity or write-write order here")


GARBAGE_READ = "a read returned a value no producer sent: corruption or a foreign writer"


def _garbage_read(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    # Kafka returns only records some producer appended: no configuration or fault permits inventing one.
    return _violation(GARBAGE_READ)


def _leader_outside(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if cfg.unclean:
        return _permitted("unclean.leader.election.enable=true: a replica outside ISR ∪ ELR may be elected")
    return _violation(
        "with unclean.leader.election.enable=false only an ISR member, an ELR member or the last known "
        f"leader may lead{_config_note(known)}"
    )


def _epoch_regression(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _violation("the controller only ever increases a partition's leader epoch")


def _ack_below_min_isr(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    if cfg.acks != "all":
        return _permitted(f"acks={cfg.acks}: min.insync.replicas only gates acks=all writes")
    return _violation(
        f"acks=all: the leader refuses (NOT_ENOUGH_REPLICAS) or fails (…_AFTER_APPEND) a write while its ISR "
        f"is below min.insync.replicas={cfg.min_insync}{_config_note(known)}"
    )


def _follower_kept(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _violation(
        "a follower that has not reached the leader's log end for replica.lag.time.max.ms leaves the ISR "
        "(Partition.maybeShrinkIsr, run every replica.lag.time.max.ms / 2); this one could not fetch at all"
    )


def _follower_rejoined(_i: Mapping[str, Any], cfg: RunConfig, known: bool, faults: FaultSummary) -> Verdict:
    return _violation(
        "a follower rejoins the ISR only once its log end has reached the leader's high watermark "
        "(Partition.maybeExpandIsr); this one could not fetch from the leader"
    )


_RULES = {
    "lost-write": _lost_write,
    "unseen": _unseen,
    "inconsistent-offsets": _inconsistent_offsets,
    "duplicate": _duplicate,
    "garbage-read": _garbage_read,
    "nonmonotonic-send": _nonmonotonic_send,
    "int-nonmonotonic-send": _nonmonotonic_send,
    "poll-skip": _consumer_order,
    "nonmonotonic-poll": _consumer_order,
    "int-poll-skip": _consumer_order,
    "int-nonmonotonic-poll": _consumer_order,
    "vanished-read": _vanished_read,
    "G1a": _g1a,
    "precommitted-read": _txn,
    "G1c": _g1c,
    "G0": _g0,
    "int-send-skip": _not_bad,
    "leader-outside-isr-elr": _leader_outside,
    "leader-epoch-regression": _epoch_regression,
    "ack-below-min-isr": _ack_below_min_isr,
    "follower-kept-in-isr": _follower_kept,
    "follower-rejoined-while-cut": _follower_rejoined,
}


def judge(
    anomaly: str,
    instance: dict[str, Any],
    config: RunConfig | Mapping[str, Any] | None,
    faults: FaultSummary | Any,
) -> Verdict:
    """Whether Kafka, configured as ``config``, permits this anomaly instance given the run's ``faults``.

    ``config`` may also be a resolved scenario dict (``RunConfig.from_scenario``) or None (Kafka's defaults,
    noted in the reason); ``faults`` may also be ``faults.windows.FaultWindows``, a list of
    history events, or None (no faults).
    """
    cfg, known = RunConfig.coerce(config)
    fs = FaultSummary.coerce(faults)
    rule = _RULES.get(anomaly)
    if rule is None:
        return _violation(f"no rule of the reference model permits '{anomaly}'")
    verdict = rule(instance, cfg, known, fs)
    if verdict == GROUP_POSITION_MOVES:
        return _client_defect(anomaly, cfg, fs, instance, group_resume=True) or verdict
    if verdict.verdict == "violation":
        return (_request_fault(anomaly, cfg, fs) or _disk_fault(anomaly, cfg, fs) or _name_fault(anomaly, fs)
                or _client_fault(anomaly, fs) or _client_defect(anomaly, cfg, fs, instance)
                or _readmitted(anomaly, cfg, fs)
                or verdict)
    return verdict


def _request_fault(anomaly: str, cfg: RunConfig, faults: FaultSummary) -> Verdict | None:
    """What the per-request faults the run saw let through of an anomaly the general rules call a violation
    (reference_model.request_faults). What Kafka permits anyway (an aborted record read at read_uncommitted) stays
    permitted."""
    return _first_permitting(anomaly, (
        (f"{kind} on {api}", rule_for(kind, api, kafka_version=cfg.kafka_version, idempotence=cfg.idempotence,
                                      transactional=cfg.transactional,
                                      client_transaction_version=cfg.client_transaction_version,
                                      cluster_transaction_version=cfg.cluster_transaction_version))
        for kind, api in sorted(faults.requests)))


def _disk_fault(anomaly: str, cfg: RunConfig, faults: FaultSummary) -> Verdict | None:
    """What the disk faults the run saw let through of an anomaly the general rules call a violation
    (reference_model.disk_faults). Several power losses at once are the general rules' (_power_loss_permits)."""
    return _first_permitting(anomaly, (
        (f"{kind} ({detail})" if detail else kind, disk_rule_for(kind, detail or None, kafka_version=cfg.kafka_version))
        for kind, detail in sorted(faults.disks)))


def _first_permitting(anomaly: str, rules: Iterable[tuple[str, RequestFaultRule | DiskFaultRule]]) -> Verdict | None:
    """The verdict of the first fault rule that lets ``anomaly`` through, named by where it acted: a known defect
    of the version (or client) when one is the reason, else permitted; None when none does."""
    for where, r in rules:
        if anomaly in r.permits:
            if r.defect:
                return _known_defect(r.defect, r.fixed_in, f"{where}: {r.rule}")
            return _permitted(f"{where}: {r.rule}")
    return None


def _name_fault(anomaly: str, faults: FaultSummary) -> Verdict | None:
    """What the broken broker names the run saw let through of an anomaly the general rules call a violation
    (reference_model.dns_faults, whose rules permit an anomaly only as a client's known defect); None otherwise."""
    return _first_permitting(anomaly, ((f"dns-fail ({mode})", name_rule_for(mode, librdkafka))
                                       for mode, librdkafka in sorted(faults.names, key=str)))


def _client_fault(anomaly: str, faults: FaultSummary) -> Verdict | None:
    """What the frozen client processes the run saw let through of an anomaly the general rules call a violation
    (reference_model.client_faults: per client and version); None otherwise."""
    return _first_permitting(anomaly, ((f"{kind} ({client or 'client'} {version or ''})".replace(" )", ")"),
                                        client_rule_for(kind, client, version))
                                       for kind, client, version in sorted(faults.clients, key=str)))


def _client_defect(anomaly: str, cfg: RunConfig, faults: FaultSummary, instance: Mapping[str, Any], *,
                   group_resume: bool = False) -> Verdict | None:
    """A known defect of the run's client release that explains an anomaly the general rules call a violation, or
    with ``group_resume`` one they permit as a group consumer's move (reference_model.client_defects); None
    otherwise."""
    d = client_defect(anomaly, cfg, leader_changed=faults.leader_affected is not False or faults.link_faults,
                      instance=instance, group_resume=group_resume)
    if d is None:
        return None
    return _known_defect(d.name, d.fixed_in, f"{cfg.client} {cfg.client_version or '(installed)'}: {d.reason}")


def _readmitted(anomaly: str, cfg: RunConfig, faults: FaultSummary) -> Verdict | None:
    """KAFKA-14139's shapes other than the loss, on a version that has it (reference_model.disk_replace)."""
    rule = readmission_rule(anomaly, faults.kinds, cfg.kafka_version)
    return _known_defect(str(rule.defect), rule.fixed_in, rule.reason) if rule else None
