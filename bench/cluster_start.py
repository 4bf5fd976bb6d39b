"""Seconds from nothing to ready for 1, 3 and 5 nodes (images already built), and for one killed node's
restart until it is back in the ISR. Target on a 2-core machine: 3 nodes ready in ≤ 6 s
(docs/architecture.md §6: nodes launched concurrently, class-data sharing archives in the image).

    .venv/bin/python bench/cluster_start.py [--nodes 1 3 5] [--repeat 2]
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from rich.console import Console
from rich.table import Table

from kafka_chaos.cluster import ClusterSpec, KafkaCluster
from kafka_chaos.cluster.state import PartitionState


def out_of_isr(node_id: int) -> Callable[[PartitionState], bool]:
    return lambda s: node_id not in s.isr


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--nodes", type=int, nargs="+", default=[1, 3, 5])
    parser.add_argument("--repeat", type=int, default=2)
    args = parser.parse_args()
    table = Table(title="cluster start (seconds, median of runs)")
    for col in ("nodes", "ready", "restart → back in ISR", "runs"):
        table.add_column(col)
    for n in args.nodes:
        ready, rejoin = [], []
        for _ in range(args.repeat):
            t0 = time.monotonic()
            with KafkaCluster(ClusterSpec(nodes=n)) as cluster:
                ready.append(time.monotonic() - t0)
                if n >= 3:
                    cluster.create_topic("bench", 1, 3, {"min.insync.replicas": "2"})
                    leader = cluster.partition_states("bench")[0].leader
                    assert leader is not None
                    node = cluster.node(leader)
                    node.kill()
                    cluster.wait_for_state("bench", out_of_isr(leader), "leader out of the ISR")
                    t1 = time.monotonic()
                    node.start()
                    cluster.wait_for_isr("bench", 3, node_id=leader)
                    rejoin.append(time.monotonic() - t1)
        table.add_row(str(n), f"{statistics.median(ready):.1f}",
                      f"{statistics.median(rejoin):.1f}" if rejoin else "—", str(args.repeat))
    Console().print(table)


if __name__ == "__main__":
    main()
