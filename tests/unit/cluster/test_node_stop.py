"""KafkaNode's stop on an engine that answers a stop with Podman's "container state improper" race."""

from __future__ import annotations

from typing import Any

import docker.errors
import pytest

from kafka_chaos.cluster.node import KafkaNode

IMPROPER = "container 6030 is running or paused, refusing to clean up: container state improper"


class FakeContainer:
    def __init__(self, stop_error: str | None, exits: bool, running_after_stop: int = 0) -> None:
        self.stop_error, self.exits = stop_error, exits
        self.status = "running"
        self.killed = False
        self.running_after_stop = running_after_stop  # reloads that still say running after the stop
        self.removed: list[bool] = []

    def stop(self, timeout: int) -> None:
        if self.exits and not self.running_after_stop:
            self.status = "exited"
        if self.stop_error is not None:
            raise docker.errors.APIError(f"500 Server Error: Internal Server Error (\"{self.stop_error}\")")

    def kill(self, signal: str) -> None:
        self.killed, self.status = True, "exited"

    def reload(self) -> None:
        if self.exits and self.running_after_stop:
            self.running_after_stop -= 1
            self.status = "running" if self.running_after_stop else "exited"

    def remove(self, v: bool, force: bool = False) -> None:
        if self.status == "running" and not force:
            raise docker.errors.APIError(
                "500 Server Error (\"cannot remove container 6dea as it is running - running or paused containers "
                "cannot be removed without force: container state improper\")")
        self.removed.append(force)

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


def test_a_stop_answered_before_the_state_left_running_waits_for_it_before_the_remove() -> None:
    c = FakeContainer(None, exits=True, running_after_stop=3)
    n = node(c)
    n._stop_container(5)
    n._remove_container()
    assert c.status == "exited" and c.removed == [False] and not c.killed
