"""What Kafka promises when a node's disk is replaced (disk-replace, docs/architecture.md §5).

The node comes back with the same node id and nothing on disk: no log, no metadata log, no election state, a new
log directory id (KIP-858). The rules, from Kafka's code:

* **A broker's replicas.** The broker registers again with a new broker epoch. Its partitions' leaders take it
  back into the ISR only once its log end has reached the high watermark (``Partition.maybeExpandIsr``), so it
  refetches everything first. Before 3.5.0 an AlterPartition named the ISR by broker id only: one built while
  the old incarnation was in sync and accepted after the broker came back empty re-added it, and a later
  election could make the empty replica leader, losing committed records (KAFKA-14139). KIP-903 (3.5.0,
  KAFKA-14617) sends each ISR member's broker epoch (``newIsrWithEpochs``) and the controller rejects a member
  whose epoch is not its current registration's (``ReplicationControlManager.ineligibleReplicasForIsr``:
  "broker epoch mismatch", ``INELIGIBLE_REPLICA``). From 3.5.0 a replaced broker is one node down to the model.
* **Every replica gone at once.** A disk replaced while the partition's other replicas are down too (or replaced
  themselves) leaves no copy of what it held: a loss is permitted, as for a correlated power loss.
* **A controller** (KIP-853). On a static quorum (``controller.quorum.voters``) the voters are ids only, so the
  empty controller is a voter again at once (``VoterSet.isVoter`` without directory ids checks the id alone); its
  vote is granted to any candidate, whose log is never behind an empty one, so with a second voter lagging it
  can help elect a leader missing committed metadata: the case KIP-853's motivation calls unsafe, and why the
  operations guide asks that a majority hold the committed log before the disk is formatted. With one disk
  replaced and the other voters up, the quorum's majority holds every committed record and nothing is lost. On a
  dynamic quorum (kraft.version 1) the voters are (id, directory id): the new directory id makes it an observer
  that cannot vote until remove-controller and add-controller put it back (``QuorumState.isVoter``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from kafka_chaos import versions
from kafka_chaos.faults.registry import with_effect

DISK_REPLACES = with_effect("disk-replace")
KAFKA_14139 = "KAFKA-14139"
KAFKA_14139_FIXED_IN = "3.5.0"
KAFKA_14139_SHAPES = frozenset({"vanished-read", "follower-kept-in-isr", "follower-rejoined-while-cut"})
"""What else the empty replica's stale re-admission shows besides the loss: the records consumers read before it led
gone, and a replica in the ISR that never caught up."""


@dataclass(frozen=True, slots=True)
class DiskReplaceRule:
    """The answer for a loss in a run with a disk replaced: `defect` set: a known defect of the version."""

    reason: str
    defect: str | None = None
    fixed_in: str | None = None


def loss_rule(kinds: Iterable[str], kafka_version: str | None, rf: int, max_down: int) -> DiskReplaceRule | None:
    """Why a disk replacement may explain a lost or diverging acknowledged record, or None when it cannot (then the
    general rules judge: the replaced node counts as one node down)."""
    if not set(kinds) & DISK_REPLACES:
        return None
    if max_down >= rf:
        return DiskReplaceRule(
            f"a disk was replaced while every replica (RF={rf}) was down or replaced: the last in-sync replica may "
            "be the empty one, and KRaft elects it on return (it stays in the ISR, or with ELR is the last known "
            "leader): nothing else holds the records")
    if kafka_version is not None and not versions.at_least(kafka_version,
                                                           versions.ALTER_PARTITION_BROKER_EPOCH_FROM):
        return DiskReplaceRule(
            f"Kafka {kafka_version}: AlterPartition names ISR members by id only, so a request built while the "
            "replaced broker's old incarnation was in sync can put the empty replica back into the ISR and a later "
            "election can make it leader (KAFKA-14139; KIP-903 adds broker epochs to AlterPartition in 3.5.0)",
            KAFKA_14139, KAFKA_14139_FIXED_IN)
    return None


@dataclass(frozen=True, slots=True)
class ControllerExpectation:
    """What Kafka does with a controller that comes back on an empty disk."""

    quorum: Literal["static", "dynamic"]
    voter_at_once: bool
    """It votes as soon as it starts (static), or only once added back (dynamic)."""
    needs_readd: bool
    reason: str


def controller_expectation(dynamic_quorum: bool) -> ControllerExpectation:
    if dynamic_quorum:
        return ControllerExpectation(
            "dynamic", False, True,
            "KIP-853: the voter set names (id, directory id); formatted with --no-initial-controllers the node has "
            "a new directory id, so it is an observer until remove-controller (old directory id) and "
            "add-controller (refused until it caught up) make it a voter again")
    return ControllerExpectation(
        "static", True, False,
        "controller.quorum.voters names ids only: the empty controller is a voter again at once, with no election "
        "state and no log (KIP-853's motivation: it may vote for a candidate missing committed records); the "
        "operations guide asks that a majority hold the committed log before its disk is formatted")


def readmission_rule(anomaly: str, kinds: Iterable[str], kafka_version: str | None) -> DiskReplaceRule | None:
    """KAFKA-14139's other shapes (`KAFKA_14139_SHAPES`) on a version before KIP-903, in a run with a disk replaced;
    None otherwise (the general rules judge them)."""
    if anomaly not in KAFKA_14139_SHAPES or not set(kinds) & DISK_REPLACES or kafka_version is None:
        return None
    if versions.at_least(kafka_version, versions.ALTER_PARTITION_BROKER_EPOCH_FROM):
        return None
    return DiskReplaceRule(
        f"Kafka {kafka_version}: a stale AlterPartition, built while the replaced broker's old incarnation was in "
        "sync, names it by id only and puts its empty replica back into the ISR (KAFKA-14139; KIP-903 adds broker "
        "epochs in 3.5.0): it sits in the ISR without having fetched, and once elected its empty log removes what "
        "consumers had read", KAFKA_14139, KAFKA_14139_FIXED_IN)
