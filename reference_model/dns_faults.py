"""What Kafka promises when a broker's name stops resolving for clients, or resolves to a dead address.

`dns-fail` (docs/architecture.md §5) acts on the clients' side only: the brokers, replication and the quorum
never look the name up, so the cluster goes on as if nothing happened and keeps the broker's leaderships. For
clients it is an availability fault like a cut client link (reference_model.availability): what that broker
leads cannot be reached until the name resolves again. Kafka promises no data anomaly from it: a client that
cannot connect retries (librdkafka resolves the name again on each connect once ``broker.address.ttl``, 1 s,
has passed), and nothing it wrote or read changes.

One client defect breaks that promise, and it is the reason this fault exists. librdkafka 2.1.0 brought
KIP-320 (a consumer validates its position with OffsetForLeaderEpoch after a leader change), and treated
every error of that request it had no rule for as permanent: the position was *reset* (to
``auto.offset.reset``) instead of validated again. A failed name lookup (``Local: Host resolution failure``)
is such an error, so a consumer whose partition's new leader could not be resolved re-read from the start or
skipped to the end (confluentinc/librdkafka#4427). Fixed in 2.3.0 by retrying every error of offset
validation (confluentinc/librdkafka#4447; CHANGELOG, v2.3.0: "During offset validation a permanent error like
host resolution failure would cause an offset reset … Solved by retrying even in case of permanent errors").
A refused connection (``dead-address``) was already retried in 2.1.0–2.2.x (``rd_kafka_err_action``: a
transport error is RETRY), so only ``unresolvable`` meets the defect.
"""

from __future__ import annotations

from kafka_chaos import versions
from kafka_chaos.faults.registry import kinds_of
from kafka_chaos.reference_model.request_faults import RequestFaultRule

NAME_FAULT_KINDS = kinds_of("client-name")
OFFSET_RESET_ANOMALIES = frozenset({"poll-skip", "nonmonotonic-poll", "int-poll-skip", "int-nonmonotonic-poll"})
"""What a consumer whose position was reset shows: a jump forward (skip) or back (re-read)."""
LIBRDKAFKA_4447 = "confluentinc/librdkafka#4427 (fixed by #4447)"
DEFECT_FROM, FIXED_IN = (2, 1), (2, 3)
"""librdkafka's offset validation (KIP-320) came in 2.1.0; permanent errors are retried from 2.3.0."""


def rule_for(mode: str, librdkafka: str | None) -> RequestFaultRule:
    """The promise about a `dns-fail` of this mode, for clients running this librdkafka (None: unknown, taken
    as a fixed one: the history records the version, so unknown means an old history)."""
    lib = versions.major_minor(librdkafka)
    if mode == "unresolvable" and lib is not None and DEFECT_FROM <= lib < FIXED_IN:
        return RequestFaultRule(OFFSET_RESET_ANOMALIES, (
            f"librdkafka {librdkafka} resets a consumer's position when offset validation (KIP-320, after a "
            "leader change) meets a host resolution failure, which it takes for a permanent error: the consumer "
            "re-reads or skips"), defect=LIBRDKAFKA_4447, fixed_in="librdkafka 2.3.0")
    return RequestFaultRule(frozenset(), (
        "a broker name clients cannot resolve or connect to is a client-side availability fault: the cluster "
        "keeps the broker's leaderships and clients retry (librdkafka resolves again on each connect after "
        "broker.address.ttl); Kafka permits no data anomaly for it"
        + (" (librdkafka from 2.3.0 retries offset validation on any error: confluentinc/librdkafka#4447)"
           if mode == "unresolvable" else "")))
