"""The disk-fault layer's cost: kafka-chaos producers (acks=all, RF=3, min.insync=2, idempotence, 100-byte records,
unthrottled, every op recorded) on a 3-node cluster whose data sits on volatile disks (cluster/volatile_disk.py), and
on the same cluster shape with a `slow-disk` of 0 ms armed on every node's disk through its control socket (the fault
hooks consulted on every fsync, read and write, delaying and failing nothing). One cluster after the other in the same
run (two real clusters never run at once). Prints throughput and p99 send latency for both and the ratio (target
≥ 0.9).

    .venv/bin/python bench/disk_layer.py [--seconds 20] [--rounds 1]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from node_links import best  # noqa: E402  (this folder is on sys.path: run as a script)

from kafka_chaos.cluster import ClusterSpec, KafkaCluster  # noqa: E402
from kafka_chaos.faults.kinds import DiskFault  # noqa: E402

SPEC = ClusterSpec(nodes=3, volatile_disks="unsynced")


def armed(cluster: KafkaCluster) -> dict[str, Any]:
    """A slow-disk of 0 ms on every node's disk, as the nemesis arms one; the disks' answers (what is armed)."""
    return DiskFault("slow-disk", cluster, {"delay_ms": 0}).start(sorted(cluster.nodes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=64)
    args = parser.parse_args()
    console = Console()
    plain = best(SPEC, args.seconds, args.rounds, args.producers, args.in_flight)
    console.print(f"volatile disk: {plain[0]:,.0f} sends/s, p99 {plain[1]:.1f} ms")
    hooked = best(SPEC, args.seconds, args.rounds, args.producers, args.in_flight,
                  prepare=lambda cluster: console.print(f"armed: {armed(cluster)['disks']}"))
    table = Table(title="acknowledged sends per second: slow-disk of 0 ms armed vs the plain volatile disk")
    for col in ("disk", "sends/s", "p99 send ms"):
        table.add_column(col)
    table.add_row("volatile disk", f"{plain[0]:,.0f}", f"{plain[1]:.1f}")
    table.add_row("volatile disk, slow-disk 0 ms armed", f"{hooked[0]:,.0f}", f"{hooked[1]:.1f}")
    console.print(table)
    console.print(f"ratio (armed / plain): {hooked[0] / plain[0]:.2f} (target ≥ 0.9)")


if __name__ == "__main__":
    main()
