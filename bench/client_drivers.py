"""Acknowledged records per second of each client driver (workloads.drivers) against Kafka's own
ProducerPerformance, on one 3-node cluster in the same run: one topic (3 partitions, RF 3, min.insync 2), acks=all,
idempotence, the same record size and count, unthrottled. ProducerPerformance runs inside a broker container (the
image ships it); each driver produces through the driver interface without waiting per record, polls for
deliveries and flushes. Prints records/s of each and its ratio to ProducerPerformance beside the target
(in-process librdkafka ≥ 1.0×, pinned-version librdkafka ≥ 0.8×, Java driver ≥ 0.8×).

    .venv/bin/python bench/client_drivers.py [--records 200000] [--record-size 100] [--repeat 1]

The timed part of a driver starts once its producer exists (a worker process started, a JVM warm) and ends when
flush() returns, as ProducerPerformance times its send loop and flush but not the JVM's start. `--repeat` runs
the whole sequence again on the same cluster and keeps each row's median; the rounds vary the order (a balanced
Latin square): over four rounds each producer runs once in every position and once right after each other one.
"""

from __future__ import annotations

import argparse
import random
import re
import statistics
import string
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table

TOPIC = "client-bench"
PARTITIONS = 3
SETTINGS = {"acks": "all", "enable.idempotence": "true", "linger.ms": "5", "batch.size": "16384"}
"""The producer settings every side runs with (the workloads' defaults: workloads.producer.ProducerSettings)."""
POLL_EVERY = 1000
"""Records produced between two poll(0) calls: delivery callbacks are served without a call per record."""
FLUSH_TIMEOUT_S = 120.0
REFERENCE = "ProducerPerformance"


@dataclass(frozen=True)
class Side:
    """One driver of the comparison: its row's label, its `[workload]` client choice and its target ratio."""

    label: str
    client: str
    version: str | None
    target: float


@dataclass(frozen=True)
class PerfSummary:
    """ProducerPerformance's closing line."""

    records: int
    records_per_s: float
    mb_per_s: float
    avg_latency_ms: float
    max_latency_ms: float


_SUMMARY = re.compile(r"(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
                      r"([\d.]+) ms max latency, \d+ ms 50th")


def parse_perf_summary(output: str) -> PerfSummary:
    """The totals of a ProducerPerformance run from its output (the line with percentiles, printed once at the
    end; the periodic lines before it have none). ValueError when the output has no such line (the run failed)."""
    found = _SUMMARY.findall(output)
    if not found:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise ValueError(f"ProducerPerformance printed no summary line; its output ended with:\n{tail}")
    records, rate, mb, avg, top = found[-1]
    return PerfSummary(int(records), float(rate), float(mb), float(avg), float(top))


@dataclass(frozen=True)
class Row:
    """One line of the table: records/s (median of the repeats) and the target ratio (None: the reference)."""

    label: str
    records_per_s: float
    target: float | None = None
    note: str = ""


def table_rows(reference: Row, measured: list[Row]) -> list[tuple[str, str, str, str, str]]:
    """(label, records/s, ratio, target, met) per row, the reference first with ratio 1.00; a driver that did not
    run (records/s NaN, e.g. its client could not be installed) shows its note instead of figures."""
    rows = [(reference.label, f"{reference.records_per_s:,.0f}", "1.00", "", "")]
    for r in measured:
        if r.records_per_s != r.records_per_s:  # NaN
            rows.append((r.label, "—", "—", _target(r.target), r.note or "did not run"))
            continue
        ratio = r.records_per_s / reference.records_per_s
        met = "" if r.target is None else ("yes" if ratio >= r.target else "no")
        rows.append((r.label, f"{r.records_per_s:,.0f}", f"{ratio:.2f}", _target(r.target), met))
    return rows


def _target(target: float | None) -> str:
    return "" if target is None else f"≥ {target:.1f}"


def render(title: str, reference: Row, measured: list[Row]) -> Table:
    table = Table(title=title)
    for col in ("producer", "acked records/s", "ratio", "target", "met"):
        table.add_column(col, justify="left" if col == "producer" else "right")
    for row in table_rows(reference, measured):
        table.add_row(*row)
    return table


def round_order(names: list[str], round_: int) -> list[str]:
    """The order of the producers in a round: a balanced Latin square (Williams' design), so over a cycle of
    rounds (as many as producers, for an even count) each producer runs once in every position and right after
    each other producer once. What runs just before a producer leaves the brokers busy for a while (a JVM's
    exit, segment and page-cache work), so a fixed order charges that to the same producer every round."""
    n = len(names)
    first = [0]
    for i in range(1, n):  # 0, 1, n-1, 2, n-2, …
        first.append((i + 1) // 2 if i % 2 else n - i // 2)
    return [names[(index + round_) % n] for index in first]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def payload(size: int, seed: int = 0) -> bytes:
    """A record value like ProducerPerformance's: random upper-case letters (printable, so protocol lines carry
    it as is)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=size)).encode("ascii")


# --- measuring (needs a cluster) -------------------------------------------------------------------------------------


def kafka_perf(cluster: Any, records: int, record_size: int) -> PerfSummary:
    from workload_throughput import perf_test  # this folder is on sys.path: run as a script

    code, text = perf_test(cluster, TOPIC, records, record_size, SETTINGS)
    summary = parse_perf_summary(text)
    if code != 0 or summary.records < records:
        raise RuntimeError(f"ProducerPerformance acknowledged {summary.records} of {records} records "
                           f"(exit {code}):\n{text[-2000:]}")
    return summary


def produce_all(driver: Any, bootstrap: str, records: int, record_size: int, process: int) -> tuple[int, int, float]:
    """(acknowledged, failed, seconds): `records` records through the driver's producer, timed from the first
    produce to the end of the flush."""
    from kafka_chaos.cluster.logs import client_logger

    # the logger keeps an in-process client's lines off the table (a worker logs to its stderr instead)
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "client.id": f"client-bench-{process}",
                            "logger": client_logger(),
                            **{k: (v == "true" if v in ("true", "false") else v) for k, v in SETTINGS.items()}}
    producer = driver.producer(conf, process)
    value = payload(record_size)
    counts = {"ok": 0, "failed": 0}

    def on_delivery(err: Any, _msg: Any) -> None:
        counts["ok" if err is None else "failed"] += 1

    t0 = time.monotonic()
    for i in range(records):
        while True:
            try:
                producer.produce(TOPIC, value=value, on_delivery=on_delivery)
                break
            except BufferError:  # the client's queue is full: serve deliveries, then try again
                producer.poll(0.05)
        if i % POLL_EVERY == 0:
            producer.poll(0)
    left = producer.flush(FLUSH_TIMEOUT_S)
    elapsed = time.monotonic() - t0
    if left:
        raise RuntimeError(f"{left} records still undelivered {FLUSH_TIMEOUT_S:.0f}s into the flush")
    driver.release(process)
    return counts["ok"], counts["failed"], elapsed


def run(args: argparse.Namespace, console: Console) -> tuple[Row, list[Row]]:
    from kafka_chaos.cluster import ClusterSpec, KafkaCluster
    from kafka_chaos.errors import ClientUnavailable
    from kafka_chaos.harness.collector import fewer_collections
    from kafka_chaos.workloads.config import WorkloadConfig
    from kafka_chaos.workloads.drivers import make_driver

    sides = [Side("librdkafka in process", "librdkafka", None, 1.0),
             Side(f"librdkafka {args.pinned} worker", "librdkafka", args.pinned, 0.8),
             Side(f"Java {args.java} worker", "java", args.java, 0.8)]
    drivers: dict[str, Any] = {}
    notes: dict[str, str] = {}
    for side in sides:  # installed before the cluster starts (cached after the first use)
        try:
            drivers[side.label] = make_driver(WorkloadConfig(client=side.client, client_version=side.version),
                                              progress=console.print)
        except ClientUnavailable as err:
            notes[side.label] = str(err).split(". ")[0]
            console.print(f"[yellow]{side.label}: not run: {err}")
    reference: list[float] = []
    rates: dict[str, list[float]] = {side.label: [] for side in sides}
    try:
        # the collector settings of a run (harness.run), so each driver is measured as a run drives it
        with fewer_collections(), KafkaCluster(ClusterSpec(nodes=3)) as cluster:
            cluster.create_topic(TOPIC, PARTITIONS, 3, {"min.insync.replicas": "2"})
            bootstrap = cluster.bootstrap_servers()
            process = 0
            for _ in range(args.warmup):  # a new cluster's first records are slow (page cache, JIT, segment files)
                perf = kafka_perf(cluster, args.records, args.record_size)
                console.print(f"(warm-up) ProducerPerformance: {perf.records_per_s:,.0f} records/s (not counted)")
            for round_ in range(args.repeat):
                for name in round_order([REFERENCE, *(s.label for s in sides)], round_):
                    if name == REFERENCE:
                        perf = kafka_perf(cluster, args.records, args.record_size)
                        reference.append(perf.records_per_s)
                        console.print(f"[{round_ + 1}/{args.repeat}] {REFERENCE}: {perf.records_per_s:,.0f} "
                                      f"records/s (avg latency {perf.avg_latency_ms:.0f} ms)")
                        continue
                    if name not in drivers:
                        continue
                    process += 1
                    ok, failed, seconds = produce_all(drivers[name], bootstrap, args.records, args.record_size,
                                                      process)
                    rates[name].append(ok / seconds)
                    console.print(f"[{round_ + 1}/{args.repeat}] {name}: {ok / seconds:,.0f} records/s "
                                  f"({ok:,} acknowledged, {failed:,} failed, {seconds:.1f} s)")
    finally:
        for driver in drivers.values():
            driver.close()
    return (Row(REFERENCE, median(reference)),
            [Row(s.label, median(rates[s.label]), s.target, notes.get(s.label, "")) for s in sides])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records each producer sends")
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    parser.add_argument("--repeat", type=int, default=1, help="rounds; each row shows its median")
    parser.add_argument("--warmup", type=int, default=1,
                        help="ProducerPerformance runs before the first round, not counted")
    parser.add_argument("--pinned", default="2.6.1", help="the confluent-kafka release of the pinned driver")
    parser.add_argument("--java", default="4.1.0", help="the Java client release")
    args = parser.parse_args()
    console = Console(width=120)  # the table unwrapped in a log or a pipe too
    reference, measured = run(args, console)
    console.print(render(f"{args.records:,} records of {args.record_size} B, acks=all, idempotence, RF 3, "
                         f"min.insync 2, unthrottled; ratio to ProducerPerformance in a broker container "
                         f"(median of {args.repeat})",
                         reference, measured))


if __name__ == "__main__":
    main()
