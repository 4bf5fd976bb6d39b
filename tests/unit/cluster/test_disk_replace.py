"""A volatile disk replaced: everything under it deleted, and counted first (no FUSE mount needed)."""

from __future__ import annotations

from pathlib import Path

from kafka_chaos.cluster.node import _directory_id
from kafka_chaos.cluster.volatile_disk import VolatileDisk


def test_replace_empties_the_backing_directory_and_counts_what_each_entry_held(tmp_path: Path) -> None:
    disk = VolatileDisk(tmp_path / "node-1")
    (disk.backing / "t-0").mkdir(parents=True)
    (disk.backing / "t-0" / "00000000000000000000.log").write_bytes(b"x" * 1000)
    (disk.backing / "t-0" / "00000000000000000000.index").write_bytes(b"i" * 24)
    (disk.backing / "__cluster_metadata-0").mkdir()
    (disk.backing / "__cluster_metadata-0" / "quorum-state").write_bytes(b"{}")
    (disk.backing / "meta.properties").write_text("node.id=1\ndirectory.id=abc\n")
    with open(disk.backing / "t-0" / "00000000000000000000.timeindex", "wb") as f:
        f.truncate(10 << 20)  # preallocated as Kafka does: sparse, nothing allocated
    wiped = disk.replace()
    assert wiped["files"] == 5 and wiped["log_bytes"] == 1000
    assert sorted(wiped["entries"]) == ["__cluster_metadata-0", "meta.properties", "t-0"]
    assert 1024 <= wiped["entries"]["t-0"] < 10 << 20 and wiped["bytes"] == sum(wiped["entries"].values())
    assert disk.backing.is_dir() and list(disk.backing.iterdir()) == []
    assert disk.replace() == {"files": 0, "bytes": 0, "log_bytes": 0, "entries": {}}


def test_the_directory_id_is_read_from_meta_properties_or_none_before_kip_858() -> None:
    assert _directory_id("version=1\nnode.id=2\ndirectory.id=Xy-z_123\ncluster.id=c\n") == "Xy-z_123"
    assert _directory_id("version=1\nnode.id=2\ncluster.id=c\n") is None
