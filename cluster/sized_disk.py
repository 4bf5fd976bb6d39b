"""Sized disks: a node's data directory on a small file system of its own, so a fault can fill it (docs/architecture.md
§5, "Full disk").

With `[cluster] disk_size_mb = N` each node's data directory (partition logs and the metadata log) is a tmpfs of N
MiB mounted on the host and bind-mounted into the node's container, so it outlives the container's restarts. tmpfs
allocates pages as they are written and refuses a write that does not fit with ENOSPC at once, as ext4 does: the
broker sees the error on the append that hits it, not later. The `disk-full` fault fills a disk with a ballast
file until `free_mb` is left; its heal deletes the ballast (and the nemesis starts the node if it stopped).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
from pathlib import Path

from kafka_chaos.cluster.volatile_disk import is_mounted, remove_run_disks
from kafka_chaos.errors import ClusterError

SIZED_ROOT = Path(os.environ.get("KAFKA_CHAOS_SIZED_DISKS", "/var/tmp/kafka-chaos/sized"))
BALLAST = ".kafka-chaos-ballast"
MIB = 1024 * 1024


def missing_requirements(engine_url: str | None = None) -> list[str]:
    """What this machine lacks for sized disks, each with its fix (empty: disk-full can run here)."""
    problems = []
    if engine_url is not None and not engine_url.startswith("unix://"):
        problems.append(f"the container engine at {engine_url} is not on this machine: the disks are mounted "
                        "here, so disk_size_mb needs a local engine (unset DOCKER_HOST or point it at a unix socket)")
    if os.geteuid() != 0:
        problems.append("mounting a tmpfs needs root (run kafka-chaos as root, as the engine here runs)")
    return problems


def remove_sized_disks(run_id: str | None = None) -> list[str]:
    """Unmount and delete the sized disks of one run (or of every run: leftovers of killed runs)."""

    def unmount_node(node: Path) -> None:
        if is_mounted(node):
            subprocess.run(["umount", "-l", str(node)], capture_output=True)

    return remove_run_disks(SIZED_ROOT, run_id, unmount_node)


class SizedDisk:
    """One node's data directory on a tmpfs of `size_mb` MiB. A lifecycle object: `mount()` before the node is
    created, `fill(free_mb)` / `free()` for the fault, `close()` at the end (unmounts and deletes)."""

    def __init__(self, path: Path, size_mb: int) -> None:
        self.path = path
        self.size_mb = size_mb

    @property
    def mounted(self) -> bool:
        return is_mounted(self.path)

    def mount(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)
        if self.mounted:
            return
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={self.size_mb}m,mode=0777", "tmpfs",
                               str(self.path)], capture_output=True, text=True)
        if done.returncode != 0:
            raise ClusterError(f"could not mount a {self.size_mb} MiB tmpfs at {self.path}: "
                               f"{done.stderr.strip() or done.stdout.strip()}")

    def usage(self) -> dict[str, int]:
        """Bytes in use and free on the disk now."""
        sv = os.statvfs(self.path)
        return {"size": sv.f_blocks * sv.f_frsize, "free": sv.f_bavail * sv.f_frsize,
                "used": (sv.f_blocks - sv.f_bfree) * sv.f_frsize}

    def fill(self, free_mb: float = 0.0) -> dict[str, int]:
        """Write a ballast file until `free_mb` MiB are left (or the disk is full); returns the usage before and
        the ballast's size."""
        before = self.usage()
        want = max(0, before["free"] - int(free_mb * MIB))
        written = 0
        chunk = b"\0" * MIB
        with open(self.path / BALLAST, "ab", buffering=0) as f:
            try:
                while written < want:
                    written += f.write(chunk[: min(MIB, want - written)]) or 0
            except OSError:
                pass  # the disk is full: what fitted stays
        ballast = (self.path / BALLAST).stat().st_size
        return {"free_before": before["free"], "ballast": ballast, "free_after": self.usage()["free"]}

    def free(self) -> int:
        """Delete the ballast; returns the bytes it held."""
        ballast = self.path / BALLAST
        size = ballast.stat().st_size if ballast.exists() else 0
        with contextlib.suppress(FileNotFoundError):
            ballast.unlink()
        return size

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True)
        shutil.rmtree(self.path, ignore_errors=True)
