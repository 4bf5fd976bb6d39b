"""Checking a stored run: the checker's results, junit.xml and the report (`kafka-chaos check`, and the end of
every run). Apart from harness.run so that a check imports none of the cluster code (docs/architecture.md §1)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from rich.console import Console

from kafka_chaos.checker.check import check_run
from kafka_chaos.checker.results import RunResults
from kafka_chaos.report import junit, write_report
from kafka_chaos.rundir import RunDir

if TYPE_CHECKING:
    from kafka_chaos.harness.testmap import Checker


def check_run_dir(run_dir: Path, console: Console | None = None, checkers: Sequence[Checker] = ()) -> RunResults:
    """Check a stored run (also one cut short): results.json (written once, `checkers`' outputs in it, by
    checker.check.check_run), the report, junit.xml."""
    results = check_run(Path(run_dir), checkers=checkers)
    write_junit(Path(run_dir), results)
    try:
        write_report(Path(run_dir))
    except Exception as err:  # a broken report must not hide the verdict
        (console or Console(stderr=True)).print(f"[yellow]warning:[/] report not written: {err}")
    return results


def write_junit(run_dir: Path, results: RunResults) -> Path:
    """One test case per run; its failure text lists the violations."""
    violations = results.violations
    failure = "\n".join(f"{v.name or '?'} {v.key if v.key is not None else ''}: {v.reason or ''}"
                        for v in violations[:200]) if violations else None
    return junit.write_junit(RunDir(run_dir).junit, "kafka-chaos", [
        junit.Case(run_dir.name, "kafka-chaos.run", failure, f"{len(violations)} violations")])
