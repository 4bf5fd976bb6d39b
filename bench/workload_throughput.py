"""kafka-chaos producers (acks=all, 100-byte records, every op recorded in the history) against Kafka's own
ProducerPerformance with the same settings, on one 3-node cluster in the same run. Prints the ratio
(target ≥ 0.8).

    .venv/bin/python bench/workload_throughput.py [--records 200000] [--seconds 20]

ProducerPerformance runs inside a broker container (the image ships it), against the same brokers.
"""

from __future__ import annotations

import argparse
import itertools
import re
import tempfile
import time
from pathlib import Path

from rich.console import Console

from kafka_chaos.cluster import ClusterSpec, KafkaCluster
from kafka_chaos.history import History
from kafka_chaos.workloads import ProducerSettings, ProducerWorkload


def perf_test(cluster: KafkaCluster, topic: str, records: int, record_size: int,
              producer_props: dict[str, str]) -> tuple[int | None, str]:
    """Kafka's ProducerPerformance, unthrottled, inside the first broker's container: (exit code, output)."""
    node = cluster.brokers[0]
    props = " ".join(f"{k}={v}" for k, v in producer_props.items())
    bootstrap = ",".join(f"{b.alias}:{b.internal_port}" for b in cluster.brokers)
    cmd = (f"KAFKA_HEAP_OPTS=-Xmx256m kafka-producer-perf-test.sh --topic {topic} --num-records {records} "
           f"--record-size {record_size} --throughput -1 --producer-props bootstrap.servers={bootstrap} {props}")
    code, out = node.container.exec_run(["sh", "-c", cmd])
    return code, out.decode(errors="replace") if isinstance(out, bytes) else ""


def kafka_perf(cluster: KafkaCluster, topic: str, records: int, producer_props: dict[str, str]) -> float:
    code, text = perf_test(cluster, topic, records, 100, producer_props)
    m = re.findall(r"([\d.]+) records/sec", text)
    if code != 0 or not m:
        raise RuntimeError(f"ProducerPerformance failed:\n{text[-2000:]}")
    return float(m[-1])


def ours(cluster: KafkaCluster, topic: str, seconds: float, producers: int, in_flight: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        return measure_producers(cluster, topic, seconds, producers, in_flight, Path(tmp) / "history.jsonl")[0]


def measure_producers(cluster: KafkaCluster, topic: str, seconds: float, producers: int, in_flight: int,
                      history_path: Path) -> tuple[float, int]:
    """kafka-chaos producers (acks=all, idempotence, 100 B, unthrottled) for `seconds` after a 2 s warm-up, every
    op recorded in `history_path`: (acknowledged sends per second, history time the measurement began)."""
    with History(history_path) as history:
        values = itertools.count()
        workers = [
            ProducerWorkload(ProducerSettings(cluster.bootstrap_servers(), topic, 3, acks="all", idempotence=True,
                                              linger_ms=5, batch_size=16384, record_size=100, rate=0,
                                              in_flight=in_flight), history, values, seed=i)
            for i in range(producers)
        ]
        for w in workers:
            w.start()
        time.sleep(2)  # warm-up: connections, producer ids
        t0_ns = history.now()
        ok0 = sum(w.counts["ok"] for w in workers)
        t0 = time.monotonic()
        time.sleep(seconds)
        ok1 = sum(w.counts["ok"] for w in workers)
        elapsed = time.monotonic() - t0
        for w in workers:
            w.stop(flush_timeout_s=10)
        return (ok1 - ok0) / elapsed, t0_ns


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--seconds", type=float, default=20)
    parser.add_argument("--producers", type=int, default=2)
    parser.add_argument("--in-flight", type=int, default=256)
    args = parser.parse_args()
    console = Console()
    with KafkaCluster(ClusterSpec(nodes=3)) as cluster:
        cluster.create_topic("perf-ref", 3, 3, {"min.insync.replicas": "2"})
        cluster.create_topic("perf-ours", 3, 3, {"min.insync.replicas": "2"})
        props = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "batch.size": "16384"}
        reference = kafka_perf(cluster, "perf-ref", args.records, props)
        mine = ours(cluster, "perf-ours", args.seconds, args.producers, args.in_flight)
    console.print(f"Kafka ProducerPerformance: {reference:,.0f} records/s (acks=all, 100 B, in-cluster)")
    console.print(f"kafka-chaos producers:     {mine:,.0f} records/s ({args.producers} threads × {args.in_flight} "
                  "processes, every op in the history)")
    console.print(f"ratio: {mine / reference:.2f} (target ≥ 0.8)")


if __name__ == "__main__":
    main()
