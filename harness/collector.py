"""How often Python's cyclic garbage collector runs while a run's clients send (docs/architecture.md §3, Client
drivers).

A run allocates a few container objects per record (the history's op, the delivery callback's arguments, a
worker's delivery reports) and keeps many of them until the record is acknowledged. With Python's default
thresholds (a young collection every 700 such allocations, an older one every tenth of those) the collector walks
the same live objects over and over: half the Python time per record of the out-of-process path, measured with a
worker stub that answers at once (3.2 µs at the default, 1.6 µs at 10,000; bench/client_drivers.py shows the
effect on a cluster). So a run raises the young threshold and freezes what existed before it started (the
modules, the scenario, the cluster's objects), which no collection during the run could free.
Garbage in reference cycles is still collected, only in larger, rarer passes; everything is as it was once the
run ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

YOUNG_THRESHOLD = 20_000
"""Allocations of container objects between two young collections during a run (Python's default: 700)."""


@contextmanager
def fewer_collections(young_threshold: int = YOUNG_THRESHOLD) -> Iterator[None]:
    """Within the block, collect young objects every `young_threshold` allocations instead of Python's default,
    and leave the objects that existed before it out of every collection (gc.freeze). Nested blocks keep the
    outer one's settings until the outer one ends."""
    before = gc.get_threshold()
    outermost = gc.get_freeze_count() == 0
    if outermost:
        gc.freeze()
    gc.set_threshold(max(young_threshold, before[0]), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)
        if outermost:
            gc.unfreeze()
