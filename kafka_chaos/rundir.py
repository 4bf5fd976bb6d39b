"""A run's folder and the names of the files in it: the one place they are spelled (docs/architecture.md §2).

    run = RunDir(Path("results/20261124T190000-demo-7"))
    run.history, run.results, run.report   # Path objects

A run id is `YYYYmmddTHHMMSS-<scenario>-<seed>`. Everything a run writes is in its folder, appended as it goes,
so a run cut short keeps what it wrote and `kafka-chaos check` still reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SCENARIO_FILE = "scenario.toml"  # the scenario as resolved (defaults filled in)
HISTORY_FILE = "history.jsonl"  # Jepsen-style history, one event per line
STATE_FILE = "state.jsonl"  # the observer's partition-state samples
SENDS_FILE = "sends.parquet"  # the history's sends as a table
POLLS_FILE = "polls.parquet"  # the history's polled records as a table
OPS_FILE = "ops.parquet"  # the history's completed client ops (what the report draws)
EXTRA_READS_FILE = "extra_reads.parquet"  # what else polls returned (fail / info polls, unknown offsets)
TABLES_FILE = "tables.json"  # what the history's parse found besides the tables, so a check need not parse again
SENDS_ARROW_FILE = "sends.arrow"  # sends.parquet as Arrow IPC, memory-mapped by the check (checker.stored_tables)
POLLS_ARROW_FILE = "polls.arrow"
RESULTS_FILE = "results.json"  # the checker's RunResults
REPORT_FILE = "report.html"
JUNIT_FILE = "junit.xml"
RECONCILE_FILE = "reconcile.json"  # Spark's reconciliation of several runs
LOGS_DIR = "logs"  # each node's log, saved when the cluster is removed
CLIENTS_LOG_FILE = "clients.log"  # in LOGS_DIR: the clients' own log lines (librdkafka's, the workers' stderr)
EVENTS_FILE = "events.jsonl"  # the cluster's own events, from the node logs (checker.cluster_events)
RESOLVED_SCENARIO_FILE = "scenario.resolved.toml"  # every fault explicit, with the nodes it hit (replay, shrink)


@dataclass(frozen=True)
class RunDir:
    path: Path

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def scenario(self) -> Path:
        return self.path / SCENARIO_FILE

    @property
    def history(self) -> Path:
        return self.path / HISTORY_FILE

    @property
    def state(self) -> Path:
        return self.path / STATE_FILE

    @property
    def sends(self) -> Path:
        return self.path / SENDS_FILE

    @property
    def polls(self) -> Path:
        return self.path / POLLS_FILE

    @property
    def ops(self) -> Path:
        return self.path / OPS_FILE

    @property
    def results(self) -> Path:
        return self.path / RESULTS_FILE

    @property
    def report(self) -> Path:
        return self.path / REPORT_FILE

    @property
    def junit(self) -> Path:
        return self.path / JUNIT_FILE

    @property
    def events(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def resolved_scenario(self) -> Path:
        return self.path / RESOLVED_SCENARIO_FILE

    @property
    def logs(self) -> Path:
        return self.path / LOGS_DIR

    @property
    def clients_log(self) -> Path:
        return self.logs / CLIENTS_LOG_FILE

    def log_of(self, node: str) -> Path:
        return self.logs / f"{node}.log"
