"""The disk-fault layer's cost: kafka-chaos producers (acks=all, RF=3, min.insync=2, idempotence, 100-byte records,
unthrottled, every op recorded) on a 3-node cluster whose data sits on volatile disks (cluster/volatile_disk.py), and
on the same cluster shape with a `slow-disk` of 0 ms armed on every node's disk through its control socket (the fault
hooks consulted on every fsync, read and write, delaying and failing nothing). One cluster after the other in the same
run (two real clusters never run at once). Prints throughput and p99 send latency for both and the ratio (target
≥ 0.9).

    .venv/bin/python bench/disk_layer.py [--seconds 20] [--rounds 1]
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from node_links import Side, compare  # noqa: E402  (this folder is on sys.path: run as a script)

from kafka_chaos.cluster import ClusterSpec, KafkaCluster  # noqa: E402
from kafka_chaos.faults.kinds import DiskFault  # noqa: E402

SPEC = ClusterSpec(nodes=3, volatile_disks="unsynced")


def armed(cluster: KafkaCluster) -> dict[str, Any]:
    """A slow-disk of 0 ms on every node's disk, as the nemesis arms one; the disks' answers (what is armed)."""
    return DiskFault("slow-disk", cluster, {"delay_ms": 0}).start(sorted(cluster.nodes))


def main() -> None:
    console = Console()
    compare(__doc__.split("\n\n")[0], Side("volatile disk", SPEC),
            Side("volatile disk, slow-disk 0 ms armed", SPEC,
                 lambda cluster: console.print(f"armed: {armed(cluster)['disks']}")),
            title="acknowledged sends per second: slow-disk of 0 ms armed vs the plain volatile disk",
            column="disk", ratio="armed / plain", target=0.9, rounds=1)


if __name__ == "__main__":
    main()
