"""The power-loss disk's cost on Kafka: Kafka's own ProducerPerformance (acks=all, 100-byte records, max
throughput) on a 3-node cluster with plain data volumes and on the same cluster shape with every node's data on
a volatile disk (cluster/volatile_disk.py: FUSE on the host), one after the other in the same run (two real
clusters never run at once). Prints both figures and the ratio (target ≥ 0.7).

    .venv/bin/python bench/volatile_disk.py [--records 300000] [--rounds 2]

Each cluster runs the test `--rounds` times and keeps the best (the first round also warms the JIT).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workload_throughput import kafka_perf  # noqa: E402  (this folder is on sys.path: run as a script)

from kafka_chaos.cluster import ClusterSpec, KafkaCluster  # noqa: E402

PROPS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "batch.size": "16384"}


def best_throughput(spec: ClusterSpec, records: int, rounds: int) -> float:
    with KafkaCluster(spec) as cluster:
        cluster.settle_disks()
        results = []
        for i in range(rounds):
            cluster.create_topic(f"perf-{i}", 3, 3, {"min.insync.replicas": "2"})
            results.append(kafka_perf(cluster, f"perf-{i}", records, PROPS))
        return max(results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    console = Console()
    plain = best_throughput(ClusterSpec(nodes=3), args.records, args.rounds)
    volatile = best_throughput(ClusterSpec(nodes=3, volatile_disks="unsynced"), args.records, args.rounds)
    console.print(f"plain volumes:  {plain:,.0f} records/s (ProducerPerformance, acks=all, 100 B, in-cluster)")
    console.print(f"volatile disks: {volatile:,.0f} records/s (every node's data through FUSE on the host)")
    console.print(f"ratio: {volatile / plain:.2f} (target ≥ 0.7)")


if __name__ == "__main__":
    main()
