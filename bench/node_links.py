"""The link proxies' cost: kafka-chaos producers (acks=all, RF=3, min.insync=2, idempotence,
100-byte records, unthrottled, every op recorded) on a 3-node cluster with direct links between nodes and on the
same cluster shape with every link between nodes through its own proxy (`[cluster] link_proxies = true`,
cluster/node_links.py), one after the other in the same run (two real clusters never run at once). Clients reach
the brokers directly in both: only replication and the quorum pass through the proxies. Prints throughput and
p99 send latency for both and the throughput ratio (target ≥ 0.8).

    .venv/bin/python bench/node_links.py [--seconds 20] [--rounds 2]

Each cluster runs the workload `--rounds` times on a fresh topic and keeps the best round.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson
from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from workload_throughput import measure_producers  # noqa: E402  (this folder is on sys.path: run as a script)

from kafka_chaos.cluster import ClusterSpec, KafkaCluster  # noqa: E402


def one_round(cluster: KafkaCluster, topic: str, seconds: float, producers: int, in_flight: int) -> tuple[float, float]:
    """(acknowledged sends per second, p99 send latency in ms) over `seconds` after a 2 s warm-up."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "history.jsonl"
        rate, t0_ns = measure_producers(cluster, topic, seconds, producers, in_flight, path)
        invoked: dict[object, int] = {}
        latencies = []
        for line in path.read_bytes().splitlines():
            e = orjson.loads(line)
            if e.get("f") != "send":
                continue
            if e["type"] == "invoke":
                invoked[e["process"]] = e["time"]
            elif e["type"] == "ok" and e["process"] in invoked and e["time"] >= t0_ns:
                latencies.append((e["time"] - invoked.pop(e["process"])) / 1e6)
        p99 = float(np.percentile(latencies, 99)) if latencies else float("nan")
        return rate, p99


def best(spec: ClusterSpec, seconds: float, rounds: int, producers: int, in_flight: int,
         prepare: Callable[[KafkaCluster], object] | None = None) -> tuple[float, float]:
    """The best of `rounds` rounds on a cluster of `spec`, each on a fresh topic; `prepare` acts on the cluster
    once it is up (bench/request_faults.py arms its toxics there)."""
    with KafkaCluster(spec) as cluster:
        if prepare is not None:
            prepare(cluster)
        results = []
        for i in range(rounds):
            cluster.create_topic(f"links-{i}", 3, 3, {"min.insync.replicas": "2"})
            results.append(one_round(cluster, f"links-{i}", seconds, producers, in_flight))
        return max(results)


@dataclass(frozen=True)
class Side:
    """One cluster of a comparison: its row's label, its shape, and what to do once it is up."""

    label: str
    spec: ClusterSpec
    prepare: Callable[[KafkaCluster], object] | None = None


def compare(description: str, reference: Side, measured: Side, *, title: str, column: str, ratio: str,
            target: float, rounds: int = 2) -> None:
    """The command line every layer-cost bench shares: run the producers on `reference`, then on `measured` (one
    cluster after the other), print both rows and the throughput ratio measured / reference against `target`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    console = Console()
    rows = []
    for side in (reference, measured):
        rate, p99 = best(side.spec, args.seconds, args.rounds, args.producers, args.in_flight, prepare=side.prepare)
        console.print(f"{side.label}: {rate:,.0f} sends/s, p99 {p99:.1f} ms")
        rows.append((side.label, rate, p99))
    table = Table(title=title)
    for col in (column, "acknowledged sends/s", "p99 send ms"):
        table.add_column(col, justify="right")
    for label, rate, p99 in rows:
        table.add_row(label, f"{rate:,.0f}", f"{p99:.1f}")
    console.print(table)
    console.print(f"ratio ({ratio}): {rows[1][1] / rows[0][1]:.2f} (target ≥ {target})")


def main() -> None:
    compare(__doc__.split("\n\n")[0], Side("direct", ClusterSpec(nodes=3)),
            Side("through link proxies", ClusterSpec(nodes=3, link_proxies=True)),
            title="kafka-chaos producers, acks=all, RF 3, min.insync 2, 100 B, unthrottled",
            column="links between nodes", ratio="proxied / direct", target=0.8)


if __name__ == "__main__":
    main()
