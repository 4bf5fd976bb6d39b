"""The report package: geometry as pure functions, templates that escape, and the sections added later
(feature levels, faults active at an anomaly, health and availability when the results carry them)."""

from __future__ import annotations

import json
from pathlib import Path

from kafka_chaos.report import render_report
from kafka_chaos.report.geometry import consecutive_runs, fmt_num, label_lanes, nice_max, nice_step
from kafka_chaos.report.view import elr_label
from tests.unit.report.fake_run import make_run


def test_nice_steps_and_limits() -> None:
    assert nice_step(100) == 20.0 and nice_step(7, 7) == 1.0 and nice_step(0) == 1.0
    assert nice_max(83) == 100.0 and nice_max(0) == 1.0
    assert fmt_num(25_000) == "25k" and fmt_num(1500) == "1.5k" and fmt_num(12) == "12"


def test_labels_take_the_first_free_lane() -> None:
    # three labels 100 px wide at x = 0, 50, 120: the second overlaps the first, the third fits after the first
    assert label_lanes([0, 50, 120], [100, 100, 100]) == [0, 1, 0]
    assert label_lanes([0, 1, 2], [10, 10, 10], max_lanes=2) == [0, 1, 0]  # out of lanes: the first to free


def test_series_are_cut_where_a_bucket_is_missing() -> None:
    points = [(0, 1.0), (1, 2.0), (4, 3.0), (5, 1.0), (7, 0.5)]
    assert consecutive_runs(points) == [[(0, 1.0), (1, 2.0)], [(4, 3.0), (5, 1.0)], [(7, 0.5)]]
    assert consecutive_runs([]) == []


def test_elr_shows_the_versions_default_when_not_set() -> None:
    assert elr_label({"cluster": {"kafka_version": "4.3.1"}}) == "ELR on (Kafka 4.3.1's default)"
    assert elr_label({"cluster": {"kafka_version": "4.0.1"}}) == "ELR off (Kafka 4.0.1's default)"
    assert elr_label({"cluster": {"kafka_version": "4.0.1", "elr": True}}) == "ELR on"


def test_elr_set_by_the_brokers_feature_setting_is_shown_as_the_model_reads_it() -> None:
    from kafka_chaos.reference_model.config import RunConfig

    cfg = {"cluster": {"kafka_version": "4.0.1"}, "kafka_settings": {"eligible.leader.replicas.version": "1"}}
    assert RunConfig.from_scenario(cfg).elr is True
    assert elr_label(cfg) == "ELR on"  # not "off (Kafka 4.0.1's default)": the model judged the run with ELR on


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_text_from_the_run_is_escaped(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = _results(run.run_dir)
    results["violations"][0]["reason"] = "<script>alert(1)</script>"
    results["anomalies"]["lost-write"][0]["reason"] = "<script>alert(1)</script>"
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    assert "<script>" not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_anomaly_rows_name_the_faults_active_then(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    page = render_report(run.run_dir)
    row = page[page.index('data-anomaly="lost-write"'):]
    row = row[: row.index("</table>")]
    assert 'class="faults-then"' in row and "kill" in row  # the lost write happened during the kill of node 2


def test_health_and_availability_sections_when_present(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    page = render_report(run.run_dir)
    assert 'id="health"' not in page and 'id="availability"' not in page
    results = _results(run.run_dir)
    results["health"] = {"min_insync_replicas": 2, "under_replicated_s": 4.5, "under_min_isr_s": 1.25,
                         "offline_s": 0.0, "controllers": [1, 3], "series": []}
    results["availability"] = {"share": 0.8, "windows": [
        {"key": "chaos/0", "kind": "send", "start_s": 10.0, "end_s": 16.5, "duration_s": 6.5, "faults": ["kill"],
         "predicted_s": 4.0, "finding": "unavailable-longer-than-expected", "causes": ["no leader until 16.2 s"]}]}
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    health = page[page.index('id="health"'):]
    assert "1.25 s" in health[:600] and "1, 3" in health[:600]
    windows = page[page.index('id="availability-windows"'):]
    windows = windows[: windows.index("</table>")]
    assert "unavailable-longer-than-expected" in windows and "no leader until 16.2 s" in windows and "6.5" in windows
    assert "<details><summary>1 event</summary>" in windows  # the events folded below the one-line cause
    assert "80.0%" in page
    assert "Partition health: counts per sample" not in page, "no series: no panel"
    results["health"]["series"] = [
        {"time": t * 1_000_000_000, "partitions": 3, "under_replicated": u, "under_min_isr": m, "offline": 0}
        for t, u, m in ((1, 0, 0), (12, 2, 1), (17, 0, 0))]
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    panel = page[page.index("Partition health: counts per sample"):]
    assert "under min ISR partitions" in panel and "under-replicated partitions" in panel


def test_campaign_matrix_marks_a_configuration_violating_if_any_seed_did(tmp_path: Path) -> None:
    from kafka_chaos.report.campaign import matrix, render_index

    def run(i: int, acks: str, faults: str, passed: bool | None) -> dict:
        done = passed is not None
        return {"index": i, "label": f"r{i}", "axes": {"workload.acks": acks}, "fault_set": faults,
                "status": "done" if done else "pending", "passed": passed, "anomaly_counts": {}, "complete": True,
                "run_dir": str(tmp_path / f"r{i}"), "config": f"acks={acks}"}

    runs = [run(0, "1", "leader-kill", True), run(1, "1", "leader-kill", False), run(2, "all", "leader-kill", True),
            run(3, "all", "isolation", None)]
    m = matrix(runs)
    assert m["columns"] == ["leader-kill", "isolation"]
    assert m["cells"][("workload.acks=1", "leader-kill")] == "violation"  # one seed of two violated
    assert m["cells"][("workload.acks=all", "leader-kill")] == "pass"
    assert m["cells"][("workload.acks=all", "isolation")] == "pending"
    page = render_index({"campaign": "c", "campaign_id": "c-1", "done": 3, "total": 4, "failed": 1, "runs": runs},
                        tmp_path)
    first = page[page.index('id="runs-by-verdict"'):]
    assert first.index(">r1<") < first.index(">r0<")  # failures first
    assert page.count('class="cell violation"') == 1 and page.count('class="cell pass"') == 1


def test_junit_escapes_and_counts(tmp_path: Path) -> None:
    import xml.etree.ElementTree as ET

    from kafka_chaos.report.junit import Case, write_junit

    path = write_junit(tmp_path / "junit.xml", "s", [Case("a<b", "c", failure="lost & <found>", failure_message="1"),
                                                     Case("ok", "c"), Case("later", "c", skipped="not run")])
    root = ET.parse(path).getroot()
    assert (root.get("tests"), root.get("failures"), root.get("skipped")) == ("3", "1", "1")
    assert root[0].get("name") == "a<b" and root[0][0].text == "lost & <found>"


def test_results_that_do_not_fit_the_model_are_reported_not_guessed(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = _results(run.run_dir)
    results["anomaly_counts"] = {"lost-write": "many"}
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    assert "NOT CHECKED" in page and "results.json does not fit the results model at anomaly_counts.lost-write" in page


def test_checker_and_spark_results_fit_one_model() -> None:
    from kafka_chaos.checker.results import RunResults

    checker_like = {"valid": False, "complete": True, "anomaly_counts": {"lost-write": 1},
                    "anomalies": {"lost-write": [{"key": "t/0", "value": 3, "ops": [1, 9], "verdict": "permitted",
                                                  "reason": "acks=1", "times": [5, 9]}]},
                    "violations": [], "stats": {}, "faults": {"windows": []}}
    out = RunResults.model_validate(checker_like).to_json_dict()
    assert out["anomalies"]["lost-write"][0]["times"] == [5, 9]  # a kind's own fields are kept
    assert "health" not in out and "availability" not in out  # absent sections stay absent
    assert RunResults.model_validate(out).count("lost-write") == 1


def test_the_final_drain_is_a_band_of_its_own(tmp_path: Path) -> None:
    page = render_report(make_run(tmp_path / "run").run_dir)
    assert page.count('class="drain-band"') == 1 and "final drain: every partition read" in page
    cut = render_report(make_run(tmp_path / "cut", complete=False).run_dir)
    assert 'class="drain-band"' not in cut  # a run cut short never reached its drain


def test_cluster_events_and_availability_windows_on_the_timeline(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    (run.run_dir / "events.jsonl").write_text(
        json.dumps({"time_s": 11.2, "node": 1, "kind": "raft-state", "text": "node 1 became leader in epoch 4"})
        + "\nnot json\n")
    results = _results(run.run_dir)
    results["availability"] = {"share": 0.9, "windows": [
        {"key": "chaos/0", "kind": "send", "start_s": 10.0, "end_s": 14.0, "duration_s": 4.0, "faults": ["kill"],
         "predicted_s": 6.0, "finding": None, "causes": ["node 1 became leader in epoch 4"]}]}
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    assert page.count('class="cluster-event"') == 1 and "node 1 raft-state: node 1 became leader in epoch 4" in page
    assert page.count('class="availability-window"') == 1 and "no successful send on chaos/0 for 4.0 s" in page


def test_what_the_crash_took_per_node_and_partition(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    assert 'id="crash"' not in render_report(run.run_dir)
    results = _results(run.run_dir)
    lost = {"2": {"files": 7, "log_bytes": 81920, "partitions": {
        "chaos-0": {"end_offset_before": 1200, "end_offset_after": 950},
        "chaos-1": {"end_offset_before": 800, "end_offset_after": None}}}}
    results.setdefault("faults", {}).setdefault("windows", []).append(
        {"f": "power-loss", "value": {"nodes": [2], "lose": "unsynced", "lost": lost}, "nodes": [2],
         "start": 5 * 10**9, "end": 9 * 10**9, "heal": "power-on", "index": 3})
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    table = page[page.index('id="crash-table"'):]
    table = table[: table.index("</table>")]
    assert "<td>chaos-0</td><td>1200</td><td>950</td><td>250</td>" in table
    assert "<td>chaos-1</td><td>800</td><td>—</td><td>800</td>" in table
    assert "<td>unsynced</td><td>7</td><td>81920</td>" in table
