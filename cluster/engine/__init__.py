"""Find the Docker-API engine the way Docker does: DOCKER_HOST, else the default socket.

On hosts without a Docker engine, `setup-engine.sh` (beside this file) runs Podman's Docker-API service on
/run/podman/podman.sock; it is tried last, so the harness works there without DOCKER_HOST in the environment.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import docker
import docker.errors
import requests.exceptions

from kafka_chaos.errors import EngineUnavailable

PODMAN_SOCKET = "/run/podman/podman.sock"
DOCKER_SOCKET = "/var/run/docker.sock"
SETUP_SCRIPT = Path(__file__).resolve().parent / "setup-engine.sh"


def engine_url() -> str:
    if url := os.environ.get("DOCKER_HOST"):
        return url
    for sock in (DOCKER_SOCKET, PODMAN_SOCKET):
        if Path(sock).is_socket():
            return f"unix://{sock}"
    return f"unix://{DOCKER_SOCKET}"


def _unavailable(url: str, why: str) -> EngineUnavailable:
    return EngineUnavailable(
        f"No container engine answers at {url} ({why}). kafka-chaos needs a Docker-API engine. "
        f"Start one with `make setup` (or `bash {SETUP_SCRIPT}`), which installs Podman if needed and serves "
        f"the Docker API on unix://{PODMAN_SOCKET}; then export DOCKER_HOST=unix://{PODMAN_SOCKET} or unset a "
        "DOCKER_HOST that points elsewhere."
    )


@functools.cache
def docker_client() -> docker.DockerClient:
    """A connected client; raises EngineUnavailable with the command that fixes it."""
    url = engine_url()
    try:
        client = docker.DockerClient(base_url=url, timeout=120)
        client.ping()
    except (docker.errors.DockerException, requests.exceptions.RequestException, OSError) as err:
        raise _unavailable(url, type(err).__name__) from None
    # testcontainers reads the engine from the environment; Ryuk's image cannot be pulled offline and we
    # remove everything ourselves by label.
    os.environ["DOCKER_HOST"] = url
    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
    return client
