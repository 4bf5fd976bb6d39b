"""Helpers for the documented-scenario chaos suites: read what a run's history and state samples show."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kafka_chaos.harness.run import RunResult

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios"


def events(result: RunResult) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (result.run_dir / "history.jsonl").read_text().splitlines()]


def samples(result: RunResult) -> list[dict[str, Any]]:
    path = result.run_dir / "state.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def topic_of(result: RunResult) -> str:
    """The run's topic, from the history's `topic` event (a shared cluster gives each run its own)."""
    (topic,) = [e["value"]["topic"] for e in events(result) if e["process"] == "harness" and e["f"] == "topic"]
    return str(topic)


def nemesis(result: RunResult, f: str) -> list[dict[str, Any]]:
    """The `info` events (the fault took effect) of nemesis op `f`, in order."""
    return [e for e in events(result) if e["process"] == "nemesis" and e["f"] == f and e["type"] == "info"]


def sends_between(result: RunResult, start: int, end: int, type_: str = "ok") -> int:
    return sum(1 for e in events(result) if e["f"] == "send" and e["type"] == type_ and start <= e["time"] <= end)


def leader_changes(result: RunResult, key: str) -> list[tuple[int, int | None, list[int] | None]]:
    """(time, leader, isr) each time the observed leader of `key` changed."""
    out: list[tuple[int, int | None, list[int] | None]] = []
    for s in samples(result):
        if s["key"] == key and (not out or out[-1][1] != s["leader"]):
            out.append((s["time"], s["leader"], s["isr"]))
    return out
