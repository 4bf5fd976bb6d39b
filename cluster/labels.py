"""Labels on everything kafka-chaos starts, so leftovers can be found and removed (`kafka-chaos clean`)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime

import docker
import docker.errors

RUN_LABEL = "io.kafka-chaos.run"
ROLE_LABEL = "io.kafka-chaos.role"
NODE_LABEL = "io.kafka-chaos.node-id"
PORT_LABEL = "io.kafka-chaos.client-port"

_started: set[str] = set()
"""Run ids of the clusters this process started and has not handed over to be kept (swept after an interrupt)."""


def track(run_id: str) -> None:
    _started.add(run_id)


def untrack(run_id: str) -> None:
    """A cluster the user keeps (`--kafka-chaos-keep`): no sweep removes it."""
    _started.discard(run_id)


def started_run_ids() -> frozenset[str]:
    return frozenset(_started)


def new_run_id(name: str = "cluster", seed: int = 0) -> str:
    return f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{name}-{seed}"


def labelled(client: docker.DockerClient, run_id: str | None = None) -> dict[str, list[str]]:
    """Names of every container, network and volume kafka-chaos labelled (for one run, or all)."""
    flt: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    return {
        "containers": [str(c.name) for c in client.containers.list(all=True, filters=flt)],
        "networks": [str(n.name) for n in client.networks.list(filters=flt)],
        "volumes": [str(v.name) for v in client.volumes.list(filters=flt)],
    }


def labelled_of(client: docker.DockerClient, run_ids: frozenset[str]) -> dict[str, list[str]]:
    """`labelled` for a set of run ids."""
    found: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}
    for run_id in sorted(run_ids):
        for kind, names in labelled(client, run_id).items():
            found[kind] += names
    return found


def remove_labelled(client: docker.DockerClient, run_id: str | None = None) -> dict[str, list[str]]:
    """Remove what `labelled` lists: side-cars first (Podman refuses to remove a node they depend on)."""
    flt: dict[str, str | list[str] | bool] = {"label": f"{RUN_LABEL}={run_id}" if run_id else RUN_LABEL}
    removed: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}
    containers = client.containers.list(all=True, filters=flt)
    containers.sort(key=lambda c: c.labels.get(ROLE_LABEL) != "sidecar")
    for c in containers:
        with contextlib.suppress(docker.errors.NotFound):
            c.remove(force=True, v=True)
            removed["containers"].append(str(c.name))
    for net in client.networks.list(filters=flt):
        with contextlib.suppress(docker.errors.NotFound):
            net.remove()
            removed["networks"].append(str(net.name))
    for vol in client.volumes.list(filters=flt):
        with contextlib.suppress(docker.errors.NotFound):
            vol.remove(force=True)
            removed["volumes"].append(str(vol.name))
    return removed
