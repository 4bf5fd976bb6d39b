"""What Kafka promises when a client's own process is frozen: `client-pause` (docs/architecture.md §5), a
SIGSTOP of an out-of-process client worker, as a long GC pause or a stopped application.

Nothing on the cluster's side changes: the brokers, replication and the quorum go on. A frozen consumer stops
heartbeating, so after `session.timeout.ms` its group moves its partitions to the other members (a consumer
that assigns its partitions itself has no group to leave); a frozen transactional producer's transaction is
aborted by its coordinator after `transaction.timeout.ms`, and a producer that resumes after its epoch was
bumped is fenced. Those are availability effects and errors the client must surface: Kafka permits no data
anomaly for a paused client. Known client defects under a pause (duplicates on an epoch bump, KAFKA-17754's
transaction left open across a paused client's retried EndTxn) are the model's per-client rules, keyed by
the client and version this fault's history value records.
"""

from __future__ import annotations

from kafka_chaos.faults.registry import kinds_of
from kafka_chaos.reference_model.request_faults import RequestFaultRule

CLIENT_FAULT_KINDS = kinds_of("client-process")


def rule_for(kind: str, client: str | None, version: str | None) -> RequestFaultRule:
    """The promise about a client fault for this client at this version (None: not recorded)."""
    who = f"{client} {version}".strip() if client else "the client"
    return RequestFaultRule(frozenset(), (
        f"{kind} freezes a client process ({who}): an availability fault on the client's side (its group "
        "rebalances after session.timeout.ms, its open transaction is aborted after transaction.timeout.ms and "
        "the producer is fenced if it resumes after that); Kafka permits no data anomaly for it"))
