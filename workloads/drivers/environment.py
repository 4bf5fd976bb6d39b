"""Cached client environments: a pinned confluent-kafka release in a venv of its own, installed from PyPI on
first use (as images are built on first use) and reused afterwards: `~/.cache/kafka-chaos/clients/
confluent-kafka-<version>/`. A lock keeps two runs from installing the same one at once."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from kafka_chaos.errors import ClientUnavailable

Progress = Callable[[str], None]
"""Told what is being done while an environment is prepared (one short line each step)."""


def clients_cache() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "kafka-chaos" / "clients"
    root.mkdir(parents=True, exist_ok=True)
    return root


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive lock on `path` (created), held while the block runs, across processes."""
    with path.open("a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def confluent_kafka_python(version: str, progress: Progress | None = None) -> Path:
    """The python of the environment holding confluent-kafka `version`, installed first if needed."""
    say = progress or (lambda _: None)
    root = clients_cache()
    env = root / f"confluent-kafka-{version}"
    python, marker = env / "bin" / "python", env / ".installed"
    if marker.exists():
        return python
    with locked(root / f".confluent-kafka-{version}.lock"):
        if marker.exists():  # another run installed it while this one waited
            return python
        shutil.rmtree(env, ignore_errors=True)  # what a cut-short install left
        say(f"client: creating the environment for confluent-kafka {version} in {env}…")
        _run([sys.executable, "-m", "venv", str(env)], version)
        say(f"client: installing confluent-kafka=={version} from PyPI (once; reused afterwards)…")
        # wheels only: a release without one for this Python would need librdkafka's sources and a compiler
        _run([str(python), "-m", "pip", "install", "--disable-pip-version-check", "--no-input", "--quiet",
              "--only-binary=:all:", f"confluent-kafka=={version}"], version, cleanup=env)
        marker.write_text(version + "\n")
    return python


def _run(command: list[str], version: str, cleanup: Path | None = None) -> None:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode == 0:
        return
    if cleanup is not None:
        shutil.rmtree(cleanup, ignore_errors=True)
    said = [line.strip() for line in (done.stderr or done.stdout).splitlines() if line.strip()]
    why = said[-1] if said else f"exit status {done.returncode}"
    py = f"{sys.version_info.major}.{sys.version_info.minor}"
    raise ClientUnavailable(
        f'[workload] client_version = "{version}": confluent-kafka {version} could not be installed from PyPI '
        f"for Python {py} ({why}). Pick a release PyPI serves with a wheel for this Python (the list is at "
        "https://pypi.org/project/confluent-kafka/#history), or remove client_version to run the confluent-kafka "
        "installed with kafka-chaos in process. Nothing was started.")
