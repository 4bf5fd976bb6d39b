"""What Kafka promises when a node's disk loses, tears, corrupts, fails or delays what Kafka wrote to it.

The disk faults (docs/architecture.md §5: `power-loss` with or without `torn`, `corrupt` of a file class,
`disk-error`, `slow-disk`) act on one node's volatile disk. Whether an anomaly a run shows under one breaks a
promise depends on the fault, the file class it hit and the broker's version. This module states those rules, each
with its source in Kafka's code or KIPs; :mod:`reference_model.verdicts` asks it after its general rules, as it asks
:mod:`reference_model.request_faults`.

The rules, by fault:

* **power-loss** — Kafka acknowledges once the in-sync replicas have a record in memory
  (``log.flush.interval.messages`` is Long.MAX_VALUE by default): durability comes from replication. A node that
  lost its unflushed tail recovers it on start (``LogLoader.recoverLog``: after an unclean shutdown every segment
  from the recovery point on is re-read, ``LogSegment.recover`` checks each batch's CRC with
  ``batch.ensureValid()`` and truncates at the first invalid one, later unflushed segments are deleted), then
  fetches the rest from the leader and rejoins the ISR only once caught up (``Partition.maybeExpandIsr``). So one
  power loss among live replicas permits nothing. Every replica at once, or the last in-sync replica while the others
  are down, permits losing acknowledged records: see :func:`power_loss_rule` (KIP-966 for the last ISR member).
* **torn** (a power loss whose last unsynced write per file kept only a prefix) — the torn bytes lie past the last
  fsync, hence past the recovery point (``UnifiedLog.flush`` moves it only after the segment was fsynced), so the
  same CRC check finds the partial batch and recovery truncates there; the indexes of recovered segments are rebuilt
  (``offsetIndex().reset()`` in ``LogSegment.recover``); checkpoints are written to a ``.tmp`` file, fsynced and
  renamed (``CheckpointFile.write``), so a torn write leaves the old one whole. The exception is KAFKA-16541: from
  3.7.0 (KAFKA-15046) the leader-epoch checkpoint was rewritten on truncation without fsync, and a power loss could
  leave it torn, so the replica fails to load its log ("Malformed line in checkpoint file"), its log directory goes
  offline and the broker stops; fixed in 3.8.0. A torn write permits no data anomaly beyond its power loss's.
* **corrupt** (bits flipped in fsynced data, the node killed and started on it), by file class:
  ``segment`` — past the recovery point the CRC check of recovery truncates at the flipped batch and the replica
  re-fetches; below it nothing re-reads the segment at load, the broker serves fetches without checking CRCs, and
  only a reader that checks them (the Java consumer's ``check.crcs=true``; librdkafka's ``check.crcs`` is false by
  default) refuses the batch; followers do check (``UnifiedLog.analyzeAndValidateRecords``: "Record is corrupt") and
  retry (``AbstractFetcherThread``: "Found invalid messages during fetch"). ``index`` — a recovered segment's index is
  rebuilt and ``LogSegment.sanityCheck`` rebuilds one whose shape is wrong (``CorruptIndexException``), but an entry
  of a flushed segment flipped to another plausible position starts reads there: a later position skips records.
  ``checkpoint`` — checkpoints carry no checksum (``CheckpointFile``: a version, a count, one entry per line): an
  unreadable recovery point or log start offset is reset safely (``LogManager.loadLogs``), but a flipped digit that
  still parses is believed, and a wrong high watermark or leader epoch entry misplaces truncation (KIP-101).
  ``metadata-log`` — KRaft readers validate each batch's CRC (``KafkaRaftClient``: "Validate batch CRC") and the
  other voters hold every committed record, so one corrupted node permits no data anomaly.
* **disk-error** — KIP-112: an IOException in a log directory takes it offline (``LogDirFailureChannel``,
  ``ReplicaManager.handleLogDirFailure``) and its partitions' leadership moves to the other in-sync replicas; a
  broker whose metadata log directory or every log directory failed halts (``Exit.halt(1)``). No data anomaly.
* **slow-disk** — appends are not fsynced (the flusher and segment rolls are), so a slower fsync delays
  acknowledgements only where it holds the log lock; a follower that falls behind for ``replica.lag.time.max.ms``
  leaves the ISR (``Partition.maybeShrinkIsr``), which is permitted and loses nothing. No data anomaly.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_chaos import versions
from kafka_chaos.cluster.disk_corruption import FILE_CLASSES

DISK_FAULT_KINDS = frozenset({"power-loss", "corrupt", "disk-error", "slow-disk"})
TORN = frozenset({"page", "byte"})
LOSS_ANOMALIES = frozenset({"lost-write", "unseen", "inconsistent-offsets", "vanished-read"})
SKIP_ANOMALIES = frozenset({"poll-skip", "int-poll-skip"})

RECOVERY = (
    "after an unclean shutdown LogLoader.recoverLog re-reads every segment from the recovery point on, "
    "LogSegment.recover checks each batch's CRC (batch.ensureValid()) and truncates at the first invalid one, and "
    "the replica fetches the rest from the leader before it rejoins the ISR (Partition.maybeExpandIsr)"
)
KAFKA_16541 = (
    "KAFKA-16541: from 3.7.0 (KAFKA-15046, d71d0639d9d) LeaderEpochFileCache.truncateFromStart/End rewrote the "
    "leader-epoch checkpoint without fsync, so a power loss could leave it torn and the replica fails to load its "
    "log (\"Malformed line in checkpoint file\"): its log directory goes offline and the broker stops; fixed in "
    "3.8.0 (7c30eed66c4) by fsyncing it again. The other replicas hold the records: no data anomaly"
)
FSYNCED = (
    "Kafka acknowledges a write once the in-sync replicas have it in memory, not on disk "
    "(log.flush.interval.messages is Long.MAX_VALUE by default: durability comes from replication, and the OS "
    "writes pages back on its own)"
)


@dataclass(frozen=True, slots=True)
class DiskFaultRule:
    """What Kafka promises about one disk fault: the anomalies its code lets through (``permits``), the rule in one
    sentence with its source, and, where a known defect of the version applies, its name and first fixed version."""

    permits: frozenset[str]
    rule: str
    defect: str | None = None
    fixed_in: str | None = None


def leader_epoch_checkpoint_unsynced(kafka_version: str | None) -> bool:
    """Whether this version rewrites the leader-epoch checkpoint without fsync (KAFKA-16541: 3.7.x)."""
    first, fixed = versions.LEADER_EPOCH_CHECKPOINT_UNSYNCED
    return versions.at_least(kafka_version, first) and not versions.at_least(kafka_version, fixed)


def power_loss_rule(*, rf: int, max_power_lost: int, max_down: int, elr: bool, kafka_version: str | None,
                    flush_every_message: bool = False) -> DiskFaultRule:
    """A power loss of ``max_power_lost`` nodes at once, with at most ``max_down`` nodes down at once, on a
    partition of ``rf`` replicas. Three cases, from Kafka's code (4.0.1 and 4.3.1):

    * every replica lost power at once: nothing but the page cache held the tail of the log;
    * the last in-sync replica lost power while the others were down, ELR off (4.0's default): KRaft never empties
      the ISR, so the last member stays in it and leads again on return with what its disk kept (the case KIP-966
      was written for);
    * the same with ELR on (4.1+): KIP-966 drops a replica that shut down uncleanly from the ISR and the ELR
      (``PartitionChangeBuilder.maybePopulateTargetElr``, ``uncleanShutdownReplicas``), but once both are empty the
      controller elects the last known leader as soon as it registers again (``canElectLastKnownLeader``,
      ``useLastKnownLeaderInBalancedRecovery = true``), without asking whether it shut down cleanly.

    One power loss among live replicas takes nothing: the others hold the records and the node re-syncs."""
    if flush_every_message:
        return DiskFaultRule(frozenset(), "flush.messages=1: every append was fsynced before it was acknowledged, "
                             f"so a power loss takes nothing acknowledged; {RECOVERY}")
    if max_power_lost >= rf:
        return DiskFaultRule(LOSS_ANOMALIES, (
            f"every replica (RF={rf}) lost power at once: {FSYNCED}, so records no replica had fsynced are gone "
            "after a correlated power loss"))
    if max_down >= rf:
        if elr:
            return DiskFaultRule(LOSS_ANOMALIES, (
                "a replica lost power while every other replica was down; ELR on: KIP-966 removes a replica that "
                "shut down uncleanly from the ISR and the ELR, but once both are empty the controller elects the "
                "last known leader when it returns (PartitionChangeBuilder.canElectLastKnownLeader, "
                "useLastKnownLeaderInBalancedRecovery = true: KIP-966's balanced recovery), whether or not it lost "
                "unflushed data, and the other replicas truncate to its log"))
        feature = ("eligible.leader.replicas.version=0"
                   if versions.at_least(kafka_version, versions.ELR_FEATURE_FROM) or kafka_version is None
                   else f"Kafka {kafka_version} has no ELR feature; it came in 4.0")
        return DiskFaultRule(LOSS_ANOMALIES, (
            f"the last in-sync replica lost power while every other replica was down; ELR off ({feature}): KRaft "
            "keeps the last member in the ISR, so it leads again on return with what its disk kept and the other "
            "replicas truncate to it: the hole KIP-966 (Eligible Leader Replicas, Motivation) was written to close"))
    return DiskFaultRule(frozenset(), (
        f"a power loss of {max_power_lost} of {rf} replicas while the others ran: {RECOVERY}, so the replicas that "
        "kept power hold every acknowledged record"))


def torn_rule(torn: str, kafka_version: str | None) -> DiskFaultRule:
    """A power loss whose last unsynced write per file kept a prefix (``page``: page-aligned; ``byte``: any)."""
    if torn not in TORN:
        raise ValueError(f"not a torn-write mode: {torn!r} (one of {sorted(TORN)})")
    rule = (
        f"a write torn at power loss ({torn}) lies past the last fsync, so past the recovery point (UnifiedLog.flush "
        f"moves it only after the fsync): {RECOVERY}; recovered segments' indexes are rebuilt (LogSegment.recover: "
        "offsetIndex().reset()) and checkpoints are written to a .tmp file, fsynced and renamed "
        "(CheckpointFile.write), so a torn write leaves the old checkpoint whole; a partial batch never reaches a "
        "reader")
    if leader_epoch_checkpoint_unsynced(kafka_version):
        return DiskFaultRule(frozenset(), f"{rule}; except on this version: {KAFKA_16541}", defect="KAFKA-16541",
                             fixed_in="3.8.0")
    return DiskFaultRule(frozenset(), rule)


def corrupt_rule(file_class: str, *, client_checks_crcs: bool = False) -> DiskFaultRule:
    """Bits flipped at rest in fsynced data of one node's newest file of ``file_class``, the node then killed and
    started on it. ``client_checks_crcs``: the consumers verify batch CRCs (the Java consumer's default; librdkafka,
    kafka-chaos's client, does not by default)."""
    if file_class not in FILE_CLASSES:
        raise ValueError(f"not a file class: {file_class!r} (one of {list(FILE_CLASSES)})")
    if file_class == "segment":
        rule = (
            f"{RECOVERY}; a flip below the checkpointed recovery point is not re-read at load (LogLoader.recoverLog "
            "recovers segments.values(recoveryPointCheckpoint, ...) only), and the broker serves fetches without "
            "checking CRCs: followers check each batch (UnifiedLog.analyzeAndValidateRecords: \"Record is corrupt\") "
            "and retry (AbstractFetcherThread: \"Found invalid messages during fetch\"), consumers only with "
            "check.crcs")
        if client_checks_crcs:
            return DiskFaultRule(frozenset(), f"{rule}, which this client sets: a flipped batch is refused")
        return DiskFaultRule(frozenset({"garbage-read"}), (
            f"{rule}, which librdkafka leaves false by default: a flipped value below the recovery point may reach "
            "a reader of that replica"))
    if file_class == "index":
        return DiskFaultRule(SKIP_ANOMALIES, (
            "a recovered segment's index is rebuilt (LogSegment.recover: offsetIndex().reset()) and "
            "LogSegment.sanityCheck rebuilds one of the wrong shape (CorruptIndexException), but an entry of a "
            "flushed segment flipped to another plausible position is believed: a fetch starts there "
            "(LogSegment.translateOffset scans forward from it), so a later position skips records"))
    if file_class == "checkpoint":
        return DiskFaultRule(LOSS_ANOMALIES, (
            "checkpoints carry no checksum (CheckpointFile: a version, a count, one entry per line): an unreadable "
            "recovery point or log start offset is reset safely (LogManager.loadLogs: \"resetting the recovery "
            "checkpoint to 0\"), but a flipped digit that still parses is believed, and a wrong high watermark or "
            "leader-epoch entry (KIP-101's truncation by leader epoch) can expose uncommitted records or "
            "truncate committed ones"))
    return DiskFaultRule(frozenset(), (
        "KRaft readers validate each metadata batch's CRC (KafkaRaftClient: RecordsBatchReader, \"Validate batch "
        f"CRC\"), {RECOVERY}, and the other voters hold every committed record"))


DISK_ERROR = DiskFaultRule(frozenset(), (
    "KIP-112: an IOException in a log directory takes it offline (LogDirFailureChannel.maybeAddOfflineLogDir, "
    "ReplicaManager.handleLogDirFailure), its partitions' leadership moves to the other in-sync replicas, and a "
    "broker whose metadata log directory or every log directory failed halts (Exit.halt(1): \"Shutdown broker "
    "because ... has failed\"); nothing it acknowledged is only on that disk"))
SLOW_DISK = DiskFaultRule(frozenset(), (
    "appends are not fsynced (log.flush.interval.messages is Long.MAX_VALUE by default; the flusher and segment "
    "rolls are), so a slow fsync delays acknowledgements at most; a follower behind the leader's log end for "
    "replica.lag.time.max.ms leaves the ISR (Partition.maybeShrinkIsr), which is permitted and loses nothing"))


def rule_for(kind: str, detail: str | None = None, *, kafka_version: str | None,
             client_checks_crcs: bool = False) -> DiskFaultRule:
    """The promise Kafka makes about one node's disk fault ``kind`` at ``kafka_version``. ``detail``: the torn mode
    of a power loss (None: whole writes lost), the file class of a corruption. The power loss of one node among live
    replicas; :func:`power_loss_rule` says what several at once permit."""
    if kind not in DISK_FAULT_KINDS:
        raise ValueError(f"not a disk fault kind: {kind!r}")
    if kind == "power-loss":
        if detail:
            return torn_rule(detail, kafka_version)
        return DiskFaultRule(frozenset(), f"one node's power loss: {RECOVERY}")
    if kind == "corrupt":
        return corrupt_rule(detail or "segment", client_checks_crcs=client_checks_crcs)
    return DISK_ERROR if kind == "disk-error" else SLOW_DISK
