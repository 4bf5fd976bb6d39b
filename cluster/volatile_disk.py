"""A node's data directory on a disk that can lose power (docs/architecture.md §6, "Power loss").

SIGKILL keeps the page cache: a killed broker comes back with every byte it wrote. A power cut does not: what was
not fsynced is gone. `VolatileDisk` puts a pass-through FUSE file system between the node and its data (the
semantics of lazyfs, the tool Jepsen uses for this), runs it on the host (the node's container gets the mount
as a plain bind volume and needs no privilege), and records what each file would lose:

- file *data and size* are volatile until the file is fsynced (`fsync`/`fdatasync`, `msync` of a mapped index,
  `FileChannel.force`); writes go through to the backing file at once, and the first change to a block since the
  last sync saves the block's synced bytes (`UnsyncedWrites`), so reads stay plain pass-through;
- with a write-back age (`lose = "last:N s"`), a file dirty for longer than N seconds counts as written back, as
  Linux's flusher does per inode (`dirty_expire_centisecs`, 30 s by default);
- *names* are durable at once (create, rename, unlink, mkdir), as in lazyfs: a file created and never synced
  survives a power loss empty. A real file system may also lose the name; this one does not;
- a power loss may *tear* the last unsynced write of each file (`torn = "page" | "byte"`, lazyfs's torn-op): a
  prefix of it, cut at a page boundary or at any byte, stays on disk instead of the whole write going.

`power_off` (after the node's processes are SIGKILLed) puts every file back to what was synced, refuses any late
write (the kernel's write-back of a dead process's mapped pages) and unmounts; `power_on` mounts the backing
directory again for the node's restart.

Disk faults beyond power loss (docs/architecture.md §5) are armed through the control socket while the disk is
mounted (`DiskFaults`): every fsync `fsync_delay_ms` slower (slow-disk), or reads, writes or fsyncs failing with
EIO, optionally only for paths matching a glob (disk-error). With the kernel's write-back cache a failed write
reaches the program at its next fsync, and a read served from the page cache never reaches the daemon: EIO on
read hits data the node has not read lately.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fnmatch
import hashlib
import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kafka_chaos.errors import ClusterError

# Where nodes' volatile disks live on the host: <root>/<run id>/<node>/{backing,mnt}
DISKS_ROOT = Path(os.environ.get("KAFKA_CHAOS_DISKS", "/var/tmp/kafka-chaos/disks"))
BLOCK = 4096
FUSE_CAP_WRITEBACK_CACHE = 1 << 16  # libfuse 3 fuse_common.h
ZERO_BLOCK = bytes(BLOCK)


@dataclass
class _FileState:
    synced_size: int
    dirty_since: float
    blocks: dict[int, bytes | None] = field(default_factory=dict)  # synced bytes of changed blocks; None: zeros
    last_write: tuple[int, int] | None = None  # (offset, length) of the last write, if it is the last change


@dataclass(frozen=True)
class FileLoss:
    """One file after a power loss: its size before and after, the blocks put back, and for a Kafka log segment
    (`<partition>/<base offset>.log`) the offset after its last whole record batch, before and after."""

    path: str
    size_before: int
    size_after: int
    blocks_restored: int
    end_offset_before: int | None = None
    end_offset_after: int | None = None
    torn_offset: int | None = None
    """A torn last write: where it started, how long it was, how many of its leading bytes the loss kept."""
    torn_length: int | None = None
    torn_kept: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if v is not None}


DISK_OPS = ("fsync", "write", "read")
"""What a disk-error can fail: fsync; write (also create and truncate); read."""


class DiskFaults:
    """What the disk does wrong while armed, and what it did (the answer to {"cmd": "faults"}): fsyncs delayed,
    EIO returned per operation. Thread-safe: FUSE calls it from many threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.fsync_delay_ms = 0
        self.eio_ops: frozenset[str] = frozenset()
        self.eio_glob: str | None = None
        self.delayed_fsyncs = 0
        self.delayed_ms = 0
        self.eio_returned: dict[str, int] = {}

    def arm(self, request: dict[str, Any]) -> None:
        """Apply the settings a command names (absent keys keep theirs): `fsync_delay_ms`, and `eio` as
        {"ops": [...], "glob": ...} or None to stop failing."""
        with self._lock:
            if "fsync_delay_ms" in request:
                self.fsync_delay_ms = max(0, int(request["fsync_delay_ms"]))
            if "eio" in request:
                eio = request["eio"] or {}
                ops = frozenset(eio.get("ops", DISK_OPS if eio else ()))
                unknown = ops - set(DISK_OPS)
                if unknown:
                    raise ValueError(f"unknown disk operations {sorted(unknown)}; known: {list(DISK_OPS)}")
                self.eio_ops, self.eio_glob = ops, eio.get("glob")

    def fsync_delay_s(self) -> float:
        with self._lock:
            if self.fsync_delay_ms:
                self.delayed_fsyncs += 1
                self.delayed_ms += self.fsync_delay_ms
            return self.fsync_delay_ms / 1000

    def fails(self, op: str, rel: str) -> bool:
        """Whether `op` on `rel` fails with EIO now (counted when it does)."""
        with self._lock:
            if op not in self.eio_ops or (self.eio_glob is not None and not fnmatch.fnmatchcase(rel, self.eio_glob)):
                return False
            self.eio_returned[op] = self.eio_returned.get(op, 0) + 1
            return True

    def to_dict(self) -> dict[str, Any]:
        with self._lock:
            return {"fsync_delay_ms": self.fsync_delay_ms, "eio_ops": sorted(self.eio_ops),
                    "eio_glob": self.eio_glob, "delayed_fsyncs": self.delayed_fsyncs, "delayed_ms": self.delayed_ms,
                    "eio_returned": dict(self.eio_returned)}


def segment_end_offset(path: Path) -> int | None:
    """The offset after the last whole record batch of a Kafka log segment (None: no whole batch). A batch is
    baseOffset int64, batchLength int32, …, lastOffsetDelta int32 at byte 23 (Kafka's DefaultRecordBatch)."""
    end = None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        pos = 0
        while pos + 27 <= size:
            head = os.pread(f.fileno(), 27, pos)
            base, length = struct.unpack_from(">qi", head)
            if length <= 0 or pos + 12 + length > size:
                break  # a torn or zero-filled tail: what Kafka's recovery truncates
            end = base + struct.unpack_from(">i", head, 23)[0] + 1
            pos += 12 + length
    return end


class UnsyncedWrites:
    """What a power loss would take from the files under `root`: the bookkeeping of the volatile disk, without FUSE.

    Callers hold one lock around each `before_*` call and the change it precedes (the file system does)."""

    def __init__(self, root: Path, writeback_after_s: float | None = None) -> None:
        self.root = root
        self.writeback_after_s = writeback_after_s
        self.files: dict[str, _FileState] = {}

    def _state(self, rel: str, now: float) -> _FileState:
        state = self.files.get(rel)
        if state is None:
            try:
                size = os.stat(self.root / rel).st_size
            except FileNotFoundError:
                size = 0
            state = self.files[rel] = _FileState(synced_size=size, dirty_since=now)
        return state

    def _save(self, rel: str, state: _FileState, first_block: int, last_block: int) -> None:
        last_block = min(last_block, (state.synced_size - 1) // BLOCK)
        todo = [b for b in range(first_block, last_block + 1) if b not in state.blocks]
        if not todo:
            return
        with open(self.root / rel, "rb") as f:
            for b in todo:
                data = os.pread(f.fileno(), BLOCK, b * BLOCK)
                state.blocks[b] = None if data == ZERO_BLOCK[: len(data)] else data

    def created(self, rel: str, now: float) -> None:
        self.files[rel] = _FileState(synced_size=0, dirty_since=now)

    def before_write(self, rel: str, offset: int, length: int, now: float) -> None:
        state = self._state(rel, now)
        if length > 0 and offset < state.synced_size:
            self._save(rel, state, offset // BLOCK, (offset + length - 1) // BLOCK)
        state.last_write = (offset, length) if length > 0 else state.last_write

    def before_truncate(self, rel: str, length: int, now: float) -> None:
        state = self._state(rel, now)
        state.last_write = None  # the truncation is the file's last change: no write left to tear
        if length < state.synced_size:
            self._save(rel, state, length // BLOCK, (state.synced_size - 1) // BLOCK)

    def synced(self, rel: str) -> None:
        self.files.pop(rel, None)

    def renamed(self, old: str, new: str) -> None:
        self.files.pop(new, None)  # the replaced file is gone, durably (names are durable)
        moved = {k: v for k, v in self.files.items() if k == old or k.startswith(old + "/")}
        for k, v in moved.items():
            del self.files[k]
            self.files[new + k[len(old):]] = v

    def removed(self, rel: str) -> None:
        self.files.pop(rel, None)

    def write_back(self, now: float) -> None:
        """The kernel's flusher: files dirty for longer than the write-back age count as on disk."""
        if self.writeback_after_s is None:
            return
        for rel in [r for r, s in self.files.items() if now - s.dirty_since >= self.writeback_after_s]:
            del self.files[rel]

    def synced_prefix(self, rel: str) -> int:
        """How many leading bytes of a file are as they were at its last fsync (its whole size if clean). A block
        changed since counts up to its first byte that differs: the kernel's write-back cache rewrites whole
        pages, synced bytes included."""
        try:
            with open(self.root / rel, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                state = self.files.get(rel)
                if state is None:
                    return size
                limit = min(size, state.synced_size)
                for b in sorted(state.blocks):
                    if b * BLOCK >= limit:
                        break
                    saved, now = state.blocks[b] or ZERO_BLOCK, os.pread(f.fileno(), BLOCK, b * BLOCK)
                    n = min(len(saved), len(now), limit - b * BLOCK)
                    differs = next((i for i in range(n) if saved[i] != now[i]), None)
                    if differs is not None:
                        return b * BLOCK + differs
                return limit
        except FileNotFoundError:
            return 0

    def flipped_at_rest(self, rel: str, flips: list[tuple[int, int]]) -> None:
        """Bits flipped (byte offset, bit) in a file's synced bytes, written since like any write, count as on disk:
        the synced copy of each changed block a power loss would put back carries them too."""
        state = self.files.get(rel)
        if state is None:
            return
        for offset, bit in flips:
            b = offset // BLOCK
            if b in state.blocks:
                saved = bytearray(state.blocks[b] or ZERO_BLOCK[: min(BLOCK, state.synced_size - b * BLOCK)])
                saved[offset % BLOCK] ^= 1 << bit
                state.blocks[b] = bytes(saved)
        state.last_write = None  # the flips' own write is no write in flight to tear

    def unsynced_bytes(self) -> int:
        total = 0
        for rel, state in self.files.items():
            with contextlib.suppress(FileNotFoundError):
                total += max(0, os.stat(self.root / rel).st_size - state.synced_size)
            total += BLOCK * len(state.blocks)
        return total

    def lose(self, torn: str | None = None, torn_glob: str | None = None,
             rng: random.Random | None = None) -> list[FileLoss]:
        """Put every file back to what was synced: its synced size, the synced bytes of every block changed since.
        With `torn` ("page" or "byte"), the last write of each file (whose path matches `torn_glob`, if given)
        keeps a prefix (`torn_prefix`) instead of going whole."""
        rng = rng or random.Random(0)
        losses = []
        for rel, state in sorted(self.files.items()):
            path = self.root / rel
            try:
                size_before = os.stat(path).st_size
            except FileNotFoundError:
                continue
            segment = rel.endswith(".log")
            end_before = segment_end_offset(path) if segment else None
            tear = (torn is not None and state.last_write is not None
                    and (torn_glob is None or fnmatch.fnmatchcase(rel, torn_glob)))
            with open(path, "r+b") as f:
                kept, prefix = 0, b""
                if tear and state.last_write is not None:
                    offset, length = state.last_write
                    kept = torn_prefix(offset, length, str(torn), rng)
                    prefix = os.pread(f.fileno(), kept, offset)
                os.ftruncate(f.fileno(), state.synced_size)
                for b, data in sorted(state.blocks.items()):
                    end = min(BLOCK, state.synced_size - b * BLOCK)
                    os.pwrite(f.fileno(), (data if data is not None else ZERO_BLOCK)[:end], b * BLOCK)
                if prefix:
                    os.pwrite(f.fileno(), prefix, state.last_write[0] if state.last_write else 0)
                os.fsync(f.fileno())
                size_after = os.fstat(f.fileno()).st_size
            if size_before != size_after or state.blocks or tear:
                end_after = segment_end_offset(path) if segment else None
                torn_at = state.last_write if tear else None
                losses.append(FileLoss(rel, size_before, size_after, len(state.blocks), end_before, end_after,
                                       *((torn_at[0], torn_at[1], kept) if torn_at else (None, None, None))))
        self.files.clear()
        return losses


def torn_prefix(offset: int, length: int, torn: str, rng: random.Random) -> int:
    """How many leading bytes of a write at `offset` of `length` bytes a tearing power loss keeps: strictly
    fewer than all; with "page", up to a page boundary inside the write (none inside: nothing kept, as a write
    within one page reaches the disk whole or not at all); with "byte", any count from 1."""
    if torn == "byte":
        return rng.randrange(1, length) if length > 1 else 0
    boundaries = range((offset // BLOCK + 1) * BLOCK, offset + length, BLOCK)
    return rng.choice(boundaries) - offset if boundaries else 0


def _fuse_operations(backing: Path, writes: UnsyncedWrites, faults: DiskFaults | None = None) -> Any:
    """The pass-through file system over `backing` (mfusepy on libfuse 3), recording into `writes`, failing or
    slowing as `faults` says."""
    import mfusepy
    from mfusepy import FuseOSError

    class VolatileFs(mfusepy.Operations):  # type: ignore[misc]
        use_ns = True

        def __init__(self) -> None:
            self.mutex = threading.RLock()
            self.powered = True
            self.faults = faults or DiskFaults()

        def init_with_config(self, conn: Any, config: Any) -> None:
            # The kernel's write-back cache gathers small appends into page-sized writes (the daemon's cost is
            # per call); what it holds is unsynced, and fsync flushes it here before FSYNC. Only this daemon
            # changes the backing files while mounted, so cached pages and attributes stay true.
            # Not with a write-back age: the kernel's own flusher would then shift what "dirty for N s" means.
            if writes.writeback_after_s is None and conn is not None and conn.capable & FUSE_CAP_WRITEBACK_CACHE:
                conn.want |= FUSE_CAP_WRITEBACK_CACHE
            if config is not None:
                config.kernel_cache = 1
                config.attr_timeout = config.entry_timeout = 60.0

        def _path(self, path: str) -> str:
            return str(backing) + path

        def _rel(self, path: str) -> str:
            return path.lstrip("/")

        def _check_power(self) -> None:
            if not self.powered:
                raise FuseOSError(errno.EIO)

        def _check_fault(self, op: str, path: str) -> None:
            if self.faults.fails(op, self._rel(path)):
                raise FuseOSError(errno.EIO)

        def power_off(self, torn: str | None = None, torn_glob: str | None = None,
                      seed: int = 0) -> list[FileLoss]:
            with self.mutex:
                self.powered = False
                return writes.lose(torn, torn_glob, random.Random(seed))

        # -- names: durable at once --
        def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
            self._check_power()
            st = os.fstat(fh) if fh is not None else os.lstat(self._path(path))
            keys = ("st_mode", "st_nlink", "st_uid", "st_gid", "st_size", "st_atime", "st_mtime", "st_ctime",
                    "st_blocks", "st_blksize")
            attrs = {k: getattr(st, k) for k in keys}
            for k in ("st_atime", "st_mtime", "st_ctime"):
                attrs[k] = getattr(st, k + "_ns")
            return attrs

        def readdir(self, path: str, fh: int) -> list[str]:
            self._check_power()
            return [".", "..", *os.listdir(self._path(path))]

        def access(self, path: str, amode: int) -> int:
            self._check_power()
            if not os.access(self._path(path), amode):
                raise FuseOSError(errno.EACCES)
            return 0

        def mkdir(self, path: str, mode: int) -> int:
            self._check_power()
            os.mkdir(self._path(path), mode)
            return 0

        def rmdir(self, path: str) -> int:
            self._check_power()
            os.rmdir(self._path(path))
            return 0

        def unlink(self, path: str) -> int:
            with self.mutex:
                self._check_power()
                os.unlink(self._path(path))
                writes.removed(self._rel(path))
            return 0

        def rename(self, old: str, new: str) -> int:
            with self.mutex:
                self._check_power()
                os.rename(self._path(old), self._path(new))
                writes.renamed(self._rel(old), self._rel(new))
            return 0

        def chmod(self, path: str, mode: int) -> int:
            self._check_power()
            os.chmod(self._path(path), mode)
            return 0

        def chown(self, path: str, uid: int, gid: int) -> int:
            self._check_power()
            os.chown(self._path(path), uid, gid)
            return 0

        def utimens(self, path: str, times: tuple[int, int] | None = None) -> int:
            self._check_power()
            os.utime(self._path(path), ns=times) if times else os.utime(self._path(path))
            return 0

        def symlink(self, target: str, source: str) -> int:
            self._check_power()
            os.symlink(source, self._path(target))
            return 0

        def readlink(self, path: str) -> str:
            self._check_power()
            return os.readlink(self._path(path))

        def statfs(self, path: str) -> dict[str, int]:
            sv = os.statvfs(self._path(path))
            keys = ("f_bavail", "f_bfree", "f_blocks", "f_bsize", "f_favail", "f_ffree", "f_files", "f_flag",
                    "f_frsize", "f_namemax")
            return {k: getattr(sv, k) for k in keys}

        # -- data: volatile until fsync --
        def create(self, path: str, mode: int, fi: Any = None) -> int:
            with self.mutex:
                self._check_power()
                self._check_fault("write", path)
                fh = os.open(self._path(path), os.O_RDWR | os.O_CREAT | os.O_TRUNC, mode)
                writes.created(self._rel(path), time.monotonic())
            return fh

        def open(self, path: str, flags: int) -> int:
            self._check_power()
            # the write-back cache reads pages it only partly writes: a write-only file is opened for both
            flags &= ~os.O_APPEND
            if flags & os.O_ACCMODE == os.O_WRONLY:
                flags = (flags & ~os.O_ACCMODE) | os.O_RDWR
            if flags & os.O_TRUNC:
                with self.mutex:
                    writes.before_truncate(self._rel(path), 0, time.monotonic())
                    return os.open(self._path(path), flags)
            return os.open(self._path(path), flags)

        def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
            self._check_power()
            self._check_fault("read", path)
            return os.pread(fh, size, offset)

        def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
            with self.mutex:
                self._check_power()
                self._check_fault("write", path)
                writes.before_write(self._rel(path), offset, len(data), time.monotonic())
                return os.pwrite(fh, data, offset)

        def truncate(self, path: str, length: int, fh: int | None = None) -> int:
            with self.mutex:
                self._check_power()
                self._check_fault("write", path)
                writes.before_truncate(self._rel(path), length, time.monotonic())
                if fh is not None:
                    os.ftruncate(fh, length)
                else:
                    os.truncate(self._path(path), length)
            return 0

        def fallocate(self, path: str, mode: int, offset: int, size: int, fh: int) -> int:
            raise FuseOSError(errno.EOPNOTSUPP)  # callers fall back to writing (Kafka preallocates by setLength)

        def fsync(self, path: str, datasync: int, fh: int) -> int:
            delay_s = self.faults.fsync_delay_s()
            if delay_s:
                time.sleep(delay_s)  # outside the lock: a slow fsync holds back its caller, not other files' I/O
            self._check_fault("fsync", path)
            with self.mutex:
                self._check_power()
                os.fsync(fh)
                writes.synced(self._rel(path))
            return 0

        def flush(self, path: str, fh: int) -> int:
            return 0  # close(2) is no sync

        def release(self, path: str, fh: int) -> int:
            os.close(fh)
            return 0

    return VolatileFs()


# -- the daemon: one process per node, on the host ------------------------------------------------------------


def _serve_control(sock_path: Path, ops: Any, writes: UnsyncedWrites) -> None:
    """One JSON command per connection: {"cmd": "status"}, {"cmd": "power-off"}, {"cmd": "settle"} or
    {"cmd": "faults", ...} (`DiskFaults.arm`; answers what is armed and what it did). A bad command is answered
    {"error": "..."}."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    with contextlib.suppress(FileNotFoundError):
        sock_path.unlink()
    server.bind(str(sock_path))
    server.listen(4)
    while True:
        conn, _ = server.accept()
        with conn:
            request = json.loads(conn.makefile().readline() or "{}")
            if request.get("cmd") == "faults":
                try:
                    ops.faults.arm(request)
                    answer: dict[str, Any] = ops.faults.to_dict()
                except (ValueError, TypeError) as err:
                    answer = {"error": str(err)}
            elif request.get("cmd") == "power-off":
                losses = ops.power_off(request.get("torn"), request.get("torn_glob"), int(request.get("seed", 0)))
                answer = {"files": [loss.to_dict() for loss in losses]}
            elif request.get("cmd") == "synced":
                with ops.mutex:
                    answer = {"synced_size": writes.synced_prefix(str(request.get("path", "")))}
            elif request.get("cmd") == "at-rest":
                with ops.mutex:
                    writes.flipped_at_rest(str(request["path"]), [(int(o), int(b)) for o, b in request["flips"]])
                    answer = {}
            elif request.get("cmd") == "settle":
                with ops.mutex:
                    answer = {"settled_files": len(writes.files)}
                    writes.files.clear()
            else:
                with ops.mutex:
                    answer = {"dirty_files": len(writes.files), "unsynced_bytes": writes.unsynced_bytes()}
            conn.sendall((json.dumps(answer) + "\n").encode())


def _flusher(ops: Any, writes: UnsyncedWrites) -> None:
    while True:
        time.sleep(1.0)
        with ops.mutex:
            writes.write_back(time.monotonic())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="kafka-chaos volatile disk (FUSE pass-through, lazyfs semantics)")
    parser.add_argument("backing", type=Path)
    parser.add_argument("mountpoint", type=Path)
    parser.add_argument("--control", type=Path, required=True)
    parser.add_argument("--writeback-after-s", type=float, default=None)
    args = parser.parse_args(argv)
    import mfusepy

    writes = UnsyncedWrites(args.backing, args.writeback_after_s)
    ops = _fuse_operations(args.backing, writes)
    threading.Thread(target=_serve_control, args=(args.control, ops, writes), daemon=True).start()
    if args.writeback_after_s is not None:
        threading.Thread(target=_flusher, args=(ops, writes), daemon=True).start()
    # allow_other: the node's processes are not the daemon's; default_permissions: the kernel checks modes
    mfusepy.FUSE(ops, str(args.mountpoint), foreground=True, nothreads=False, allow_other=True,
                 default_permissions=True, fsname="kafka-chaos-volatile")


# -- the host side ----------------------------------------------------------------------------------------------


def missing_requirements(engine_url: str | None = None) -> list[str]:
    """What this machine lacks for a volatile disk, each with its fix (empty: power loss can run here)."""
    problems = []
    if engine_url is not None and not engine_url.startswith("unix://"):
        problems.append(f"the container engine at {engine_url} is not on this machine: the disks are mounted "
                        "here, so power-loss needs a local engine (unset DOCKER_HOST or point it at a unix socket)")
    if not os.path.exists("/dev/fuse"):
        problems.append("/dev/fuse is missing (load the fuse module: `modprobe fuse`)")
    if shutil.which("fusermount3") is None:
        problems.append("fusermount3 is missing (install Debian's fuse3: `make setup` does)")
    try:
        import mfusepy  # noqa: F401
    except (ImportError, OSError) as err:
        problems.append(f"the FUSE binding does not load ({err}; `make setup` installs mfusepy and libfuse3)")
    return problems


def unmount(mountpoint: Path) -> None:
    """Unmount (lazily when busy); a mount whose daemon died answers "transport endpoint not connected"."""
    for args in (["fusermount3", "-u", str(mountpoint)], ["fusermount3", "-uz", str(mountpoint)]):
        if subprocess.run(args, capture_output=True).returncode == 0:
            return


def is_mounted(mountpoint: Path) -> bool:
    target = os.path.abspath(mountpoint)
    with open("/proc/self/mounts") as f:
        return any(len(fields) > 1 and fields[1] == target for fields in (line.split() for line in f))


def remove_run_disks(root: Path, run_id: str | None, unmount_node: Callable[[Path], None]) -> list[str]:
    """Under `root/<run>/<node>`: unmount each node's disk (`unmount_node`) and delete the run folders, of one run
    or of every run (leftovers of killed runs); returns the `run/node` names removed. Volatile and sized disks share
    the layout and differ only in how a node's disk is unmounted."""
    runs = [root / run_id] if run_id else (sorted(p for p in root.iterdir() if not p.name.startswith("."))
                                           if root.is_dir() else [])  # .sockets: the disks' control sockets
    removed = []
    for run in runs:
        for node in sorted(run.iterdir()) if run.is_dir() else []:
            unmount_node(node)
            removed.append(f"{run.name}/{node.name}")
        shutil.rmtree(run, ignore_errors=True)
    return removed


def remove_disks(run_id: str | None = None) -> list[str]:
    """Unmount and delete the volatile disks of one run (or of every run: leftovers of killed runs)."""

    def unmount_node(node: Path) -> None:
        if is_mounted(node / "mnt"):
            unmount(node / "mnt")
        with contextlib.suppress(FileNotFoundError):
            control_socket(node).unlink()

    return remove_run_disks(DISKS_ROOT, run_id, unmount_node)


class VolatileDisk:
    """A directory whose unsynced writes a power loss takes: `backing` holds the data, `mountpoint` is what the
    node mounts. A lifecycle object: `mount()` before the node starts, `power_off()` after its processes die,
    `power_on()` before it starts again, `close()` at the end (unmounts and deletes both)."""

    def __init__(self, root: Path, writeback_after_s: float | None = None) -> None:
        self.root = root
        self.backing = root / "backing"
        self.mountpoint = root / "mnt"
        self.control = control_socket(root)
        self.writeback_after_s = writeback_after_s
        self._daemon: subprocess.Popen[bytes] | None = None

    def mount(self, timeout_s: float = 10.0) -> None:
        self.backing.mkdir(parents=True, exist_ok=True)
        self.mountpoint.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            self.control.unlink()
        argv = [sys.executable, "-m", "kafka_chaos.cluster.volatile_disk", str(self.backing), str(self.mountpoint),
                "--control", str(self.control)]
        if self.writeback_after_s is not None:
            argv += ["--writeback-after-s", str(self.writeback_after_s)]
        log = open(self.root / "daemon.log", "ab")  # noqa: SIM115 - the daemon's stderr for as long as it lives
        self._daemon = subprocess.Popen(argv, stdout=log, stderr=log, start_new_session=True)
        deadline = time.monotonic() + timeout_s
        while not (is_mounted(self.mountpoint) and self.control.exists()):
            if self._daemon.poll() is not None or time.monotonic() > deadline:
                tail = (self.root / "daemon.log").read_text(errors="replace")[-800:]
                self.close()
                raise ClusterError(f"the volatile disk at {self.mountpoint} did not mount: {tail.strip()}")
            time.sleep(0.05)

    def _ask(self, cmd: str, timeout_s: float = 60.0, **fields: Any) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout_s)
            s.connect(str(self.control))
            s.sendall((json.dumps({"cmd": cmd, **fields}) + "\n").encode())
            answer: dict[str, Any] = json.loads(s.makefile().readline())
            if "error" in answer:
                raise ClusterError(f"the volatile disk at {self.mountpoint} refused {cmd}: {answer['error']}")
            return answer

    def arm_faults(self, **settings: Any) -> dict[str, Any]:
        """Arm (or disarm) disk faults (`DiskFaults.arm`); returns what is armed and what the faults did so far."""
        return self._ask("faults", **settings)

    def slow_fsyncs(self, delay_ms: int) -> dict[str, Any]:
        """Every fsync from now on takes `delay_ms` more (0: back to normal). Returns the disk's fault state."""
        return self.arm_faults(fsync_delay_ms=delay_ms)

    def fail_io(self, ops: list[str] | tuple[str, ...] = DISK_OPS, glob: str | None = None) -> dict[str, Any]:
        """`ops` (of DISK_OPS) fail with EIO from now on, on paths matching `glob` (relative to the data directory;
        `*` matches across `/`), or on every path."""
        return self.arm_faults(eio={"ops": list(ops), "glob": glob})

    def clear_faults(self) -> dict[str, Any]:
        """No more delays or errors; returns what the disk did while they were armed."""
        return self.arm_faults(fsync_delay_ms=0, eio=None)

    def faults(self) -> dict[str, Any]:
        return self.arm_faults()

    def flipped_at_rest(self, rel: str, flips: list[tuple[int, int]]) -> None:
        """Bits just flipped through the mount in synced bytes of `rel` stay after a power loss, without an fsync
        that would make the file's unsynced writes durable too (`UnsyncedWrites.flipped_at_rest`)."""
        self._ask("at-rest", path=rel, flips=[list(f) for f in flips])

    def synced_size(self, rel: str) -> int:
        """How many leading bytes of `rel` (relative to the data directory) were fsynced."""
        return int(self._ask("synced", path=rel)["synced_size"])

    def status(self) -> dict[str, Any]:
        return self._ask("status")

    def settle(self) -> int:
        """Everything written so far counts as on disk (`sync`): a run starts on a machine that has been up for
        longer than the write-back age. Returns how many files were dirty."""
        os.sync()  # pages the kernel's write-back cache still holds reach the daemon first
        return int(self._ask("settle")["settled_files"])

    def power_off(self, torn: str | None = None, torn_glob: str | None = None, seed: int = 0) -> list[dict[str, Any]]:
        """Lose every unsynced write (the node's processes must be dead), then unmount. Returns the files changed.
        `torn`: "page" or "byte" tears each file's last write (`UnsyncedWrites.lose`), drawn with `seed`."""
        files: list[dict[str, Any]] = self._ask("power-off", torn=torn, torn_glob=torn_glob, seed=seed)["files"]
        self._stop_daemon()
        return files

    def power_on(self) -> None:
        self.mount()

    def replace(self) -> dict[str, Any]:
        """A new, empty disk in this one's place (the node's processes must be dead): unmounted, everything under
        the backing directory deleted, and counted first, per top-level entry (a partition's directory,
        meta.properties, a checkpoint file); the next `power_on` mounts the empty disk. Returns {"files", "bytes",
        "log_bytes", "entries": {name: bytes}}: bytes allocated on disk (Kafka preallocates its index files
        sparse, so their length says little), and the length of the log segments (the records)."""
        if self._daemon is not None or is_mounted(self.mountpoint):
            self._stop_daemon()  # its bookkeeping of unsynced writes goes with the old disk
        entries: dict[str, int] = {}
        files = log_bytes = 0
        for entry in sorted(self.backing.iterdir()) if self.backing.is_dir() else []:
            found = ([f for f in entry.rglob("*") if f.is_file() or f.is_symlink()]
                     if entry.is_dir() and not entry.is_symlink() else [entry])
            stats = [(f.name, f.lstat()) for f in found]
            entries[entry.name] = sum(st.st_blocks * 512 for _, st in stats)
            log_bytes += sum(st.st_size for name, st in stats if name.endswith(".log"))
            files += len(stats)
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        return {"files": files, "bytes": sum(entries.values()), "log_bytes": log_bytes, "entries": entries}

    @property
    def mounted(self) -> bool:
        return self._daemon is not None and self._daemon.poll() is None and is_mounted(self.mountpoint)

    def _stop_daemon(self) -> None:
        unmount(self.mountpoint)
        if self._daemon is not None:
            try:
                self._daemon.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._daemon.kill()
                self._daemon.wait()
            self._daemon = None

    def close(self) -> None:
        if is_mounted(self.mountpoint) or self._daemon is not None:
            self._stop_daemon()
        shutil.rmtree(self.root, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            self.control.unlink()


def control_socket(root: Path) -> Path:
    """The disk daemon's control socket: a short path named by a digest of the disk's folder, because a Unix
    socket's path has at most 107 bytes and a run id (the scenario's name in it) can make the folder longer."""
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    sockets = DISKS_ROOT / ".sockets"
    sockets.mkdir(parents=True, exist_ok=True)
    return sockets / f"{digest}.sock"


if __name__ == "__main__":
    main()
