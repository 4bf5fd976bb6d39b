"""A run keeps its clients' own log lines in logs/clients.log, and only its own: the file handler lives as
long as the run, however the run ends."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.harness import run as run_mod

SCENARIO = {"name": "client-log", "seed": 1, "duration_s": 1, "cluster": {"nodes": 1},
            "topic": {"partitions": 1, "replication_factor": 1, "min_insync_replicas": 1}}


class _Cluster:
    """Stands in for the cluster: the run only asks it for its logs here (_execute is replaced)."""

    def save_logs(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "node-1.log").write_text("broker\n")


class _Pool:
    def get(self, spec: Any) -> _Cluster:
        return _Cluster()


def _file_handlers() -> list[logging.FileHandler]:
    return [h for h in client_logger().handlers if isinstance(h, logging.FileHandler)]


def _run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, line: str,
         interrupt: bool = False) -> tuple[list[list[str]], Path]:
    seen: list[list[str]] = []

    def execute(ctx: Any, workloads: Any, nemeses: Any) -> None:
        seen.append([h.baseFilename for h in _file_handlers()])
        client_logger().info("%s", line)  # as a worker's stderr line or librdkafka's own line arrives
        client_logger().debug("not kept: below info")
        if interrupt:
            raise KeyboardInterrupt

    monkeypatch.setattr(run_mod, "_execute", execute)
    monkeypatch.setattr(run_mod, "_write_resolved", lambda *args: None)
    out = tmp_path / "results"
    if interrupt:
        with pytest.raises(KeyboardInterrupt):
            run_mod.run_scenario(SCENARIO, out=out, pool=_Pool())  # type: ignore[arg-type]
        run_dir = next(out.iterdir())
    else:
        run_dir = run_mod.run_scenario(SCENARIO, out=out, pool=_Pool()).run_dir  # type: ignore[arg-type]
    return seen, run_dir


def test_the_run_writes_its_clients_lines_to_its_folder_and_detaches_afterwards(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    level = client_logger().level
    seen, first = _run(tmp_path / "a", monkeypatch, "worker-1: speaks transaction.version=2")
    assert seen == [[str((first / "logs" / "clients.log").resolve())]]
    assert _file_handlers() == [] and client_logger().level == level
    _, second = _run(tmp_path / "b", monkeypatch, "worker-1: joined the group")
    first_log = (first / "logs" / "clients.log").read_text()
    assert "INFO worker-1: speaks transaction.version=2" in first_log
    assert "joined the group" not in first_log and "below info" not in first_log
    assert "joined the group" in (second / "logs" / "clients.log").read_text()
    assert (second / "logs" / "node-1.log").read_text() == "broker\n"  # the nodes' logs beside it


def test_an_interrupted_run_keeps_its_lines_and_detaches_too(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    seen, run_dir = _run(tmp_path, monkeypatch, "worker-2: cut short", interrupt=True)
    assert len(seen[0]) == 1
    assert _file_handlers() == []
    assert "worker-2: cut short" in (run_dir / "logs" / "clients.log").read_text()
