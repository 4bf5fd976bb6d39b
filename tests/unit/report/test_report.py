"""The HTML report on a small fake run directory: verdict, configuration, anomaly rows, fault bands, state
marks, node logs; incomplete and partial runs; escaping; fault pairing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.report import REPORT_FILE, load_run, render_report, write_report
from kafka_chaos.report.data import fault_bands, scan_history
from tests.unit.report.fake_run import SEC, make_run


def _section(page: str, start_id: str, end_id: str) -> str:
    a = page.index(f'id="{start_id}"')
    return page[a : page.index(f'id="{end_id}"', a)]


def test_report_of_a_failed_run(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    out = write_report(run.run_dir)
    assert out == run.run_dir / REPORT_FILE
    page = out.read_text()

    # verdict first, with the violations count and the configuration in one line
    assert page.index('id="verdict"') < page.index('id="timeline"')
    assert re.search(r'class="verdict fail" id="verdict"><span class="big">FAIL</span>', page)
    assert "<b>1 violation</b> (lost-write × 1)" in page
    config = _section(page, "config", "complete")
    for part in (
        "Kafka 4.0.0",
        "3 nodes (3 controllers)",
        "RF 3",
        "min.insync 2",
        "acks=1",
        "idempotence off",
        "unclean off",
        "ELR off",
        "seed 7",
    ):
        assert part in config, part
    assert 'id="incomplete"' not in page

    # the anomaly row: key, value, offset, both ops with their process / f / outcome, verdict and reason
    table = page[page.index('data-anomaly="lost-write"') :]
    row = table[
        table.index('<tr class="anomaly-row">') : table.index("</tr>", table.index('class="anomaly-row"'))
    ]
    assert "chaos/0" in row
    assert f'href="#h{run.lost_writer}"' in row and f'href="#h{run.lost_reader}"' in row
    assert re.search(r"p=[0-2] send invoke→ok", row)
    assert "p=3 poll invoke→ok" in row
    assert '<span class="badge violation">violation</span>' in row
    assert "acks=1 loss needs a leader crash" in row
    # the cited history lines are embedded, and anchored
    assert f'<tr id="h{run.lost_writer}">' in page
    assert 'href="history.jsonl"' in page

    # timeline: fault bands with their targets, leader change ticks, throughput and latency panels
    svg = page[page.index("<svg") : page.index("</svg>")]
    assert "kill n2" in svg
    assert "partition isolate [1]|[2,3]" in svg
    assert "latency n3" in svg
    assert "chaos/1: leader 2 → none" in svg
    assert "chaos/1: leader none → 1 (epoch 1)" in svg
    assert "ISR [1,2,3] → [1,3]" in svg
    assert "Throughput" in svg and "Send latency" in svg and "Unseen" in svg
    assert "t=" in svg and "lost-write chaos/0: violation" in svg

    # node logs, relative links
    assert '<a class="log" href="logs/node-1.log">logs/node-1.log</a>' in page
    assert "<script" not in page.lower()


def test_history_stream_counts_and_latency(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    events = [json.loads(line) for line in (run.run_dir / "history.jsonl").read_text().splitlines()]
    scan = scan_history(run.run_dir / "history.jsonl", [run.lost_writer])
    sends_ok = sum(1 for e in events if e["f"] == "send" and e["type"] == "ok")
    assert sum(n for (f, t, _), n in scan.counts.items() if (f, t) == ("send", "ok")) == sends_ok
    assert sum(n for (f, t, _), n in scan.counts.items() if f == "send") == sum(
        1 for e in events if e["f"] == "send" and e["type"] != "invoke"
    )
    assert scan.drain_complete is True and not scan.cut_last_line and not scan.bad_lines
    assert scan.lines[run.lost_writer].type == "invoke"
    assert scan.lines[scan.partner[run.lost_writer]].type == "ok"
    # send latency reached 1.5 s while node 2 was down
    assert max(p[2] for p in scan.latency_percentiles.values()) == 1500 * 10**6


def test_incomplete_run_with_a_cut_last_line(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", complete=False, cut_last_line=True)
    scan = scan_history(run.run_dir / "history.jsonl")
    assert scan.cut_last_line and not scan.bad_lines and scan.drain_complete is None
    page = write_report(run.run_dir).read_text()
    banner = page[page.index('id="incomplete"') :]
    banner = banner[: banner.index("</div>")]
    assert "Incomplete run" in banner and "cut short" in banner and "unseen" in banner
    assert "last line was cut" in banner


def test_malformed_line_in_the_middle_is_reported_not_fatal(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    hist = run.run_dir / "history.jsonl"
    lines = hist.read_text().splitlines(keepends=True)
    lines.insert(10, "{not json\n")
    hist.write_text("".join(lines))
    scan = scan_history(hist)
    assert scan.bad_lines == [11] and not scan.cut_last_line
    assert "1 malformed line(s)" in render_report(run.run_dir)


def test_a_damaged_history_gives_a_banner_naming_its_lines_not_a_traceback(tmp_path: Path) -> None:
    """Lines the checker refuses (an unknown f, a time that is not an integer, an array, an event without a
    process) are listed and skipped by the report's one reader pass; what the rest holds is still drawn."""
    run = make_run(tmp_path / "run")
    hist = run.run_dir / "history.jsonl"
    lines = hist.read_text().splitlines(keepends=True)
    damaged = ['{"index": 9, "time": 1, "process": 1, "type": "ok", "f": "sned", "value": []}\n',
               '{"index": 10, "time": "soon", "process": "nemesis", "type": "info", "f": "kill"}\n',
               "[1, 2]\n", '{"index": 12, "time": 5}\n']
    hist.write_text("".join([*lines[:9], *damaged, *lines[9:]]))
    scan = scan_history(hist)
    assert scan.bad_lines == [10, 11, 12, 13] and scan.error is None and not scan.complete
    assert scan.events == len(lines) and scan.drain_complete is True
    page = render_report(run.run_dir)
    assert "4 malformed line(s) (skipped): 10, 11, 12, 13" in page
    assert "kill n2" in page  # the timeline still comes from the history


def test_an_unreadable_history_is_named_on_the_page(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from kafka_chaos.checker.history_reader import HistoryReader

    def failing_read(*_: object, **__: object) -> None:
        raise OSError(5, "Input/output error")

    run = make_run(tmp_path / "run")
    monkeypatch.setattr(HistoryReader, "read", failing_read)
    page = render_report(run.run_dir)
    missing = page[page.index('id="missing"') :]
    assert "history.jsonl could not be read" in missing[:600] and "Input/output error" in missing[:600]


def test_missing_files_still_render(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", with_results=False, with_state=False)
    page = render_report(run.run_dir)
    assert "NOT CHECKED" in page and "kafka-chaos check" in page
    missing = page[page.index('id="missing"') :]
    assert "state.jsonl" in missing[:400] and "results.json" in missing[:400]
    assert "kill n2" in page  # the timeline still comes from the history
    assert "not available (no state.jsonl)" in page

    empty = tmp_path / "empty"
    empty.mkdir()
    page = render_report(empty)
    assert "NOT CHECKED" in page and "history.jsonl" in page and "configuration unknown" in page

    with pytest.raises(KafkaChaosError):
        render_report(tmp_path / "nope")


def test_results_alone_render_with_stats_throughput(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "results.json").write_text(
        json.dumps(
            {
                "valid": True,
                "complete": True,
                "anomaly_counts": {},
                "anomalies": {},
                "violations": [],
                "stats": {
                    "duration_ns": 5 * SEC,
                    "throughput": {
                        "bucket_ns": SEC,
                        "send_ok": [5, 6, 7, 8, 9, 1],
                        "poll_ok": [1, 1, 1, 1, 1, 1],
                    },
                },
            }
        )
    )
    page = render_report(run_dir)
    assert '<span class="big">PASS</span>' in page and "0 violations" in page
    assert "No anomalies found." in page
    assert "send ok" in page  # from stats.throughput


def test_everything_from_files_is_escaped(tmp_path: Path) -> None:
    evil = '<script>alert("x")</script>'
    run = make_run(tmp_path / "run", key_prefix=evil)
    results = json.loads((run.run_dir / "results.json").read_text())
    results["anomalies"]["lost-write"][0]["reason"] = "<img src=x onerror=alert(1)>"
    (run.run_dir / "results.json").write_text(json.dumps(results))
    with (run.run_dir / "scenario.toml").open("a") as fh:
        fh.write('\n[extra]\nnote = "<b>bold</b>"\n')
    (run.run_dir / "logs" / "<b>node&4.log").write_text("x")
    page = render_report(run.run_dir)
    assert "<script" not in page.lower()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;/0" in page
    assert "<b>node" not in page and 'href="logs/%3Cb%3Enode%264.log"' in page


def test_conformance_and_model_summary(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = json.loads((run.run_dir / "results.json").read_text())
    inst = {
        "key": "chaos/1",
        "ops": [run.kill_index],
        "times": [10 * SEC],
        "verdict": "violation",
        "reason": "leader epoch went from 5 to 4",
        "epochs": [5, 4],
    }
    results["anomalies"]["leader-epoch-regression"] = [inst]
    results["anomaly_counts"]["leader-epoch-regression"] = 1
    results["violations"].append({"name": "leader-epoch-regression", **inst})
    results["model"] = {
        "prediction": {"loss": "none", "availability": "writes fail with NotEnoughReplicas"},
        "observed": {"loss": "1 value", "availability": "writes fail with NotEnoughReplicas"},
    }
    (run.run_dir / "results.json").write_text(json.dumps(results))
    page = render_report(run.run_dir)
    conf = page[page.index('id="conformance"') : page.index('id="logs"')]
    assert 'data-anomaly="leader-epoch-regression"' in conf
    assert "leader epoch went from 5 to 4" in conf
    assert f'href="#h{run.kill_index}"' in conf and "nemesis kill" in conf
    assert 'id="model"' in conf and "NotEnoughReplicas" in conf and "1 value" in conf
    jepsen = page[page.index('id="anomalies"') : page.index('id="conformance"')]
    assert "leader-epoch-regression" not in jepsen
    assert "2 violations" in page


def test_without_a_model_summary_the_reference_model_still_says_what_it_expects(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    page = render_report(run.run_dir)
    expected = page[page.index('id="expected"') : page.index('id="logs"')]
    assert "not available" not in expected and 'id="expectations"' in expected
    assert "acks=1, RF=3, min.insync.replicas=2" in expected
    assert "acknowledged writes may be lost" in expected  # acks=1 under a kill: the model permits the loss
    assert "writes during kill [2]" in expected and "writes during partition" in expected
    assert 'class="mismatch"' not in expected


def test_the_expected_section_without_results(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run", with_results=False)
    page = render_report(run.run_dir)
    expected = page[page.index('id="expected"') : page.index('id="logs"')]
    assert "acknowledged writes may be lost" in expected and "not measured" in expected


def test_instances_are_capped(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = json.loads((run.run_dir / "results.json").read_text())
    many = [
        {
            "key": f"chaos/{i % 3}",
            "value": i,
            "offsets": [i, i + 7],
            "verdict": "permitted",
            "reason": "retries without idempotence",
        }
        for i in range(50)
    ]
    results["anomalies"]["duplicate"] = many
    results["anomaly_counts"]["duplicate"] = 50
    (run.run_dir / "results.json").write_text(json.dumps(results))
    data = load_run(run.run_dir, max_instances=5)
    page = render_report(run.run_dir, max_instances=5)
    assert data.max_instances == 5
    table = page[page.index('data-anomaly="duplicate"') :]
    table = table[: table.index("</table>")]
    assert table.count('class="anomaly-row"') == 5
    assert "showing 5" in page


def _ev(i: int, t: float, type_: str, f: str, value: object = None) -> dict[str, object]:
    return {"index": i, "time": int(t * SEC), "type": type_, "f": f, "value": value, "error": None}


def test_fault_bands_follow_the_checker() -> None:
    """Without results.json the bands come from checker.faults_from_history (one pairing rule)."""
    events = [
        _ev(0, 1, "invoke", "kill", {"nodes": [1]}),
        _ev(1, 1.1, "info", "kill", {"nodes": [1]}),
        _ev(2, 2, "invoke", "pause", {"nodes": [2]}),
        _ev(3, 2.1, "info", "pause", {"nodes": [2]}),
        _ev(4, 3, "invoke", "restart", {"nodes": [1]}),
        _ev(5, 3.5, "info", "restart", {"nodes": [1]}),
        _ev(6, 4, "invoke", "partition", {"shape": "halves", "groups": [[1, 2], [3]]}),
        _ev(7, 4, "info", "partition"),
        _ev(12, 7, "invoke", "heal", None),
        _ev(13, 7.3, "info", "heal", None),
        _ev(14, 8, "invoke", "stop", {"nodes": [3]}),
        _ev(15, 8.1, "info", "stop", {"nodes": [3]}),
        _ev(16, 9, "invoke", "start", {"nodes": [3]}),
        _ev(17, 9.4, "info", "start", {"nodes": [3]}),
        _ev(18, 9.5, "invoke", "kill", {"nodes": [2]}),  # never took effect nor healed
    ]
    bands = {(b.f, b.target): b for b in fault_bands(events, 10 * SEC)}
    assert bands[("kill", "n1")].start == int(1.1 * SEC) and bands[("kill", "n1")].end == int(3.5 * SEC)
    assert bands[("kill", "n1")].heal == "restart" and bands[("kill", "n1")].index == 0
    assert bands[("pause", "n2")].end is None  # never resumed
    assert bands[("partition", "halves [1,2]|[3]")].heal == "heal"
    assert bands[("stop", "n3")].heal == "start"
    assert bands[("kill", "n2")].start == int(9.5 * SEC) and bands[("kill", "n2")].end is None
    assert len(bands) == 5


def test_fault_bands_prefer_the_checked_windows(tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    results = json.loads((run.run_dir / "results.json").read_text())
    results["faults"] = {
        "end_time": 30 * SEC,
        "windows": [
            {
                "f": "pause",
                "value": {"nodes": [3]},
                "nodes": [3],
                "start": 2 * SEC,
                "end": 5 * SEC,
                "heal": "resume",
                "index": 7,
                "error": "docker: <boom>",
            }
        ],
    }
    (run.run_dir / "results.json").write_text(json.dumps(results))
    data = load_run(run.run_dir)
    assert [(b.f, b.target, b.heal) for b in data.faults] == [("pause", "n3", "resume")]
    page = render_report(run.run_dir)
    assert "pause n3" in page and "kill n2" not in page
    assert "docker: &lt;boom&gt;" in page


def test_known_defects_show_apart_from_violations(tmp_path: Path) -> None:
    """A known defect of the version in use: a PASS banner that names the bug, an amber badge on its row with
    the bug and its fix in the details, and no violation counted."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    torn = {"key": "chaos/0", "ops": [], "verdict": "known-defect", "reason": "a transaction torn by a held EndTxn",
            "defect": "KAFKA-17754", "fixed_in": "4.0.0 with transaction version 2"}
    (run_dir / "results.json").write_text(json.dumps({
        "valid": False, "complete": True, "anomaly_counts": {"G1c": 1}, "anomalies": {"G1c": [torn]},
        "violations": [], "known_defects": [{"name": "G1c", **torn}]}))
    page = render_report(run_dir)
    assert '<span class="big">PASS</span>' in page and "0 violations" in page
    assert "known defects: KAFKA-17754 × 1" in page
    row = page[page.index('data-anomaly="G1c"'):]
    assert '<span class="badge known-defect">known-defect</span>' in row
    assert "defect=&#34;KAFKA-17754&#34;" in row and "fixed_in=&#34;4.0.0 with transaction version 2&#34;" in row


def test_a_history_with_no_client_op_fails_with_its_reason(tmp_path: Path) -> None:
    """The check of a history without a send, poll or txn is no pass: the banner says FAIL and why."""
    from kafka_chaos.checker import check_run
    from kafka_chaos.checker.results import NO_CLIENT_OPS

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "history.jsonl").write_text(
        json.dumps({"index": 0, "time": 0, "process": 0, "type": "invoke", "f": "assign", "value": ["chaos/0"]})
        + "\n" + json.dumps({"index": 1, "time": 1, "process": 0, "type": "ok", "f": "assign", "value": ["chaos/0"]})
        + "\n")
    check_run(run_dir)
    page = render_report(run_dir)
    banner = page[page.index('id="verdict"') : page.index("</div>", page.index('id="verdict"'))]
    assert re.search(r'class="verdict fail" id="verdict"><span class="big">FAIL</span>', page)
    assert "PASS" not in banner and NO_CLIENT_OPS.split(":")[0] in banner and "Jepsen valid: false" in banner
