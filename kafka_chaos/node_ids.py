"""Node ids: combined nodes and brokers are 1..N; dedicated controllers are 101..100+C.

The cluster names its nodes by these, and the run configuration the model and the checker read derives the
same ids from the scenario's node counts.
"""

from __future__ import annotations

FIRST_CONTROLLER_ID = 101
"""Dedicated controllers start here, clear of every broker id (brokers added later take the next id up)."""


def broker_ids(nodes: int) -> tuple[int, ...]:
    return tuple(range(1, nodes + 1))


def controller_ids(nodes: int, controllers: int) -> tuple[int, ...]:
    """The voters: the dedicated controllers, or the combined nodes when there are none."""
    if controllers:
        return tuple(range(FIRST_CONTROLLER_ID, FIRST_CONTROLLER_ID + controllers))
    return broker_ids(nodes)
