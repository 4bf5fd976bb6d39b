"""Links between nodes (docs/architecture.md §5): which directed links a link fault acts on.

A *link* is the set of TCP connections one node opens to one listener of another: `Link(3, 1, "internal")` is
node 3's connections to node 1's inter-broker listener (node 3's replica fetches from partitions node 1 leads),
`Link(2, 101, "controller")` node 2's connections to controller 101 (broker heartbeats and metadata fetches, or
Raft fetches and votes between voters). With `[cluster] link_proxies = true` every link passes through a proxy
of its own (cluster.node_links), so a fault on one link leaves every other link alone.

Selectors, resolved against the fault's target nodes T (pure functions of the ids, testable without a cluster):

- `replication`: T's fetches from every other broker; `direction = "both"` adds every other broker's fetches
  from T (T as leader). Brokers only.
- `controller`: T's connections to every controller but itself; `both` adds the controllers' connections to T
  when T is a voter.
- `quorum`: every voter's connections to every other voter (the target does not matter).
- a list of `[from, to]` pairs: the connections `from` opens to `to` (every listener of `to` it uses); `both`
  adds `to → from`. A controller-only node opens connections to controllers alone.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from kafka_chaos.cluster.node_links import Link, listeners_between

Selector = Literal["replication", "controller", "quorum"] | list[list[int]]
Direction = Literal["both", "one-way"]


class LinkSelectorError(ValueError):
    """A selector that names a node or a link the cluster does not have."""


def check_pairs(pairs: Sequence[Sequence[int]], brokers: Collection[int], controllers: Collection[int]) -> None:
    """Validation of an explicit selector: two known, different nodes per pair."""
    everyone = set(brokers) | set(controllers)
    for pair in pairs:
        if len(pair) != 2:
            raise LinkSelectorError(f"a link is [from, to]; got {list(pair)}")
        a, b = pair
        unknown = sorted({a, b} - everyone)
        if unknown:
            raise LinkSelectorError(f"link [{a}, {b}] names nodes {unknown} the cluster does not have; nodes are "
                                    f"{sorted(everyone)}")
        if a == b:
            raise LinkSelectorError(f"link [{a}, {b}]: a node has no link to itself")


def links_of(selector: Selector, targets: Collection[int], brokers: Collection[int], controllers: Collection[int],
             direction: Direction = "both") -> list[Link]:
    """The directed links a selector names (sorted, without repeats)."""
    brokers, controllers = set(brokers), set(controllers)
    out: set[Link] = set()
    both = direction == "both"
    if isinstance(selector, list):
        check_pairs(selector, brokers, controllers)
        for a, b in selector:
            out |= {Link(a, b, listener) for listener in listeners_between(a, b, brokers, controllers)}
            if both:
                out |= {Link(b, a, listener) for listener in listeners_between(b, a, brokers, controllers)}
    elif selector == "replication":
        not_brokers = sorted(set(targets) - brokers)
        if not_brokers:
            raise LinkSelectorError(f"replication links belong to brokers; {not_brokers} are controllers only")
        for t in targets:
            for b in sorted(brokers - {t}):
                out.add(Link(t, b, "internal"))
                if both:
                    out.add(Link(b, t, "internal"))
    elif selector == "controller":
        for t in targets:
            for c in sorted(controllers - {t}):
                out.add(Link(t, c, "controller"))
                if both and t in controllers:
                    out.add(Link(c, t, "controller"))
    elif selector == "quorum":
        out = {Link(a, b, "controller") for a in controllers for b in controllers if a != b}
    else:
        raise LinkSelectorError(f"unknown link selector {selector!r}: replication, controller, quorum or "
                                "[[from, to], …]")
    if not out:
        raise LinkSelectorError(f"selector {selector!r} on nodes {sorted(targets)} names no link (one node?)")
    return sorted(out)
