"""history.jsonl → tables: completeness, cut runs, unfinished ops, nemesis and harness events, Parquet."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from checker_histories import K1, History, K

import kafka_chaos.checker.analysis
import kafka_chaos.checker.verdicts
from kafka_chaos.checker import HistoryError, check_run, history_to_tables, read_tables
from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.checker.tables import parse_history
from kafka_chaos.faults.windows import faults_from_history


@pytest.fixture(autouse=True)
def no_reference_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_chaos.checker.analysis, "load_judge", lambda: None)


def clean() -> History:
    h = History(run_start={"scenario": "demo", "acks": "all"})
    h.send(0, K, 1, 0)
    h.send(0, K1, 2, 0)
    h.poll(1, {K: [(0, 1)], K1: [(0, 2)]})
    return h


def test_tables_have_the_shared_schemas_and_rows(tmp_path: Path) -> None:
    h = clean()
    h.txn(2, [["send", K, 3], ["poll"]], [["send", K, [1, 3]], ["poll", {K1: [[0, 2]]}]])
    h.drain()
    t = history_to_tables(h.write(tmp_path))
    assert t.sends.schema.equals(SENDS_SCHEMA) and t.polls.schema.equals(POLLS_SCHEMA)
    assert t.sends.to_pydict() == {
        "value": [1, 2, 3],
        "key": [K, K1, K],
        "offset": [0, 0, 1],
        "process": [0, 0, 2],
        "op_index": [1, 3, 7],
        "type": ["ok", "ok", "ok"],
        "invoke_time": [2000, 4000, 8000],
        "complete_time": [3000, 5000, 9000],
    }
    assert t.polls.to_pydict() == {
        "value": [1, 2, 2],
        "key": [K, K1, K1],
        "offset": [0, 0, 0],
        "process": [1, 1, 2],
        "op_index": [6, 6, 8],
        "type": ["ok", "ok", "ok"],
        "time": [7000, 7000, 9000],
    }
    m = t.meta
    assert m.complete and m.drain_complete is True and not m.truncated
    assert m.run_start == {"scenario": "demo", "acks": "all"}
    assert m.op_counts == {"send": {"ok": 2, "fail": 0, "info": 0}, "poll": {"ok": 1, "fail": 0, "info": 0},
                           "txn": {"ok": 1, "fail": 0, "info": 0}}  # fmt: skip
    assert m.ok_poll_times.tolist() == [7000, 9000]


def test_only_ok_polls_carry_records() -> None:
    h = History()
    h.poll(1, {}, type_="fail")
    h.poll(2, {}, type_="info")
    h.poll(3, {K: []})
    t = parse_history(h.text().encode())
    assert t.polls.num_rows == 0
    assert t.meta.op_counts["poll"] == {"ok": 1, "fail": 1, "info": 1}
    assert t.meta.ok_poll_times.tolist() == [h.events[-1]["time"]]


def test_a_cut_last_line_is_dropped_and_the_run_is_incomplete(tmp_path: Path) -> None:
    h = clean()
    h.send(0, K, 5, 1)
    h.poll(1, {K: [(1, 5)]})
    h.drain()
    cut = len(json.dumps(h.events[-1])) // 2 + 1  # cut in the middle of the drain-complete line
    run = h.write(tmp_path, cut=cut)
    t = history_to_tables(run)
    assert t.meta.truncated and not t.meta.complete and t.meta.drain_complete is None
    assert t.meta.events == len(h.events) - 1
    r = check_run(run).to_json_dict()
    assert r["complete"] is False and r["run"]["truncated"] is True
    assert r["valid"] is True and r["anomaly_counts"] == {}


def test_a_cut_in_the_middle_of_an_op_leaves_it_unfinished(tmp_path: Path) -> None:
    h = clean()
    inv = h.event(0, "invoke", "send", [["send", K, 9]])
    h.event(0, "ok", "send", [["send", K, [1, 9]]])
    run = h.write(tmp_path, cut=10)  # the ok completion of 9 is cut
    t = history_to_tables(run)
    row = t.sends.filter(pa.compute.equal(t.sends["value"], 9)).to_pylist()
    assert row == [{"value": 9, "key": K, "offset": None, "process": 0, "op_index": inv, "type": "info",
                    "invoke_time": h.events[inv]["time"], "complete_time": None}]  # fmt: skip
    assert t.meta.op_counts["send"]["unfinished"] == 1 and t.meta.op_counts["send"]["info"] == 1
    r = check_run(run).to_json_dict()
    assert r["complete"] is False and r["anomaly_counts"] == {}  # info sends are never unseen


def test_without_drain_complete_true_the_run_is_incomplete(tmp_path: Path) -> None:
    h = clean()
    assert not history_to_tables(h.write(tmp_path / "a")).meta.complete
    h.drain(ok=False)
    t = history_to_tables(h.write(tmp_path / "b"))
    assert t.meta.drain_complete is False and not t.meta.complete and not t.meta.truncated


def test_last_line_without_newline_is_kept_if_whole() -> None:
    h = clean()
    h.drain()
    t = parse_history(h.text().rstrip("\n").encode())
    assert t.meta.complete and not t.meta.truncated


def test_unknown_processes_and_jepsens_diagnostic_op_are_ignored() -> None:
    h = clean()
    h.event("observer", "info", "sample", {"x": 1})
    h.event(7, "invoke", "debug-topic-partitions", [K])
    h.event(7, "ok", "debug-topic-partitions", {"whatever": True})
    h.event("harness", "info", "phase", "drain")
    h.drain()
    t = parse_history(h.text().encode())
    assert t.meta.complete and t.meta.ignored == 3 and t.sends.num_rows == 2


@pytest.mark.parametrize(("event", "expected"), [
    ({"type": "okay", "f": "send", "value": [["send", K, [0, 1]]]}, r"line 3: type 'okay'.*invoke, ok, fail, info"),
    ({"type": "ok", "f": "sned", "value": [["send", K, [0, 1]]]}, r"line 3: f 'sned'.*send, poll, txn"),
    ({"type": "ok", "f": "poll", "value": {K: [[0, 1]]}}, r"line 3: value .*list of micro-ops"),
    ({"type": "ok", "f": "poll", "value": [["poll", [[0, 1]]]]}, r'line 3: micro-op .*\["poll", \{key'),
    ({"type": "ok", "f": "poll", "value": [["poll", {K: [[0, 1, 2]]}]]}, r"line 3: records .*\[offset, value\]"),
])
def test_a_client_op_of_the_wrong_shape_names_its_line_and_what_was_expected(
        tmp_path: Path, event: dict[str, Any], expected: str) -> None:
    h = History()
    h.send(0, K, 0, 0)  # lines 1-2
    h.event(1, event["type"], event["f"], event["value"])  # line 3 (a completion needs no invoke to be read)
    h.drain()
    h.write(tmp_path)
    with pytest.raises(HistoryError, match=expected):
        history_to_tables(tmp_path)


def test_a_damaged_line_before_the_end_is_an_error(tmp_path: Path) -> None:
    h = clean()
    h.drain()
    lines = h.text().splitlines()
    lines[2] = lines[2][:15]
    (tmp_path / "history.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(HistoryError, match="line 3"):
        history_to_tables(tmp_path)


def test_missing_history_says_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(HistoryError, match=r"history\.jsonl"):
        history_to_tables(tmp_path)
    with pytest.raises(HistoryError, match="no run directory"):
        check_run(tmp_path / "nope").to_json_dict()


def test_check_run_writes_parquet_and_results(tmp_path: Path) -> None:
    h = clean()
    h.drain()
    run = h.write(tmp_path)
    r = check_run(run).to_json_dict()
    on_disk = json.loads((run / "results.json").read_text())
    assert on_disk["valid"] is True and on_disk["complete"] is True
    assert set(on_disk) >= {"valid", "complete", "anomaly_counts", "anomalies", "violations", "stats"}
    assert on_disk["anomaly_counts"] == r["anomaly_counts"] == {}
    sends, polls = read_tables(run)
    t = history_to_tables(run)
    assert sends.equals(t.sends) and polls.equals(t.polls)


def test_check_run_without_write_writes_nothing(tmp_path: Path) -> None:
    h = clean()
    h.drain()
    run = h.write(tmp_path)
    check_run(run, write=False).to_json_dict()
    assert sorted(p.name for p in run.iterdir()) == ["history.jsonl"]


def test_faults_from_history_pairs_faults_with_their_heals() -> None:
    h = History()
    h.nemesis("kill", {"nodes": [1]})
    h.nemesis("partition", {"shape": "halves"})
    h.nemesis("pause", {"nodes": [2]})
    h.nemesis("restart", {"nodes": [1]})
    h.nemesis("heal", None)
    h.event("nemesis", "invoke", "latency", {"ms": 100})  # never took effect: counts from its invoke
    t = parse_history(h.text().encode())
    fs = faults_from_history(t.meta.nemesis, end_time=t.meta.end_time)
    got = [(w.f, w.nodes, w.start, w.end, w.heal) for w in fs.windows]
    assert got == [
        ("kill", (1,), 2000, 8000, "restart"),
        ("partition", (), 4000, 10000, "heal"),
        ("pause", (2,), 6000, None, None),
        ("latency", (), 11000, None, None),
    ]
    assert [w.f for w in fs.active(5000)] == ["kill", "partition"]
    assert fs.kinds == {"kill", "partition", "pause", "latency"}


def test_verdicts_come_from_the_reference_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With kafka_chaos.reference_model.verdicts importable, every instance gets its judge's verdict."""
    calls: list[tuple[str, dict[str, Any], Any, Any]] = []

    class Verdict:
        def __init__(self, verdict: str, reason: str) -> None:
            self.verdict, self.reason = verdict, reason

    def judge(anomaly: str, instance: dict[str, Any], config: Any, faults: Any) -> Verdict:
        calls.append((anomaly, instance, config, faults))
        if anomaly == "unseen":
            return Verdict("permitted", "acks=1 after a leader crash")
        return Verdict("violation", "acks=all with min ISR 2")

    module = types.ModuleType("kafka_chaos.reference_model.verdicts")
    module.judge = judge  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "kafka_chaos.reference_model.verdicts", module)
    monkeypatch.setattr(kafka_chaos.checker.analysis, "load_judge", kafka_chaos.checker.verdicts.load_judge)
    # This stand-in model has a judge only: the configuration and faults reach it as recorded.
    monkeypatch.setattr(kafka_chaos.checker.analysis, "verdict_inputs",
                        lambda config, faults, samples: (config, faults))

    h = History(run_start={"acks": "1"})
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.send(0, K, 3, 2)
    h.poll(1, {K: [(0, 1)]})
    h.poll(2, {K: [(2, 3)]})
    h.nemesis("kill", {"nodes": [1]})
    h.drain()
    r = check_run(h.write(tmp_path), write=False).to_json_dict()
    assert [c[0] for c in calls] == ["lost-write", "unseen"]
    assert calls[0][2] == {"acks": "1"} and [w.f for w in calls[0][3].windows] == ["kill"]
    assert r["anomalies"]["unseen"][0]["verdict"] == "permitted"
    assert r["anomalies"]["lost-write"][0]["reason"] == "acks=all with min ISR 2"
    assert [(v["name"], v["value"]) for v in r["violations"]] == [("lost-write", 2)]
    assert r["valid"] is False  # valid is Jepsen's: bad anomalies are present


def test_heals_close_the_faults_they_undo() -> None:
    h = History()
    h.nemesis("kill", {"nodes": [1]})
    h.nemesis("kill", {"nodes": [2]})
    h.nemesis("latency", {"nodes": [1, 2, 3], "ms": 50})
    h.nemesis("partition", {"nodes": [3], "shape": "isolate"})
    h.nemesis("restart", {"nodes": [2]})
    h.nemesis("heal-link", {"nodes": [1, 2, 3]})
    h.nemesis("heal", {"nodes": [1, 2, 3]})
    h.nemesis("kill", {"target": "leader", "nodes": []})  # failed to start
    h.nemesis("restart", {"nodes": []})
    t = parse_history(h.text().encode())
    fs = faults_from_history(t.meta.nemesis)
    got = [(w.f, w.nodes, w.heal, w.end) for w in fs.windows]
    assert got == [
        ("kill", (1,), None, None),
        ("kill", (2,), "restart", 10000),
        ("latency", (1, 2, 3), "heal-link", 12000),
        ("partition", (3,), "heal", 14000),
        ("kill", (), "restart", 18000),
    ]


def test_spilling_columns_to_arrow_mid_parse_changes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    h = clean()
    for v in range(10, 30):
        h.send(v % 3, K if v % 2 else K1, v, v)
        if v % 4 == 0:
            h.poll(5, {K: [(v - 1, v - 1)], K1: [(v, v)]})
    h.event(9, "invoke", "send", [["send", K, 99]])  # never completes: sorted back into op order
    h.send(8, K, 100, 50)
    data = h.text().encode()
    whole = parse_history(data)
    import kafka_chaos.checker.history_reader
    monkeypatch.setattr(kafka_chaos.checker.history_reader, "SPILL_EVERY", 4)
    spilled = parse_history(data)
    assert spilled.sends.equals(whole.sends) and spilled.polls.equals(whole.polls)
    assert spilled.sends.num_rows == 24 and spilled.sends["op_index"].to_pylist() == sorted(
        spilled.sends["op_index"].to_pylist()
    )
