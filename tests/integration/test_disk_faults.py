"""Disk faults beyond power loss on the volatile disk itself, without Kafka: a real FUSE mount on this machine.
What is asserted is what the daemon reports it did (fsyncs delayed, EIO returned), never wall-clock time."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_chaos.cluster.volatile_disk import VolatileDisk, missing_requirements
from kafka_chaos.errors import ClusterError

pytestmark = pytest.mark.skipif(bool(missing_requirements()), reason="; ".join(missing_requirements()))


def _write_and_sync(path: Path, data: bytes) -> None:
    with open(path, "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def test_a_slow_disk_delays_every_fsync_by_the_armed_delay_and_stops_after_the_heal(disk: VolatileDisk) -> None:
    assert disk.slow_fsyncs(40)["fsync_delay_ms"] == 40
    for _ in range(3):
        _write_and_sync(disk.mountpoint / "00000000000000000000.log", b"x" * 100)
    armed = disk.faults()
    assert armed["delayed_fsyncs"] >= 3 and armed["delayed_ms"] == 40 * armed["delayed_fsyncs"]
    healed = disk.clear_faults()
    assert healed["fsync_delay_ms"] == 0 and healed["delayed_fsyncs"] == armed["delayed_fsyncs"]
    _write_and_sync(disk.mountpoint / "00000000000000000000.log", b"y")
    assert disk.faults()["delayed_fsyncs"] == armed["delayed_fsyncs"], "no fsync is delayed after the heal"
    assert (disk.mountpoint / "00000000000000000000.log").read_bytes() == b"x" * 300 + b"y"


def test_eio_on_the_chosen_operations_and_paths_only_and_not_after_the_heal(disk: VolatileDisk) -> None:
    m = disk.mountpoint
    (m / "chaos-0").mkdir()
    (m / "other").mkdir()
    # written behind the mount's back, so no page of it is cached and a read has to reach the daemon
    (disk.backing / "chaos-0" / "cold.log").write_bytes(b"c" * 5000)
    disk.fail_io(["fsync", "read"], glob="chaos-0/*")
    with pytest.raises(OSError) as err:
        _write_and_sync(m / "chaos-0" / "00000000000000000000.log", b"x" * 10)
    assert err.value.errno == 5  # EIO
    with pytest.raises(OSError) as err:
        (m / "chaos-0" / "cold.log").read_bytes()
    assert err.value.errno == 5
    _write_and_sync(m / "other" / "f.log", b"outside the glob")
    report = disk.faults()
    assert report["eio_returned"].get("fsync", 0) >= 1 and report["eio_returned"].get("read", 0) >= 1
    assert "write" not in report["eio_returned"], "writes were not armed to fail"

    disk.fail_io(["write"])  # every path
    with pytest.raises(OSError) as err:
        _write_and_sync(m / "other" / "g.log", b"z" * 10)
    assert err.value.errno == 5
    assert disk.faults()["eio_returned"]["write"] >= 1

    disk.clear_faults()
    _write_and_sync(m / "chaos-0" / "00000000000000000000.log", b"healed")
    assert (m / "chaos-0" / "cold.log").read_bytes() == b"c" * 5000
    assert (m / "other" / "f.log").read_bytes() == b"outside the glob"


def test_an_unknown_operation_is_refused_by_the_daemon(disk: VolatileDisk) -> None:
    with pytest.raises(ClusterError, match="unknown disk operations"):
        disk.fail_io(["rename"])
    assert disk.faults()["eio_ops"] == []


@pytest.mark.parametrize("torn", ["page", "byte"])
def test_a_torn_power_loss_keeps_a_prefix_of_the_last_unsynced_write(disk: VolatileDisk, torn: str) -> None:
    m = disk.mountpoint
    _write_and_sync(m / "seg.log", b"A" * 5000)
    with open(m / "seg.log", "ab") as f:  # unsynced; the kernel hands it to the daemon when the file is closed
        f.write(b"B" * (3 * 4096))
    (m / "other.index").write_bytes(b"I" * 3 * 4096)
    files = {f["path"]: f for f in disk.power_off(torn=torn, torn_glob="*.log", seed=11)}
    disk.power_on()
    seg = files["seg.log"]
    data = (m / "seg.log").read_bytes()
    assert len(data) == seg["size_after"] == max(5000, seg["torn_offset"] + seg["torn_kept"])
    assert 0 < seg["torn_kept"] < seg["torn_length"], "a prefix of the last write stays, not all of it"
    assert data == b"A" * 5000 + b"B" * (len(data) - 5000), "what stays is the synced bytes, then the prefix"
    if torn == "page":
        assert (seg["torn_offset"] + seg["torn_kept"]) % 4096 == 0
    assert "torn_kept" not in files["other.index"], "files outside the glob lose their writes whole"
    assert (m / "other.index").read_bytes() == b""


def test_corruption_at_rest_flips_only_fsynced_batch_bytes_and_survives_a_power_loss(disk: VolatileDisk) -> None:
    import random
    import struct

    from kafka_chaos.cluster.disk_corruption import corrupt

    def batch(base: int) -> bytes:
        return struct.pack(">qi", base, 49) + b"\x5a" * 49

    m = disk.mountpoint
    (m / "chaos-0").mkdir()
    seg = m / "chaos-0" / "00000000000000000000.log"
    synced = batch(0) + batch(1)
    _write_and_sync(seg, synced)
    with open(seg, "ab") as f:
        f.write(batch(2))  # unsynced: no flip may land here
    assert disk.synced_size("chaos-0/00000000000000000000.log") == len(synced)
    result = corrupt(m, "segment", 16, random.Random(2), disk.synced_size, at_rest=disk.flipped_at_rest)
    assert result["file"] == "chaos-0/00000000000000000000.log"
    flipped = bytearray(synced + batch(2))
    for flip in result["flips"]:
        assert flip["offset"] < len(synced)
        flipped[flip["offset"]] ^= 1 << flip["bit"]
    assert seg.read_bytes() == bytes(flipped), "a reader through the mount sees the flips"
    disk.power_off()
    disk.power_on()
    assert seg.read_bytes() == bytes(flipped[: len(synced)]), "the flips were fsynced; the unsynced batch is gone"
