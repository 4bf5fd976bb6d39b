"""Network partition shapes (Jepsen's nemesis/combined): which node must not hear which.

A grudge maps each node to the nodes whose packets it drops. Shapes are pure functions of the node ids, the
targets and the seeded random source, so they can be tested without a cluster.
"""

from __future__ import annotations

import random
from typing import Literal

Shape = Literal["isolate", "halves", "majority-ring", "bridge", "one-way"]
Grudge = dict[int, set[int]]


def complete_grudge(components: list[list[int]]) -> Grudge:
    """Every node drops every node outside its own component."""
    everyone = {n for c in components for n in c}
    return {n: everyone - set(c) for c in components for n in c}


def grudge(shape: Shape, nodes: list[int], targets: list[int], rng: random.Random) -> Grudge:
    nodes = sorted(nodes)
    if shape == "isolate":
        rest = [n for n in nodes if n not in targets]
        return complete_grudge([sorted(targets), rest])
    if shape == "one-way":
        # targets hear nothing from the others; the others still hear the targets
        others = {n for n in nodes if n not in targets}
        return {t: set(others) for t in targets}
    shuffled = nodes[:]
    rng.shuffle(shuffled)
    half = len(shuffled) // 2
    if shape == "halves":
        return complete_grudge([sorted(shuffled[:half]), sorted(shuffled[half:])])
    if shape == "bridge":
        # two halves that cannot talk, and one node that talks to both
        bridge, rest = shuffled[0], shuffled[1:]
        a, b = rest[: len(rest) // 2], rest[len(rest) // 2 :]
        g = complete_grudge([a, b])
        g[bridge] = set()
        return g
    if shape == "majority-ring":
        # Each node sees a majority (itself and its k nearest neighbours each way on a ring), and no two nodes
        # see the same majority. Links are cut in both directions, so with fewer than 5 nodes no such ring
        # exists; there the nearest shape, a bridge, is used.
        n = len(shuffled)
        if n < 5:
            return grudge("bridge", nodes, targets, rng)
        k = (n // 2 + 1) // 2
        return {
            node: set(shuffled) - {shuffled[(i + d) % n] for d in range(-k, k + 1)}
            for i, node in enumerate(shuffled)
        }
    raise ValueError(f"unknown partition shape {shape!r}")
