"""The power-loss disk itself, without Kafka: a real FUSE mount on this machine. Write, fsync, write
more, power off, mount again: the fsynced bytes are there and the rest are not."""

from __future__ import annotations

import mmap
import os
from pathlib import Path

import pytest

from kafka_chaos.cluster.volatile_disk import VolatileDisk, is_mounted, missing_requirements, remove_disks

pytestmark = pytest.mark.skipif(bool(missing_requirements()), reason="; ".join(missing_requirements()))


def test_fsynced_bytes_survive_and_the_rest_is_lost(disk: VolatileDisk) -> None:
    m = disk.mountpoint
    with open(m / "segment.log", "wb") as f:
        f.write(b"A" * 5000)
        f.flush()
        os.fsync(f.fileno())
        f.write(b"B" * 3000)
        f.flush()
    (m / "topic-0").mkdir()
    (m / "topic-0" / "never-synced").write_bytes(b"gone")
    assert disk.status()["unsynced_bytes"] >= 3000 + 4
    files = {f["path"]: f for f in disk.power_off()}
    assert not disk.mounted
    assert files["segment.log"]["size_before"] == 8000 and files["segment.log"]["size_after"] == 5000
    disk.power_on()
    assert (m / "segment.log").read_bytes() == b"A" * 5000
    assert (m / "topic-0" / "never-synced").read_bytes() == b"", "the name survives, its data does not"


def test_a_mapped_index_keeps_what_msync_flushed(disk: VolatileDisk) -> None:
    """Kafka's offset and time indexes are memory-mapped; MappedByteBuffer.force is msync, which reaches the disk
    as an fsync."""
    path = disk.mountpoint / "00000000000000000000.index"
    with open(path, "w+b") as f:
        f.truncate(8192)
        with mmap.mmap(f.fileno(), 8192) as mm:
            mm[0:4] = b"SYNC"
            mm.flush()
            mm[4096:4100] = b"LOST"
    disk.power_off()
    disk.power_on()
    data = path.read_bytes()
    assert data[:4] == b"SYNC" and data[4096:4100] == bytes(4)


def test_remove_disks_unmounts_what_a_killed_run_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_chaos.cluster.volatile_disk as vd

    monkeypatch.setattr(vd, "DISKS_ROOT", tmp_path)
    left = VolatileDisk(tmp_path / "run-x" / "node-1")
    left.mount()
    assert remove_disks("run-x") == ["run-x/node-1"]
    assert not is_mounted(left.mountpoint) and not (tmp_path / "run-x").exists()
    assert not left.control.exists()


def test_a_disk_of_a_run_with_a_long_name_mounts_and_leaves_no_socket(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A run id carries the scenario's name (a zoo run's is long): the disk's folder may be longer than a Unix
    socket's path can be, and the disk must still mount; every-run removal skips the sockets' folder."""
    import kafka_chaos.cluster.volatile_disk as vd

    monkeypatch.setattr(vd, "DISKS_ROOT", tmp_path)
    run = "20261129T042441-zoo-KIP-966-last-replica-standing-affected-0-966-" + "x" * 40
    disk = VolatileDisk(tmp_path / run / "node-101")
    assert len(str(disk.root / "control.sock")) > 107
    disk.mount()
    (disk.mountpoint / "f").write_bytes(b"x")
    assert disk.control.exists()
    assert remove_disks() == [f"{run}/node-101"]
    assert not disk.control.exists() and not (tmp_path / run).exists()


def test_settled_writes_survive_a_power_loss(disk: VolatileDisk) -> None:
    (disk.mountpoint / "bootstrap.checkpoint").write_bytes(b"setup, never fsynced")
    assert disk.settle() == 1
    (disk.mountpoint / "bootstrap.checkpoint").write_bytes(b"x")  # O_TRUNC after the settle: lost again
    disk.power_off()
    disk.power_on()
    assert (disk.mountpoint / "bootstrap.checkpoint").read_bytes() == b"setup, never fsynced"
