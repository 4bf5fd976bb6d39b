"""Finding and reading the `sends` / `polls` tables of one or many runs (docs/architecture.md §3),
through Spark's Hadoop file systems, so a path may be local or any URI Spark reads (hdfs://, s3a://, file://, …).

A run is a directory holding its history — `history.jsonl` (plain or compressed) or a `history/` folder of
parts, which Spark parses itself (spark/history.py) — and/or `sends.parquet`, `polls.parquet` and
`extra_reads.parquet` (each a Parquet file or a directory of Parquet files), which `kafka-chaos check` writes.
The tables are read when all three exist and are at least as new as the history, the history otherwise; a
run without a history is read from its sends and polls alone (with its extra reads, if it has them).

Why a third table rather than falling back to the history whenever it holds what Jepsen's rules read besides
the two tables (records of fail / info polls, ok records at unknown offsets): the tables alone cannot say
whether the history held any, so the fallback would need the history read anyway, and runs without a history
(tables copied to object storage) would be silently wrong. `extra_reads.parquet` is as small as those records
are few (empty for kafka-chaos's own workloads). A path may be a glob
(`results/*-demo-*`): each match is a run. The run id is the directory's name. With several runs, every key
is prefixed `<run id>/` so runs never mix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA, POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.errors import SparkReconcileError
from kafka_chaos.spark.history import HISTORY_CANDIDATES, HistoryFrames
from kafka_chaos.spark.kernel import SRC_FAIL, SRC_INFO, SRC_OK, SRC_POLL, SRC_POLL_OTHER, marker_rows
from kafka_chaos.spark.session import first_line

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_CANDIDATES = {"sends": ("sends.parquet", "sends"), "polls": ("polls.parquet", "polls"),
               "extra_reads": ("extra_reads.parquet", "extra_reads")}
_STORED = "tables.json"  # kafka_chaos.rundir.TABLES_FILE: what the history's parse found besides the tables
_INTEGER_TYPES = {"bigint", "int", "smallint", "tinyint"}
_NEEDED = {
    "sends": ("value", "key", "offset", "op_index", "type", "process", "complete_time"),
    "polls": ("value", "key", "offset", "op_index", "type", "process", "time"),
    "extra_reads": ("value", "key", "offset", "op_index", "type", "process", "time", "pos"),
}
_SCHEMAS = {"sends": SENDS_SCHEMA, "polls": POLLS_SCHEMA, "extra_reads": EXTRA_READS_SCHEMA}
INPUT_DDL = "key string, value bigint, offset bigint, src tinyint, op bigint, process bigint, time bigint, pos bigint"
"""kernel.INPUT_SCHEMA as Spark DDL."""
OP_STRIDE = 1 << 40
"""Op indexes of run n are shifted by n × OP_STRIDE in a multi-run job, so ops of different runs never
meet (`op % OP_STRIDE` is the history index again)."""


@dataclass(frozen=True)
class OrderFacts:
    """What the order anomalies read of a run besides its rows (`tables.json`'s `extras`, which
    `kafka-chaos check` writes beside the tables; from a history, spark/history.py reads them)."""

    resets: tuple[tuple[int, int, frozenset[str]], ...] = ()
    """(process, index, names) of every ok or info assign / subscribe (checker.tables.Reset)."""
    subscribers: frozenset[int] = frozenset()
    """Processes with an ok subscribe: subscribe-mode consumers."""
    rebalanced: tuple[tuple[int, tuple[str, ...]], ...] = ()
    """(poll op, keys its rebalance log names)."""
    empty: tuple[tuple[int, int, str, str], ...] = ()
    """(process, op, key, type) of each key a poll returned with no records."""


@dataclass(frozen=True)
class RunTables:
    """Where one run's tables are, and the id its keys are namespaced with."""

    run: str
    number: int
    """Position in the list of runs: op indexes are per run, so with several runs the job adds
    `number * OP_STRIDE` to them (see `load_rows`)."""
    path: str
    sends: str
    polls: str
    bytes: int
    history: HistoryFrames | None = None
    """Set when the run is read from its history rather than from Parquet tables (then `sends`/`polls`
    are empty)."""
    extra_reads: str = ""
    """`extra_reads.parquet` beside the tables (EXTRA_READS_SCHEMA); empty when the run has none."""
    order: OrderFacts = OrderFacts()
    """A run read from its tables: the resets, subscribe-mode consumers, rebalances and empty reads of its
    `tables.json`; none when it has none (tables written by hand or copied without it). A run read from its
    history finds them there (HistoryFrames.memberships, and the rows' markers)."""


def _fs(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    jvm: Any = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
    path = jvm.org.apache.hadoop.fs.Path(uri)
    return path.getFileSystem(conf), path


def _join(base: str, name: str) -> str:
    return base.rstrip("/") + "/" + name


def resolve_runs(spark: SparkSession, paths: list[str]) -> list[RunTables]:
    """The tables (or the history) of each run directory in `paths` (globs expanded), or SparkReconcileError
    naming what is missing."""
    if not paths:
        raise SparkReconcileError("No run directory given. Pass one or more RUN_DIRs (results/<run id>).")
    runs: list[RunTables] = []
    seen: dict[str, int] = {}
    for raw in _expand(spark, paths):
        base = raw.rstrip("/") or raw
        try:
            fs, root = _fs(spark, base)
            if not fs.exists(root):
                raise SparkReconcileError(
                    f"Run directory {raw} does not exist. Pass a run's results directory "
                    "(results/<run id>, holding history.jsonl)."
                )
            found: dict[str, tuple[str, int, int]] = {}  # table → (uri, bytes, modified ms)
            for table, names in {**_CANDIDATES, "history": HISTORY_CANDIDATES, "stored": (_STORED,)}.items():
                for name in names:
                    uri = _join(base, name)
                    tfs, tpath = _fs(spark, uri)
                    if tfs.exists(tpath):
                        summary = tfs.getContentSummary(tpath)
                        modified = int(tfs.getFileStatus(tpath).getModificationTime())
                        found[table] = (uri, int(summary.getLength()), modified)
                        break
        except SparkReconcileError:
            raise
        except Exception as exc:
            raise SparkReconcileError(
                f"Cannot read {raw} ({first_line(exc)}). Check the path or URI and that Spark has the file "
                "system for its scheme (e.g. hadoop-aws for s3a://)."
            ) from None
        run = base.rsplit("/", 1)[-1] or base
        if run in seen:
            seen[run] += 1
            run = f"{run}#{seen[run]}"
        else:
            seen[run] = 1
        history = found.get("history")
        # With a history, the tables stand for it only when all three are there and as new: tables written
        # before extra_reads.parquet existed lack the records of fail / info polls and unknown offsets.
        needed = ("sends", "polls") if history is None else ("sends", "polls", "extra_reads")
        if all(t in found for t in needed) and (history is None or min(found[t][2] for t in needed) >= history[2]):
            extra, stored = found.get("extra_reads"), found.get("stored")
            order = _order_facts(spark, stored[0]) if stored and stored[2] >= found["sends"][2] else OrderFacts()
            runs.append(RunTables(run=run, number=len(runs), path=raw, sends=found["sends"][0],
                                  polls=found["polls"][0], extra_reads=extra[0] if extra else "",
                                  bytes=sum(found[t][1] for t in _CANDIDATES if t in found), order=order))
        elif history is not None:
            runs.append(RunTables(run=run, number=len(runs), path=raw, sends="", polls="", bytes=history[1],
                                  history=HistoryFrames(spark, [history[0]])))
        else:
            raise SparkReconcileError(
                f"{raw} holds no history.jsonl (nor a history/ folder of parts, nor sends.parquet and "
                "polls.parquet). Pass a run directory as `kafka-chaos run` writes it (results/<run id>)."
            )
    return runs


def _order_facts(spark: SparkSession, uri: str) -> OrderFacts:
    """The `extras` of a run's `tables.json` (checker.stored_tables), or none if it is not one."""
    try:
        text = spark.read.text(uri, wholetext=True).first()
        stored = json.loads(text[0] if text is not None else "")
        x, m = stored["extras"], stored["meta"]
        return OrderFacts(
            resets=tuple((int(p), int(i), frozenset(str(n) for n in names)) for p, i, names in x["resets"]),
            subscribers=frozenset(int(p) for p in m["subscribe_processes"]),
            rebalanced=tuple((int(i), tuple(str(k) for k in keys)) for i, keys in x["rebalanced"]),
            empty=tuple((int(p), int(i), str(k), str(t)) for p, i, k, t in x["empty"]),
        )
    except Exception:  # not the checker's (or damaged): the tables are read without it
        return OrderFacts()


def _expand(spark: SparkSession, paths: list[str]) -> list[str]:
    """Each path, or the directories a glob in it matches (in name order)."""
    expanded: list[str] = []
    for raw in paths:
        if not any(c in raw for c in "*?[{"):
            expanded.append(raw)
            continue
        try:
            fs, pattern = _fs(spark, raw)
            matches = fs.globStatus(pattern) or []
        except Exception as exc:
            raise SparkReconcileError(f"Cannot expand {raw} ({first_line(exc)}).") from None
        dirs = sorted(str(m.getPath().toString()) for m in matches if m.isDirectory())
        if not dirs:
            raise SparkReconcileError(f"{raw} matches no run directory.")
        expanded += dirs
    return expanded


def _read(spark: SparkSession, uri: str, table: str) -> DataFrame:
    try:
        df = spark.read.parquet(uri)
        types = dict(df.dtypes)
    except Exception as exc:
        raise SparkReconcileError(
            f"{uri} is not a readable Parquet table ({first_line(exc)}). Regenerate it with "
            "`kafka-chaos check RUN_DIR` (it rewrites the tables from history.jsonl), "
            "or remove the damaged file."
        ) from None
    problems = []
    for column in _NEEDED[table]:
        kind = types.get(column)
        want = "string" if column in {"key", "type"} else "integer"
        if kind is None:
            problems.append(f"no column '{column}'")
        elif (want == "string") != (kind == "string") or (want == "integer" and kind not in _INTEGER_TYPES):
            problems.append(f"column '{column}' is {kind}, not {want}")
    if problems:
        expected = ", ".join(f"{f.name} {f.type}" for f in _SCHEMAS[table])
        raise SparkReconcileError(
            f"{uri} is not a {table} table: {'; '.join(problems)}. The {table} table has the columns "
            f"{expected} (docs/architecture.md §3); regenerate it with `kafka-chaos check RUN_DIR`."
        )
    return df


def read_sends(spark: SparkSession, run: RunTables) -> DataFrame:
    """The run's sends DataFrame, checked to have the columns the job reads (from its history when it has no
    tables)."""
    if run.history is not None:
        return run.history.sends()
    return _read(spark, run.sends, "sends")


def load_rows(spark: SparkSession, runs: list[RunTables], *, prefix: bool | None = None) -> DataFrame:
    """One narrow DataFrame of every poll record and every send of every run, in kernel.INPUT_SCHEMA:
    `key` (prefixed `<run id>/` when `prefix`, by default when there are several runs), `value`, `offset`,
    `src`, `op` (shifted by `run.number * OP_STRIDE` when `prefix`), `process`, `time` (a send's
    `complete_time`, a poll's `time`) and `pos` (the row's place in its table, `_row_order`). A run's
    `extra_reads.parquet` adds the records of fail / info polls and those of ok polls at unknown offsets.

    Each table is scanned once, only these columns are read (Parquet column pruning), nothing is shuffled.
    """
    from pyspark.sql import functions as F

    frames: list[DataFrame] = []
    if prefix is None:
        prefix = len(runs) > 1
    for run in runs:
        if run.history is not None:  # straight from the history, in one pass
            frames.append(run.history.rows(run.run + "/" if prefix else "",
                                           run.number * OP_STRIDE if prefix else 0))
            continue
        sends, polls = _read(spark, run.sends, "sends"), _read(spark, run.polls, "polls")
        key = F.concat(F.lit(run.run + "/"), F.col("key")) if prefix else F.col("key")
        op = F.col("op_index").cast("bigint") + F.lit(run.number * OP_STRIDE if prefix else 0)
        kind = F.col("type")
        frames.append(
            sends.select(
                key.alias("key"),
                F.col("value").cast("bigint").alias("value"),
                F.col("offset").cast("bigint").alias("offset"),
                F.when(kind == "ok", SRC_OK)
                .when(kind == "fail", SRC_FAIL)
                .otherwise(SRC_INFO)
                .cast("tinyint")
                .alias("src"),
                op.alias("op"),
                F.col("process").cast("bigint").alias("process"),
                F.col("complete_time").cast("bigint").alias("time"),
                _row_order(sends).alias("pos"),
            )
        )
        frames.append(
            polls.where(kind == "ok").select(
                key.alias("key"),
                F.col("value").cast("bigint").alias("value"),
                F.col("offset").cast("bigint").alias("offset"),
                F.lit(SRC_POLL).cast("tinyint").alias("src"),
                op.alias("op"),
                F.col("process").cast("bigint").alias("process"),
                F.col("time").cast("bigint").alias("time"),
                _row_order(polls).alias("pos"),
            )
        )
        if run.order.rebalanced or run.order.empty:
            markers = marker_rows(dict(run.order.rebalanced), run.order.empty,
                                  key_prefix=run.run + "/" if prefix else "",
                                  op_shift=run.number * OP_STRIDE if prefix else 0)
            frames.append(spark.createDataFrame([tuple(r.values()) for r in markers.to_pylist()], INPUT_DDL))
        if run.extra_reads:
            extra = _read(spark, run.extra_reads, "extra_reads")
            frames.append(
                extra.select(
                    key.alias("key"),
                    F.col("value").cast("bigint").alias("value"),
                    F.col("offset").cast("bigint").alias("offset"),
                    F.when(kind == "ok", SRC_POLL).otherwise(SRC_POLL_OTHER).cast("tinyint").alias("src"),
                    op.alias("op"),
                    F.col("process").cast("bigint").alias("process"),
                    F.col("time").cast("bigint").alias("time"),
                    # the record's exact place among its op's records of the key (kernel._returned_first)
                    (F.lit(-1) - F.col("pos").cast("bigint")).alias("pos"),
                )
            )
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def _row_order(table: DataFrame) -> Column:
    """Each row's place in its table (kernel.INPUT_SCHEMA `pos`): the tables keep an op's sends in micro-op
    order and its records in the order returned (checker/tables.py), and Spark's scan does not keep row order,
    so it is read from Parquet's own row index. A table written as several files (parts, in name order) puts
    each file's rows after the previous file's."""
    from pyspark.sql import functions as F

    index = F.col("_metadata.row_index").cast("bigint")
    names = sorted({uri.rstrip("/").rsplit("/", 1)[-1] for uri in table.inputFiles()})
    if len(names) <= 1:
        return index
    rank = F.create_map(*(x for i, name in enumerate(names) for x in (F.lit(name), F.lit(i))))
    return rank[F.col("_metadata.file_name")].cast("bigint") * F.lit(1 << 40) + index
