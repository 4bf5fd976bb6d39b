"""Per-broker host names for clients, kept in the host's /etc/hosts, so a fault can break one (`dns-fail`).

Clients run in the harness process and reach brokers on the host. Without names there is nothing for a
name-resolution fault to break, so a cluster started with `host_names` advertises each broker's client
listener as `kc-<run id>-broker-<id>` and this module maps those names in /etc/hosts, inside one block per
cluster:

    # kafka-chaos begin <run id>
    127.0.0.1 kc-<run id>-broker-1
    # kafka-chaos end <run id>

glibc's `files` source reads /etc/hosts on every lookup and librdkafka resolves a broker's name again on each
connect once `broker.address.ttl` (1 s) has passed, so a change to the block reaches clients at their next
connection. Breaking a name either leaves it out of the block (nothing resolves it: the lookup falls through
to DNS, which does not know it) or maps it to `DEAD_ADDRESS`. This module owns the names' format and the
block's; every write is atomic (a temporary file renamed over the original, or, where /etc/hosts is a bind
mount that cannot be replaced, rewritten in place) under a lock, and touches no line outside its own block.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path

HOSTS_PATH = Path("/etc/hosts")
LOOPBACK = "127.0.0.1"
DEAD_ADDRESS = "127.0.0.2"
"""Where a `dead-address` name points: a loopback address nothing listens on (node ports are published on
127.0.0.1 only), so every connect is refused at once, on any Linux host. TEST-NET-1 (192.0.2.1) is not dead
everywhere: on some hosts it is the gateway (it refuses too), and sandboxes with a transparent proxy accept
connections to every outside address, so what a client met there would depend on the machine."""
MARK = "# kafka-chaos"
_LABEL_MAX = 63  # RFC 1035: one label of a host name


def host_name(run_id: str, broker_id: int) -> str:
    """The name clients know broker `broker_id` of cluster `run_id` by: one DNS label of [a-z0-9-]."""
    run = re.sub(r"[^a-z0-9-]+", "-", run_id.lower()).strip("-") or "run"
    suffix = f"-broker-{broker_id}"
    if len(run) + len(suffix) + 3 > _LABEL_MAX:  # too long for a label: cut it, keep it unique by a digest
        digest = hashlib.sha256(run_id.encode()).hexdigest()[:8]
        run = f"{run[: _LABEL_MAX - len(suffix) - 3 - 9].rstrip('-')}-{digest}"
    return f"kc-{run}{suffix}"


def _begin(run_id: str) -> str:
    return f"{MARK} begin {run_id}"


def _end(run_id: str) -> str:
    return f"{MARK} end {run_id}"


def problem(path: Path | None = None) -> str | None:
    """Why the block cannot be written to `path` (None when it can): a paragraph naming the fix."""
    path = path or HOSTS_PATH
    if os.access(path, os.W_OK) and os.access(path.parent, os.W_OK | os.X_OK):
        return None
    return (f"dns-fail gives each broker a host name in {path}, and {path} (or its directory) is not writable "
            f"by this user (uid {os.getuid()}). Run kafka-chaos as a user who may write {path} (root, or make the "
            f"file writable: sudo chmod o+w {path}), or remove the dns-fail faults from the scenario. Nothing "
            "was started.")


def blocks(text: str) -> dict[str, dict[str, str]]:
    """Every kafka-chaos block in a hosts file's text: run id → {name: address}."""
    found: dict[str, dict[str, str]] = {}
    current: str | None = None
    for line in text.splitlines():
        if line.startswith(f"{MARK} begin "):
            current = line.removeprefix(f"{MARK} begin ").strip()
            found[current] = {}
        elif line.startswith(f"{MARK} end "):
            current = None
        elif current is not None and line.strip() and not line.lstrip().startswith("#"):
            address, *names = line.split()
            for name in names:
                found[current][name] = address
    return found


def _without(text: str, run_ids: frozenset[str] | None) -> list[str]:
    """The file's lines without the blocks of `run_ids` (of every run when None)."""
    kept: list[str] = []
    inside: str | None = None
    for line in text.splitlines():
        if line.startswith(f"{MARK} begin "):
            run_id = line.removeprefix(f"{MARK} begin ").strip()
            if run_ids is None or run_id in run_ids:
                inside = run_id
                continue
        if inside is not None:
            if line.startswith(f"{MARK} end "):
                inside = None
            continue
        kept.append(line)
    return kept


def set_block(run_id: str, names: Mapping[str, str | None], path: Path | None = None) -> None:
    """Write cluster `run_id`'s block: each name mapped to its address, a name whose address is None left
    out (it then resolves nowhere). Other lines, and other clusters' blocks, stay as they are."""
    path = path or HOSTS_PATH
    with _locked(path):
        text = path.read_text() if path.exists() else ""
        lines = _without(text, frozenset({run_id}))
        lines += [_begin(run_id), *(f"{a} {n}" for n, a in names.items() if a is not None), _end(run_id)]
        _replace(path, "\n".join(lines) + "\n")


def remove_blocks(run_ids: frozenset[str] | None = None, path: Path | None = None) -> list[str]:
    """Remove the blocks of `run_ids` (every kafka-chaos block when None); returns the run ids removed.
    The file is not written when it holds none of them."""
    path = path or HOSTS_PATH
    if not path.exists():
        return []
    with _locked(path):
        text = path.read_text()
        present = sorted(r for r in blocks(text) if run_ids is None or r in run_ids)
        if present:
            _replace(path, "\n".join(_without(text, run_ids)) + "\n")
    return present


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """One writer at a time per hosts file, across processes (two clusters starting together). The lock file
    lives in the temporary directory, not beside /etc/hosts, so nothing is left in /etc."""
    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"kafka-chaos-hosts-{key}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _replace(path: Path, text: str) -> None:
    """Atomically: a reader sees the old file or the new one, never half of one."""
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.kafka-chaos-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        try:
            os.replace(tmp, path)
        except OSError as err:
            if err.errno not in (errno.EBUSY, errno.EXDEV, errno.EPERM):
                raise
            # a bind-mounted /etc/hosts (a container's) cannot be renamed over: one write of the whole text
            with open(path, "r+") as f:
                f.write(text)
                f.truncate()
                f.flush()
                os.fsync(f.fileno())
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
