"""Finding and reading the `sends` / `polls` tables of one or many runs (docs/architecture.md §3),
through Spark's Hadoop file systems, so a path may be local or any URI Spark reads (hdfs://, s3a://, file://, …).

A run is a directory holding its history — `history.jsonl` (plain or compressed) or a `history/` folder of
parts, which Spark parses itself (spark/history.py) — and/or `sends.parquet` and `polls.parquet` (each a
Parquet file or a directory of Parquet files), which `kafka-chaos check` writes. The tables are read when
both exist and are at least as new as the history, the history otherwise. A path may be a glob
(`results/*-demo-*`): each match is a run. The run id is the directory's name. With several runs, every key
is prefixed `<run id>/` so runs never mix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.errors import SparkReconcileError
from kafka_chaos.spark.history import HISTORY_CANDIDATES, HistoryFrames
from kafka_chaos.spark.kernel import SRC_FAIL, SRC_INFO, SRC_OK, SRC_POLL
from kafka_chaos.spark.session import first_line

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

_CANDIDATES = {"sends": ("sends.parquet", "sends"), "polls": ("polls.parquet", "polls")}
_INTEGER_TYPES = {"bigint", "int", "smallint", "tinyint"}
_NEEDED = {
    "sends": ("value", "key", "offset", "op_index", "type", "process", "complete_time"),
    "polls": ("value", "key", "offset", "op_index", "type", "process", "time"),
}
_SCHEMAS = {"sends": SENDS_SCHEMA, "polls": POLLS_SCHEMA}
OP_STRIDE = 1 << 40
"""Op indexes of run n are shifted by n × OP_STRIDE in a multi-run job, so ops of different runs never
meet (`op % OP_STRIDE` is the history index again)."""


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
            for table, names in {**_CANDIDATES, "history": HISTORY_CANDIDATES}.items():
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
        tables = "sends" in found and "polls" in found
        history = found.get("history")
        if tables and (history is None or min(found["sends"][2], found["polls"][2]) >= history[2]):
            runs.append(RunTables(run=run, number=len(runs), path=raw, sends=found["sends"][0],
                                  polls=found["polls"][0], bytes=found["sends"][1] + found["polls"][1]))
        elif history is not None:
            runs.append(RunTables(run=run, number=len(runs), path=raw, sends="", polls="", bytes=history[1],
                                  history=HistoryFrames(spark, [history[0]])))
        else:
            raise SparkReconcileError(
                f"{raw} holds no history.jsonl (nor a history/ folder of parts, nor sends.parquet and "
                "polls.parquet). Pass a run directory as `kafka-chaos run` writes it (results/<run id>)."
            )
    return runs


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
            "`kafka-chaos check RUN_DIR` (it rewrites sends.parquet and polls.parquet from history.jsonl), "
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


def read_run(spark: SparkSession, run: RunTables) -> tuple[DataFrame, DataFrame]:
    """The run's sends and polls DataFrames, checked to have the columns the job reads (from its history when
    it has no tables)."""
    if run.history is not None:
        return run.history.frames()
    return _read(spark, run.sends, "sends"), _read(spark, run.polls, "polls")


def load_rows(spark: SparkSession, runs: list[RunTables], *, prefix: bool | None = None) -> DataFrame:
    """One narrow DataFrame of every ok poll record and every send of every run, in kernel.INPUT_SCHEMA:
    `key` (prefixed `<run id>/` when `prefix`, by default when there are several runs), `value`, `offset`,
    `src`, `op` (shifted by `run.number * OP_STRIDE` when `prefix`), `process`, `time` (a send's
    `complete_time`, a poll's `time`) and `pos` (the row's place in its table, `_row_order`).

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
        sends, polls = read_run(spark, run)
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
