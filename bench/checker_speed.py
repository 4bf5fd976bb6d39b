"""How fast the checker is: `history_to_tables` and `analyse` on synthetic histories.

    .venv/bin/python bench/checker_speed.py                    # 10^5 and 10^6 events
    .venv/bin/python bench/checker_speed.py --sizes 1e5 1e6 1e7
    .venv/bin/python bench/checker_speed.py --txn --sizes 1e5 1e6   # transactional: micro-ops, cycle search
    .venv/bin/python bench/checker_speed.py --end-to-end --sizes 1e6 1e7   # `kafka-chaos check` vs Polars
                                                    # (of a finished run, and of its history alone)

A size is a number of history events (lines). Each history is generated here and checked in a fresh
subprocess, so that the peak RSS printed (VmHWM; imports alone take ~150 MB) is the checker's
own. The histories are clean (a few failed sends; the checker does the same work either way) and look like
a real run: 16 partitions, 8 producers sending one record per op, 4 assign-mode consumers polling batches
of up to 8 records per partition a little behind the producers, a kill/restart by the nemesis, and the
harness's final `drain-complete`. Wall time suffers on a busy machine; CPU time less so.
Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

SEND_INVOKE = (
    '{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"send","value":[["send","chaos/%d",%d]]}\n'
)
SEND_OK = '{"index":%d,"time":%d,"process":%d,"type":"ok","f":"send","value":[["send","chaos/%d",[%d,%d]]]}\n'
SEND_FAIL = (
    '{"index":%d,"time":%d,"process":%d,"type":"fail","f":"send","value":[["send","chaos/%d",%d]],'
    '"error":"NotEnoughReplicasException"}\n'
)
POLL_INVOKE = '{"index":%d,"time":%d,"process":%d,"type":"invoke","f":"poll","value":[["poll"]]}\n'
POLL_OK = '{"index":%d,"time":%d,"process":%d,"type":"ok","f":"poll","value":[["poll",{"chaos/%d":[%s]}]]}\n'


def peak_rss_kb() -> int:
    """This process's peak resident memory, KiB: VmHWM, the high-water mark of its own address space. Not
    getrusage's ru_maxrss: Linux carries that across fork and exec, so a child started by a parent that had
    generated a large history would report the parent's peak."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def generate(
    path: Path,
    events: int,
    *,
    keys: int = 16,
    producers: int = 8,
    consumers: int = 4,
    batch: int = 8,
    fail_rate: float = 0.01,
    seed: int = 0,
) -> dict[str, int]:
    """Write a clean history of about `events` lines to `path`; return what it holds."""
    rng = np.random.default_rng(seed)
    m = max(1, int(events / (2 + 2 / batch)))  # send ops; polls add about 2/batch lines per send
    key = rng.integers(0, keys, size=m)
    failed = rng.random(m) < fail_rate
    # Offsets: rank of each successful send within its key, in value (= time) order.
    offset = np.full(m, -1, dtype=np.int64)
    good = np.flatnonzero(~failed)
    order = good[np.argsort(key[good], kind="stable")]
    k_sorted = key[order]
    starts = np.searchsorted(k_sorted, np.arange(keys))
    rank = np.arange(len(order)) - starts[k_sorted]
    offset[order] = rank
    # Poll batches: consecutive runs of `batch` records of one key, read by consumer key % consumers after
    # the batch's last record was acknowledged, plus a random lag.
    batch_id = k_sorted * (m // batch + 2) + rank // batch
    new = np.r_[True, batch_id[1:] != batch_id[:-1]]
    b_first = np.flatnonzero(new)
    b_last = np.r_[b_first[1:] - 1, len(order) - 1]
    last_value = order[b_last]
    lag = rng.integers(0, 4 * producers, size=len(b_first))
    # A consumer reads a key's batches in order: make each key's poll positions non-decreasing.
    span = 2 * m
    b_key = k_sorted[b_first]
    poll_at = np.maximum.accumulate(last_value + lag + b_key * span) - b_key * span
    record = [f"[{o},{v}]" for o, v in zip(rank.tolist(), order.tolist(), strict=True)]

    # Merge: send op v sorts at 2v, a poll at 2(last value + lag) + 1.
    n_polls = len(b_first)
    sort_key = np.concatenate([2 * np.arange(m), 2 * np.minimum(poll_at, m - 1) + 1])
    op_order = np.argsort(sort_key, kind="stable")
    nops = len(op_order)
    lines = 2 * nops + 5
    with path.open("w") as fh:
        start = {"index": 0, "time": 0, "process": "harness", "type": "info", "f": "run-start"}
        fh.write(json.dumps({**start, "value": {"seed": seed}}) + "\n")
        fh.write('{"index":1,"time":500,"process":"nemesis","type":"invoke","f":"kill","value":{"nodes":[2]}}\n')
        fh.write('{"index":2,"time":600,"process":"nemesis","type":"info","f":"kill","value":{"nodes":[2]}}\n')
        chunk = 200_000
        for a in range(0, nops, chunk):
            out: list[str] = []
            for pos, op in enumerate(op_order[a : a + chunk].tolist(), a):
                i = 3 + 2 * pos
                t = 1000 * i
                if op < m:
                    k = int(key[op])
                    p = op % producers
                    out.append(SEND_INVOKE % (i, t, p, k, op))
                    if failed[op]:
                        out.append(SEND_FAIL % (i + 1, t + 700, p, k, op))
                    else:
                        out.append(SEND_OK % (i + 1, t + 700, p, k, offset[op], op))
                else:
                    b = op - m
                    first, last = int(b_first[b]), int(b_last[b])
                    k = int(k_sorted[first])
                    c = producers + k % consumers
                    out.append(POLL_INVOKE % (i, t, c))
                    out.append(POLL_OK % (i + 1, t + 700, c, k, ",".join(record[first : last + 1])))
            fh.write("".join(out))
        i = 3 + 2 * nops
        restart = {"index": i, "time": 1000 * i, "process": "nemesis", "type": "info", "f": "restart"}
        fh.write(json.dumps({**restart, "value": {"nodes": [2]}}) + "\n")
        drain = {"index": i + 1, "time": 1000 * i + 1, "process": "harness", "type": "info"}
        fh.write(json.dumps({**drain, "f": "drain-complete", "value": True}) + "\n")
    return {"events": lines, "send_ops": m, "poll_ops": n_polls, "records_read": len(order)}


def run_one(path: Path) -> dict[str, float]:
    """Time history_to_tables and analyse on the history at `path`, in this process."""
    from kafka_chaos.checker import analyse, history_to_tables
    from kafka_chaos.faults.windows import faults_from_history

    size = path.stat().st_size
    rss_before = peak_rss_kb()
    t0, c0 = time.perf_counter(), time.process_time()
    tables = history_to_tables(path)
    t_tables, c_tables = time.perf_counter() - t0, time.process_time() - c0
    rss_tables = peak_rss_kb()
    meta = tables.meta
    t0, c0 = time.perf_counter(), time.process_time()
    result = analyse(
        tables.sends,
        tables.polls,
        subscribe_processes=meta.subscribe_processes,
        faults=faults_from_history(meta.nemesis, end_time=meta.end_time),
        complete=meta.complete,
        end_time=meta.end_time,
        op_counts=meta.op_counts,
        ok_poll_times=meta.ok_poll_times,
    )
    t_analyse, c_analyse = time.perf_counter() - t0, time.process_time() - c0
    return {
        "events": meta.events,
        "bytes": size,
        "tables_s": t_tables,
        "analyse_s": t_analyse,
        "tables_cpu_s": c_tables,
        "analyse_cpu_s": c_analyse,
        "sends_rows": tables.sends.num_rows,
        "polls_rows": tables.polls.num_rows,
        "anomalies": sum(result.anomaly_counts.values()),
        "valid": result.results().valid,
        "peak_rss_mb_before": rss_before / 1024,
        "peak_rss_mb_tables": rss_tables / 1024,
        "peak_rss_mb": peak_rss_kb() / 1024,
    }


# --- end to end: `kafka-chaos check RUN_DIR` against a Polars baseline on the same tables ---


def polars_baseline(run_dir: Path) -> dict[str, float]:
    """The three reconciliation queries in Polars on the run's sends.parquet/polls.parquet, Parquet read
    included: acknowledged sends never read (lost), values read at two offsets (duplicated), offsets read
    with two values (inconsistent offsets). The reference the issue names: what a columnar engine needs for
    the core of the job."""
    import polars as pl

    t0, c0 = time.perf_counter(), time.process_time()
    sends = pl.scan_parquet(run_dir / "sends.parquet")
    polls = pl.scan_parquet(run_dir / "polls.parquet")
    read = polls.select("key", "value").unique()
    lost = sends.filter(pl.col("type") == "ok").join(read, on=["key", "value"], how="anti")
    duplicated = polls.group_by("key", "value").agg(pl.col("offset").n_unique().alias("n")).filter(pl.col("n") > 1)
    inconsistent = (polls.group_by("key", "offset").agg(pl.col("value").n_unique().alias("n"))
                    .filter(pl.col("n") > 1))
    counts = pl.collect_all([lost.select(pl.len()), duplicated.select(pl.len()), inconsistent.select(pl.len())])
    return {"polars_s": time.perf_counter() - t0, "polars_cpu_s": time.process_time() - c0,
            "found": float(sum(int(c.item()) for c in counts))}


def check_one(run_dir: Path) -> dict[str, float]:
    """`kafka-chaos check RUN_DIR --json` as the CLI runs it (parse, analyse, write tables, results.json,
    junit.xml and the report), in this process; peak RSS of this process."""
    import contextlib
    import io

    from kafka_chaos.harness.cli import main as cli_main

    sys.argv = ["kafka-chaos", "check", str(run_dir), "--json"]
    t0, c0 = time.perf_counter(), time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            cli_main()
        except SystemExit as done:
            if done.code not in (0, None):
                raise RuntimeError(f"check exited {done.code}") from None
    return {"check_s": time.perf_counter() - t0, "check_cpu_s": time.process_time() - c0,
            "peak_rss_mb": peak_rss_kb() / 1024}


def store_as_the_run_does(run_dir: Path) -> float:
    """Feed the history's lines to a TableBuilder and store its tables, as the recorder does while a run writes
    its history (checker.stored_tables); returns the seconds it took (spent during the run, not by the check)."""
    from kafka_chaos.checker.stored_tables import TableBuilder

    t0 = time.perf_counter()
    builder = TableBuilder()
    with (run_dir / "history.jsonl").open("rb") as fh:
        for line in fh:
            builder.feed(line)
    builder.store(run_dir)
    return time.perf_counter() - t0


def _in_fresh_process(flag: str, run_dir: Path) -> dict[str, float]:
    proc = subprocess.run([sys.executable, __file__, flag, str(run_dir)], capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"{flag} failed:\n{proc.stderr[-2000:]}")
    result: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main_end_to_end(sizes: list[str]) -> int:
    print("`kafka-chaos check` end to end (report included) vs the Polars baseline on the tables it wrote (the three")
    print("reconciliation queries), same run; each in a fresh process; lines/s per wall second.")
    print("  run's tables: a finished run, whose recorder stored the tables as it wrote the history (the check")
    print("                reads them; `store s` is what building them cost, spread over the run)")
    print("  history only: history.jsonl alone (another tool's, or a run cut short): the check parses it")
    header = (f"{'lines':>11} {'MB':>6} {'input':>13} | {'check s':>8} {'cpu s':>6} {'lines/s':>10} {'peak MB':>8} | "
              f"{'polars s':>8} | {'check/polars':>12} | {'store s':>7}")
    print(header)
    print("-" * len(header))
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="checker-e2e-") as tmp:
            run_dir = Path(tmp)
            info = generate(run_dir / "history.jsonl", int(float(size)))
            mb = (run_dir / "history.jsonl").stat().st_size / 1e6
            store_s = store_as_the_run_does(run_dir)
            try:
                rows: list[tuple[str, dict[str, float], float | None]] = [
                    ("run's tables", _in_fresh_process("--one-check", run_dir), store_s)]
                polars = _in_fresh_process("--one-polars", run_dir)
                (run_dir / "tables.json").unlink()
                rows.append(("history only", _in_fresh_process("--one-check", run_dir), None))
            except RuntimeError as err:
                print(f"{size:>11} {err}")
                return 1
        lines = info["events"]
        for label, c, stored in rows:
            print(f"{lines:>11,} {mb:>6.0f} {label:>13} | {c['check_s']:>8.2f} {c['check_cpu_s']:>6.2f} "
                  f"{lines / c['check_s']:>10,.0f} {c['peak_rss_mb']:>8,.0f} | {polars['polars_s']:>8.2f} | "
                  f"{c['check_s'] / polars['polars_s']:>12.1f} | " + (f"{stored:>7.1f}" if stored else f"{'-':>7}"))
        if polars["found"]:
            print(f"  unexpected: Polars found {polars['found']:.0f} anomalies in a clean history")
    return 0
# --- end of end to end ---


# --- transactional histories: `--txn`, sizes in micro-ops, the cycle search included ---
ELLE_OPS_PER_S = 5000
"""Jepsen's Elle checks list-append histories at about this many ops per second (the issue's figure)."""


def generate_txn(path: Path, micro_ops: int, *, keys: int = 16, processes: int = 8, seed: int = 1) -> None:
    """A clean transactional history: `processes` overlapping transactions at a time, each sending to 2-4
    distinct keys (offsets in invoke order, so no cycle exists) and a third of them first polling what was
    last committed on two keys (wr edges); a final read of every key. Micro-ops are sends + records polled."""
    rng = np.random.default_rng(seed)
    ends = [0] * keys
    committed: list[list[tuple[int, int]]] = [[] for _ in range(keys)]
    index = t = value = done_mops = 0
    pending: list[tuple[int, list[Any]]] = []
    with path.open("w") as fh:
        def emit(process: int, type_: str, v: Any) -> None:
            nonlocal index, t
            t += 1000
            fh.write(json.dumps({"index": index, "time": t, "process": process, "type": type_, "f": "txn",
                                 "value": v}, separators=(",", ":")) + "\n")
            index += 1

        proc = 0
        while done_mops < micro_ops:
            if len(pending) == processes:
                p, finished = pending.pop(0)
                emit(p, "ok", finished)
                for m in finished:
                    if m[0] == "send":
                        committed[int(m[1].rsplit("/", 1)[1])].append((m[2][0], m[2][1]))
            mops: list[Any] = []
            if rng.random() < 1 / 3:
                read = {f"chaos/{k}": [list(r) for r in committed[k][-4:]]
                        for k in rng.choice(keys, 2, replace=False).tolist() if committed[k]}
                mops.append(["poll", read])
                done_mops += sum(len(v) for v in read.values())
            for k in rng.choice(keys, int(rng.integers(2, 5)), replace=False).tolist():
                mops.append(["send", f"chaos/{k}", [ends[k], value]])
                ends[k] += 1
                value += 1
                done_mops += 1
            proc += 1
            emit(proc, "invoke", [["poll"] if m[0] == "poll" else ["send", m[1], m[2][1]] for m in mops])
            pending.append((proc, mops))
        for p, mops in pending:
            emit(p, "ok", mops)


def run_one_txn(path: Path) -> dict[str, float]:
    """Read the transactions and search for cycles (checker.anomalies.cycles), in this process."""
    from kafka_chaos.checker.anomalies.cycles import find_cycles, read_txn_history

    t0, c0 = time.perf_counter(), time.process_time()
    h = read_txn_history(path)
    t_read = time.perf_counter() - t0
    found = find_cycles(h)
    total_s, cpu_s = time.perf_counter() - t0, time.process_time() - c0
    return {"txns": len(h), "micro_ops": h.micro_ops, "read_s": t_read,
            "total_s": total_s, "cpu_s": cpu_s,
            "cycles": len(found.G0) + len(found.G1c),
            "peak_rss_mb": peak_rss_kb() / 1024}


def main_txn(sizes: list[str]) -> int:
    print("transactional histories: read + ww/wr/process/realtime graph + SCC cycle search (one process)")
    print("mops/s per wall second; mops/cpu-s per CPU second of the process (what counts on a busy machine)")
    header = (f"{'micro-ops':>10} {'txns':>8} | {'wall s':>7} {'read s':>7} {'cpu s':>6} {'mops/s':>10} "
              f"{'mops/cpu-s':>10} {'x Elle':>7} | {'RSS MB':>7}")
    print(header)
    print("-" * len(header))
    for size in sizes:
        with tempfile.TemporaryDirectory(prefix="checker-speed-txn-") as tmp:
            path = Path(tmp) / "history.jsonl"
            generate_txn(path, int(float(size)))
            proc = subprocess.run([sys.executable, __file__, "--one-txn", str(path)], capture_output=True,
                                  text=True, check=False)
        if proc.returncode:
            print(f"{size:>10} failed:\n{proc.stderr}")
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rate = r["micro_ops"] / r["total_s"]
        print(f"{r['micro_ops']:>10,} {r['txns']:>8,} | {r['total_s']:>7.2f} {r['read_s']:>7.2f} {r['cpu_s']:>6.2f} "
              f"{rate:>10,.0f} {r['micro_ops'] / r['cpu_s']:>10,.0f} {rate / ELLE_OPS_PER_S:>7.0f} | "
              f"{r['peak_rss_mb']:>7,.0f}")
        if r["cycles"]:
            print(f"  unexpected: {r['cycles']} cycles in a clean history")
    return 0
# --- end transactional histories ---


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    ap.add_argument("--sizes", nargs="+", default=["1e5", "1e6"], help="history sizes in events, e.g. 1e7")
    ap.add_argument("--one", type=Path, help=argparse.SUPPRESS)  # internal: check one history, print JSON
    ap.add_argument("--txn", action="store_true", help="transactional histories; sizes in micro-ops")
    ap.add_argument("--one-txn", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--end-to-end", action="store_true", help="`kafka-chaos check` vs Polars on the same tables")
    ap.add_argument("--one-check", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--one-polars", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one_check:
        print(json.dumps(check_one(args.one_check)))
        return 0
    if args.one_polars:
        print(json.dumps(polars_baseline(args.one_polars)))
        return 0
    if args.end_to_end:
        return main_end_to_end(args.sizes)
    if args.one:
        print(json.dumps(run_one(args.one)))
        return 0
    if args.one_txn:
        print(json.dumps(run_one_txn(args.one_txn)))
        return 0
    if args.txn:
        return main_txn(args.sizes)
    from kafka_chaos.checker.tables import JSON_DECODER

    print(f"JSON decoder: {JSON_DECODER}; ev/s = events per wall second")
    print("wall = elapsed seconds; cpu = this process's CPU seconds (what counts on a busy machine)")
    header = (
        f"{'events':>10} {'MB':>7} {'sends':>9} {'polled':>9} | "
        f"{'tables wall':>11} {'cpu':>6} {'ev/s':>10} | "
        f"{'analyse wall':>12} {'cpu':>6} {'ev/s':>10} | {'peak RSS MB tables/all':>22}"
    )
    print(header)
    print("-" * len(header))
    for size in args.sizes:
        n = int(float(size))
        with tempfile.TemporaryDirectory(prefix="checker-speed-") as tmp:
            path = Path(tmp) / "history.jsonl"
            generate(path, n)
            proc = subprocess.run(
                [sys.executable, __file__, "--one", str(path)], capture_output=True, text=True, check=False
            )
        if proc.returncode:
            print(f"{n:>10} failed:\n{proc.stderr}")
            return 1
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        ev = r["events"]
        print(
            f"{ev:>10} {r['bytes'] / 1e6:>7.1f} {r['sends_rows']:>9} {r['polls_rows']:>9} | "
            f"{r['tables_s']:>11.2f} {r['tables_cpu_s']:>6.2f} {ev / r['tables_s']:>10,.0f} | "
            f"{r['analyse_s']:>12.2f} {r['analyse_cpu_s']:>6.2f} {ev / r['analyse_s']:>10,.0f} | "
            f"{r['peak_rss_mb_tables']:>11,.0f} / {r['peak_rss_mb']:>8,.0f}"
        )
        if r["anomalies"] or not r["valid"]:
            print(f"  unexpected: {r['anomalies']} anomalies in a clean history")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
