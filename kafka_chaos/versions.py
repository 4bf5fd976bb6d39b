"""What a Kafka version brings by default: the one place a feature's first version is written.

The cluster's validation, the run configuration the model and the checker read, and the report's
configuration line all ask here.
"""

from __future__ import annotations

from typing import Any

ELR_FEATURE_FROM = (4, 0)
"""eligible.leader.replicas.version (KIP-966) can be set from Kafka 4.0."""
ELR_DEFAULT_FROM = (4, 1)
"""ELR is on by default for clusters created from Kafka 4.1."""
DYNAMIC_QUORUM_FROM = (3, 9)
"""KIP-853's dynamic KRaft quorum (kraft.version 1) from Kafka 3.9."""
TRANSACTION_VERIFICATION_FROM = (3, 6)
"""KIP-890 part 1: the leader verifies a transactional Produce with the coordinator (KAFKA-14884, 3.6.0;
transaction.partition.verification.enable defaults to true)."""
TRANSACTION_V2_FROM = (4, 0)
"""KIP-890 part 2: transaction version 2, an epoch bump at every transaction end (EndTxn v5), from Kafka 4.0."""
ALTER_PARTITION_BROKER_EPOCH_FROM = (3, 5)
"""KIP-903: AlterPartition carries each replica's broker epoch (KAFKA-14617, 3.5.0)."""


def major_minor(version: Any) -> tuple[int, int] | None:
    """`4.1.0` → (4, 1); a missing minor reads as 0; None when the version says nothing readable."""
    if version is None:
        return None
    parts: list[int] = []
    for piece in str(version).split(".")[:2]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        if not digits:
            break
        parts.append(int(digits))
    if not parts:
        return None
    return parts[0], parts[1] if len(parts) > 1 else 0


def at_least(version: Any, first: tuple[int, int]) -> bool:
    """Whether `version` is `first` or later (False when it cannot be read)."""
    mm = major_minor(version)
    return mm is not None and mm >= first


def elr_default(version: Any) -> bool | None:
    """Whether a new cluster of this version runs with ELR when nothing sets it; None when the version is
    unknown."""
    mm = major_minor(version)
    return None if mm is None else mm >= ELR_DEFAULT_FROM
