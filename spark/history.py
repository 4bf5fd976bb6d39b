"""A run's `history.jsonl` read by Spark itself: the kernel's rows (sends and poll records) built from the
text lines, in parallel, with no single-process step between a run and the job (docs/architecture.md §3, §7).

Input: one history file or a folder of parts (`history.jsonl`, `history.jsonl.gz`, `history.jsonl.zst`,
`history/*.jsonl*`), local or any URI Spark reads; Hadoop's codecs decompress by extension. The rules are the
checker's history reader's (`checker/history_reader.py`, whose names it imports), as Spark columns:

- Each line is one event: `from_json` with an explicit envelope (`process`, `type`, `f`, `index`, `time`, and
  `value` kept as JSON text), micro-ops parsed from that text only where they are used.
- A client op (integer `process`) is paired invoke → completion by process: a window over each process's
  client events ordered by `index` (a process runs one op at a time, so the event before a completion is its
  invoke). A send's row takes the completion's type and, when the completion carries `[offset, value]`, the
  offset; its values come from the completion, or from the invoke when the completion has none; its op is the
  invoke's index. An invoke that is its process's last event never completed: an `info` send with no
  completion time.
- Every completed poll (and txn) gives one row per record, op = the completion's index: an ok op's records
  are reads (at an unknown offset too: read, but at no place in the log), a fail or info op's records join
  the log only (Jepsen's rules, as checker.tables' `PollExtras` reads them). A fail or info poll that
  returned nothing is not malformed.
- A line that is not an event (not JSON, no `process`/`type`/`time`, a client op without `index` or of an
  unknown `type` or `f`), or a poll value of another shape, is *malformed*. Only a last line cut mid-way is
  allowed (the run was interrupted: the run is then incomplete); any other stops the job naming the file and
  line, unless the caller skips them, counted (`--skip-malformed`).

What the checker reads besides the tables — the harness's `run-start` and `drain-complete`, the nemesis's and
operator's events for the fault windows — is gathered in the same pass with `DataFrame.observe` (a handful of
events). The job's pass (`HistoryFrames.rows`) parses each line once and generates the kernel's rows directly
(the job's rare second look, at info sends committed through another key, reads those rows again);
`HistoryFrames.sends` gives the sends table's columns for a duplicate's send time, reading the file again.
Records in the history only (fail / info polls, ok records at unknown offsets) are rows here as they are in
the Parquet path's `extra_reads.parquet` (spark/tables.py).
"""

from __future__ import annotations

import contextlib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlparse

from kafka_chaos.checker.history_reader import (
    CLIENT_FS,
    DRAIN_COMPLETE,
    HARNESS,
    OP_TYPES,
    RUN_START,
    SIDE_PROCESSES,
    is_complete,
)
from kafka_chaos.errors import SparkReconcileError

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, Observation, SparkSession

HISTORY_CANDIDATES = ("history.jsonl", "history.jsonl.gz", "history.jsonl.zst", "history.jsonl.bz2", "history")
"""What a run folder may hold for its history, in the order looked for (`history` is a folder of parts)."""
ENVELOPE = "process STRING, type STRING, f STRING, index BIGINT, time BIGINT, value STRING"
_RECORDS = "map<string, array<array<bigint>>>"
_COMPRESSED = (".gz", ".zst", ".bz2", ".lz4", ".snappy", ".deflate")


@dataclass
class HistoryFacts:
    """What one run's pass over its history observed besides the rows."""

    malformed: int = 0
    """Lines (and poll values) that are not what §3 says, the cut last line included."""
    first_malformed: tuple[str, str] | None = None
    """(file, text) of one malformed line: the job looks up its line number only when it reports it."""
    truncated: bool = False
    """The only malformed line is the last line of its file, cut mid-way: dropped, the run is incomplete."""
    drain_complete: bool | None = None
    run_start: dict[str, Any] | None = None
    side_events: list[dict[str, Any]] = field(default_factory=list)
    """The nemesis's, operator's and harness's events, in index order (values decoded)."""
    end_time: int = 0
    isolation: dict[int, str] = field(default_factory=dict)
    """Readers' isolation levels, from `assign` values that name one (§3): what the G1a verdict reads."""
    txn_processes: set[int] = field(default_factory=set)
    """Processes that ran `txn` ops: a G1a's writer among them wrote in a transaction (the verdict reads it)."""

    @property
    def complete(self) -> bool:
        return is_complete(self.drain_complete, truncated=self.truncated, malformed=self.malformed)


class HistoryFrames:
    """The kernel's rows of one run's history (and its sends), and, once a job has run on them, what it
    observed."""

    def __init__(self, spark: SparkSession, files: list[str]) -> None:
        self.spark = spark
        self.files = files
        self._observations: list[tuple[Observation, Observation]] = []

    def sends(self) -> DataFrame:
        """The sends with the Parquet table's columns (docs/architecture.md §3), for the job's follow-up (a
        duplicate's send time); it runs after the job's pass (`rows`), whose observations `facts` reports, so
        it observes nothing."""
        return _sends(self._lines())

    def rows(self, key_prefix: str = "", op_shift: int = 0) -> DataFrame:
        """The job's input (kernel.INPUT_SCHEMA: key, value, offset, src, op, process, time, pos) straight
        from the history, in one pass: each line parsed once (micro-ops as text elements), one exchange of the
        client events by process for the pairing, and each event's sends and poll records generated as one
        array that is exploded once — two branches (sends, polls) would read and parse the file twice. The
        pass observes what `facts` reports."""
        from pyspark.sql import Observation

        events_seen, polls_seen = Observation(), Observation()
        self._observations.append((events_seen, polls_seen))
        return _rows(self._lines(), events_seen, polls_seen, key_prefix, op_shift)

    def memberships(self) -> tuple[list[tuple[int, int, frozenset[str]]], set[int]]:
        """The run's resets — every ok or info `assign` / `subscribe`: (process, index of its completion, the
        keys or topics it names, from the completion's value or else its invoke's) — and its subscribe-mode
        consumers (an ok `subscribe`), as the checker's history reader finds them. The kernel needs them before
        its pass, so they are read first: only the lines that mention either are decoded, and they are few.
        A local plain file is searched from here (a byte search: a Spark job over the whole file costs more
        than the rest of a small run's job); anything else by a Spark job."""
        local = self._local_file()
        found = _membership_lines(local) if local is not None else self._membership_events()
        resets: list[tuple[int, int, frozenset[str]]] = []
        subscribers: set[int] = set()
        invoked: dict[int, dict[str, Any]] = {}
        for e in sorted(found, key=lambda e: (e["process"], e["index"])):
            if e["type"] == "invoke":
                invoked[e["process"]] = e
                continue
            invoke = invoked.pop(e["process"], None)
            if e["type"] == "ok" and e["f"] == "subscribe":
                subscribers.add(e["process"])
            if e["type"] in ("ok", "info"):
                value = e["value"]
                if value is None and invoke is not None:
                    value = invoke["value"]
                resets.append((e["process"], e["index"], _named(value)))
        return resets, subscribers

    def _local_file(self) -> Path | None:
        """The history as a local, uncompressed file, if it is one."""
        if len(self.files) != 1 or self.files[0].endswith(_COMPRESSED):
            return None
        uri = self.files[0]
        if uri.startswith("file:"):
            uri = urlparse(uri).path
        elif "://" in uri:
            return None
        path = Path(uri)
        return path if path.is_file() else None

    def _membership_events(self) -> list[dict[str, Any]]:
        from pyspark.sql import functions as f

        col = f.col
        lines = self._lines().where(col("line").contains("assign") | col("line").contains("subscribe"))
        events = _envelope(lines).where(_is_client() & ~_malformed() & col("f").isin("assign", "subscribe"))
        rows = events.select(col("process").try_cast("bigint").alias("process"), "index", "type", "f",
                             "value").collect()
        return [{"process": int(r["process"]), "index": int(r["index"]), "type": r["type"], "f": r["f"],
                 "value": _json(r["value"])} for r in rows]

    def _lines(self) -> DataFrame:
        from pyspark.sql import functions as f

        return self.spark.read.text(self.files).select(f.input_file_name().alias("file"),
                                                       f.col("value").alias("line"))

    def facts(self) -> HistoryFacts:
        """What the first pass observed. Call only after a job ran on the first `rows()`: an observation
        waits for its job."""
        if not self._observations:
            raise SparkReconcileError("internal error: no Spark job has read this history yet")
        events_seen, polls_seen = self._observations[0]
        return _facts(self, _metrics(events_seen), _metrics(polls_seen))

    def line_number(self, file: str, text: str) -> tuple[int, int]:
        """(1-based line number of the first line equal to `text` in `file`, the file's line count):
        only for a malformed line that is reported, so a second read of one file is fine."""
        numbered = self.spark.sparkContext.textFile(file).zipWithIndex()
        hits = numbered.filter(lambda pair: pair[0] == text).map(lambda pair: pair[1]).take(1)
        total = numbered.count()
        return (int(hits[0]) + 1 if hits else 0), int(total)

    def ends_with_newline(self, file: str) -> bool | None:
        """Whether `file` ends with a newline; None for a compressed file (its end cannot be read cheaply)."""
        if file.endswith(_COMPRESSED):
            return None
        jvm: Any = self.spark.sparkContext._jvm
        conf = self.spark.sparkContext._jsc.hadoopConfiguration()  # type: ignore[union-attr]
        path = jvm.org.apache.hadoop.fs.Path(file)
        fs = path.getFileSystem(conf)
        length = int(fs.getFileStatus(path).getLen())
        if length == 0:
            return True
        stream = fs.open(path)
        try:
            stream.seek(length - 1)
            return bool(stream.read() == ord("\n"))
        finally:
            stream.close()


def _membership_lines(path: Path, block_size: int = 1 << 24) -> list[dict[str, Any]]:
    """The well-formed assign / subscribe events of a local history file, found by a byte search over blocks
    of whole lines, about `block_size` bytes each (the lines that mention neither are never decoded)."""
    lines: list[bytes] = []

    def search(block: bytes) -> None:
        starts: set[int] = set()
        for needle in (b"assign", b"subscribe"):
            at = block.find(needle)
            while at >= 0:
                starts.add(block.rfind(b"\n", 0, at) + 1)
                end = block.find(b"\n", at)
                at = block.find(needle, end) if end >= 0 else -1
        for a in sorted(starts):
            end = block.find(b"\n", a)
            lines.append(block[a : end if end >= 0 else len(block)])

    with path.open("rb") as fh:
        tail = b""
        while chunk := fh.read(block_size):
            data = tail + chunk
            cut = data.rfind(b"\n") + 1
            search(data[:cut])
            tail = data[cut:]
        search(tail)
    events = []
    for line in lines:
        try:
            e = json.loads(line)
        except ValueError:
            continue  # malformed: the job's pass reports it
        if not isinstance(e, dict) or e.get("f") not in ("assign", "subscribe") or e.get("type") not in OP_TYPES:
            continue
        process, index = e.get("process"), e.get("index")
        if isinstance(process, str) and re.fullmatch(r"-?[0-9]+", process):
            process = int(process)
        if type(process) is not int or type(index) is not int or e.get("time") is None:
            continue
        events.append({"process": process, "index": index, "type": e["type"], "f": e["f"], "value": e.get("value")})
    return events


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text is not None else None
    except ValueError:
        return None


def _named(value: Any) -> frozenset[str]:
    """The keys (or topics) an assign / subscribe value names: a list, or `{"keys": [...], ...}`."""
    if isinstance(value, dict):
        value = value.get("keys")
    return frozenset(str(x) for x in value) if isinstance(value, list) else frozenset()


def _metrics(observation: Observation) -> dict[str, Any]:
    """An observation's metrics; none when its pass read no row at all (an empty history: Spark then has no
    metrics row to give, and says so with an assertion)."""
    try:
        return dict(observation.get)
    except Exception:
        return {}


def _envelope(lines: DataFrame) -> DataFrame:
    from pyspark.sql import functions as f

    return lines.select("file", "line", f.from_json("line", ENVELOPE).alias("e")).select("file", "line", "e.*")


def _is_client() -> Column:
    from pyspark.sql import functions as f

    return f.col("process").rlike(r"^-?[0-9]+$")


def _malformed() -> Column:
    from pyspark.sql import functions as f

    col = f.col
    missing = col("process").isNull() | col("type").isNull() | col("time").isNull()
    bad_client = _is_client() & (
        col("index").isNull() | ~col("type").isin(*OP_TYPES) | col("f").isNull() | ~col("f").isin(*CLIENT_FS)
    )
    return (f.trim(col("line")) != "") & (missing | bad_client)


def _sends(lines: DataFrame) -> DataFrame:
    """Every send micro-op of send and txn ops, paired with its invoke (malformed lines left out)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    col = f.col
    events = _envelope(lines)
    bad = _malformed()
    # Pairing needs every client event of a process (an invoke replaced by another op's is forgotten, as the
    # checker forgets it), but only a send's or txn's value: the shuffle carries the rest narrow.
    client = events.where(_is_client() & ~bad).select(
        col("process").try_cast("bigint").alias("process"),
        "index",
        "time",
        "type",
        "f",
        f.when(col("f").isin("send", "txn"), col("value")).alias("value"),
    )
    by_process = Window.partitionBy("process").orderBy("index")
    paired = client.select(
        "*",
        f.lag("type").over(by_process).alias("prev_type"),
        f.lag("f").over(by_process).alias("prev_f"),
        f.lag("index").over(by_process).alias("prev_index"),
        f.lag("time").over(by_process).alias("prev_time"),
        f.lag("value").over(by_process).alias("prev_value"),
        f.lead("index").over(by_process).alias("next_index"),
    ).where(col("f").isin("send", "txn"))
    has_invoke = (col("prev_type") == "invoke") & col("prev_f").isNotNull()
    own = f.from_json(col("value"), "array<string>")
    invoked = f.from_json(col("prev_value"), "array<string>")
    completed = paired.where(col("type") != "invoke").select(
        "process",
        "type",
        f.when(has_invoke, col("prev_index")).otherwise(col("index")).alias("op_index"),
        f.when(has_invoke, col("prev_time")).otherwise(col("time")).alias("invoke_time"),
        col("time").alias("complete_time"),
        f.when(f.coalesce(f.size(own), f.lit(0)) > 0, own)
        .otherwise(f.when(has_invoke, invoked))
        .alias("mops"),
    )
    unfinished = paired.where((col("type") == "invoke") & col("next_index").isNull()).select(
        "process",
        f.lit("info").alias("type"),
        col("index").alias("op_index"),
        col("time").alias("invoke_time"),
        f.lit(None).cast("bigint").alias("complete_time"),
        own.alias("mops"),
    )
    mops = completed.unionByName(unfinished).select(
        "process", "type", "op_index", "invoke_time", "complete_time", f.explode("mops").alias("mop")
    )
    mop = f.from_json(col("mop"), "array<string>")
    sends = mops.select("*", mop.alias("m")).where(f.get(col("m"), 0) == "send")
    x = f.get(col("m"), 2)
    pair = f.from_json(x, "array<bigint>")
    listed = f.startswith(f.ltrim(x), f.lit("["))
    return sends.select(
        f.when(listed, f.get(pair, 1)).otherwise(x.try_cast("bigint")).alias("value"),
        f.get(col("m"), 1).alias("key"),
        f.when(listed, f.get(pair, 0)).alias("offset"),
        "process",
        "op_index",
        "type",
        "invoke_time",
        "complete_time",
    )


TYPED_ENVELOPE = "process STRING, type STRING, f STRING, index BIGINT, time BIGINT, value ARRAY<ARRAY<STRING>>"
"""The envelope with the value as micro-ops whose elements are JSON text: one parse gives a send's key and
`[offset, value]` text and a poll's records text. Other values (a nemesis's object) come out null here; the
side events read theirs with get_json_object."""


def _rows(lines: DataFrame, seen: Observation, polls_seen: Observation, key_prefix: str,
          op_shift: int) -> DataFrame:
    from pyspark.sql import Window
    from pyspark.sql import functions as f

    from kafka_chaos.spark.kernel import (
        SRC_EMPTY,
        SRC_FAIL,
        SRC_INFO,
        SRC_OK,
        SRC_POLL,
        SRC_POLL_OTHER,
        SRC_REBALANCED,
    )

    col = f.col
    events = lines.select("file", "line", f.from_json("line", TYPED_ENVELOPE).alias("e")).select(
        "file", "line", "e.*")
    bad = _malformed()
    side = col("process").isin(*SIDE_PROCESSES)
    level = f.get_json_object("line", "$.value.isolation")
    observed = events.observe(
        seen,
        f.count_if(bad).alias("malformed"),
        f.min(f.when(bad, f.concat_ws("\n", col("file"), col("line")))).alias("first"),
        f.max(f.when(bad, f.concat_ws("\n", col("file"), col("line")))).alias("last"),
        f.collect_list(f.when(side, f.struct("index", "time", "process", "type", "f",
                                             f.get_json_object("line", "$.value").alias("value")))).alias("side"),
        f.max("time").alias("end_time"),
        f.collect_list(f.when((col("f") == "assign") & level.isNotNull(),
                              f.struct(col("process").alias("process"), level.alias("level")))).alias("isolation"),
        f.collect_set(f.when(col("f") == "txn", col("process"))).alias("txn_processes"),
    )
    # A poll's rebalance log (checker.history_reader), looked for only in the lines that mention one.
    log_text = f.when(col("line").contains("rebalance"), f.coalesce(
        f.get_json_object("line", "$.rebalance_log"), f.get_json_object("line", "$['rebalance-log']")))
    client = observed.where(_is_client() & ~bad).select(
        col("process").try_cast("bigint").alias("process"), "index", "time", "type", "f", "value",
        log_text.alias("rebalance"))
    by_process = Window.partitionBy("process").orderBy("index")
    writes = col("f").isin("send", "txn")
    paired = client.select(
        "*",
        f.lag("type").over(by_process).alias("prev_type"),
        f.lag("index").over(by_process).alias("prev_index"),
        f.lag(f.when(writes & (col("type") == "invoke"), col("value"))).over(by_process).alias("prev_value"),
        f.lead("index").over(by_process).alias("next_index"),
    )
    completion = col("type") != "invoke"
    has_invoke = col("prev_type") == "invoke"
    send_mops = (
        f.when(completion & (f.coalesce(f.size("value"), f.lit(0)) > 0), col("value"))
        .when(completion & has_invoke, col("prev_value"))
        .when(~completion & col("next_index").isNull(), col("value"))  # never completed: info
    )
    src = (
        f.when(~completion, f.lit(SRC_INFO))
        .when(col("type") == "ok", f.lit(SRC_OK))
        .when(col("type") == "fail", f.lit(SRC_FAIL))
        .otherwise(f.lit(SRC_INFO))
    )
    send_op = f.when(completion & has_invoke, col("prev_index")).otherwise(col("index"))
    row_type = "struct<key: string, value: bigint, offset: bigint, src: tinyint, op: bigint, bad: boolean>"

    def send_row(m: Column) -> Column:
        x = f.get(m, 2)
        listed = f.startswith(f.ltrim(x), f.lit("["))
        pair = f.split(f.translate(x, "[] ", ""), ",")
        return f.struct(
            f.get(m, 1).alias("key"),
            f.when(listed, f.get(pair, 1)).otherwise(x).try_cast("bigint").alias("value"),
            f.when(listed, f.get(pair, 0).try_cast("bigint")).alias("offset"),
            src.cast("tinyint").alias("src"),
            send_op.alias("op"),
            f.lit(False).alias("bad"),
        ).cast(row_type)

    sends = f.transform(
        f.filter(f.when(writes, send_mops), lambda m: f.get(m, 0) == "send"), send_row)

    ok = col("type") == "ok"
    poll_src = f.when(ok, f.lit(SRC_POLL)).otherwise(f.lit(SRC_POLL_OTHER))

    def marker(key: Column, src: int) -> Column:
        """A marker row (kernel.SRC_EMPTY, kernel.SRC_REBALANCED) of this op for `key`."""
        return f.struct(key.alias("key"), f.lit(0).cast("bigint").alias("value"),
                        f.lit(None).cast("bigint").alias("offset"), f.lit(src).cast("tinyint").alias("src"),
                        col("index").alias("op"), f.lit(False).alias("bad")).cast(row_type)

    def poll_rows(m: Column) -> Column:
        records = f.from_json(f.get(m, 1), _RECORDS)
        # A fail / info poll that returned nothing repeats its invoke's ["poll"]: no records, not malformed
        # (checker.tables); records it did return must have the shape an ok poll's have.
        returned = f.coalesce(f.startswith(f.ltrim(f.get(m, 1)), f.lit("{")), f.lit(False))
        good = f.transform(
            f.map_entries(records),
            lambda e: f.when(
                ok & (f.coalesce(f.size(e["value"]), f.lit(0)) <= 0), f.array(marker(e["key"], SRC_EMPTY))
            ).otherwise(f.transform(
                f.coalesce(e["value"], f.array().cast("array<array<bigint>>")),
                lambda p: f.struct(
                    e["key"].alias("key"),
                    f.get(p, 1).alias("value"),
                    f.get(p, 0).alias("offset"),
                    poll_src.cast("tinyint").alias("src"),
                    col("index").alias("op"),
                    (p.isNull() | (f.size(p) != 2)).alias("bad"),
                ).cast(row_type),
            )),
        )
        broken = f.array(f.struct(f.lit(None).alias("key"), f.lit(None).alias("value"), f.lit(None).alias(
            "offset"), poll_src.alias("src"), col("index").alias("op"), f.lit(True).alias("bad"),
        ).cast(row_type))
        nothing = f.array().cast(f"array<{row_type}>")
        return (f.when(~ok & ~returned, nothing).when(records.isNull(), broken)
                .otherwise(f.flatten(good)))

    # Every completed poll's records (Jepsen's rules read fail / info polls too, and ok records at unknown
    # offsets: read, at no place in the log).
    polls = f.flatten(f.transform(
        f.filter(f.when(completion & col("f").isin("poll", "txn"), col("value")),
                 lambda m: f.get(m, 0) == "poll"),
        poll_rows,
    ))
    # Its keys named in the op's rebalance log: marker rows.
    log = f.from_json(f.when(completion & col("f").isin("poll", "txn"), col("rebalance")),
                      "array<struct<keys: array<string>>>")
    rebalanced = f.transform(
        f.array_distinct(f.flatten(f.transform(log, lambda r: f.coalesce(r["keys"], f.array().cast("array<string>"))))),
        lambda k: marker(k, SRC_REBALANCED))
    # An op's sends come first in the array, in micro-op order, then its records in the order returned: the
    # element's index orders an op's sends and an op's records (kernel.INPUT_SCHEMA `pos`).
    generated = paired.select(f.posexplode(f.concat(
        f.coalesce(sends, f.array().cast(f"array<{row_type}>")),
        f.coalesce(polls, f.array().cast(f"array<{row_type}>")),
        f.coalesce(rebalanced, f.array().cast(f"array<{row_type}>")),
    )).alias("pos", "r"), "process", f.when(completion, col("time")).alias("time")).select(
        "r.*", "process", "time", "pos")
    checked = generated.observe(
        polls_seen,
        f.count_if(col("bad")).alias("malformed"),
        f.min(f.when(col("bad"), f.concat_ws("/", col("key"), col("op").cast("string")))).alias("first"),
    )
    key = f.concat(f.lit(key_prefix), col("key")) if key_prefix else col("key")
    return checked.where(~col("bad")).select(
        key.alias("key"), "value", "offset", "src", (col("op") + f.lit(op_shift)).alias("op"), "process", "time",
        "pos")


def _facts(history: HistoryFrames, seen: dict[str, Any], polls: dict[str, Any]) -> HistoryFacts:
    facts = HistoryFacts(malformed=int(seen.get("malformed") or 0) + int(polls.get("malformed") or 0))
    facts.end_time = int(seen.get("end_time") or 0)
    if seen.get("first"):
        file, _, text = str(seen["first"]).partition("\n")
        facts.first_malformed = (file, text)
    elif polls.get("first"):
        facts.first_malformed = (history.files[0], f'a poll value {polls["first"][:80]}')
    if facts.malformed == 1 and seen.get("last"):
        file, _, text = str(seen["last"]).partition("\n")
        number, total = history.line_number(file, text)
        if number == total and history.ends_with_newline(file) is not True:
            facts.truncated = True
            facts.malformed = 0
            facts.first_malformed = None
    side = sorted((e.asDict() for e in seen.get("side") or [] if e is not None), key=lambda e: e["index"])
    for event in side:
        with contextlib.suppress(ValueError):  # not JSON: kept as the text it was
            event["value"] = json.loads(event["value"]) if event["value"] is not None else None
        if event["process"] == HARNESS and event["f"] == DRAIN_COMPLETE:
            facts.drain_complete = event["value"] is True
        elif event["process"] == HARNESS and event["f"] == RUN_START and facts.run_start is None:
            v = event["value"]
            facts.run_start = v if isinstance(v, dict) else {"value": v}
    facts.side_events = side
    for reader in seen.get("isolation") or []:
        if reader is not None:
            with contextlib.suppress(TypeError, ValueError):
                facts.isolation[int(reader["process"])] = str(reader["level"])
    for process in seen.get("txn_processes") or []:
        with contextlib.suppress(TypeError, ValueError):
            facts.txn_processes.add(int(process))
    return facts
