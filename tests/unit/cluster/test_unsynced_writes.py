"""The volatile disk's bookkeeping (cluster/volatile_disk.py) on plain files: what a power loss puts back."""

from __future__ import annotations

import os
import struct
from pathlib import Path

from kafka_chaos.cluster.volatile_disk import BLOCK, UnsyncedWrites, segment_end_offset


def write(writes: UnsyncedWrites, root: Path, rel: str, offset: int, data: bytes, now: float = 0.0) -> None:
    """What the file system does for one write: record first, then change the backing file."""
    writes.before_write(rel, offset, len(data), now)
    with open(root / rel, "r+b" if (root / rel).exists() else "w+b") as f:
        os.pwrite(f.fileno(), data, offset)


def test_appends_after_the_last_sync_are_cut_and_overwrites_put_back(tmp_path: Path) -> None:
    (tmp_path / "seg.log").write_bytes(b"A" * (BLOCK + 100))  # on disk before the run: synced
    writes = UnsyncedWrites(tmp_path)
    write(writes, tmp_path, "seg.log", BLOCK + 100, b"B" * 500)  # append
    write(writes, tmp_path, "seg.log", 10, b"C" * 20)  # overwrite inside synced data
    losses = writes.lose()
    data = (tmp_path / "seg.log").read_bytes()
    assert data == b"A" * (BLOCK + 100)
    assert [(x.path, x.size_before, x.size_after, x.blocks_restored) for x in losses] == [
        ("seg.log", BLOCK + 600, BLOCK + 100, 1)]
    assert writes.files == {}, "after a power loss everything left is on disk"


def test_fsync_makes_a_file_durable_and_later_writes_are_lost_again(tmp_path: Path) -> None:
    writes = UnsyncedWrites(tmp_path)
    writes.created("f", 0.0)
    write(writes, tmp_path, "f", 0, b"synced")
    writes.synced("f")
    write(writes, tmp_path, "f", 6, b"-lost")
    write(writes, tmp_path, "f", 0, b"S")
    writes.lose()
    assert (tmp_path / "f").read_bytes() == b"synced"


def test_a_file_created_and_never_synced_survives_empty(tmp_path: Path) -> None:
    writes = UnsyncedWrites(tmp_path)
    writes.created("new", 0.0)
    write(writes, tmp_path, "new", 0, b"x" * 100)
    writes.lose()
    assert (tmp_path / "new").exists() and (tmp_path / "new").read_bytes() == b""


def test_truncate_below_the_synced_size_is_undone(tmp_path: Path) -> None:
    original = bytes(range(256)) * 40  # 10240 bytes, three blocks
    (tmp_path / "idx").write_bytes(original)
    writes = UnsyncedWrites(tmp_path)
    writes.before_truncate("idx", 100, 0.0)
    os.truncate(tmp_path / "idx", 100)
    writes.lose()
    assert (tmp_path / "idx").read_bytes() == original


def test_zero_blocks_are_kept_as_zeros(tmp_path: Path) -> None:
    (tmp_path / "sparse").write_bytes(bytes(2 * BLOCK))
    writes = UnsyncedWrites(tmp_path)
    write(writes, tmp_path, "sparse", BLOCK + 5, b"data")
    assert writes.files["sparse"].blocks == {1: None}
    writes.lose()
    assert (tmp_path / "sparse").read_bytes() == bytes(2 * BLOCK)


def test_rename_carries_what_is_unsynced_and_replaces_the_target(tmp_path: Path) -> None:
    (tmp_path / "checkpoint").write_bytes(b"old")
    writes = UnsyncedWrites(tmp_path)
    writes.created("checkpoint.tmp", 0.0)
    write(writes, tmp_path, "checkpoint.tmp", 0, b"new, not synced")
    os.rename(tmp_path / "checkpoint.tmp", tmp_path / "checkpoint")
    writes.renamed("checkpoint.tmp", "checkpoint")
    writes.lose()
    # the name is durable (lazyfs), the data was never synced
    assert (tmp_path / "checkpoint").read_bytes() == b""
    assert not (tmp_path / "checkpoint.tmp").exists()


def test_write_back_age_keeps_files_dirty_longer_than_it(tmp_path: Path) -> None:
    writes = UnsyncedWrites(tmp_path, writeback_after_s=30)
    writes.created("old", 0.0)
    write(writes, tmp_path, "old", 0, b"written back", now=0.0)
    writes.created("young", 25.0)
    write(writes, tmp_path, "young", 0, b"lost", now=25.0)
    writes.write_back(now=31.0)
    writes.lose()
    assert (tmp_path / "old").read_bytes() == b"written back"
    assert (tmp_path / "young").read_bytes() == b""


def batch(base_offset: int, records: int, payload: int = 40) -> bytes:
    """A minimal record batch header: baseOffset, batchLength, …, lastOffsetDelta at byte 23."""
    body = bytearray(49 + payload)  # the batch after baseOffset and batchLength
    struct.pack_into(">i", body, 23 - 12, records - 1)
    return struct.pack(">qi", base_offset, len(body)) + bytes(body)


def test_segment_end_offset_reads_whole_batches_only(tmp_path: Path) -> None:
    seg = tmp_path / "00000000000000000000.log"
    seg.write_bytes(batch(0, 5) + batch(5, 3) + batch(8, 4)[:30])  # the last batch torn
    assert segment_end_offset(seg) == 8
    seg.write_bytes(batch(0, 5) + bytes(200))  # zeros after a power loss's undo
    assert segment_end_offset(seg) == 5
    seg.write_bytes(b"")
    assert segment_end_offset(seg) is None
