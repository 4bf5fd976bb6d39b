"""What a Kafka version brings: the one place a feature's first version, or a difference between versions, is written.

The cluster's validation and configuration, the image build, the run configuration the model and the checker
read, and the report's configuration line all ask here.
"""

from __future__ import annotations

import re
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
LEADER_EPOCH_CHECKPOINT_UNSYNCED = ((3, 7), (3, 8))
"""KAFKA-16541: from 3.7.0 (KAFKA-15046, d71d0639d9d) the leader-epoch checkpoint is rewritten without fsync on
truncation; 3.8.0 fsyncs it again (7c30eed66c4, and 3835515feaf on trunk for 3.9.0). [first affected, first fixed)."""


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


# -- which releases kafka-chaos can build and start ----------------------------------------------------------

OLDEST_SUPPORTED = (3, 4)
"""The oldest release line whose images are built and started here (checked with 3.4.1). KRaft (no ZooKeeper) is
what kafka-chaos starts; it came in 2.8 as early access and was declared production-ready for new clusters in 3.3
(KIP-833). Older releases are refused before anything is built or started, not half-started."""
OLDEST_RELEASE = f"{OLDEST_SUPPORTED[0]}.{OLDEST_SUPPORTED[1]}.0"
"""The oldest release kafka-chaos builds and starts (make test starts it once)."""
CONTROLLER_ADVERTISED_FROM = (3, 9)
"""KIP-853: from 3.9 a controller may name its listener in advertised.listeners (the endpoint voters are known
by). Before 3.9 KafkaConfig refuses a broker whose advertised.listeners names a controller listener
(validateAdvertisedListenersDoesNotContainControllerListenersForKRaftBroker), so a combined node advertises only
its broker listeners."""
LOG4J2_FROM = (4, 0)
"""KIP-653: Kafka 4.0 logs through log4j2. Kafka 3.x logs through reload4j (log4j 1) and brings the
slf4j-reload4j binding; the image logs through log4j2 on every version, so a 3.x image leaves that binding out
(two SLF4J bindings: the first found wins, and log4j 1 has no configuration in the image)."""

_RELEASE = re.compile(r"^(\d+)\.(\d+)\.(\d+)$")


def release_number(version: Any) -> tuple[int, int, int] | None:
    """`3.4.1` → (3, 4, 1); None for anything that is not a release's three numbers (`4.3`, `latest`, `3.7.0-rc1`)."""
    m = _RELEASE.match(str(version).strip())
    return (int(m[1]), int(m[2]), int(m[3])) if m else None


def unbuildable(version: Any) -> str | None:
    """Why no image of `version` can be built here, as a paragraph that names the fix; None when the version is
    one the image build takes (whether Maven Central serves it is asked by the build itself)."""
    number = release_number(version)
    oldest = OLDEST_RELEASE
    if number is None:
        return (f"Kafka version {version!r} is not a release number: kafka-chaos builds each Kafka image from "
                f"that release's jars on Maven Central, named by three numbers (e.g. 3.6.2, 4.0.1). Set "
                f"cluster.kafka_version (or --kafka-version) to a released version, {oldest} or later.")
    if number[:2] < OLDEST_SUPPORTED:
        return (f"Kafka {version} cannot be started by kafka-chaos: it starts KRaft clusters (no ZooKeeper), "
                f"built and tested from Kafka {oldest} on (KRaft was production-ready only from 3.3, KIP-833, "
                f"and absent before 2.8). Use kafka_version {oldest} or later, or run against a cluster of "
                f"{version} that is already running with cluster.bootstrap_servers.")
    return None


# -- the command-line tools' classes ---------------------------------------------------------------------------

TOOL_CLASSES: dict[str, tuple[tuple[tuple[int, int], str], ...]] = {
    # launcher: (first release line, main class), newest first. The tools moved from core (Scala, kafka.admin /
    # kafka.tools) to the tools module (org.apache.kafka.tools) over 3.4-3.7 (KIP-906, KAFKA-14525); each line is
    # that of the first release whose jars on Maven Central (kafka_2.13, kafka-tools) hold the new class, as read
    # in 3.4.1, 3.5.2, 3.6.2, 3.7.0, 3.8.1, 3.9.1, 4.0.1 and 4.3.1. The image build checks each class is in its jars.
    "kafka-server-start.sh": (((0, 0), "kafka.Kafka"),),
    "kafka-storage.sh": (((0, 0), "kafka.tools.StorageTool"),),
    "kafka-configs.sh": (((0, 0), "kafka.admin.ConfigCommand"),),
    "kafka-metadata-quorum.sh": (((0, 0), "org.apache.kafka.tools.MetadataQuorumCommand"),),
    "kafka-producer-perf-test.sh": (((0, 0), "org.apache.kafka.tools.ProducerPerformance"),),
    "kafka-consumer-perf-test.sh": (((3, 5), "org.apache.kafka.tools.ConsumerPerformance"),
                                    ((0, 0), "kafka.tools.ConsumerPerformance")),
    "kafka-cluster.sh": (((3, 5), "org.apache.kafka.tools.ClusterTool"), ((0, 0), "kafka.tools.ClusterTool")),
    "kafka-features.sh": (((3, 6), "org.apache.kafka.tools.FeatureCommand"), ((0, 0), "kafka.admin.FeatureCommand")),
    "kafka-topics.sh": (((3, 7), "org.apache.kafka.tools.TopicCommand"), ((0, 0), "kafka.admin.TopicCommand")),
    "kafka-leader-election.sh": (((3, 7), "org.apache.kafka.tools.LeaderElectionCommand"),
                                 ((0, 0), "kafka.admin.LeaderElectionCommand")),
}


def tool_class(launcher: str, version: Any) -> str:
    """The main class `launcher` (e.g. kafka-topics.sh) runs in Kafka `version`; the newest when the version
    cannot be read."""
    mm = major_minor(version)
    for first, cls in TOOL_CLASSES[launcher]:
        if mm is None or mm >= first:
            return cls
    return TOOL_CLASSES[launcher][-1][1]
