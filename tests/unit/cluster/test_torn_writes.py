"""A power loss that tears the last unsynced write of each file (cluster/volatile_disk.py), on plain files."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from kafka_chaos.cluster.volatile_disk import BLOCK, UnsyncedWrites, torn_prefix


def write(writes: UnsyncedWrites, root: Path, rel: str, offset: int, data: bytes) -> None:
    writes.before_write(rel, offset, len(data), 0.0)
    with open(root / rel, "r+b" if (root / rel).exists() else "w+b") as f:
        os.pwrite(f.fileno(), data, offset)


@pytest.mark.parametrize("seed", range(20))
def test_a_page_tear_keeps_the_write_up_to_a_page_boundary_inside_it(seed: int) -> None:
    kept = torn_prefix(100, 3 * BLOCK, "page", random.Random(seed))
    assert (100 + kept) % BLOCK == 0 and 0 < kept < 3 * BLOCK
    byte = torn_prefix(100, 3 * BLOCK, "byte", random.Random(seed))
    assert 0 < byte < 3 * BLOCK


def test_a_write_inside_one_page_is_not_torn_by_page() -> None:
    assert torn_prefix(10, 100, "page", random.Random(0)) == 0


def test_only_the_last_write_of_a_file_is_torn_and_the_rest_goes(tmp_path: Path) -> None:
    (tmp_path / "seg.log").write_bytes(b"A" * 100)  # synced before
    writes = UnsyncedWrites(tmp_path)
    write(writes, tmp_path, "seg.log", 100, b"B" * 50)
    write(writes, tmp_path, "seg.log", 150, b"C" * (2 * BLOCK))
    losses = writes.lose("byte", rng=random.Random(7))
    (loss,) = losses
    assert (loss.torn_offset, loss.torn_length) == (150, 2 * BLOCK) and 0 < (loss.torn_kept or 0) < 2 * BLOCK
    data = (tmp_path / "seg.log").read_bytes()
    # the earlier unsynced write is lost: a hole of zeros where it was, then the kept prefix of the last one
    assert data == b"A" * 100 + bytes(50) + b"C" * (loss.torn_kept or 0)
    assert loss.size_after == len(data)


def test_an_overwrite_tears_over_the_synced_bytes_it_replaced(tmp_path: Path) -> None:
    (tmp_path / "cp").write_bytes(b"old!" * BLOCK)  # 4 pages, synced
    writes = UnsyncedWrites(tmp_path)
    write(writes, tmp_path, "cp", 0, b"new!" * BLOCK)
    (loss,) = writes.lose("page", rng=random.Random(1))
    kept = loss.torn_kept or 0
    assert kept % BLOCK == 0 and 0 < kept < 4 * BLOCK
    assert (tmp_path / "cp").read_bytes() == b"new!" * (kept // 4) + b"old!" * ((4 * BLOCK - kept) // 4)


def test_the_glob_chooses_which_files_tear_and_a_truncation_leaves_no_write_to_tear(tmp_path: Path) -> None:
    writes = UnsyncedWrites(tmp_path)
    for rel in ("a.log", "b.index", "c.log"):
        writes.created(rel, 0.0)
        write(writes, tmp_path, rel, 0, b"x" * 3 * BLOCK)
    writes.before_truncate("c.log", BLOCK, 0.0)
    os.truncate(tmp_path / "c.log", BLOCK)
    losses = {x.path: x for x in writes.lose("page", torn_glob="*.log", rng=random.Random(3))}
    assert losses["a.log"].torn_kept is not None and losses["a.log"].size_after == losses["a.log"].torn_kept
    assert losses["b.index"].torn_kept is None and losses["b.index"].size_after == 0
    assert losses["c.log"].torn_kept is None and losses["c.log"].size_after == 0


def test_the_synced_prefix_ends_at_the_first_byte_changed_since_the_last_fsync(tmp_path: Path) -> None:
    (tmp_path / "seg.log").write_bytes(b"A" * 3 * BLOCK)
    writes = UnsyncedWrites(tmp_path)
    assert writes.synced_prefix("seg.log") == 3 * BLOCK and writes.synced_prefix("absent") == 0
    write(writes, tmp_path, "seg.log", BLOCK, b"A" * 100 + b"B")  # a page rewritten, mostly with what it held
    assert writes.synced_prefix("seg.log") == BLOCK + 100
    write(writes, tmp_path, "seg.log", 3 * BLOCK, b"C")  # an append does not move it
    assert writes.synced_prefix("seg.log") == BLOCK + 100


def test_bits_flipped_at_rest_survive_a_power_loss_that_takes_the_unsynced_writes(tmp_path: Path) -> None:
    (tmp_path / "seg.log").write_bytes(b"A" * 2 * BLOCK)  # synced
    writes = UnsyncedWrites(tmp_path)
    write(writes, tmp_path, "seg.log", 2 * BLOCK, b"unsynced")
    write(writes, tmp_path, "seg.log", BLOCK + 5, bytes([ord("A") ^ 4]))  # the flip, written like any write
    writes.flipped_at_rest("seg.log", [(BLOCK + 5, 2)])
    (loss,) = writes.lose("byte", rng=random.Random(0))
    assert loss.torn_kept is None, "the flip's own write is not torn"
    expected = bytearray(b"A" * 2 * BLOCK)
    expected[BLOCK + 5] ^= 4
    assert (tmp_path / "seg.log").read_bytes() == bytes(expected)
