"""Bits flipped in what a node fsynced, at rest: the disk half of the `corrupt` fault (docs/architecture.md §5).

A file class names which of Kafka's files is hit, by Kafka's own file names under the data directory:

- `segment`: `<topic>-<partition>/<base offset>.log`, a partition's record log;
- `index`: `<topic>-<partition>/*.index` and `*.timeindex`, the memory-mapped offset and time indexes;
- `checkpoint`: any `*checkpoint` (recovery points, high watermarks, log start offsets, leader epochs, KRaft
  snapshots);
- `metadata-log`: `__cluster_metadata-0/*.log`, the KRaft metadata log.

Flips land only in bytes that were fsynced (a power loss would not take them back) and, in a log, only inside
whole record batches, so it is the batch CRC (Kafka's DefaultRecordBatch) that stands between the flip and a
reader. The newest such file (by modification time) is the one hit. Offsets and bits come from the caller's
seeded generator, so a run's corruption is replayed with its seed.
"""

from __future__ import annotations

import fnmatch
import os
import random
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal, get_args

from kafka_chaos.errors import ClusterError

FileClass = Literal["segment", "index", "checkpoint", "metadata-log"]
FILE_CLASSES: tuple[str, ...] = get_args(FileClass)
METADATA_DIR = "__cluster_metadata-0"
PATTERNS: dict[str, str] = {
    "segment": "<topic>-<partition>/*.log",
    "index": "<topic>-<partition>/*.index or *.timeindex",
    "checkpoint": "*checkpoint",
    "metadata-log": f"{METADATA_DIR}/*.log",
}
assert set(PATTERNS) == set(FILE_CLASSES)


def describe(file_class: str) -> str:
    """The file names a class stands for, for messages."""
    return f"{file_class}: {PATTERNS.get(file_class, 'no such class')}"


def file_class_of(rel: str) -> str | None:
    """The class of a path relative to the data directory (None: a file no class names)."""
    parts = rel.split("/")
    name = parts[-1]
    if name.endswith("checkpoint"):
        return "checkpoint"
    if len(parts) != 2:
        return None
    if name.endswith(".log"):
        return "metadata-log" if parts[0] == METADATA_DIR else "segment"
    if name.endswith((".index", ".timeindex")):
        return "index"
    return None


def files_of(root: Path, file_class: str, glob: str | None = None) -> list[str]:
    """The files of a class under `root` (matching `glob` too, if given), newest first."""
    found = []
    for dirpath, _, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            rel = str(path.relative_to(root))
            if file_class_of(rel) == file_class and (glob is None or fnmatch.fnmatchcase(rel, glob)):
                try:
                    found.append((path.stat().st_mtime_ns, rel))
                except FileNotFoundError:
                    continue
    return [rel for _, rel in sorted(found, reverse=True)]


def batch_ranges(data: bytes) -> list[tuple[int, int]]:
    """(start, end) of each whole record batch at the head of a log segment (baseOffset int64, batchLength int32,
    then batchLength bytes)."""
    ranges, pos = [], 0
    while pos + 12 <= len(data):
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if length <= 0 or pos + 12 + length > len(data):
            break
        ranges.append((pos, pos + 12 + length))
        pos += 12 + length
    return ranges


def flip_targets(data: bytes, file_class: str) -> list[tuple[int, int]]:
    """The byte ranges a flip may hit in `data` (a file's fsynced bytes): its whole batches for a log, up to its
    last non-zero byte otherwise (a preallocated index is mostly zeros no reader looks at)."""
    if file_class in ("segment", "metadata-log"):
        return batch_ranges(data)
    end = len(data.rstrip(b"\0"))
    return [(0, end)] if end else []


def pick_flips(ranges: list[tuple[int, int]], bits: int, rng: random.Random) -> list[tuple[int, int]]:
    """`bits` distinct (byte offset, bit) pairs, uniform over the bytes of `ranges`."""
    total = sum(end - start for start, end in ranges)
    chosen = sorted(rng.sample(range(total * 8), min(bits, total * 8)))
    flips = []
    for k in chosen:
        byte, bit = divmod(k, 8)
        for start, end in ranges:
            if byte < end - start:
                flips.append((start + byte, bit))
                break
            byte -= end - start
    return flips


def corrupt(root: Path, file_class: str, bits: int, rng: random.Random, synced_size: Callable[[str], int],
            glob: str | None = None,
            at_rest: Callable[[str, list[tuple[int, int]]], None] | None = None) -> dict[str, Any]:
    """Flip `bits` bits in the fsynced bytes of the newest file of `file_class` under `root` that has any and
    write them back. `synced_size(rel)`: how many leading bytes of a file were fsynced. `at_rest(rel, flips)`,
    called once the file is closed, makes the flips durable (a volatile disk's bookkeeping); without it they
    are fsynced. Returns the history's record: the file, and each flip's offset and bit."""
    candidates = files_of(root, file_class, glob)
    for rel in candidates:
        with open(root / rel, "r+b") as f:
            data = os.pread(f.fileno(), synced_size(rel), 0)
            ranges = flip_targets(data, file_class)
            if not ranges:
                continue
            flips = pick_flips(ranges, bits, rng)
            flipped = bytearray(data)
            for offset, bit in flips:
                flipped[offset] ^= 1 << bit
            for offset in sorted({o for o, _ in flips}):
                os.pwrite(f.fileno(), flipped[offset:offset + 1], offset)
            if at_rest is None:
                os.fsync(f.fileno())
        if at_rest is not None:
            at_rest(rel, flips)
        return {"file": rel, "file_class": file_class, "flips": [{"offset": o, "bit": b} for o, b in flips]}
    where = f" matching {glob!r}" if glob else ""
    raise ClusterError(f"no {file_class} file{where} with fsynced data to corrupt"
                       + (f" (found only empty or unsynced ones: {candidates[:5]})" if candidates else ""))
