"""What Kafka promises when one kind of request is delayed, held, dropped or duplicated on a link.

A per-request fault (docs/architecture.md §5: `request-delay`, `response-delay`, `request-hold`,
`request-drop`, `response-drop`, `request-duplicate`) acts on the frames of chosen API keys only. Whether the
anomalies a run shows under such a fault break a promise depends on which request it was, the broker's
version and the transaction protocol the client speaks. This module states those rules, each with its
source in Kafka's code or KIPs; :mod:`reference_model.verdicts` asks it before its general rules.

The rules, by the request they act on:

* **Produce** — idempotence (KIP-98) numbers each producer's batches per partition; the leader keeps the
  last five batches' sequences per producer (``ProducerStateEntry.NUM_BATCHES_TO_RETAIN``) and answers a
  repeat of one with its first offset instead of appending it again, so a duplicated, re-sent or late
  Produce never writes a value twice while idempotence is on. Without idempotence a re-send after a lost or
  late response is a second append (duplicates permitted). In a transaction, a Produce that arrives after
  its transaction ended is the shape of KAFKA-14402: before 3.6.0 the leader appends it anyway, into the
  next transaction of the same producer epoch or into a transaction no one will end (the last stable
  offset stuck, read_committed readers stalled). KIP-890 part 1 (3.6.0, KAFKA-14884 ea0bb001262,
  ``transaction.partition.verification.enable`` on by default) makes the leader ask the coordinator whether
  the transaction is ongoing first, which closes the hanging transaction; a late Produce can still join the
  *next* transaction when that one has already added the partition and the epoch is the same, which only an
  epoch bump per transaction prevents: KIP-890 part 2 (transaction version 2, Kafka 4.0, for clients that
  speak it — the Java client from 4.0; librdkafka does not, confluentinc/librdkafka#5423).
* **EndTxn** — with transaction protocol v1 a transaction's end request carries the producer id and epoch
  only, not which transaction it ends; a late EndTxn(commit) for the previous transaction that reaches the
  coordinator while the next one is ongoing commits *that* one early, and the coordinator answers the
  client's own EndTxn for it as a retry of a finished commit (``TransactionCoordinator.endTransaction``:
  ``CompleteCommit`` + commit → ``NONE``). This is KAFKA-17754 (found by Jepsen in Bufstream 0.1.0): a torn
  transaction (G1c), an aborted transaction's records visible (G1a), acknowledged records lost. Fixed by
  transaction version 2 (KIP-890 part 2: EndTxn v5, an epoch bump at every transaction end), on a 4.0+
  broker with a client that speaks it. A duplicated EndTxn that arrives with the first is answered as a
  retry and changes nothing.
* **AlterPartition** — the controller accepts an ISR change only from the partition's current leader at its
  leader epoch, and only for the current partition epoch (``ReplicationControlManager``:
  ``FENCED_LEADER_EPOCH``, ``INVALID_UPDATE_VERSION``); a late or repeated request is rejected and the
  leader retries with what it learns, so a dropped response or a held request delays ISR changes but
  corrupts nothing. From 3.5.0 (KIP-903, KAFKA-14617) the request also carries each replica's broker epoch,
  so a stale request cannot re-add a replica that restarted on an empty disk (KAFKA-14139) — that one needs
  a disk replacement besides the held request.
* **WriteTxnMarkers** — the coordinator re-sends markers until every partition leader wrote them
  (``TransactionMarkerChannelManager``); until then the partition's last stable offset waits, so
  read_committed readers stall (availability) but read nothing they should not (no anomaly).
* **Any other request** (Fetch, Metadata, FindCoordinator, AddPartitionsToTxn, heartbeats, Vote, Fetch
  between controllers…) — clients and brokers retry requests they get no answer to, and a late answer to a
  request already answered is dropped by correlation id; no data anomaly is permitted by the fault itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from kafka_chaos import versions

REQUEST_FAULT_KINDS = frozenset({"request-delay", "response-delay", "request-hold", "request-drop",
                                 "response-drop", "request-duplicate"})
LATE_REQUEST_KINDS = frozenset({"request-delay", "request-hold", "request-duplicate"})
"""Kinds that can deliver a request after the client gave up on it (a held or delayed copy, or a second
copy): the shape behind KAFKA-14402 and KAFKA-17754."""
RESEND_KINDS = frozenset({"response-delay", "response-drop", "request-drop", "request-hold", "request-delay"})
"""Kinds after which the client re-sends the request (no answer in time)."""

TXN_LOSS_ANOMALIES = frozenset({"G1a", "G1c", "lost-write", "unseen", "inconsistent-offsets"})

KIP_98 = "KIP-98 (idempotent and transactional producer)"
KAFKA_14402 = (
    "KAFKA-14402 (KIP-890 part 1): before 3.6.0 a Produce that reaches the leader after its transaction ended is "
    "appended anyway, into the next transaction of the same producer epoch or a transaction no one ends; fixed in "
    "3.6.0 by transaction verification (KAFKA-14884, ea0bb001262)"
)
KIP_890_PART_2 = (
    "KIP-890 part 2: with transaction protocol v1 a late request of the previous transaction carries the same "
    "producer epoch as the next one, so it can join or end that one; an epoch bump at every transaction end "
    "(transaction version 2, Kafka 4.0) fences it, for clients that speak it (the Java client from 4.0; "
    "librdkafka does not, confluentinc/librdkafka#5423)"
)
KAFKA_17754 = (
    "KAFKA-17754 (Jepsen, Bufstream 0.1.0): a late EndTxn of the previous transaction ends the next one of the "
    "same producer epoch under transaction protocol v1, tearing it (the coordinator answers the client's own "
    "EndTxn as a retry of a finished commit); fixed by transaction version 2 (KIP-890 part 2, Kafka 4.0) for "
    "clients that speak it"
)


@dataclass(frozen=True, slots=True)
class RequestFaultRule:
    """What Kafka promises about one request fault: the anomalies its code lets through (``permits``), the
    rule in one sentence, and, where a known defect is the reason, its name and the first fixed version."""

    permits: frozenset[str]
    rule: str
    defect: str | None = None
    fixed_in: str | None = None


def transaction_version_2(kafka_version: str | None, client_transaction_version: int | None,
                          cluster_transaction_version: int | None = None) -> bool:
    """Whether transactions run with an epoch bump per transaction: a 4.0+ broker whose finalized transaction.version
    feature is 2 (``None``: a new 4.x cluster's default, 2) and a client that asks for transaction version 2
    (librdkafka never does: ``None``/1). The Java client 4.0+ reads the finalized feature from ApiVersions
    (TransactionManager.isTransactionV2Enabled), so a cluster formatted with transaction.version=1 makes it speak 1."""
    return bool(client_transaction_version and client_transaction_version >= 2
                and (cluster_transaction_version is None or cluster_transaction_version >= 2)
                and versions.at_least(kafka_version, versions.TRANSACTION_V2_FROM))


def rule_for(kind: str, api: str, *, kafka_version: str | None, idempotence: bool, transactional: bool,
             client_transaction_version: int | None = None,
             cluster_transaction_version: int | None = None) -> RequestFaultRule:
    """The promise Kafka makes about ``kind`` acting on requests of ``api`` (an API name as in Kafka's
    message definitions, e.g. ``Produce``, ``EndTxn``) at ``kafka_version``, with the transaction protocol the
    client and the cluster's finalized transaction.version agree on (transaction_version_2)."""
    if kind not in REQUEST_FAULT_KINDS:
        raise ValueError(f"not a request fault kind: {kind!r}")
    tv2 = transaction_version_2(kafka_version, client_transaction_version, cluster_transaction_version)
    if api == "Produce":
        return _produce(kind, kafka_version, idempotence=idempotence, transactional=transactional, tv2=tv2)
    if api == "EndTxn" and kind in LATE_REQUEST_KINDS:
        if tv2:
            return RequestFaultRule(frozenset(), f"transaction version 2 fences a late EndTxn: {KIP_890_PART_2}")
        return RequestFaultRule(TXN_LOSS_ANOMALIES, KAFKA_17754, defect="KAFKA-17754",
                                fixed_in="4.0.0 with transaction version 2")
    if api == "AlterPartition":
        return RequestFaultRule(frozenset(), (
            "the controller accepts an ISR change only from the current leader at the current partition epoch "
            "(ReplicationControlManager: FENCED_LEADER_EPOCH, INVALID_UPDATE_VERSION), so a late, lost or "
            "repeated AlterPartition delays ISR changes but corrupts nothing; from 3.5.0 broker epochs (KIP-903) "
            "also fence a replica restarted on an empty disk"))
    if api == "WriteTxnMarkers":
        return RequestFaultRule(frozenset(), (
            "the coordinator re-sends transaction markers until written (TransactionMarkerChannelManager): "
            "read_committed readers wait on the last stable offset, and read nothing they should not"))
    return RequestFaultRule(frozenset(), (
        f"a late, lost or repeated {api} is retried or discarded by correlation id; Kafka permits no data "
        "anomaly for it"))


def _produce(kind: str, kafka_version: str | None, *, idempotence: bool, transactional: bool,
             tv2: bool) -> RequestFaultRule:
    permits: set[str] = set()
    reasons: list[str] = []
    if not idempotence and (kind == "request-duplicate" or kind in RESEND_KINDS):
        permits |= {"duplicate", "nonmonotonic-send", "int-nonmonotonic-send"}
        reasons.append("idempotence off: a re-sent or repeated Produce is appended again")
    elif idempotence:
        reasons.append(
            f"{KIP_98}: the leader keeps each producer's last five batch sequences per partition "
            "(ProducerStateEntry.NUM_BATCHES_TO_RETAIN) and answers a repeat with its first offset, so no value is "
            "written twice")
    if transactional and kind in LATE_REQUEST_KINDS:
        if not versions.at_least(kafka_version, versions.TRANSACTION_VERIFICATION_FROM):
            return RequestFaultRule(frozenset(permits | TXN_LOSS_ANOMALIES), KAFKA_14402, defect="KAFKA-14402",
                                    fixed_in="3.6.0")
        if not tv2:
            return RequestFaultRule(frozenset(permits | TXN_LOSS_ANOMALIES), KIP_890_PART_2,
                                    defect="KAFKA-14402 (late Produce joins the next transaction)",
                                    fixed_in="4.0.0 with transaction version 2")
        reasons.append(f"a late Produce is fenced: {KIP_890_PART_2}")
    return RequestFaultRule(frozenset(permits), "; ".join(reasons) or "no anomaly permitted")
