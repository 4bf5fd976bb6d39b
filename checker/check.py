"""`check_run`: a run directory's history → tables (Parquet) → analysis → RunResults → `results.json`.

The only place in the checker that writes files.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow.parquet as pq

from kafka_chaos.checker.analysis import analyse
from kafka_chaos.checker.anomalies.cycles import TxnHistory, read_txn_history, txn_history_from_tables
from kafka_chaos.checker.availability import availability, expect_violations
from kafka_chaos.checker.cluster_events import read_events, registration_events, write_events
from kafka_chaos.checker.health import health_summary
from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.schema import OPS_SCHEMA
from kafka_chaos.checker.stored_tables import read_stored_tables, write_stored_tables
from kafka_chaos.checker.tables import HistoryTables, history_to_tables, read_state_samples
from kafka_chaos.errors import HistoryError
from kafka_chaos.faults.windows import faults_from_history
from kafka_chaos.rundir import (
    HISTORY_FILE,
    OPS_FILE,
    POLLS_ARROW_FILE,
    RESULTS_FILE,
    SENDS_ARROW_FILE,
    TABLES_FILE,
)

if TYPE_CHECKING:
    from kafka_chaos.harness.testmap import Checker


def check_run(run_dir: Path, *, write: bool = True, config: Any = None,
              checkers: Sequence[Checker] = ()) -> RunResults:
    """Check the run in `run_dir` and return its RunResults (docs/architecture.md §4), finished.

    Reads `history.jsonl` (and `state.jsonl`, the observer's samples, when there is one) — or, when the run
    stored its tables as it wrote the history (checker.stored_tables), those instead of parsing it; with
    `write`, also writes the tables (when they were parsed here) and `results.json` there, once, after
    `checkers` (a user's own, harness.testmap.Checker) have read the run: their outputs are kept under
    `checkers` by class name and their `violations` join the run's. `config` is passed to the verdicts; by
    default it is the resolved configuration the history's `run-start` event carries (None if it has none). The
    result also holds `run` (completeness details and op counts), `faults` (the fault windows) and, with state
    samples, `conformance`.
    """
    run_dir = Path(run_dir)
    if not run_dir.exists():
        raise HistoryError(f"no run directory at {run_dir}: pass a results/<run>/ directory")
    stored = read_stored_tables(run_dir) if run_dir.is_dir() else None
    history = run_dir / HISTORY_FILE if run_dir.is_dir() else run_dir
    tables = stored if stored is not None else history_to_tables(history)
    meta = tables.meta
    samples = read_state_samples(run_dir) if run_dir.is_dir() else None
    faults = faults_from_history(meta.nemesis, end_time=meta.end_time)
    run_config = config if config is not None else meta.run_start
    events = _cluster_events(run_dir, meta.run_start, samples, write=write)
    # Availability (checker.availability: measured, predicted, explained by the nodes' own logs) reads the same
    # tables and nothing the anomalies find, so it runs beside them, as Jepsen's composed checkers do: most of
    # both is numpy and Arrow work that leaves the GIL to the other.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="availability") as pool:
        measured = pool.submit(availability, tables.sends, tables.polls, faults, config=run_config,
                               end_time=meta.end_time, state_samples=samples, events=events)
        analysis = analyse(
            tables.sends,
            tables.polls,
            subscribe_processes=meta.subscribe_processes,
            config=run_config,
            faults=faults,
            complete=meta.complete,
            end_time=meta.end_time,
            op_counts=meta.op_counts,
            ok_poll_times=meta.ok_poll_times,
            state_samples=samples,
            drain_start=meta.drain_start,
            txns=_transactions(history, run_dir, tables),
            extras=tables.extras,
        )
        windows = measured.result()
    sections = analysis.to_dict()
    sections["run"] = meta.to_dict()
    sections["faults"] = faults.to_dict()
    topic = (meta.run_start or {}).get("topic", {}) if isinstance(meta.run_start, dict) else {}
    health = health_summary(samples, int(topic.get("min_insync_replicas", 1)), meta.end_time)
    if health is not None:
        sections["health"] = health
    sections["availability"] = windows
    expect = (run_config or {}).get("expect") if isinstance(run_config, dict) else None
    findings = expect_violations(windows, (expect or {}).get("max_unavailable_s"))
    if write and run_dir.is_dir() and stored is None:  # stored ones are there already, built from this history
        try:
            write_stored_tables(tables, run_dir)
        except OSError as e:
            raise HistoryError(f"cannot write results into {run_dir}: {e.strerror or e}") from e
    outputs = {type(checker).__name__: checker.check(run_dir) for checker in checkers}
    results = RunResults.of(sections).finish(complete=[meta.complete], checkers=outputs, findings=findings)
    if write and run_dir.is_dir():
        results.save(run_dir / RESULTS_FILE)
    return results


BYTES_PER_LINE = 220
"""Peak memory of `kafka-chaos check` per history line when it parses the history, measured
(bench/checker_speed.py --end-to-end, "history only"): 10^6 lines 379 MB, 10^7 lines 2,189 MB, less the ~150 MB
its imports take, and a margin."""
STORED_BYTES_PER_LINE = 150
"""The same when the run stored its tables (checker.stored_tables): 10^7 lines 1,546 MB, less the imports."""
BASE_BYTES = 200 << 20
SAMPLE_BYTES = 1 << 20


class HistoryTooLarge(HistoryError):
    """Checking the history in this process would need more memory than the machine has available."""


def estimate_check(history: Path, *, stored: bool = False) -> tuple[int, int]:
    """(lines, bytes of memory) `check_run` would need for `history`, from its size and the line length of its
    first MiB: what the check can tell before reading it. `stored`: the run stored its tables, so the check
    will not parse the history."""
    size = history.stat().st_size
    with history.open("rb") as fh:
        sample = fh.read(SAMPLE_BYTES)
    lines = round(size * max(1, sample.count(b"\n")) / max(1, len(sample)))
    return lines, BASE_BYTES + (STORED_BYTES_PER_LINE if stored else BYTES_PER_LINE) * lines


def available_memory() -> int | None:
    """Bytes the kernel says are available (MemAvailable, Linux), None where it does not say."""
    try:
        with open("/proc/meminfo", "rb") as fh:
            for line in fh:
                if line.startswith(b"MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def refuse_if_too_large(run_dir: Path) -> None:
    """Raise HistoryTooLarge (exit 2) before parsing when the history's estimated need exceeds the available
    memory, naming the Spark command that reconciles it instead (README, "Spark at scale")."""
    history = run_dir / HISTORY_FILE if run_dir.is_dir() else run_dir
    avail = available_memory()
    if avail is None or not history.is_file():
        return
    lines, need = estimate_check(history, stored=_looks_stored(run_dir))
    if need > avail:
        raise HistoryTooLarge(
            f"{history}: about {lines:,} lines; checking them in one process needs about {need / 2**30:.1f} GiB of "
            f"memory and {avail / 2**30:.1f} GiB is available. Reconcile the run with Spark instead:\n"
            f"  kafka-chaos reconcile --engine spark {run_dir}\n"
            "or pass --force to check it here anyway."
        )


def _looks_stored(run_dir: Path) -> bool:
    """The run's stored tables are there and newer than its history (what the estimate can tell without reading
    them; check_run reads them only if they really are the history's)."""
    try:
        newest = (run_dir / HISTORY_FILE).stat().st_mtime_ns
        return all((run_dir / name).stat().st_mtime_ns >= newest
                   for name in (TABLES_FILE, SENDS_ARROW_FILE, POLLS_ARROW_FILE))
    except OSError:
        return False


def _transactions(history: Path, run_dir: Path, tables: HistoryTables) -> TxnHistory:
    """Every client op as a transaction for the cycle search. Without `txn` ops the tables hold all it needs
    (the ops table names each poll's invoke), so the file is not parsed again; a `txn` op's sends and polls are
    linked only in the history, which is then read a second time, as is a history whose ops table is missing."""
    meta = tables.meta
    if not meta.has_transactions:
        ops = meta.ops
        if not ops.num_rows and run_dir.is_dir() and (run_dir / OPS_FILE).is_file():
            ops = pq.read_table(run_dir / OPS_FILE, schema=OPS_SCHEMA)  # stored tables leave it on disk
        found = txn_history_from_tables(tables.sends, tables.polls, tables.extras.reads, ops, meta.isolation)
        if found is not None:
            return found
    return read_txn_history(history)


class JepsenChecker:
    """The default checker as a run part (harness.testmap.Checker): Jepsen's anomalies with the model's verdicts;
    writes the tables and results.json into the run's folder."""

    def check(self, run_dir: Path) -> dict[str, Any]:
        return check_run(run_dir).to_json_dict()


def _cluster_events(run_dir: Path, run_start: dict[str, Any] | None, samples: list[dict[str, Any]] | None, *,
                    write: bool) -> list[dict[str, Any]]:
    """The nodes' log events (checker.cluster_events), also written to events.jsonl; none from the logs without
    them or without the run's wall-clock origin (histories from before it was recorded). Fencing comes from the
    observer's sampled registrations when the logs say nothing of it."""
    if not run_dir.is_dir():
        return []
    t0 = (run_start or {}).get("clock_unix_ns")
    events = read_events(run_dir, t0) if isinstance(t0, int) and (run_dir / "logs").is_dir() else []
    if not any(e["kind"] in ("broker-fenced", "broker-unfenced") for e in events):
        events = sorted(events + registration_events(samples or ()), key=lambda e: (e["time_s"], e["node"] or 0))
    if not events:
        return []
    if write:
        try:
            write_events(run_dir, events)
        except OSError as e:
            raise HistoryError(f"cannot write events into {run_dir}: {e.strerror or e}") from e
    return events
