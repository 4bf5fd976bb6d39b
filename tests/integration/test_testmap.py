"""The run as a test map (harness.testmap): a user's own workload and checker plugged into a real run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.harness.testmap import Checker, RunContext, Workload
from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.queue import QueueWorkload

pytestmark = pytest.mark.cluster

PHANTOM = 10**12  # a value no producer writes

CONTROL = {"name": "testmap", "duration_s": 6, "cluster": {"nodes": 3},
           "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
           "workload": {"producers": 1, "rate": 100}}


class PhantomWrite:
    """A workload that claims one acknowledged send it never made: the checker must find it missing."""

    def start(self, ctx: RunContext) -> None:
        process = ctx.history.new_process()
        key = ctx.keys[0]
        ctx.history.record(process, "invoke", "send", [["send", key, PHANTOM]])
        ctx.history.record(process, "ok", "send", [["send", key, [None, PHANTOM]]])

    def progress(self) -> str:
        return "phantom 1"

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        pass

    def final_read(self, ctx: RunContext) -> dict[str, Any] | None:
        return None


class OkSends:
    """A user checker: counts acknowledged sends in the stored history; a run without any is a violation."""

    def check(self, run_dir: Path) -> dict[str, Any]:
        ok = 0
        for line in (run_dir / "history.jsonl").read_text().splitlines():
            event = json.loads(line)
            ok += event["f"] == "send" and event["type"] == "ok"
        violations = [] if ok else [{"name": "no-acknowledged-sends", "key": "", "reason": "nothing was written"}]
        return {"ok_sends": ok, "violations": violations}


def test_parts_satisfy_the_protocols() -> None:
    assert isinstance(QueueWorkload(WorkloadConfig()), Workload)
    assert isinstance(PhantomWrite(), Workload)
    assert isinstance(OkSends(), Checker)


def test_user_workload_and_checker_join_the_run(chaos_run) -> None:
    result = chaos_run(CONTROL, workloads=[QueueWorkload(WorkloadConfig(producers=1, rate=100)), PhantomWrite()],
                       checkers=[OkSends()])
    found = result.results["checkers"]["OkSends"]
    history_oks = result.results["run"]["op_counts"]
    assert found["ok_sends"] > 1 and found["violations"] == []
    assert result.results["complete"]  # the queue workload's final drain still ran and finished
    missing = [i for name in ("lost-write", "unseen") for i in result.results["anomalies"].get(name, [])]
    assert any(str(PHANTOM) in json.dumps(i) for i in missing), \
        f"the phantom send is not reported missing: {missing[:3]} (op counts {history_oks})"
