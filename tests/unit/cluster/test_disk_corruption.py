"""Bit flips at rest (cluster/disk_corruption.py) on plain files: which files a class names, where flips land."""

from __future__ import annotations

import os
import random
import struct
from pathlib import Path

import pytest

from kafka_chaos.cluster.disk_corruption import FILE_CLASSES, batch_ranges, corrupt, file_class_of, files_of
from kafka_chaos.errors import ClusterError


def batch(base: int, records: int, size: int = 61) -> bytes:
    """A record batch's frame: baseOffset, batchLength, then `size - 12` bytes with lastOffsetDelta at byte 23."""
    body = bytearray(b"\x5a" * (size - 12))
    struct.pack_into(">i", body, 23 - 12, records - 1)
    return struct.pack(">qi", base, size - 12) + bytes(body)


def test_each_file_class_names_kafkas_files_and_nothing_else() -> None:
    assert set(FILE_CLASSES) == {"segment", "index", "checkpoint", "metadata-log"}
    assert file_class_of("chaos-0/00000000000000000000.log") == "segment"
    assert file_class_of("__cluster_metadata-0/00000000000000000000.log") == "metadata-log"
    assert file_class_of("chaos-0/00000000000000000000.index") == "index"
    assert file_class_of("chaos-0/00000000000000000000.timeindex") == "index"
    assert file_class_of("replication-offset-checkpoint") == "checkpoint"
    assert file_class_of("chaos-0/leader-epoch-checkpoint") == "checkpoint"
    assert file_class_of("__cluster_metadata-0/00000000000000000100-0000000001.checkpoint") == "checkpoint"
    assert file_class_of("meta.properties") is None and file_class_of("bootstrap.log") is None


def test_flips_land_inside_whole_synced_batches_of_the_newest_segment_and_are_seeded(tmp_path: Path) -> None:
    (tmp_path / "chaos-0").mkdir()
    old = tmp_path / "chaos-0" / "00000000000000000000.log"
    old.write_bytes(batch(0, 2))
    os.utime(old, ns=(1, 1))
    synced = batch(2, 3) + batch(5, 1, size=80)
    new = tmp_path / "chaos-0" / "00000000000000000002.log"
    new.write_bytes(synced + batch(6, 1) + b"\0" * 30)  # an unsynced batch, then preallocated zeros
    assert files_of(tmp_path, "segment") == ["chaos-0/00000000000000000002.log", "chaos-0/00000000000000000000.log"]
    assert batch_ranges(synced) == [(0, 61), (61, 141)]

    result = corrupt(tmp_path, "segment", 40, random.Random(4), lambda rel: len(synced))
    assert result["file"] == "chaos-0/00000000000000000002.log" and len(result["flips"]) == 40
    assert all(f["offset"] < len(synced) and 0 <= f["bit"] < 8 for f in result["flips"])
    after = new.read_bytes()
    expected = bytearray(synced + batch(6, 1) + b"\0" * 30)
    for f in result["flips"]:
        expected[f["offset"]] ^= 1 << f["bit"]
    assert after == bytes(expected) and after != synced + batch(6, 1) + b"\0" * 30
    new.write_bytes(synced)
    again = corrupt(tmp_path, "segment", 40, random.Random(4), lambda rel: len(synced))
    assert again == result, "same seed, same flips"


def test_a_class_with_no_file_holding_synced_data_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "chaos-0").mkdir()
    (tmp_path / "chaos-0" / "00000000000000000000.index").write_bytes(bytes(4096))  # preallocated, no entry yet
    with pytest.raises(ClusterError, match="no index file with fsynced data"):
        corrupt(tmp_path, "index", 1, random.Random(0), lambda rel: 4096)
    with pytest.raises(ClusterError, match="no checkpoint file matching"):
        corrupt(tmp_path, "checkpoint", 1, random.Random(0), lambda rel: 0, glob="chaos-0/*")
