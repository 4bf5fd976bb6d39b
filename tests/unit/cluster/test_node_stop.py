"""KafkaNode's stop on an engine that answers a stop with Podman's "container state improper" race."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest

from kafka_chaos.cluster.node import KafkaNode

IMPROPER = "container 6030 is running or paused, refusing to clean up: container state improper"


class FakeContainer:
    def __init__(self, stop_error: str | None, exits: bool) -> None:
        self.stop_error, self.exits = stop_error, exits
        self.status = "running"
        self.killed = False

    def stop(self, timeout: int) -> None:
        if self.exits:
            self.status = "exited"
        if self.stop_error is not None:
            raise docker.errors.APIError(f"500 Server Error: Internal Server Error (\"{self.stop_error}\")")

    def kill(self, signal: str) -> None:
        self.killed, self.status = True, "exited"

    def reload(self) -> None:
        pass

    def get_wrapped_container(self) -> FakeContainer:  # as testcontainers' DockerContainer
        return self


def node(container: FakeContainer) -> Any:
    n: Any = object.__new__(KafkaNode)
    n.name, n._container = "kc-test-node-1", container
    return n


def test_a_stop_the_engine_calls_improper_but_that_happened_is_a_stop() -> None:
    c = FakeContainer(IMPROPER, exits=True)
    node(c)._stop_container(1)
    assert c.status == "exited" and not c.killed


def test_a_stop_that_did_not_happen_ends_in_a_kill() -> None:
    c = FakeContainer(IMPROPER, exits=False)
    node(c)._stop_container(1)
    assert c.killed


def test_other_engine_errors_are_not_swallowed() -> None:
    with pytest.raises(docker.errors.APIError):
        node(FakeContainer("no such container", exits=True))._stop_container(1)
