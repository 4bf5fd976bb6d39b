"""At most one live cluster, shared between runs and tests that ask for the same spec."""

from __future__ import annotations

from kafka_chaos.cluster.kafka import KafkaCluster
from kafka_chaos.cluster.labels import untrack
from kafka_chaos.cluster.spec import ClusterSpec


def spec_key(spec: ClusterSpec) -> str:
    return repr(sorted(spec.model_dump().items()))


class ClusterPool:
    """At most one live cluster; a request for another spec replaces it."""

    def __init__(self, keep: bool) -> None:
        self.keep = keep
        self.current: KafkaCluster | None = None
        self._key: str | None = None

    def get(self, spec: ClusterSpec) -> KafkaCluster:
        key = spec_key(spec)
        if self.current is not None and self._key == key:
            return self.current
        self.release()
        cluster = KafkaCluster(spec)
        cluster.start()
        if self.keep:
            untrack(cluster.run_id)
        self.current, self._key = cluster, key
        return cluster

    def heal_or_drop(self) -> None:
        """Heal the shared cluster after a test; one that cannot be healed is replaced on next use, and so is one
        whose disks were damaged (failed writes, flipped bits: a later restart would recover that run's logs too),
        reshaped (a broker added or decommissioned: it no longer matches its spec) or partitioned: after
        the rules are gone, new inter-broker connections were seen to stall for ~10 s (a replica fetcher's
        connection setup timed out), enough to starve the next test's writes."""
        if self.current is None:
            return
        # partitioned, or brokers added or removed (not its spec any more); a kept cluster stays, for the user
        if (self.current.was_partitioned or self.current.was_reshaped or self.current.was_disk_damaged) \
                and not self.keep:
            self.release()
            return
        try:
            self.current.heal_all(timeout_s=60)
        except Exception:
            self.release()

    def release(self) -> None:
        if self.current is not None and not self.keep:
            self.current.stop()
        self.current, self._key = None, None
