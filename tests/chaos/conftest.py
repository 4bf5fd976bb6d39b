"""Helpers for the documented-scenario chaos suites: read what a run's history and state samples show."""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.faults.nemesis import FRAME_FAULT
from kafka_chaos.harness.run import RunResult
from kafka_chaos.rundir import SENDS_FILE

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"

VOLATILE_DISK_BASE: dict[str, Any] = {
    "cluster": {"nodes": 3, "volatile_disks": "unsynced"},
    "topic": {"partitions": 3, "replication_factor": 3, "min_insync_replicas": 2},
    "workload": {"producers": 2, "acks": "all", "idempotence": True, "rate": 300},
}
"""acks=all, RF 3, min.insync 2 on three nodes whose disks lose what was not fsynced: the disk suites' cluster."""


def volatile_disk_scenario(name: str, duration_s: float, *faults: dict[str, Any], seed: int) -> dict[str, Any]:
    """A scenario dict on VOLATILE_DISK_BASE with this fault schedule."""
    return {"name": name, "seed": seed, "duration_s": duration_s, **VOLATILE_DISK_BASE,
            "faults": {"schedule": list(faults)}}


def events(result: RunResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]


def samples(result: RunResult) -> list[dict[str, Any]]:
    path = result.run_dir / "state.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def topic_of(result: RunResult) -> str:
    """The run's topic, from the history's `topic` event (a shared cluster gives each run its own)."""
    (topic,) = [e["value"]["topic"] for e in events(result) if e["process"] == "harness" and e["f"] == "topic"]
    return str(topic)


def nemesis(result: RunResult, f: str, type_: str = "info") -> list[dict[str, Any]]:
    """The `info` events (the fault took effect) of nemesis op `f`, in order; `type_="invoke"`: when each began."""
    return [e for e in events(result) if e["process"] == "nemesis" and e["f"] == f and e["type"] == type_]


def frame_faults(result: RunResult) -> list[dict[str, Any]]:
    """What request faults did to each frame, in order (the history's `frame-fault` values)."""
    return [e["value"] for e in events(result) if e["process"] == "harness" and e["f"] == FRAME_FAULT]


def verdict_counts(result: RunResult) -> Counter[tuple[str, str, str, str | None]]:
    """How many anomaly instances the checker found per (name, isolation, verdict, defect): what a suite prints
    beside the model's expectation."""
    return Counter((name, i.get("isolation", ""), i["verdict"], i.get("defect"))
                   for name, insts in result.results["anomalies"].items() for i in insts)


def held_until_after(result: RunResult, api: str, release_after: list[str]) -> dict[str, Any]:
    """The one frame a `request-hold` fault on `api` held, checked to have been released by `release_after` frames
    on the proxy's other connections ("after"; the heal or a timeout would say "heal" or "time")."""
    (fault,) = nemesis(result, "request-hold")
    assert fault["value"]["release_after"] == release_after
    (held,) = frame_faults(result)
    assert held["api"] == api and held["released"] == "after", held
    return held


def sends_between(result: RunResult, start: int, end: int, type_: str = "ok") -> int:
    return sum(1 for e in events(result) if e["f"] == "send" and e["type"] == type_ and start <= e["time"] <= end)


def sends_invoked_between(result: RunResult, start: int, end: int, type_: str = "ok",
                          key: str | None = None) -> list[tuple[int, int]]:
    """(invoke, completion) times of the sends invoked after `start` that completed as `type_` before `end` (the
    run's sends table: each send paired with its invocation); with `key`, only the sends to that partition. Unlike
    `sends_between`, a send already in flight at `start` does not count: what it shows is the cluster's answer to
    writes made after an event, however long the machine took to get there."""
    columns = ["key", "type", "invoke_time", "complete_time"]
    rows = pq.read_table(result.run_dir / SENDS_FILE, columns=columns).to_pylist()
    return sorted((r["invoke_time"], r["complete_time"]) for r in rows if r["type"] == type_
                  and (key is None or r["key"] == key)
                  and r["complete_time"] is not None and start < r["invoke_time"] and r["complete_time"] < end)


def leader_changes(result: RunResult, key: str) -> list[tuple[int, int | None, list[int] | None]]:
    """(time, leader, isr) each time the observed leader of `key` changed."""
    out: list[tuple[int, int | None, list[int] | None]] = []
    for s in samples(result):
        if s["key"] == key and (not out or out[-1][1] != s["leader"]):
            out.append((s["time"], s["leader"], s["isr"]))
    return out


class _ClientLog(logging.Handler):
    """The workload clients' log lines of a run (in-process librdkafka and out-of-process workers both log to
    `client_logger()`)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def run_logging_clients(chaos_run: Any, scenario: dict[str, Any]) -> tuple[RunResult, list[str]]:
    """`chaos_run(scenario)` with the clients' log captured at info (librdkafka logs a request's timeout,
    REQTMOUT, there; the Java worker which transaction protocol it speaks)."""
    log, client_log = _ClientLog(), client_logger()
    level = client_log.level
    client_log.addHandler(log)
    client_log.setLevel(logging.INFO)
    try:
        return chaos_run(scenario), log.lines
    finally:
        client_log.removeHandler(log)
        client_log.setLevel(level)


def readers(result: RunResult) -> dict[str, set[tuple[str, int]]]:
    """(key, value) of what each standalone reader read, by its isolation level (its `assign` op names it)."""
    history = events(result)
    isolation = {e["process"]: e["value"]["isolation"] for e in history
                 if e["f"] == "assign" and e["type"] == "invoke" and isinstance(e["value"], dict)}
    out: dict[str, set[tuple[str, int]]] = {level: set() for level in isolation.values()}
    for e in history:
        if e["f"] == "poll" and e["type"] == "ok" and e["process"] in isolation:
            out[isolation[e["process"]]] |= {(key, value) for op in e["value"] if len(op) > 1
                                             for key, records in op[1].items() for _, value in records}
    return out


def txn_sends(result: RunResult, type_: str) -> set[tuple[str, int]]:
    """(key, value) of the sends of the transactions that completed as `type_` (ok: committed, fail: aborted)."""
    return {(m[1], m[2][1] if isinstance(m[2], list) else m[2]) for e in events(result)
            if e["f"] == "txn" and e["type"] == type_ for m in e["value"] if m[0] == "send"}
