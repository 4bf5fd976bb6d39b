"""The tables a run stores as it writes its history (checker.stored_tables) are what a parse of the finished file
gives: every field of every table, the HistoryMeta and the PollExtras, on every line of a history; and checking
them finds what checking the parsed history finds."""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import numpy as np

from kafka_chaos.checker.check import check_run
from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.checker.stored_tables import TableBuilder, read_stored_tables, stored_schema
from kafka_chaos.checker.tables import HistoryTables, history_to_tables
from kafka_chaos.errors import HistoryError
from kafka_chaos.rundir import HISTORY_FILE, TABLES_FILE


def store_as_a_run_does(run_dir: Path, text: str) -> None:
    """Feed each line to a TableBuilder as the recorder writes it, then store once the file is closed."""
    builder = TableBuilder()
    with (run_dir / HISTORY_FILE).open("wb") as fh:
        for line in text.encode().splitlines(keepends=True):
            fh.write(line)
            builder.feed(line)
    builder.store(run_dir)


def assert_same_tables(stored: HistoryTables, parsed: HistoryTables) -> None:
    assert stored.sends.schema.equals(stored_schema(SENDS_SCHEMA)), "sends' schema"
    assert stored.polls.schema.equals(stored_schema(POLLS_SCHEMA)), "polls' schema"
    assert stored.sends.cast(SENDS_SCHEMA).equals(parsed.sends), "sends"
    assert stored.polls.cast(POLLS_SCHEMA).equals(parsed.polls), "polls"
    assert stored.extras.reads.equals(parsed.extras.reads), "extras.reads"
    for name in ("resets", "rebalanced", "empty"):
        assert getattr(stored.extras, name) == getattr(parsed.extras, name), f"extras.{name}"
    for f in dataclasses.fields(parsed.meta):
        ours, theirs = getattr(stored.meta, f.name), getattr(parsed.meta, f.name)
        if f.name == "ops":  # not read back: ops.parquet is there (and what the report reads)
            continue
        if isinstance(theirs, np.ndarray):
            assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs), f"meta.{f.name}"
        else:
            assert ours == theirs, f"meta.{f.name}: {ours!r} != {theirs!r}"


def assert_stored_agrees(text: str) -> None:
    with tempfile.TemporaryDirectory(prefix="stored-agreement-") as tmp:
        run_dir = Path(tmp)
        store_as_a_run_does(run_dir, text)
        stored = read_stored_tables(run_dir)
        assert stored is not None, "the run's stored tables were not read back"
        assert_same_tables(stored, history_to_tables(run_dir))
        # and the check finds the same in them (their key and type columns come dictionary-encoded)
        from_stored = _checked(run_dir)
        (run_dir / TABLES_FILE).unlink()
        assert from_stored == _checked(run_dir)


def _checked(run_dir: Path) -> str:
    """The check's result as JSON, or the error it stopped with (some histories are refused on purpose)."""
    try:
        return json.dumps(check_run(run_dir, write=False).to_json_dict(), sort_keys=True, default=str)
    except HistoryError as err:
        return f"HistoryError: {err}"
