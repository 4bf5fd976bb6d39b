"""The full-disk mechanism itself, without Kafka: a real tmpfs of a few MiB on this machine. A write
that does not fit fails with ENOSPC at once; the ballast leaves exactly what was asked; freeing it lets writes
through again; closing leaves no mount."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from kafka_chaos.cluster.sized_disk import MIB, SizedDisk, remove_sized_disks


@pytest.fixture
def disk(tmp_path: Path):
    d = SizedDisk(tmp_path / "node-1", 16)
    d.mount()
    yield d
    d.close()
    assert not d.mounted and not d.path.exists(), "close() leaves no mount and no files"


def test_a_full_disk_refuses_the_write_that_does_not_fit(disk: SizedDisk) -> None:
    assert disk.mounted and 15 * MIB < disk.usage()["size"] <= 16 * MIB
    (disk.path / "00000000000000000000.log").write_bytes(b"x" * MIB)
    filled = disk.fill(free_mb=1)
    assert filled["ballast"] > 10 * MIB and abs(filled["free_after"] - MIB) <= 64 * 1024
    with open(disk.path / "00000000000000000000.log", "ab") as log:
        log.write(b"y" * (MIB // 2))  # fits in what was left
        log.flush()
        with pytest.raises(OSError) as err:
            log.write(b"z" * MIB)  # does not: refused at the write, as ext4 refuses it
            log.flush()
    assert err.value.errno == errno.ENOSPC
    assert disk.free() == filled["ballast"]
    (disk.path / "after.log").write_bytes(b"w" * 4 * MIB)  # room again
    assert (disk.path / "00000000000000000000.log").stat().st_size >= MIB + MIB // 2


def test_leftover_disks_of_a_killed_run_are_removed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import kafka_chaos.cluster.sized_disk as sized

    monkeypatch.setattr(sized, "SIZED_ROOT", tmp_path)
    d = SizedDisk(tmp_path / "run-x" / "node-2", 16)
    d.mount()
    assert remove_sized_disks("run-x") == ["run-x/node-2"]
    assert not d.mounted and not (tmp_path / "run-x").exists()
