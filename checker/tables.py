"""history.jsonl → the `sends` and `polls` tables (docs/architecture.md §3), and Parquet in and out.

The history is read by the one reader (checker.history_reader.HistoryReader: one pass, one handler per event
kind, the pairing of invokes with completions); this module gives what it found its public shape. What each op
contributes:

- `send` (and the send micro-ops of a `txn`): one `sends` row per micro-op, with the completion's type and,
  when the completion carries `[offset, value]`, the offset. The value is taken from the completion when it
  has one, else from the invoke (values are known at invoke time). An invoke that never completed (the run
  was cut short) is a send of type `info` with `complete_time` null: its outcome is unknown.
- `poll` (and the poll micro-ops of a `txn`): one `polls` row per record an `ok` op read at a known offset.
  Everything else a poll returned goes to `PollExtras.reads` (Jepsen reads it too, jepsen.tests.kafka): the
  records of `fail` and `info` polls (`version-orders` takes the log from *all* polls; `int-poll-skip+
  nonmonotonic-cases` and `poll-skip+nonmonotonic-cases` check them) and ok records whose offset is unknown
  (read, so neither lost nor unseen, but at no place in the log), each with its position among the op's
  records of its key. A key an op returned with no records is in `PollExtras.empty`; a poll's
  `rebalance_log` (`[{"keys": [...]}, ...]`) in `PollExtras.rebalanced`.
- `assign` / `subscribe`: a process with an `ok` subscribe is a subscribe-mode consumer (rebalances allowed);
  every ok or info one is a `Reset` in `PollExtras.resets` (Jepsen's positions restart there).
- `nemesis` events are kept as a small list for the report and the verdicts; `harness` events carry the
  resolved configuration (`run-start`) and whether the final drain read finished (`drain-complete`).
- Events of other processes, and Jepsen's `debug-topic-partitions`, are counted and otherwise ignored. A
  client op of another f or type, or a poll value of the wrong shape, is an error naming the line and what
  was expected there.

A run is *complete* as checker.history_reader.is_complete says: its history ends with `drain-complete: true`
and no line was cut; a last line cut mid-way (the run was interrupted while writing) is dropped. A malformed
line anywhere else is an error: the file was damaged, not merely cut short.
"""

from __future__ import annotations

import io
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_chaos.checker.history_reader import JSON_DECODER as JSON_DECODER  # which decoder the reader uses
from kafka_chaos.checker.history_reader import LOADS, HistoryRead, HistoryReader
from kafka_chaos.checker.ops_series import ops_series
from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA, OPS_SCHEMA, POLLS_SCHEMA, SENDS_SCHEMA, empty_table
from kafka_chaos.errors import HistoryError
from kafka_chaos.faults.windows import NemesisEvent as NemesisEvent  # the fault pairing takes these events
from kafka_chaos.rundir import EXTRA_READS_FILE, HISTORY_FILE, OPS_FILE, POLLS_FILE, SENDS_FILE, STATE_FILE


@dataclass(frozen=True)
class HistoryMeta:
    """What the history says besides the two tables."""

    complete: bool
    """True only if the history ends with `drain-complete: true` and no line was cut."""
    drain_complete: bool | None
    """The value of the harness's final `drain-complete` event, None if there was none."""
    truncated: bool
    """The last line was cut mid-way and was dropped."""
    events: int
    """Events read (lines, not counting a cut last line)."""
    end_time: int
    """The largest `time` in the history (ns since the run started)."""
    run_start: dict[str, Any] | None
    """The value of the optional first `run-start` event: the resolved scenario / configuration."""
    subscribe_processes: frozenset[int]
    """Client processes that subscribed (group-managed assignment) with an ok `subscribe`."""
    nemesis: tuple[NemesisEvent, ...]
    op_counts: dict[str, dict[str, int]]
    """Completed client ops per f and type (`ok`, `fail`, `info`); ops never completed count as `info` and
    also under `unfinished`."""
    ok_poll_times: npt.NDArray[np.int64] = field(repr=False)
    """Completion times of every ok op that polled, including polls that returned nothing."""
    drain_start: int | None = None
    """When the final read began (the harness's `drain-start`): consumer lag is measured before it."""
    ignored: int = 0
    """Events from unknown processes, or with an unknown f, that were skipped."""
    unplaced_records: int = 0
    """Records ok polls returned without an offset: read, but at no known place in the log (PollExtras)."""
    isolation: dict[int, str] = field(default_factory=dict)
    """Each reader's isolation level, as its `assign` said (checker.anomalies.cycles.TxnHistory.isolation)."""
    ops: pa.Table = field(default_factory=lambda: empty_table(OPS_SCHEMA), repr=False)
    """OPS_SCHEMA: every completed client op, in history order (what the report draws, `ops.parquet`)."""
    fetch_from: tuple[dict[str, Any], ...] = ()
    """The harness's `fetch-from` events (which replica a rack-aware consumer reads from), with their `time`."""
    unfinished: dict[str, int] = field(default_factory=dict)
    """Invokes never completed, by f: those pending at the end and those a process's next invoke replaced."""

    @property
    def has_transactions(self) -> bool:
        """The history holds `txn` ops: only then does the cycle search need a second pass over the file."""
        return "txn" in self.op_counts

    def to_dict(self) -> dict[str, Any]:
        return {
            "complete": self.complete,
            "drain_complete": self.drain_complete,
            "drain_start": self.drain_start,
            "truncated": self.truncated,
            "events": self.events,
            "end_time": self.end_time,
            "subscribe_processes": sorted(self.subscribe_processes),
            "op_counts": self.op_counts,
            "ignored": self.ignored,
            "unplaced_records": self.unplaced_records,
        }


@dataclass(frozen=True)
class Reset:
    """An ok or info `assign` / `subscribe` of a process (its completion's history index): Jepsen's
    `poll-skip+nonmonotonic-cases-per-process` and `nonmonotonic-send-cases` keep, from there on, only the
    positions of the keys it names. `names` are what its value lists: keys (`assign`, Jepsen's `subscribe`)
    or topics (kafka-chaos's `subscribe`); a key is kept when it or its topic is named."""

    process: int
    index: int
    names: frozenset[str]

    def keeps(self, key: str) -> bool:
        return key in self.names or key.rpartition("/")[0] in self.names


@dataclass(frozen=True)
class PollExtras:
    """What Jepsen's rules read from a general history besides the two tables. Empty for kafka-chaos's own
    queue workload, whose polls are ok, with offsets, and which assigns once per process."""

    reads: pa.Table = field(default_factory=lambda: empty_table(EXTRA_READS_SCHEMA))
    """EXTRA_READS_SCHEMA: records of fail and info polls, and records of ok polls at unknown offsets."""
    resets: tuple[Reset, ...] = ()
    rebalanced: dict[int, frozenset[str]] = field(default_factory=dict)
    """Poll (or txn) op index → the keys its `rebalance_log` names."""
    empty: tuple[tuple[int, int, str, str], ...] = ()
    """(process, op index, key, type) of each key a poll returned with no records."""

    def __bool__(self) -> bool:
        return bool(self.reads.num_rows or self.resets or self.rebalanced or self.empty)


@dataclass(frozen=True)
class HistoryTables:
    """The result of reading a history: the two tables (SENDS_SCHEMA, POLLS_SCHEMA) and the rest."""

    sends: pa.Table
    polls: pa.Table
    meta: HistoryMeta
    extras: PollExtras = field(default_factory=PollExtras)
    """What else Jepsen's rules read (fail / info polls, unknown offsets, resets, rebalances)."""


def history_to_tables(path: Path | str) -> HistoryTables:
    """Read `history.jsonl` (or a run directory holding one) into the sends and polls tables.

    Raises HistoryError when the file is missing, unreadable, or damaged before its last line.
    """
    path = Path(path)
    if path.is_dir():
        path = path / HISTORY_FILE
    try:
        with path.open("rb", buffering=1 << 20) as fh:
            return tables_of(HistoryReader().read_file(fh, source=str(path)))
    except FileNotFoundError:
        raise HistoryError(
            f"no history at {path}: pass a run directory (results/<run>/) that holds {HISTORY_FILE}, "
            "as written by `kafka-chaos run`"
        ) from None
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}; check the path and permissions") from e


def parse_history(data: bytes, *, source: str = HISTORY_FILE) -> HistoryTables:
    """`history_to_tables` on the bytes of a history file."""
    return tables_of(HistoryReader().read_file(io.BytesIO(data), source=source))


def parse_lines(lines: Iterable[bytes], *, source: str) -> HistoryTables:
    """One pass of the history reader over the lines (each with its newline, except perhaps the last), with
    every table built. Also what a run's recorder feeds as it writes (checker.stored_tables.TableBuilder)."""
    return tables_of(HistoryReader().read(lines, source=source))


_AS_READ = ("drain_complete", "drain_start", "truncated", "events", "end_time", "run_start", "op_counts",
            "ok_poll_times", "ignored", "unplaced_records", "isolation", "ops", "unfinished")
"""HistoryMeta's fields that are the reader's (HistoryRead) as they are."""


def tables_of(read: HistoryRead) -> HistoryTables:
    """What one reader pass found, as HistoryTables (the record tables are empty unless it built them)."""
    meta = HistoryMeta(
        complete=read.complete,
        subscribe_processes=frozenset(read.subscribe_processes),
        nemesis=tuple(NemesisEvent(i, t, ty, f, v, er, p) for i, t, ty, f, v, er, p in read.fault_events),
        fetch_from=tuple(read.fetch_from),
        **{name: getattr(read, name) for name in _AS_READ},
    )
    extras = PollExtras(read.extra_reads, tuple(Reset(p, i, names) for p, i, names in read.resets), read.rebalanced,
                        tuple(read.empty_reads))
    return HistoryTables(sends=read.sends, polls=read.polls, meta=meta, extras=extras)


OPS_SUMMARY_KEY = b"kafka-chaos.history"
"""`ops.parquet`'s metadata key: history_summary as JSON."""


def write_tables(tables: HistoryTables, run_dir: Path | str) -> tuple[Path, Path, Path]:
    """Write `sends.parquet`, `polls.parquet`, `extra_reads.parquet` (`PollExtras.reads`, empty for kafka-chaos's
    own workloads) and `ops.parquet` (with history_summary in its metadata) into `run_dir`; return the first
    three's paths. The extra reads are written so that a reader of the tables (spark/) finds every record
    Jepsen's rules read without the history; the resets, rebalances and empty reads of `PollExtras` are not (only
    the checks spark/ leaves to the checker read them). `ops` is what the report draws (report.data)."""
    run_dir = Path(run_dir)
    paths = run_dir / SENDS_FILE, run_dir / POLLS_FILE, run_dir / EXTRA_READS_FILE
    for table, path in zip((tables.sends, tables.polls, tables.extras.reads), paths, strict=True):
        pq.write_table(table, path)
    summary = json.dumps(history_summary(tables.meta, run_dir / HISTORY_FILE), default=str).encode()
    ops = tables.meta.ops
    pq.write_table(ops.replace_schema_metadata({**(ops.schema.metadata or {}), OPS_SUMMARY_KEY: summary}),
                   run_dir / OPS_FILE)
    return paths


def history_summary(meta: HistoryMeta, history: Path) -> dict[str, Any]:
    """What the report reads of a history besides its ops (report.data.HistoryScan), and which file it came
    from (size and mtime: a history rewritten since is read again)."""
    st = history.stat() if history.is_file() else None
    return {
        "history": {"size": st.st_size, "mtime_ns": st.st_mtime_ns} if st else None,
        "events": meta.events,
        "end_time": meta.end_time,
        "truncated": meta.truncated,
        "run_start": meta.run_start,
        "drain_complete": meta.drain_complete,
        "drain_start": meta.drain_start,
        "nemesis": [{"index": e.index, "time": e.time, "type": e.type, "f": e.f, "value": e.value, "error": e.error}
                    for e in meta.nemesis if e.process == "nemesis"],
        "fetch_from": list(meta.fetch_from),
        "unfinished": meta.unfinished,
        "series": ops_series(meta.ops),
    }


def read_tables(run_dir: Path | str) -> tuple[pa.Table, pa.Table]:
    """Read `sends.parquet` and `polls.parquet` from `run_dir`, cast to the shared schemas."""
    run_dir = Path(run_dir)
    try:
        sends = pq.read_table(run_dir / SENDS_FILE)
        polls = pq.read_table(run_dir / POLLS_FILE)
    except (FileNotFoundError, OSError) as e:
        raise HistoryError(
            f"cannot read the tables in {run_dir} ({e}); run `kafka-chaos check {run_dir}` to derive them "
            f"from {HISTORY_FILE}"
        ) from None
    return sends.select(SENDS_SCHEMA.names).cast(SENDS_SCHEMA), polls.select(POLLS_SCHEMA.names).cast(
        POLLS_SCHEMA
    )


def read_extra_reads(run_dir: Path | str) -> pa.Table | None:
    """`extra_reads.parquet` from `run_dir` (EXTRA_READS_SCHEMA), or None when the tables were written without
    it (before it existed): then only the history has those records."""
    path = Path(run_dir) / EXTRA_READS_FILE
    if not path.exists():
        return None
    try:
        table = pq.read_table(path)
    except OSError as e:
        raise HistoryError(f"cannot read {path} ({e}); run `kafka-chaos check {run_dir}` to write it again") from None
    return table.select(EXTRA_READS_SCHEMA.names).cast(EXTRA_READS_SCHEMA)


def read_state_samples(run_dir: Path | str) -> list[dict[str, Any]] | None:
    """The observer's samples (`state.jsonl`, docs/architecture.md §3), or None if the run has none.

    Lenient, as the samples are evidence on the side: a line that is not a JSON object (a cut last line,
    say) is skipped.
    """
    path = Path(run_dir) / STATE_FILE
    try:
        fh = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as e:
        raise HistoryError(f"cannot read {path}: {e.strerror or e}") from e
    samples: list[dict[str, Any]] = []
    with fh:
        for line in fh:
            try:
                o = LOADS(line)
            except ValueError:
                continue
            if isinstance(o, dict):
                samples.append(o)
    return samples
