"""Spark reconciliation of produced vs consumed records: the same anomalies as checker/, at any scale.

Usage: `python -m spark.job RUN_DIR... [--master URL] [--out DIR]`, or the same file under `spark-submit`
(`spark-submit spark/job.py RUN_DIR...`, master and memory then come from spark-submit).

The plan — one scan of each table, one shuffle, one vectorised pass per partition:

1. **Scan** every run's `sends`, `polls` and `extra_reads` once, reading only the columns the kernel needs
   (Parquet column pruning), and project them into one narrow union (`kernel.INPUT_SCHEMA`): every poll
   record (of ok polls, at known offsets or not, and of fail / info polls: Jepsen's rules on general
   histories, checker/tables.py) and all sends, `src` telling which. A run without tables is read from its
   `history.jsonl` instead (spark/history.py: the lines parsed in parallel; pairing a send's completion with
   its invoke is one more exchange, of the client events by process). With several runs, keys are prefixed
   `<run id>/` and op indexes are shifted per run, so runs never mix.
2. **Shuffle once**: `repartition("key")` puts every row of a key into one partition. This is the only
   exchange of the history in the plan: no join of sends with polls, no groupBy per anomaly, no window —
   the plain way (one query per anomaly) scans each table once per query and shuffles the history five or
   six times (distinct, dense_rank window, joins, groupBys).
3. **Analyse per partition** with `mapInArrow(kernel.analyse_batches)`: Arrow batches go straight into numpy
   (no per-row Python): a hash factorisation of (key, value) gives the per-value facts (read? its writer?),
   one of (key, offset) with only the distinct offsets sorted gives the dense positions of the version
   order, and every anomaly follows from linear passes over those. Each partition emits at most
   `max_instances` instances per anomaly (its smallest) and one row of exact counts per key.
4. **Collect** only those capped instances and per-key counts (`toArrow`), in the same job; the driver keeps
   the smallest `max_instances` per anomaly and sums the counts. `precommitted-read` is one instance per
   txn across keys: partitions send every candidate (one per op and key, few) and the driver keeps one per
   op. Nothing is cached: the plan is a single pass, so there is nothing to reuse.
5. Rarely, a partition cannot decide whether an *info* send with a known offset committed (Jepsen: it did if
   its op had any value read, and that value may live in another key's partition). Those ops come back
   as `#uncertain` rows; only then a second, small job looks them up (a broadcast semi-join of the run's
   sends of those ops with its polls) and re-analyses just the keys concerned.

Computed: lost-write, unseen, duplicate, inconsistent-offsets, G1a, garbage-read, precommitted-read and the order
anomalies (poll-skip, nonmonotonic-poll, nonmonotonic-send and the int-* ones) (`COMPUTED`), by the checker's
rules on general histories (kernel's module doc); a must-read value nobody sent stops the job as it stops the checker
(exit 2). A (process, key) sequence of ops lives in its key's partition, so the order anomalies need no other
exchange: what bears on them besides the records travels with the rows as marker rows (an ok poll that
returned a key empty, a key in a poll's rebalance log), and the assign / subscribe resets and subscribe-mode
consumers — per process, not per key, and few — are read before the pass (from the history's lines that
mention them, or from the `tables.json` beside the tables) and shipped to every task with the kernel. The
cycles (G0, G1c) are in the result's `not_checked` with why (`NOT_CHECKED`): they are the single-process
checker's (`kafka-chaos check RUN_DIR`).

Partitions: by default the shuffle is hash-partitioned into 200 (the most that keeps Spark's bypass-merge
shuffle writer, several times faster than the sorting one) and adaptive query execution coalesces
neighbours up to 16 MiB of (compressed) shuffle data, keeping at least one per core; `shuffle_partitions`
fixes the number instead. A Python worker holds its partition's Arrow input (~30 bytes a row) and works on
whole keys ~2 million rows at a time (`kernel.CHUNK_ROWS`, ~100 bytes a row): 1.3 GB peak per worker at
10^8 records over 64 keys. Bound: one key's rows must fit in a worker's memory, which holds for Kafka
partitions of well over 10^7 records.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

if __name__ == "__main__" and not __package__:
    # Run as a file (`spark-submit spark/job.py`): import the project, not this folder's modules, by name.
    _here = Path(__file__).resolve().parent
    sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _here]
    sys.path.insert(0, str(_here.parent))

from kafka_chaos.checker.results import RunResults
from kafka_chaos.errors import ResultsError, SparkReconcileError
from kafka_chaos.rundir import RECONCILE_FILE, RESULTS_FILE
from kafka_chaos.spark import kernel
from kafka_chaos.spark.history import HistoryFacts
from kafka_chaos.spark.session import DEFAULT_DRIVER_MEMORY, DEFAULT_MASTER, first_line, start_session
from kafka_chaos.spark.tables import OP_STRIDE, RunTables, load_rows, read_sends, resolve_runs

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from rich.console import Console

__all__ = ["SparkReconcileError", "main", "reconcile", "reconcile_runs"]

INITIAL_PARTITIONS = 200  # ≤ spark.shuffle.sort.bypassMergeThreshold: above it, map tasks sort (~4× slower)
_ADAPTIVE = {
    "spark.sql.shuffle.partitions": str(INITIAL_PARTITIONS),
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # Small partitions (several per core) keep each Python worker's Arrow input small.
    "spark.sql.adaptive.advisoryPartitionSizeInBytes": "16m",
}
RESULT_FILE = RECONCILE_FILE

_POLL_SKIPS = ("poll-skip", "nonmonotonic-poll")
# Which columns of a findings row make up an instance of each anomaly (names as checker/ emits them).
_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "lost-write": (("value", "value"), ("offset", "offset"), ("index", "index"),
                   ("bound", "max_read_index"), ("ops", "ops")),
    "unseen": (("count", "count"), ("values", "values"), ("ops", "ops")),
    "duplicate": (("value", "value"), ("count", "count"), ("offsets", "offsets"), ("indexes", "indexes"),
                  ("ops", "ops")),
    "inconsistent-offsets": (("offset", "offset"), ("index", "index"), ("values", "values"), ("ops", "ops")),
    "G1a": (("value", "value"), ("offset", "offset"), ("ops", "ops"), ("processes", "processes")),
    kernel.KIND_PRECOMMITTED: (("value", "value"), ("offset", "offset"), ("ops", "ops")),
    kernel.KIND_GARBAGE: (("value", "value"), ("offset", "offset"), ("process", "process"), ("ops", "ops"),
                          ("times", "times")),
    **{kind: (("process", "process"), *((("subscribe", "subscribe"),) if kind in _POLL_SKIPS else ()),
              ("values", "values"), ("offsets", "offsets"), ("delta", "delta"), ("skipped", "skipped"),
              ("ops", "ops"), ("times", "times"))
       for kind in kernel.ORDER_KINDS},
}
COMPUTED = (*kernel.ANOMALY_KINDS, kernel.KIND_PRECOMMITTED)
"""The anomalies of checker.schema.ANOMALIES_BAD_BY_DEFAULT the job computes; the others are in NOT_CHECKED."""
_CHECK = "checked by the single-process checker: `kafka-chaos check RUN_DIR`"
CYCLES = f"cycles (G0, G1c) are {_CHECK}"
NOT_CHECKED: dict[str, str] = {
    "G0": CYCLES,
    "G1c": CYCLES,
}
"""What the job does not compute, and why: the result's `not_checked` (docs/architecture.md §4), so a zero
is never read into an anomaly nobody looked for."""


def reconcile(
    paths: Sequence[str],
    *,
    master: str | None = DEFAULT_MASTER,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shuffle_partitions: int | None = None,
    max_instances: int = 100,
    max_values: int = 1000,
    spark: SparkSession | None = None,
    progress: bool | None = None,
    console: Console | None = None,
    skip_malformed: bool = False,
) -> RunResults:
    """Reconcile the runs in `paths` with Spark: from their sends and polls tables, or from `history.jsonl`
    where a run has no (up-to-date) tables (spark/tables.py, spark/history.py).

    Returns RunResults, the `kafka-chaos check --json` shape (`valid`, `complete`, `anomaly_counts`, `anomalies`,
    `violations`, `stats`, `not_checked`: the anomalies the job does not compute, with why — `NOT_CHECKED`)
    plus `keys` (per-key counts) and `runs` (per-run anomaly counts). Instances are
    capped at `max_instances` per anomaly (smallest key, then value/offset, first); `anomaly_counts` are
    exact. An `unseen` instance lists at most `max_values` values and has the exact `count`.

    `spark`: a session to use and leave running (by default the active one, if any); otherwise one is
    started with `master` and `driver_memory`, and stopped at the end. `shuffle_partitions`: partitions
    of the one shuffle (default: adaptive, see the module doc). A malformed history line (other than a cut
    last line) is a SparkReconcileError naming the file and line, unless `skip_malformed`: then they are
    left out, counted in `stats.malformed_lines`. Raises SparkReconcileError with a message for a person.
    """
    if max_instances < 0 or max_values < 0:
        raise SparkReconcileError("max_instances and max_values must be zero or more.")
    started = time.monotonic()
    show = sys.stderr.isatty() if progress is None else progress
    if spark is None:
        spark = _active_session()  # e.g. under spark-submit, or embedded
    own = spark is None
    session = spark or start_session(
        master, driver_memory=driver_memory, shuffle_partitions=shuffle_partitions
    )
    try:
        with _Progress(session, show, console) as bar:
            bar.phase("resolving tables")
            runs = resolve_runs(session, list(paths))
            total_bytes = sum(r.bytes for r in runs)
            source = "history" if all(r.history for r in runs) else "Parquet" if not any(
                r.history for r in runs) else "history and Parquet"
            bar.phase(f"reconciling {len(runs)} run(s), {total_bytes / 1e6:,.1f} MB of {source}")
            job = _Job(session, max_instances, max_values, shuffle_partitions, *_memberships(runs))
            rows = job.findings(load_rows(session, runs))
            facts = {r.run: r.history.facts() for r in runs if r.history is not None}
            _refuse_malformed(runs, facts, skip_malformed)
            _refuse_orphans(rows)
            uncertain = [r for r in rows if r["kind"] == kernel.KIND_UNCERTAIN]
            if uncertain:
                bar.phase("deciding info sends whose op wrote to other keys")
                rows = _settle_uncertain(job, runs, rows, uncertain)
        sections = _assemble(rows, max_instances, runs=[r.run for r in runs])
        _fill_send_ms(session, runs, sections["anomalies"].get("duplicate", []))
        if facts:
            sections["histories"] = {run: _history_summary(f) for run, f in facts.items()}
        sections["stats"].update(
            engine="spark",
            runs=[r.run for r in runs],
            source=source,
            malformed_lines=sum(f.malformed for f in facts.values()),
            input_bytes=total_bytes,
            shuffle_partitions=shuffle_partitions or "adaptive",
            master=session.sparkContext.master,
            seconds=round(time.monotonic() - started, 3),
        )
        return RunResults.of(sections).finish(complete=[*_complete(runs), *(f.complete for f in facts.values())])
    finally:
        if own:
            session.stop()


def _ship_kernel_by_value() -> None:
    """Pickle the kernel's code into the tasks, so executors need numpy and pyarrow but not kafka-chaos."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(kernel)  # type: ignore[no-untyped-call]


def _active_session() -> SparkSession | None:
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        return None  # start_session says how to install it
    return SparkSession.getActiveSession()


class _Job:
    """The one pass: rows → repartition by key → kernel per partition → findings, collected."""

    def __init__(
        self, session: SparkSession, cap: int, max_values: int, shuffle_partitions: int | None,
        resets: Sequence[kernel.Reset] = (), subscribers: Sequence[kernel.Subscriber] = (),
    ) -> None:
        self.session = session
        self.cap = cap
        self.max_values = max_values
        self.shuffle_partitions = shuffle_partitions
        self.resets = resets
        self.subscribers = subscribers

    def findings(self, rows: Any, committed_info_ops: list[int] | None = None) -> list[dict[str, Any]]:
        import numpy as np

        analyse = functools.partial(
            kernel.analyse_batches,
            cap=self.cap,
            max_values=self.max_values,
            committed_info_ops=None if committed_info_ops is None else np.asarray(committed_info_ops),
            resets=self.resets,
            subscribers=self.subscribers,
        )
        if self.shuffle_partitions:
            by_key = rows.repartition(self.shuffle_partitions, "key")
        else:  # AQE sizes the partitions from the shuffle's real size, coalescing INITIAL_PARTITIONS
            by_key = rows.repartition("key")
        found = by_key.mapInArrow(analyse, kernel.FINDINGS_DDL)
        conf = self.session.conf
        settings = {} if self.shuffle_partitions else _ADAPTIVE
        previous: dict[str, str | None] = {name: conf.get(name, None) for name in settings}
        try:
            for name, value in settings.items():
                conf.set(name, value)
            rows_out: list[dict[str, Any]] = _to_arrow(found).to_pylist()
            return rows_out
        except Exception as exc:
            raise _job_error(exc) from None
        finally:
            for name, old in previous.items():
                if old is None:
                    conf.unset(name)
                else:
                    conf.set(name, old)


def _memberships(runs: list[RunTables]) -> tuple[list[kernel.Reset], list[kernel.Subscriber]]:
    """Every run's resets and subscribe-mode consumers, for the kernel (few: one per assign / subscribe), with
    the run's key prefix and op shift when there are several runs. A run's history is read for them first
    (HistoryFrames.memberships); a run read from its tables has them from its `tables.json`."""
    prefix = len(runs) > 1
    resets: list[kernel.Reset] = []
    subscribers: list[kernel.Subscriber] = []
    for run in runs:
        found, subscribe = run.history.memberships() if run.history is not None else (
            list(run.order.resets), set(run.order.subscribers))
        shift, named = (run.number * OP_STRIDE, run.run + "/") if prefix else (0, "")
        resets += [(p, i + shift, frozenset(named + n for n in names)) for p, i, names in found]
        subscribers += [(p, shift, shift + OP_STRIDE) for p in sorted(subscribe)]
    return resets, subscribers


def _to_arrow(df: Any) -> Any:
    """Collect a (small) DataFrame as a pyarrow Table: `toArrow` on Spark ≥ 4.0, its private forerunner on
    3.5."""
    if hasattr(df, "toArrow"):
        return df.toArrow()
    import pyarrow as pa

    batches = df._collect_as_arrow()
    if batches:
        return pa.Table.from_batches(batches)
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(df.schema).empty_table()


def _job_error(exc: Exception) -> SparkReconcileError:
    if isinstance(exc, SparkReconcileError):
        return exc
    line = first_line(exc)
    lowered = str(exc).lower()
    if any(s in lowered for s in ("parquet", "footer", "filenotfound", "file does not exist")):
        return SparkReconcileError(
            f"A table could not be read while reconciling ({line}). A Parquet file is damaged or was "
            "removed while Spark ran; regenerate the run's tables with `kafka-chaos check RUN_DIR`."
        )
    return SparkReconcileError(
        f"The Spark job failed ({line}). If a worker ran out of memory, set --shuffle-partitions higher or "
        "raise --driver-memory; set KAFKA_CHAOS_SPARK_LOG=warn to see Spark's own log."
    )


def _settle_uncertain(
    job: _Job, runs: list[RunTables], rows: list[dict[str, Any]], uncertain: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Info sends with an offset whose op may have committed through a value of another key.

    Jepsen counts such a send as committed (so in the version order, and losable) if any value its op sent
    was read. Their partitions could not see that; here, per run, the ops are looked up across all keys (a
    broadcast semi-join of the run's sends of those ops with its polls), and the keys whose verdict changes
    are analysed again with the committed ops known. Runs without info sends carrying offsets never get
    here.
    """
    from pyspark.sql import functions as F

    session = job.session
    prefixed = len(runs) > 1
    by_run: dict[str, dict[str, list[int]]] = {}
    for row in uncertain:
        run = row["key"].split("/", 1)[0] if prefixed else runs[0].run
        by_run.setdefault(run, {})[row["key"]] = row["ops"]
    replaced: dict[str, list[dict[str, Any]]] = {}
    for run_tables in runs:
        keys_ops = by_run.get(run_tables.run)
        if not keys_ops:
            continue
        ops = sorted({o for ops in keys_ops.values() for o in ops})
        # The run's rows as the job read them (ops shifted alike): ok reads are src 0, at any offset.
        rows_of_run = load_rows(session, [run_tables], prefix=prefixed)
        wanted = session.createDataFrame([(o,) for o in ops], "op bigint")
        try:
            op_sends = rows_of_run.where(F.col("src") == kernel.SRC_INFO).join(F.broadcast(wanted), "op",
                                                                                "left_semi")
            ok_reads = rows_of_run.where(F.col("src") == kernel.SRC_POLL).select("key", "value")
            read_ops = _to_arrow(op_sends.select("key", "value", "op").join(ok_reads, ["key", "value"],
                                                                            "left_semi").select("op").distinct())
        except Exception as exc:
            raise _job_error(exc) from None
        committed = sorted(set(read_ops.column("op").to_pylist()))
        if not committed:
            continue
        keys = sorted(k for k, k_ops in keys_ops.items() if set(k_ops) & set(committed))
        again = rows_of_run.where(F.col("key").isin(keys))
        for row in job.findings(again, committed_info_ops=committed):
            replaced.setdefault(row["key"], []).append(row)
    return [r for r in rows if r["key"] not in replaced and r["kind"] != kernel.KIND_UNCERTAIN] + [
        r for found in replaced.values() for r in found if r["kind"] != kernel.KIND_UNCERTAIN
    ]


def _refuse_orphans(rows: list[dict[str, Any]]) -> None:
    """A value that must have been read (before what ok polls reached) and that nobody sent stops the job, as
    it stops the checker (checker.anomalies.lost, Jepsen's `lost-write-cases` `:no-writer-of`): exit 2."""
    orphans = sorted((r["key"], r["value"], r["count"]) for r in rows if r["kind"] == kernel.KIND_NO_WRITER)
    if orphans:
        key, value, _ = orphans[0]
        raise SparkReconcileError(
            f"key {key}: value {value} is in the log (a poll that did not succeed read it) before what ok polls "
            f"reached, but no op sent it ({sum(n for *_, n in orphans)} such values in all). Jepsen's "
            "lost-write-cases stops there (:no-writer-of): a history must hold every send of the values it "
            "reads (one run's, on a topic that was empty)")


def _refuse_malformed(runs: list[RunTables], facts: dict[str, HistoryFacts], skip: bool) -> None:
    """A malformed history line stops the job (exit 2), naming the file and the line; with `skip` it was left
    out and is counted. A cut last line is not malformed (HistoryFacts.truncated)."""
    if skip:
        return
    for run in runs:
        found = facts.get(run.run)
        if run.history is None or found is None or not found.malformed:
            continue
        file, text = found.first_malformed or (run.history.files[0], "")
        number, _ = run.history.line_number(file, text)
        where = f"{file.removeprefix('file:')}, line {number}" if number else file.removeprefix("file:")
        more = f" ({found.malformed - 1} more malformed line(s) in this run)" if found.malformed > 1 else ""
        shown = text if len(text) <= 80 else text[:79] + "…"
        raise SparkReconcileError(
            f"{where}: not a valid history event: {shown!r}{more}. Only the last line of an interrupted run "
            "may be incomplete; this history is damaged. Fix or remove the line, or pass --skip-malformed to "
            "leave malformed lines out (they are counted in the result)."
        )


def _fill_send_ms(session: SparkSession, runs: list[RunTables], duplicates: list[dict[str, Any]]) -> None:
    """The checker's `send_ms` of each listed `duplicate` (the longest completed send of its value), looked up
    for just those values: the model judges an idempotent duplicate by it."""
    if not duplicates:
        return
    from pyspark.sql import functions as F

    prefixed = len(runs) > 1
    longest: dict[tuple[str, int], int] = {}
    for run in runs:
        mine = [d for d in duplicates if not prefixed or str(d["key"]).startswith(f"{run.run}/")]
        if not mine:
            continue
        sends = read_sends(session, run)
        if not {"invoke_time", "complete_time"} <= set(sends.columns):
            continue
        values = sorted({int(d["value"]) for d in mine})
        took = (
            sends.where(F.col("value").isin(values) & F.col("complete_time").isNotNull())
            .groupBy("key", "value")
            .agg(F.max(F.col("complete_time") - F.col("invoke_time")).alias("ns"))
        )
        try:
            table = _to_arrow(took)
        except Exception as exc:
            raise _job_error(exc) from None
        prefix = f"{run.run}/" if prefixed else ""
        for key, value, ns in zip(*(table.column(c).to_pylist() for c in ("key", "value", "ns")), strict=True):
            longest[(prefix + key, value)] = ns
    for d in duplicates:
        ns = longest.get((str(d["key"]), int(d["value"])))
        if ns is not None:
            d["send_ms"] = ns // 1_000_000


def _history_summary(facts: HistoryFacts) -> dict[str, Any]:
    """What a run's history said besides its rows: the harness judges a run without results.json by it."""
    from kafka_chaos.checker.tables import NemesisEvent
    from kafka_chaos.faults.windows import faults_from_history

    nemesis = [
        NemesisEvent(index=e["index"], time=e["time"], type=e["type"] or "info", f=str(e["f"]), value=e["value"])
        for e in facts.side_events
        if e["process"] in ("nemesis", "operator")
    ]
    return {
        "complete": facts.complete,
        "drain_complete": facts.drain_complete,
        "truncated": facts.truncated,
        "malformed_lines": facts.malformed,
        "run_start": facts.run_start,
        "faults": faults_from_history(nemesis, end_time=facts.end_time).to_dict(),
        "isolation": {str(p): level for p, level in sorted(facts.isolation.items())},
        "txn_processes": sorted(facts.txn_processes),
    }


def _complete(runs: list[RunTables]) -> list[bool]:
    """Whether each run's final drain read finished, as `kafka-chaos check` recorded it in results.json next
    to the tables (the tables alone do not say); a run without a readable local results.json counts as
    complete."""
    complete = []
    for run in runs:
        path = Path(run.path.removeprefix("file://")) / RESULTS_FILE
        try:
            complete.append(RunResults.load(path).complete)
        except ResultsError:
            complete.append(True)
    return complete


def _assemble(rows: list[dict[str, Any]], cap: int, runs: list[str] | None = None) -> dict[str, Any]:
    """The result's sections from the findings rows (RunResults.finish adds `valid`, `complete` and
    `violations`); `runs`: the run ids (keys are prefixed when there are several), for the per-run anomaly
    counts."""
    keys: dict[str, dict[str, int]] = {}
    instances: dict[str, list[dict[str, Any]]] = {kind: [] for kind in COMPUTED}
    per_op: dict[int, dict[str, Any]] = {}  # precommitted-read: one row per op, the smallest `indexes`
    for row in rows:
        if row["kind"] == kernel.KIND_PRECOMMITTED:
            best = per_op.get(row["ops"][1])
            if best is None or row["indexes"] < best["indexes"]:
                per_op[row["ops"][1]] = row
    rows = [r for r in rows if r["kind"] != kernel.KIND_PRECOMMITTED] + [per_op[o] for o in sorted(per_op)]
    for row in rows:
        if row["kind"] == kernel.KIND_KEY:
            keys[row["key"]] = dict(zip(kernel.KEY_STATS, row["stats"], strict=True))
        elif row["kind"] in (kernel.KIND_UNCERTAIN, kernel.KIND_NO_WRITER):
            continue  # settled before (or nothing of those ops was read: not committed); refused before
        else:
            instance: dict[str, Any] = {"key": row["key"]}
            for column, name in _FIELDS[row["kind"]]:
                if row[column] is not None:
                    instance[name] = [o % OP_STRIDE for o in row[column]] if column == "ops" else row[column]
            if "processes" in instance:  # G1a: the checker's names, which the verdicts read
                instance["writer_process"], instance["process"] = instance.pop("processes")
            instances[row["kind"]].append(instance)
    keys = dict(sorted(keys.items()))

    counts: dict[str, int] = {}
    for kind in kernel.ANOMALY_KINDS:
        # unseen: one instance per key that has unseen values
        n = sum((1 if kind == "unseen" else s[kind]) for s in keys.values() if s[kind] > 0)
        if n:
            counts[kind] = n
    if per_op:
        counts[kernel.KIND_PRECOMMITTED] = len(per_op)
    anomalies = {
        kind: sorted(found, key=_order)[:cap] for kind, found in instances.items() if kind in counts
    }
    single = runs[0] if runs is not None and len(runs) == 1 else None
    per_run_counts: dict[str, dict[str, int]] = {run: {} for run in runs or []}
    for key, stat in keys.items():
        per_run = per_run_counts.setdefault(single or key.split("/", 1)[0], {})
        for kind in kernel.ANOMALY_KINDS:
            if stat[kind]:
                per_run[kind] = per_run.get(kind, 0) + (1 if kind == "unseen" else stat[kind])
    for row in per_op.values():
        per_run = per_run_counts.setdefault(single or row["key"].split("/", 1)[0], {})
        per_run[kernel.KIND_PRECOMMITTED] = per_run.get(kernel.KIND_PRECOMMITTED, 0) + 1

    totals = {name: sum(s[name] for s in keys.values()) for name in kernel.KEY_STATS if name != "max_offset"}
    stats: dict[str, Any] = {
        "keys": len(keys),
        "sends": totals["sends"],
        "sends_ok": totals["sends_ok"],
        "sends_info": totals["sends_info"],
        "sends_fail": totals["sends_fail"],
        "poll_records": totals["poll_records"],
        "values_read": totals["values_read"],
        "unseen_values": totals["unseen"],
    }
    return {
        "anomaly_counts": counts,
        "anomalies": anomalies,
        "stats": stats,
        "not_checked": dict(NOT_CHECKED),
        "keys": keys,
        "runs": per_run_counts,
    }


def _order(instance: dict[str, Any]) -> tuple[str, int, int, list[int]]:
    return (instance["key"], instance.get("value", -1), instance.get("offset", -1), instance.get("ops", []))


class _Progress:
    """Rich progress for the long job: the current phase and each Spark stage's tasks, polled from Spark's
    status tracker on a thread. Does nothing when `show` is false."""

    def __init__(self, spark: SparkSession, show: bool, console: Console | None) -> None:
        self._spark = spark
        self._show = show
        self._console = console
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._progress: Any = None
        self._phase: Any = None
        self._stages: dict[int, Any] = {}
        self._started = time.monotonic()

    def __enter__(self) -> _Progress:
        if not self._show:
            return self
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=self._console or Console(stderr=True),
            transient=False,
        )
        self._progress.start()
        self._phase = self._progress.add_task("starting", total=None)
        self._thread = threading.Thread(target=self._poll, name="spark-progress", daemon=True)
        self._thread.start()
        return self

    def phase(self, text: str) -> None:
        if self._progress is not None:
            self._progress.update(self._phase, description=text)

    def _poll(self) -> None:
        tracker = self._spark.sparkContext.statusTracker()
        while not self._stop.wait(0.5):
            try:
                for stage_id in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(stage_id)
                    if info is None:
                        continue
                    if stage_id not in self._stages:
                        label = f"  stage {stage_id}: {info.name.split(' at ')[0]}"
                        self._stages[stage_id] = self._progress.add_task(label, total=info.numTasks)
                    self._progress.update(self._stages[stage_id], completed=info.numCompletedTasks)
            except Exception:  # the context is stopping; progress is best effort
                return

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._progress is not None:
            for task in self._stages.values():
                total = self._progress.tasks[task].total
                self._progress.update(task, completed=total)
            elapsed = time.monotonic() - self._started
            self._progress.update(self._phase, description=f"done in {elapsed:.1f} s", total=1, completed=1)
            self._progress.stop()


def reconcile_runs(
    paths: Sequence[str],
    *,
    engine: str = "spark",
    master: str | None = DEFAULT_MASTER,
    out: str | Path | None = None,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shuffle_partitions: int | None = None,
    max_instances: int = 100,
    progress: bool | None = None,
    skip_malformed: bool = False,
) -> RunResults:
    """What `kafka-chaos reconcile RUN_DIR… --engine spark|pandas [--master URL] [--out DIR]` does.

    `engine="spark"` runs `reconcile`; `engine="pandas"` reads each run's tables with pyarrow and runs the
    single-process checker (`checker.analyse`) on each, prefixing keys with the run id when there are several
    runs, so both engines give the same answer. With `out`, the result is written to `out/reconcile.json`.
    """
    if engine == "spark":
        result = reconcile(
            paths,
            master=master,
            driver_memory=driver_memory,
            shuffle_partitions=shuffle_partitions,
            max_instances=max_instances,
            progress=progress,
            skip_malformed=skip_malformed,
        )
    elif engine == "pandas":
        from kafka_chaos.spark.local import reconcile_local

        result = reconcile_local(paths, max_instances=max_instances)
    else:
        raise SparkReconcileError(f"Unknown engine '{engine}'. Use --engine spark or --engine pandas.")
    if out is not None:
        target = Path(out)
        target.mkdir(parents=True, exist_ok=True)
        (target / RESULT_FILE).write_text(json.dumps(result.to_json_dict(), indent=2) + "\n")
    return result


@contextmanager
def _errors_to_exit() -> Iterator[None]:
    try:
        yield
    except SparkReconcileError as err:
        from rich.console import Console

        Console(stderr=True, soft_wrap=True).print(f"[bold red]error:[/] {err}", highlight=False)
        raise SystemExit(err.exit_code) from None


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m spark.job RUN_DIR... [--master URL] [--out DIR]` — prints the JSON result on stdout."""
    parser = argparse.ArgumentParser(
        prog="python -m spark.job",
        description="Reconcile kafka-chaos runs' sends and polls tables with Spark.",
    )
    parser.add_argument("runs", nargs="+", metavar="RUN_DIR", help="run directories or URIs")
    parser.add_argument("--master", default=None, help=f"Spark master URL (default {DEFAULT_MASTER})")
    parser.add_argument("--engine", choices=("spark", "pandas"), default="spark")
    parser.add_argument("--out", default=None, help=f"write {RESULT_FILE} into this directory")
    parser.add_argument("--driver-memory", default=DEFAULT_DRIVER_MEMORY)
    parser.add_argument("--shuffle-partitions", type=int, default=None)
    parser.add_argument("--max-instances", type=int, default=100)
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--skip-malformed", action="store_true",
                        help="leave malformed history lines out (counted) instead of stopping")
    args = parser.parse_args(argv)
    from kafka_chaos.spark.session import under_spark_submit

    master = args.master or (None if under_spark_submit() else DEFAULT_MASTER)
    with _errors_to_exit():
        result = reconcile_runs(
            args.runs,
            engine=args.engine,
            master=master,
            out=args.out,
            driver_memory=args.driver_memory,
            shuffle_partitions=args.shuffle_partitions,
            max_instances=args.max_instances,
            progress=False if args.no_progress else None,
            skip_malformed=args.skip_malformed,
        )
    print(json.dumps(result.to_json_dict(), indent=2))
    return 0 if result.valid else 1


if __name__ == "__main__":
    raise SystemExit(main())
