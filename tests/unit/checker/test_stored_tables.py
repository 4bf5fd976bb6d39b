"""A run's recorder builds the checker's tables as it writes the history (checker.stored_tables); a check of the
finished run reads them instead of parsing, and parses whenever they do not belong to the history as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from checker_histories import K1, K
from stored_agreement import assert_same_tables

import kafka_chaos.checker.analysis
import kafka_chaos.checker.check
from kafka_chaos.checker import HistoryError, check_run, history_to_tables
from kafka_chaos.checker.stored_tables import TableBuilder, read_stored_tables
from kafka_chaos.history import History
from kafka_chaos.rundir import HISTORY_FILE, SENDS_ARROW_FILE, TABLES_FILE


@pytest.fixture(autouse=True)
def no_reference_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_chaos.checker.analysis, "load_judge", lambda: None)


def record_run(run_dir: Path, *, lost: bool = False) -> None:
    """A short run as the harness records it (harness.run): the recorder feeding a TableBuilder, stored after the
    history is closed. Values of every shape the recorder writes: non-string keys, nested run-start."""
    builder = TableBuilder()
    with History(run_dir / HISTORY_FILE, on_line=builder.feed) as h:
        h.record("harness", "info", "run-start", {"topic": {"name": "chaos", "min_insync_replicas": 2}, "seed": 7})
        h.record(0, "invoke", "assign", {"keys": [K, K1], "isolation": "read_committed"})
        h.record(0, "ok", "assign", {"keys": [K, K1], "isolation": "read_committed"})
        h.record("operator", "invoke", "reassign", {0: [1, 2, 3]})
        for v in range(6):
            h.record(1, "invoke", "send", [["send", K, v]])
            h.record(1, "ok", "send", [["send", K, [v, v]]])
        h.record(2, "invoke", "send", [["send", K1, 99]])  # never completes: an info send
        h.record(0, "invoke", "poll", [["poll"]])
        h.record(0, "ok", "poll", [["poll", {K: [[v, v] for v in range(6) if not (lost and v == 3)]}]])
        h.record("nemesis", "info", "kill", {"nodes": [2]}, error="not all")
        h.record("harness", "info", "drain-complete", True)
    builder.store(run_dir)


def test_a_run_stores_what_parsing_its_history_gives(tmp_path: Path) -> None:
    record_run(tmp_path)
    stored = read_stored_tables(tmp_path)
    assert stored is not None
    assert stored.sends.num_rows == 7 and stored.polls.num_rows == 6
    assert stored.meta.isolation == {0: "read_committed"} and stored.meta.nemesis[0].value == {"0": [1, 2, 3]}
    assert_same_tables(stored, history_to_tables(tmp_path))


def test_check_reads_the_stored_tables_instead_of_parsing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    record_run(tmp_path, lost=True)
    parsed = check_run(tmp_path, write=False).to_json_dict()

    def no_parse(path: Path) -> None:
        raise AssertionError(f"parsed {path}")

    monkeypatch.setattr(kafka_chaos.checker.check, "history_to_tables", no_parse)
    stored = check_run(tmp_path).to_json_dict()
    assert stored["anomaly_counts"]["lost-write"] == 1
    assert json.dumps(stored, sort_keys=True, default=str) == json.dumps(parsed, sort_keys=True, default=str)


def test_a_history_changed_after_storing_is_parsed_again(tmp_path: Path) -> None:
    record_run(tmp_path)
    with (tmp_path / HISTORY_FILE).open("a") as fh:  # say, a user appending what the run missed
        fh.write(json.dumps({"index": 99, "time": 10**9, "process": 1, "type": "invoke", "f": "send",
                             "value": [["send", K, 100]]}) + "\n")
    assert read_stored_tables(tmp_path) is None
    assert check_run(tmp_path).to_json_dict()["run"]["op_counts"]["send"]["info"] == 2
    assert read_stored_tables(tmp_path) is not None  # the check stored what it parsed


def test_nothing_is_stored_for_a_history_the_builder_did_not_see_whole(tmp_path: Path) -> None:
    (tmp_path / HISTORY_FILE).write_text(json.dumps({"index": 0, "time": 0, "process": "harness", "type": "info",
                                                     "f": "drain-start", "value": None}) + "\n")
    record_run(tmp_path)  # appends to the line written before it
    assert not (tmp_path / TABLES_FILE).exists()
    lines = (tmp_path / HISTORY_FILE).read_text().count("\n")
    assert lines == 22 and check_run(tmp_path).to_json_dict()["run"]["events"] == lines


def test_a_history_the_parser_refuses_stores_nothing_and_check_names_the_line(tmp_path: Path) -> None:
    builder = TableBuilder()
    with History(tmp_path / HISTORY_FILE, on_line=builder.feed) as h:
        h.record(1, "invoke", "sned", [["send", K, 1]])
        h.record(1, "ok", "sned", [["send", K, [0, 1]]])
        h.record(1, "invoke", "send", [["send", K, 2]])
    builder.store(tmp_path)
    assert not (tmp_path / TABLES_FILE).exists()
    with pytest.raises(HistoryError, match="line 2: f 'sned'"):
        check_run(tmp_path).to_json_dict()


def test_stored_tables_of_another_layout_are_ignored(tmp_path: Path) -> None:
    record_run(tmp_path)
    stored = json.loads((tmp_path / TABLES_FILE).read_text())
    (tmp_path / TABLES_FILE).write_text(json.dumps({**stored, "layout": 0}))
    assert read_stored_tables(tmp_path) is None
    (tmp_path / TABLES_FILE).write_text("{")
    assert read_stored_tables(tmp_path) is None


def test_a_damaged_arrow_table_is_not_read(tmp_path: Path) -> None:
    record_run(tmp_path)
    sends = tmp_path / SENDS_ARROW_FILE
    sends.write_bytes(sends.read_bytes()[:100])
    assert read_stored_tables(tmp_path) is None
    assert check_run(tmp_path).to_json_dict()["run"]["op_counts"]["send"]["ok"] == 6
