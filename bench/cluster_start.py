"""Seconds from nothing to ready for 1, 3 and 5 nodes (images already built), and for one killed node's
restart until it is back in the ISR. Target on a 2-core machine: 3 nodes ready in ≤ 6 s
(docs/architecture.md §6: class-data sharing archives in the image).

    .venv/bin/python bench/cluster_start.py [--nodes 1 3 5] [--repeat 2] [--compare]

--compare also starts each size without the archives in the same run, alternating with the normal start (the
launcher maps none: KAFKA_CDS_ARCHIVE=none), and prints the ratio of the medians.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.table import Table

from kafka_chaos.cluster import ClusterSpec, KafkaCluster
from kafka_chaos.cluster.node import KafkaNode
from kafka_chaos.cluster.state import PartitionState


def out_of_isr(node_id: int) -> Callable[[PartitionState], bool]:
    return lambda s: node_id not in s.isr


@contextmanager
def without_archives() -> Iterator[None]:
    """The start as it was before the image held class-data sharing archives: the launcher maps none."""
    entrypoint = KafkaNode._entrypoint
    KafkaNode._entrypoint = lambda self: "export KAFKA_CDS_ARCHIVE=none; " + entrypoint(self)  # type: ignore[method-assign]
    try:
        yield
    finally:
        KafkaNode._entrypoint = entrypoint  # type: ignore[method-assign]


def one_start(n: int, ready: list[float], rejoin: list[float]) -> None:
    t0 = time.monotonic()
    with KafkaCluster(ClusterSpec(nodes=n)) as cluster:
        ready.append(time.monotonic() - t0)
        if n >= 3:
            cluster.create_topic("bench", 1, 3, {"min.insync.replicas": "2"})
            leader = cluster.partition_states("bench")[0].leader
            assert leader is not None
            killed = cluster.node(leader)
            killed.kill()
            cluster.wait_for_state("bench", out_of_isr(leader), "leader out of the ISR")
            t1 = time.monotonic()
            killed.start()
            cluster.wait_for_isr("bench", 3, node_id=leader)
            rejoin.append(time.monotonic() - t1)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--compare", action="store_true", help="also start without the archives; print the ratio")
    args = parser.parse_args()
    table = Table(title="cluster start (seconds, median of runs)")
    for col in ("nodes", "ready", "restart → back in ISR", "runs", *(("no archives", "ratio") if args.compare else ())):
        table.add_column(col)
    for n in args.nodes:
        ready: list[float] = []
        rejoin: list[float] = []
        plain: list[float] = []
        for _ in range(args.repeat):
            one_start(n, ready, rejoin)
            if args.compare:
                with without_archives():
                    one_start(n, plain, [])
        median = statistics.median(ready)
        row = [str(n), f"{median:.1f}", f"{statistics.median(rejoin):.1f}" if rejoin else "—", str(args.repeat)]
        if args.compare:
            row += [f"{statistics.median(plain):.1f}", f"{median / statistics.median(plain):.2f}x"]
        table.add_row(*row)
        print(f"{n} nodes: ready {[round(r, 2) for r in ready]}"
              + (f", no archives {[round(s, 2) for s in plain]}" if args.compare else ""), flush=True)
    Console().print(table)


if __name__ == "__main__":
    main()
