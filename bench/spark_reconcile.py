"""Benchmark: Spark reconciliation vs the single-process checker vs three plain Spark queries.

    python bench/spark_reconcile.py --records 1e7 1e8 [--master 'local[2]'] [--dir /tmp/kafka-chaos-bench]
    python bench/spark_reconcile.py --from-history --records 1e6 1e7   # raw history.jsonl in, end to end

`--from-history`: a run folder holding only `history.jsonl` (bench/checker_speed.py's realistic clean
history: 16 partitions, 8 producers, 4 consumers, about 2.25 lines per produced record), then, on the same
file, in separate processes: the Spark job parsing the JSONL itself; `kafka-chaos check` end to end (parse,
analysis, tables, results, report); the Spark job again on the Parquet tables `check` wrote. The anomaly
counts of the three must be equal.

For each size, a synthetic history (spark.synthetic, with seeded anomalies) is generated once, then each
engine runs in its own process, timed from outside:

- `spark job`: `python -m spark.job RUN --master M` (JVM start included), checked against the manifest;
- `checker`: `checker.analyse` on the tables read with pyarrow, where it fits in memory (`--checker-max`);
- `plain queries`: lost / duplicate / inconsistent as three separate Spark queries, each reading the tables
  itself (the usual way to write them: an anti-join and two groupBys; the lost query compares offsets, not
  Jepsen's dense positions, which makes it lighter than the real thing), in one session; the reference.

Printed per run: wall seconds, CPU seconds (user + sys of the whole process tree: less sensitive to other
load on a shared machine), produced records per wall second, and peak memory: the JVM driver's peak RSS
(in local mode it also runs the executors), the largest Python worker, and the whole tree at its peak.
The load average before and after is printed too: on a shared 2-core machine it moves the wall times.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SEEDED: dict[str, Any] = {"lost_write": 10, "unseen": 5, "duplicate": 10, "inconsistent_offsets": 10, "g1a": 10}


@dataclass
class Measure:
    label: str
    wall: float = 0.0
    cpu: float = 0.0
    jvm_peak_mb: float = 0.0
    python_worker_peak_mb: float = 0.0
    driver_peak_mb: float = 0.0
    tree_peak_mb: float = 0.0
    output: str = ""
    ok: bool = True
    extra: dict[str, Any] = field(default_factory=dict)


def _children(pid: int) -> list[int]:
    """Every descendant of `pid` (children of any of its threads: the JVM forks from many)."""
    out: list[int] = []
    kids: list[int] = []
    try:
        for task in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{task}/children") as fh:
                kids.extend(int(x) for x in fh.read().split())
    except OSError:
        return out
    for k in kids:
        out.append(k)
        out.extend(_children(k))
    return out


def _status(pid: int) -> tuple[str, float, float]:
    """(command name, VmRSS MB, VmHWM MB) of a process, or ("", 0, 0)."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            fields = dict(line.split(":", 1) for line in fh if ":" in line)
    except OSError:
        return "", 0.0, 0.0

    def mb(name: str) -> float:
        return int(fields.get(name, "0 kB").split()[0]) / 1024

    return fields.get("Name", "").strip(), mb("VmRSS"), mb("VmHWM")


def _cpu_seconds(pid: int) -> float:
    """User + system CPU seconds a process has used so far (not counting its children)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def run_measured(label: str, cmd: list[str], ok_codes: tuple[int, ...] = (0,)) -> Measure:
    """Run `cmd`, polling the process tree's memory and CPU time (every process's last sample, summed);
    wall time from outside."""
    m = Measure(label)
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    stop = threading.Event()
    cpu: dict[int, float] = {}

    def watch() -> None:
        while not stop.wait(0.25):
            total = 0.0
            _, rss, hwm = _status(proc.pid)
            m.driver_peak_mb = max(m.driver_peak_mb, hwm)
            total += rss
            cpu[proc.pid] = max(cpu.get(proc.pid, 0.0), _cpu_seconds(proc.pid))
            for kid in _children(proc.pid):
                cpu[kid] = max(cpu.get(kid, 0.0), _cpu_seconds(kid))
                name, rss, hwm = _status(kid)
                total += rss
                if name == "java":
                    m.jvm_peak_mb = max(m.jvm_peak_mb, hwm)
                elif name.startswith("python"):
                    m.python_worker_peak_mb = max(m.python_worker_peak_mb, hwm)
            m.tree_peak_mb = max(m.tree_peak_mb, total)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    _, status, usage = os.wait4(proc.pid, 0)
    m.wall = time.monotonic() - started
    stop.set()
    watcher.join()
    m.cpu = max(sum(cpu.values()), usage.ru_utime + usage.ru_stime)
    m.output = proc.stdout.read() if proc.stdout else ""
    err = proc.stderr.read() if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code not in ok_codes:
        m.ok = False
        m.extra["error"] = err.strip().splitlines()[-3:]
    return m


# ---- the engines, each run in its own process -------------------------------------------------------------


def checker_main(run: str) -> None:
    import pyarrow.parquet as pq

    from kafka_chaos.checker import analyse

    started = time.monotonic()
    sends = pq.read_table(f"{run}/sends.parquet")
    polls = pq.read_table(f"{run}/polls.parquet")
    read = time.monotonic() - started
    result = analyse(sends, polls).to_dict()
    counts = {k: v for k, v in result["anomaly_counts"].items()}
    print(json.dumps({"anomaly_counts": counts, "read_seconds": round(read, 2)}))


def plain_main(run: str, master: str) -> None:
    """Three plain queries, each reading the tables itself, as one would write them without the job."""
    from pyspark.sql import functions as F

    from kafka_chaos.spark.session import start_session

    # The Parquet files are small on disk (synthetic data compresses well): without this, Spark estimates a
    # table small enough to broadcast and runs out of memory building it.
    spark = start_session(master, extra_conf={"spark.sql.autoBroadcastJoinThreshold": "-1"})
    times = {}

    def sends() -> Any:
        return spark.read.parquet(f"{run}/sends.parquet")

    def polls() -> Any:
        return spark.read.parquet(f"{run}/polls.parquet").where(F.col("type") == "ok")

    # lost: ok sends never read, at or below the highest offset read of their key.
    started = time.monotonic()
    acked = F.col("type") == "ok"
    ok_sends = sends().where(acked & F.col("offset").isNotNull()).select("key", "value", "offset")
    highest = polls().groupBy("key").agg(F.max("offset").alias("highest"))
    lost = (ok_sends.join(polls().select("key", "value"), ["key", "value"], "left_anti").join(highest, "key")
            .where(F.col("offset") <= F.col("highest")).count())
    times["lost"] = time.monotonic() - started

    started = time.monotonic()
    duplicate = (sends().where(acked & F.col("offset").isNotNull()).select("key", "value", "offset")
                 .unionByName(polls().select("key", "value", "offset"))
                 .groupBy("key", "value").agg(F.countDistinct("offset").alias("n")).where("n > 1").count())
    times["duplicate"] = time.monotonic() - started

    started = time.monotonic()
    inconsistent = (sends().where(acked & F.col("offset").isNotNull())
                    .select("key", "offset", "value").unionByName(polls().select("key", "offset", "value"))
                    .groupBy("key", "offset").agg(F.countDistinct("value").alias("n")).where("n > 1").count())
    times["inconsistent"] = time.monotonic() - started
    spark.stop()
    counts = {"lost-write": lost, "duplicate": duplicate, "inconsistent-offsets": inconsistent}
    print(json.dumps({"counts": counts, "seconds": {k: round(v, 1) for k, v in times.items()}}))


# ---- driver -----------------------------------------------------------------------------------------------


def ensure_data(base: Path, records: int, keys: int) -> tuple[Path, dict[str, Any], float]:
    from kafka_chaos.spark.synthetic import SyntheticSpec, generate

    run = base / f"run-{records}"
    manifest_path = run / "manifest.json"
    spec = SyntheticSpec(records=records, keys=keys, seed=11, **SEEDED)
    if manifest_path.exists():
        manifest = json.loads(manifest_path.read_text())
        if manifest["spec"]["records"] == records and manifest["spec"]["keys"] == keys:
            return run, manifest, float(manifest["seconds"])
    started = time.monotonic()
    manifest = generate(run, spec)
    return run, manifest, time.monotonic() - started


def history_main(args: argparse.Namespace) -> int:
    """`--from-history`: Spark from JSONL vs `kafka-chaos check` end to end vs Spark from Parquet."""
    from rich.console import Console
    from rich.table import Table

    sys.path.insert(0, str(ROOT / "bench"))
    from checker_speed import generate as generate_history

    console = Console(width=170)
    py = sys.executable
    rows: list[tuple[int, int, Measure]] = []
    for size in args.records:
        records = int(size)
        base = Path(args.dir) / f"history-{records}"
        spark_run, check_run = base / "spark", base / "check"
        history = spark_run / "history.jsonl"
        if not history.exists():
            spark_run.mkdir(parents=True, exist_ok=True)
            started = time.monotonic()
            info = generate_history(history, int(records * 2.25))
            (base / "info.json").write_text(json.dumps(info))
            console.print(f"generated {info['events']:,} lines in {time.monotonic() - started:.0f} s")
        info = json.loads((base / "info.json").read_text())
        for leftover in ("sends.parquet", "polls.parquet", "results.json"):
            (spark_run / leftover).unlink(missing_ok=True)  # Spark must read the history
        if check_run.exists():
            subprocess.run(["rm", "-rf", str(check_run)], check=True)
        check_run.mkdir(parents=True)
        os.link(history, check_run / "history.jsonl")  # the same file, a folder of its own for the tables
        lines = int(info["events"])
        console.print(f"[bold]{info['send_ops']:,} produced records[/], {lines:,} history lines, "
                      f"{history.stat().st_size / 1e6:,.0f} MB; load {os.getloadavg()[0]:.1f}")
        job = [py, "-m", "kafka_chaos.spark.job", "--master", args.master, "--driver-memory",
               args.driver_memory, "--no-progress", "--max-instances", "100"]
        measures = [
            run_measured("spark from history.jsonl", [*job, str(spark_run)], ok_codes=(0, 1)),
            run_measured("kafka-chaos check (end to end)",
                         [py, "-m", "kafka_chaos.harness.cli", "check", str(check_run), "--json"],
                         ok_codes=(0, 1)),
            run_measured("spark from the Parquet tables", [*job, str(check_run)], ok_codes=(0, 1)),
        ]
        counts = []
        for m in measures:
            try:
                counts.append(json.loads(m.output)["anomaly_counts"] if m.ok else None)
            except ValueError:
                counts.append(None)
            rows.append((info["send_ops"], lines, m))
            console.print(f"  {m.label}: {m.wall:.1f} s wall, {m.cpu:.1f} s CPU, peak JVM {m.jvm_peak_mb:,.0f} "
                          f"MB, driver {m.driver_peak_mb:,.0f} MB, tree {m.tree_peak_mb:,.0f} MB "
                          f"{json.dumps(m.extra)}")
        cycles = ("G0", "G1c")  # the only anomalies Spark leaves to the checker
        agreed = len({json.dumps({k: v for k, v in (c or {}).items() if k not in cycles}, sort_keys=True)
                      for c in counts}) == 1 and None not in counts
        console.print(f"  anomaly counts {'agree' if agreed else 'DIFFER'}: {counts}")
    table = Table(title=f"From the raw history on {args.master}: wall / CPU seconds, ratio to the Spark job from JSONL")
    for col in ("records", "lines", "engine", "wall s", "CPU s", "lines/s", "peak JVM MB", "driver MB",
                "tree MB", "÷ spark JSONL (wall)"):
        table.add_column(col, justify="right")
    reference = {r: m for r, _, m in rows if m.label.startswith("spark from history")}
    for records, lines, m in rows:
        ratio = f"{m.wall / reference[records].wall:.2f}×" if m.ok and reference[records].ok else "-"
        table.add_row(f"{records:,}", f"{lines:,}", m.label if m.ok else f"{m.label} (failed)", f"{m.wall:.1f}",
                      f"{m.cpu:.1f}", f"{lines / m.wall:,.0f}", f"{m.jvm_peak_mb:,.0f}", f"{m.driver_peak_mb:,.0f}",
                      f"{m.tree_peak_mb:,.0f}", ratio)
    console.print(table)
    return 0


def du_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) / 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", nargs="+", type=float, default=[1e7])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--keys", type=int, default=64)
    parser.add_argument("--dir", default="/tmp/kafka-chaos-bench")
    parser.add_argument("--checker-max", type=float, default=2e7, help="largest size for the checker")
    parser.add_argument("--plain-max", type=float, default=1e8, help="largest size for the plain queries")
    parser.add_argument("--driver-memory", default="2g")
    parser.add_argument("--from-history", action="store_true",
                        help="runs holding only history.jsonl: Spark from JSONL vs check end to end vs Parquet")
    parser.add_argument("--_checker", help=argparse.SUPPRESS)
    parser.add_argument("--_plain", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._checker:
        checker_main(args._checker)
        return 0
    if args._plain:
        plain_main(args._plain, args.master)
        return 0
    if args.from_history:
        return history_main(args)

    from rich.console import Console
    from rich.table import Table

    console = Console(width=170)
    base = Path(args.dir)
    base.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    rows_out = []
    for size in args.records:
        records = int(size)
        run, manifest, gen_s = ensure_data(base, records, args.keys)
        total_rows = manifest["rows"]["sends"] + manifest["rows"]["polls"]
        console.print(f"[bold]{records:,} produced records[/] ({total_rows:,} rows with polls, "
                      f"{du_mb(run):,.0f} MB Parquet, generated in {gen_s:.1f} s); "
                      f"load {os.getloadavg()[0]:.1f}")

        def report(m: Measure, records: int = records) -> None:
            rows_out.append((records, m, os.getloadavg()[0]))
            console.print(f"  {m.label}: {m.wall:.1f} s wall, {m.cpu:.1f} s CPU, "
                          f"{records / m.wall:,.0f} records/s; peak JVM {m.jvm_peak_mb:,.0f} MB, "
                          f"Python worker {m.python_worker_peak_mb:,.0f} MB, "
                          f"driver {m.driver_peak_mb:,.0f} MB, tree {m.tree_peak_mb:,.0f} MB; "
                          f"{json.dumps(m.extra)}; load {os.getloadavg()[0]:.1f}")

        job = run_measured("spark job", [py, "-m", "kafka_chaos.spark.job", str(run), "--master", args.master,
                                         "--driver-memory", args.driver_memory, "--no-progress",
                                         "--max-instances", "1000"],
                           ok_codes=(0, 1))  # 1: the job found anomalies (not valid), as seeded
        if job.ok:
            result = json.loads(job.output)
            seeded = {k: v for k, v in result["anomaly_counts"].items() if k in manifest["expected"]["anomaly_counts"]}
            job.extra["exact"] = seeded == manifest["expected"]["anomaly_counts"]  # the order ones follow from them
            job.extra["counts"] = result["anomaly_counts"]
        report(job)
        if records <= args.checker_max:
            chk = run_measured("checker.analyse", [py, __file__, "--_checker", str(run)])
            if chk.ok:
                counts = json.loads(chk.output)["anomaly_counts"]
                five = {k: v for k, v in counts.items() if k in manifest["expected"]["anomaly_counts"]}
                chk.extra["exact"] = five == manifest["expected"]["anomaly_counts"]
            report(chk)
        if records <= args.plain_max:
            plain = run_measured("3 plain queries",
                                 [py, __file__, "--_plain", str(run), "--master", args.master])
            if plain.ok:
                plain.extra.update(json.loads(plain.output))
            report(plain)

    table = Table(title=f"Reconciliation on {args.master} (wall / CPU seconds)")
    for col in ("records", "engine", "wall s", "CPU s", "records/s", "peak JVM MB", "peak worker MB",
                "÷ spark job (wall)", "÷ spark job (CPU)", "exact", "load after"):
        table.add_column(col, justify="right")
    jobs = {r: m for r, m, _ in rows_out if m.label == "spark job" and m.ok}
    for records, m, load in rows_out:
        ok = records in jobs and m.ok
        wall = f"{m.wall / jobs[records].wall:.2f}×" if ok else "-"
        cpu = f"{m.cpu / jobs[records].cpu:.2f}×" if ok and jobs[records].cpu else "-"
        table.add_row(f"{records:,}", m.label, f"{m.wall:.1f}", f"{m.cpu:.1f}", f"{records / m.wall:,.0f}",
                      f"{m.jvm_peak_mb:,.0f}", f"{m.python_worker_peak_mb:,.0f}", wall, cpu,
                      str(m.extra.get("exact", "") if m.ok else "failed"), f"{load:.1f}")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main())
