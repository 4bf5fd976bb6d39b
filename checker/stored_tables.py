"""The tables a run builds while it writes its history, and reading them back instead of parsing the history.

Parsing `history.jsonl` is most of what checking a large history costs (docs/architecture.md §3). A run's
recorder (kafka_chaos.history.History) therefore hands every line it writes to a `TableBuilder` as well: the same
one-pass parser (`checker.tables.parse_lines`) running in a thread, so that the tables are exactly those a parse of
the file gives, at the cost of a few microseconds per event while the cluster does the real work. When the
history closes, `write_stored_tables` writes the four Parquet tables, the sends and polls once more as
uncompressed Arrow IPC files (`sends.arrow`, `polls.arrow`: the check maps them into memory instead of decoding
Parquet, which took 1-2 s at 10^7 lines), and `tables.json` (everything else the parse found: the HistoryMeta and
PollExtras fields) stamped with the history's size and modification time.

`read_stored_tables` gives them back only while the history is still the file they were built from (same size
and mtime, same layout version); otherwise the checker parses the history as before. A run cut short by a kill
writes no `tables.json`: its history is parsed, and so read to its last whole line. `kafka-chaos check` writes
them too, so a run is parsed at most once.
"""

from __future__ import annotations

import contextlib
import os
import queue
import threading
from pathlib import Path

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.parquet as pq

from kafka_chaos.checker.schema import EXTRA_READS_SCHEMA, OPS_SCHEMA, POLLS_SCHEMA, SENDS_SCHEMA, empty_table
from kafka_chaos.checker.tables import (
    HistoryMeta,
    HistoryTables,
    NemesisEvent,
    PollExtras,
    Reset,
    parse_lines,
    write_tables,
)
from kafka_chaos.rundir import EXTRA_READS_FILE, HISTORY_FILE, POLLS_ARROW_FILE, SENDS_ARROW_FILE, TABLES_FILE

LAYOUT = 1
"""Version of `tables.json`'s layout: a file of another version is ignored (the history is parsed)."""


class TableBuilder:
    """`parse_lines` fed line by line as a history is written. `feed` only queues the line, so the recorder's
    lock is held no longer than before; `finish` waits for the parser and gives its tables (None when the
    history could not be parsed: `kafka-chaos check` then parses the file and says what is wrong with it)."""

    def __init__(self, source: str = HISTORY_FILE) -> None:
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._source = source
        self._fed = 0
        self._tables: HistoryTables | None = None
        self._thread = threading.Thread(target=self._parse, daemon=True, name="history-tables")
        self._thread.start()

    def feed(self, line: bytes) -> None:
        """One whole history line, with its newline."""
        self._fed += len(line)
        self._lines.put(line)

    def finish(self) -> HistoryTables | None:
        self._lines.put(None)
        self._thread.join()
        return self._tables

    def store(self, run_dir: Path | str) -> None:
        """`finish`, then write the tables into `run_dir` once its history is closed. Storing is a shortcut for
        the check, never a reason for a run to fail: when it cannot, the check parses the history. Nothing is
        stored unless the builder saw every byte of the history (it was empty when the run began)."""
        tables = self.finish()
        stamp = _history_stamp(Path(run_dir) / HISTORY_FILE)
        if tables is not None and stamp is not None and stamp["size"] == self._fed:
            with contextlib.suppress(OSError):
                write_stored_tables(tables, run_dir)

    def _parse(self) -> None:
        lines = iter(self._lines.get, None)
        try:
            self._tables = parse_lines(lines, source=self._source)
        except Exception:
            for _ in lines:  # keep emptying the queue: the run goes on writing
                pass


def _history_stamp(history: Path) -> dict[str, int] | None:
    try:
        st = history.stat()
    except OSError:
        return None
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns}


def write_stored_tables(tables: HistoryTables, run_dir: Path | str) -> None:
    """The Parquet tables (checker.tables.write_tables), the sends and polls as Arrow IPC, then `tables.json` —
    last, and replaced in one step, so that its presence means the tables beside it are whole."""
    run_dir = Path(run_dir)
    write_tables(tables, run_dir)
    for table, name in ((tables.sends, SENDS_ARROW_FILE), (tables.polls, POLLS_ARROW_FILE)):
        table = table.combine_chunks().cast(stored_schema(table.schema))  # one dictionary per column
        with pa.OSFile(str(run_dir / name), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=max(1, table.num_rows))  # one chunk: columns map as arrays
    meta, extras = tables.meta, tables.extras
    stored = {
        "layout": LAYOUT,
        "history": _history_stamp(run_dir / HISTORY_FILE),
        "meta": {
            "complete": meta.complete,
            "drain_complete": meta.drain_complete,
            "truncated": meta.truncated,
            "events": meta.events,
            "end_time": meta.end_time,
            "run_start": meta.run_start,
            "subscribe_processes": sorted(meta.subscribe_processes),
            "nemesis": [[e.index, e.time, e.type, e.f, e.value, e.error, e.process] for e in meta.nemesis],
            "op_counts": meta.op_counts,
            "ok_poll_times": meta.ok_poll_times,
            "drain_start": meta.drain_start,
            "ignored": meta.ignored,
            "unplaced_records": meta.unplaced_records,
            "isolation": list(meta.isolation.items()),
            "fetch_from": list(meta.fetch_from),
            "unfinished": meta.unfinished,
        },
        "extras": {
            "resets": [[r.process, r.index, sorted(r.names)] for r in extras.resets],
            "rebalanced": [[index, sorted(keys)] for index, keys in extras.rebalanced.items()],
            "empty": [list(e) for e in extras.empty],
        },
    }
    tmp = run_dir / (TABLES_FILE + ".tmp")
    tmp.write_bytes(orjson.dumps(stored, option=orjson.OPT_SERIALIZE_NUMPY | orjson.OPT_NON_STR_KEYS))
    os.replace(tmp, run_dir / TABLES_FILE)


def read_stored_tables(run_dir: Path | str) -> HistoryTables | None:
    """The tables the run (or an earlier check) stored, when they were built from the history as it is now;
    otherwise None. The sends' and polls' `key` and `type` are dictionary-encoded (`stored_schema`); `meta.ops`
    is left empty: only writing `ops.parquet` reads it, and that file is there."""
    run_dir = Path(run_dir)
    try:
        stored = orjson.loads((run_dir / TABLES_FILE).read_bytes())
        if stored.get("layout") != LAYOUT or stored.get("history") != _history_stamp(run_dir / HISTORY_FILE):
            return None
        m, x = stored["meta"], stored["extras"]
        meta = HistoryMeta(
            complete=m["complete"],
            drain_complete=m["drain_complete"],
            truncated=m["truncated"],
            events=m["events"],
            end_time=m["end_time"],
            run_start=m["run_start"],
            subscribe_processes=frozenset(m["subscribe_processes"]),
            nemesis=tuple(NemesisEvent(index=i, time=t, type=ty, f=f, value=v, error=er, process=p)
                          for i, t, ty, f, v, er, p in m["nemesis"]),
            op_counts=m["op_counts"],
            ok_poll_times=np.asarray(m["ok_poll_times"], dtype=np.int64),
            drain_start=m["drain_start"],
            ignored=m["ignored"],
            unplaced_records=m["unplaced_records"],
            isolation={int(p): str(level) for p, level in m["isolation"]},
            ops=empty_table(OPS_SCHEMA),
            fetch_from=tuple(m["fetch_from"]),
            unfinished=m["unfinished"],
        )
        extras = PollExtras(
            reads=_read(run_dir / EXTRA_READS_FILE, EXTRA_READS_SCHEMA),
            resets=tuple(Reset(p, i, frozenset(names)) for p, i, names in x["resets"]),
            rebalanced={int(i): frozenset(keys) for i, keys in x["rebalanced"]},
            empty=tuple((p, i, k, t) for p, i, k, t in x["empty"]),
        )
        return HistoryTables(sends=_mapped(run_dir / SENDS_ARROW_FILE, SENDS_SCHEMA),
                             polls=_mapped(run_dir / POLLS_ARROW_FILE, POLLS_SCHEMA), meta=meta, extras=extras)
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):  # missing, damaged or foreign: parse
        return None


ENCODED = ("key", "type")
"""Columns stored dictionary-encoded: a few names over millions of rows, which the checks code by the names
(checker.context, checker.availability) instead of hashing every row's string."""


def stored_schema(schema: pa.Schema) -> pa.Schema:
    """The schema of a stored table: `schema` with the ENCODED columns dictionary-encoded. The values are the
    same strings; readers of the tables that need plain strings cast them (`table.cast(schema)`)."""
    for name in ENCODED:
        i = schema.get_field_index(name)
        schema = schema.set(i, schema.field(name).with_type(pa.dictionary(pa.int32(), pa.string())))
    return schema


def _mapped(path: Path, schema: pa.Schema) -> pa.Table:
    """An Arrow IPC table mapped into memory: its columns are the file's pages, read as the checks touch them."""
    table = pa.ipc.open_file(pa.memory_map(str(path))).read_all()
    if not table.schema.equals(stored_schema(schema)):
        raise ValueError(f"{path.name} does not have the table's schema")
    return table


def _read(path: Path, schema: pa.Schema) -> pa.Table:
    # ParquetFile, not pq.read_table: that goes through pyarrow.dataset, which imports pandas (~0.4 s)
    table = pq.ParquetFile(path).read()
    if not table.schema.equals(schema):
        raise ValueError(f"{path.name} does not have the table's schema")
    return table
