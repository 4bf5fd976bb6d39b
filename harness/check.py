"""Checking a stored run: the checker's results, junit.xml and the report (`kafka-chaos check`, and the end of
every run). Apart from harness.run so that a check imports none of the cluster code (docs/architecture.md §1)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console

from kafka_chaos.checker.check import JepsenChecker, write_results
from kafka_chaos.report import junit, write_report
from kafka_chaos.rundir import RunDir

if TYPE_CHECKING:
    from kafka_chaos.harness.testmap import Checker


def check_run_dir(run_dir: Path, console: Console | None = None, checkers: Sequence[Checker] = ()) -> dict[str, Any]:
    """Check a stored run (also one cut short): results.json, the report, junit.xml.

    The default checker writes results.json; each further checker's output is kept under `checkers` by its class
    name, and its `violations` join the run's."""
    results = JepsenChecker().check(Path(run_dir))
    if checkers:
        for checker in checkers:
            found = checker.check(Path(run_dir))
            results.setdefault("checkers", {})[type(checker).__name__] = found
            results["violations"] = [*results["violations"], *found.get("violations", [])]
        write_results(Path(run_dir), results)
    write_junit(Path(run_dir), results)
    try:
        write_report(Path(run_dir))
    except Exception as err:  # a broken report must not hide the verdict
        (console or Console(stderr=True)).print(f"[yellow]warning:[/] report not written: {err}")
    return results


def write_junit(run_dir: Path, results: dict[str, Any]) -> Path:
    """One test case per run; its failure text lists the violations."""
    violations = results.get("violations", [])
    failure = "\n".join(f"{v.get('name', '?')} {v.get('key', '')}: {v.get('reason', '')}"
                        for v in violations[:200]) if violations else None
    return junit.write_junit(RunDir(run_dir).junit, "kafka-chaos", [
        junit.Case(run_dir.name, "kafka-chaos.run", failure, f"{len(violations)} violations")])
