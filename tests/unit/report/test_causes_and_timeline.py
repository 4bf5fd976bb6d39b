"""An availability window's cause line (report.causes) and the timeline's start-up band (report.timeline)."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_chaos.report import load_run, render_report
from kafka_chaos.report.causes import cause_line, parse_cause
from kafka_chaos.report.timeline import STARTUP_W, X0, X1, Timeline, workload_start_s
from tests.unit.report.fake_run import SEC, make_run

FENCED = "48.5s node 2: fenced broker 1: its session has timed out. (org.apache.kafka.controller.ReplicationControl)"


def test_a_controller_failover_in_one_line() -> None:
    causes = [FENCED, "45.4s node 3: node 3 won epoch 3; its controller became active 0.1s later",
              "45.4s node 3: Raft Leader at epoch 3", "45.4s node 3: controller became active at epoch 3"]
    assert cause_line(causes, ["kill [1] 44.0s–50.0s"]) == \
        "controller failover: node 3 won epoch 3 at 45.4 s; broker 1 fenced at 48.5 s"


def test_a_fencing_alone_and_more_events_than_the_line_holds() -> None:
    causes = [FENCED] + [f"{50 + i}.0s node 1: chaos-{i}: ISR 1,2,3 → 1,3" for i in range(4)]
    line = cause_line(causes)
    assert line.startswith("broker fenced: broker 1 fenced at 48.5 s; ISR of chaos-0 now 1,3 at 50.0 s")
    assert line.endswith("(+2 more)")


def test_start_up_and_windows_without_events() -> None:
    assert cause_line(["11.1s node 1: Kafka Server started", "10.9s node 1: unfenced broker 1"]) == \
        "cluster start-up: broker 1 unfenced at 10.9 s; node 1 started at 11.1 s"
    assert cause_line([], ["kill [2] 5.0s–9.0s"]) == "fault: kill [2] 5.0s–9.0s; no cluster event logged"
    assert cause_line(["not an event"]) == "no fault and no cluster event near it"
    assert cause_line(["3.0s node 1: something else"]) == "cluster event: node 1 something else at 3.0 s"
    assert parse_cause("bad") is None


def test_the_axis_starts_where_the_workload_starts() -> None:
    tl = Timeline(60.0, 20.0)
    assert tl.x(0) == X0 and tl.x(20.0) == X0 + STARTUP_W and tl.x(60.0) == X1
    assert X0 < tl.x(10.0) < X0 + STARTUP_W
    assert Timeline(60.0).x(20.0) == X0 + (X1 - X0) / 3  # no start-up known: the whole run on one scale


def _shift_history(run_dir: Path, by_ns: int) -> None:
    """Move every event but run-start later, as if the cluster had taken `by_ns` to start."""
    lines = []
    for raw in (run_dir / "history.jsonl").read_text().splitlines():
        ev = json.loads(raw)
        if ev.get("f") != "run-start":
            ev["time"] += by_ns
        lines.append(json.dumps(ev))
    (run_dir / "history.jsonl").write_text("\n".join(lines) + "\n")


def test_cluster_start_up_is_its_own_band(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", with_results=False)
    assert workload_start_s(load_run(run.run_dir)) == 0.0
    assert 'class="startup-band"' not in render_report(run.run_dir)
    _shift_history(run.run_dir, 20 * SEC)
    assert workload_start_s(load_run(run.run_dir)) == 20.0
    page = render_report(run.run_dir)
    assert page.count('class="startup-band"') == 1 and "cluster start-up: 0–20 s" in page
    assert ">20s</text>" in page and ">10s</text>" not in page  # ticks run from the workload's start
