"""The shared cluster pool replaces a cluster that was partitioned or reshaped, and heals one that was not."""

from typing import Any

import pytest

from kafka_chaos.cluster import ClusterPool


class FakeCluster:
    def __init__(self, partitioned: bool, reshaped: bool = False, disk_damaged: bool = False) -> None:
        self.was_partitioned = partitioned
        self.was_reshaped = reshaped
        self.was_disk_damaged = disk_damaged
        self.calls: list[str] = []

    def heal_all(self, timeout_s: float | None = None) -> None:
        self.calls.append("heal_all")

    def stop(self) -> None:
        self.calls.append("stop")


def pool_with(cluster: FakeCluster, keep: bool = False) -> ClusterPool:
    pool = ClusterPool(keep=keep)
    pool.current, pool._key = cluster, "spec"  # type: ignore[assignment]
    return pool


def test_partitioned_cluster_is_replaced_not_reused() -> None:
    cluster = FakeCluster(partitioned=True)
    pool = pool_with(cluster)
    pool.heal_or_drop()
    assert pool.current is None and cluster.calls == ["stop"]


def test_reshaped_cluster_is_replaced_not_reused() -> None:
    """A broker added or decommissioned: the cluster no longer matches the spec the pool keys it by."""
    cluster = FakeCluster(partitioned=False, reshaped=True)
    pool = pool_with(cluster)
    pool.heal_or_drop()
    assert pool.current is None and cluster.calls == ["stop"]


def test_cluster_with_a_damaged_disk_is_replaced_not_reused() -> None:
    """Failed writes or flipped bits stay in that run's logs: the next run's restart of the node would load them."""
    cluster = FakeCluster(partitioned=False, disk_damaged=True)
    pool = pool_with(cluster)
    pool.heal_or_drop()
    assert pool.current is None and cluster.calls == ["stop"]


@pytest.mark.parametrize("settings, damaged", [({"eio": {"ops": ["write"], "glob": None}}, True),
                                               ({"fsync_delay_ms": 100}, False),
                                               ({"fsync_delay_ms": 0, "eio": None}, False)])
def test_failing_writes_mark_the_cluster_damaged_and_a_slow_disk_does_not(settings: dict[str, Any],
                                                                         damaged: bool) -> None:
    from types import SimpleNamespace

    from kafka_chaos.cluster.node import KafkaNode

    node = object.__new__(KafkaNode)
    node.cluster = SimpleNamespace(was_disk_damaged=False)  # type: ignore[assignment]
    node.disk = SimpleNamespace(mounted=True, arm_faults=lambda **kw: kw)  # type: ignore[assignment]
    assert node.disk_faults(**settings) == settings
    assert node.cluster.was_disk_damaged is damaged


def test_unpartitioned_cluster_is_healed_and_kept() -> None:
    cluster = FakeCluster(partitioned=False)
    pool = pool_with(cluster)
    pool.heal_or_drop()
    current: Any = pool.current
    assert current is cluster and cluster.calls == ["heal_all"]


def test_kept_cluster_is_not_dropped_even_when_partitioned() -> None:
    cluster = FakeCluster(partitioned=True)
    pool = pool_with(cluster, keep=True)
    pool.heal_or_drop()
    current: Any = pool.current
    assert current is cluster and "stop" not in cluster.calls


def test_cluster_ids_never_start_with_a_dash(monkeypatch) -> None:
    """One base64url UUID in 64 starts with '-', which kafka-storage format takes for an option."""
    import uuid

    from kafka_chaos import cluster

    dash_first = uuid.UUID(bytes=b"\xfb" + bytes(15))  # base64url of 0xfb... starts with '-'
    ids = iter([dash_first, uuid.UUID(int=1)])
    monkeypatch.setattr(uuid, "uuid4", lambda: next(ids))
    assert cluster.new_cluster_id() == "AAAAAAAAAAAAAAAAAAAAAQ"  # the dash-first id was drawn and skipped
