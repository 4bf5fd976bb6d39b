"""`kafka-chaos check` refuses, before parsing, a history too large for the memory available (checker.check
.refuse_if_too_large), naming the Spark command; `--force` checks it anyway."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import kafka_chaos.checker.check as checker_check
from kafka_chaos.checker.stored_tables import TableBuilder
from kafka_chaos.harness.cli import main

LINES = (
    '{"index":0,"time":1,"process":0,"type":"invoke","f":"send","value":[["send","chaos/0",1]]}\n'
    '{"index":1,"time":2,"process":0,"type":"ok","f":"send","value":[["send","chaos/0",[0,1]]]}\n'
    '{"index":2,"time":3,"process":1,"type":"invoke","f":"poll","value":[["poll"]]}\n'
    '{"index":3,"time":4,"process":1,"type":"ok","f":"poll","value":[["poll",{"chaos/0":[[0,1]]}]]}\n'
    '{"index":4,"time":5,"process":"harness","type":"info","f":"drain-complete","value":true}\n'
)


def _check(run_dir: Path, *flags: str, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "argv", ["kafka-chaos", "check", str(run_dir), "--json", *flags])
    try:
        main()
    except SystemExit as done:
        return int(done.code or 0)
    return 0


def test_estimate_counts_lines_from_the_size(tmp_path: Path) -> None:
    (tmp_path / "history.jsonl").write_text(LINES * 100)
    lines, need = checker_check.estimate_check(tmp_path / "history.jsonl")
    assert lines == 500
    assert need == checker_check.BASE_BYTES + checker_check.BYTES_PER_LINE * 500


def test_a_run_that_stored_its_tables_is_estimated_to_need_less(tmp_path: Path) -> None:
    builder = TableBuilder()
    with (tmp_path / "history.jsonl").open("wb") as fh:
        for line in (LINES * 100).encode().splitlines(keepends=True):
            fh.write(line)
            builder.feed(line)
    builder.store(tmp_path)
    assert checker_check._looks_stored(tmp_path)
    lines, need = checker_check.estimate_check(tmp_path / "history.jsonl", stored=True)
    parsed_need = checker_check.estimate_check(tmp_path / "history.jsonl")[1]
    assert lines == 500 and need == checker_check.BASE_BYTES + checker_check.STORED_BYTES_PER_LINE * 500 < parsed_need
    later = (tmp_path / "tables.json").stat().st_mtime_ns + 10**9
    os.utime(tmp_path / "history.jsonl", ns=(later, later))  # rewritten since: the tables may not be its own
    assert not checker_check._looks_stored(tmp_path)


def test_too_large_is_refused_up_front_with_the_spark_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "history.jsonl").write_text(LINES)
    monkeypatch.setattr(checker_check, "available_memory", lambda: checker_check.BASE_BYTES)  # a fake threshold
    parsed: list[Path] = []
    monkeypatch.setattr(checker_check, "history_to_tables", lambda p: parsed.append(p))
    assert _check(tmp_path, monkeypatch=monkeypatch) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "about 5 lines" in err
    assert f"kafka-chaos reconcile --engine spark {tmp_path}" in " ".join(err.split())
    assert "--force" in err and not parsed and not (tmp_path / "results.json").exists()


def test_force_checks_it_anyway_and_enough_memory_is_not_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "history.jsonl").write_text(LINES)
    monkeypatch.setattr(checker_check, "available_memory", lambda: checker_check.BASE_BYTES)
    assert _check(tmp_path, "--force", monkeypatch=monkeypatch) == 0
    assert (tmp_path / "results.json").exists()
    (tmp_path / "results.json").unlink()
    monkeypatch.setattr(checker_check, "available_memory", lambda: 1 << 40)
    assert _check(tmp_path, monkeypatch=monkeypatch) == 0
    assert (tmp_path / "results.json").exists()
