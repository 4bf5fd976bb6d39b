"""`check --from jepsen`: hand-written Jepsen `history.edn` files, each mirroring a JSONL history written with the
same ops; the checker must find the same anomalies in both."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from checker_histories import History
from reference_agreement import assert_agree

from kafka_chaos.checker import HistoryError, check_run
from kafka_chaos.checker.jepsen_store import import_jepsen, read_ops

T0, T1 = "t0/0", "t0/1"  # Jepsen's keys 0 and 1: topic t0, partitions 0 and 1 (two per topic)

# Lost write (value 2 at offset 1 of key 0, under later reads of offsets 0 and 2), a duplicate (value 5 at
# offsets 0 and 1 of key 1), a failed send, an indefinite one, a kill and restart of n2, and a final
# #jepsen.history.Op record line (Jepsen's store writes ops as records).
EDN = """\
{:index 0, :time 1000, :type :invoke, :process 0, :f :send, :value [[:send 0 1]]}
{:index 1, :time 2000, :type :ok, :process 0, :f :send, :value [[:send 0 [0 1]]]}
{:index 2, :time 3000, :type :invoke, :process 1, :f :send, :value [[:send 0 2]]}
{:index 3, :time 4000, :type :ok, :process 1, :f :send, :value [[:send 0 [1 2]]]}
{:index 4, :time 5000, :type :invoke, :process :nemesis, :f :kill, :value :primaries}
{:index 5, :time 6000, :type :info, :process :nemesis, :f :kill, :value {"n2" :killed}}
{:index 6, :time 7000, :type :invoke, :process 0, :f :send, :value [[:send 0 3]]}
{:index 7, :time 8000, :type :ok, :process 0, :f :send, :value [[:send 0 [2 3]]]}
{:index 8, :time 9000, :type :invoke, :process 1, :f :send, :value [[:send 1 5]]}
{:index 9, :time 10000, :type :ok, :process 1, :f :send, :value [[:send 1 [0 5]]]}
{:index 10, :time 11000, :type :invoke, :process 0, :f :send, :value [[:send 1 6]]}
{:index 11, :time 12000, :type :fail, :process 0, :f :send, :value [[:send 1 6]], :error [:not-enough-replicas]}
{:index 12, :time 13000, :type :invoke, :process 1, :f :send, :value [[:send 1 7]]}
{:index 13, :time 14000, :type :info, :process 1, :f :send, :value [[:send 1 7]], :error :timeout}
{:index 14, :time 15000, :type :invoke, :process :nemesis, :f :start, :value :all}
{:index 15, :time 16000, :type :info, :process :nemesis, :f :start, :value {"n2" :started}}
{:index 16, :time 17000, :type :invoke, :process 2, :f :assign, :value [0 1]}
{:index 17, :time 18000, :type :ok, :process 2, :f :assign, :value [0 1]}
{:index 18, :time 19000, :type :invoke, :process 2, :f :poll, :value [[:poll]]}
{:index 19, :time 20000, :type :ok, :process 2, :f :poll, :value [[:poll {0 [[0 1] [2 3]], 1 [[0 5] [1 5]]}]]}
#jepsen.history.Op{:index 20, :time 21000, :type :invoke, :process 3, :f :debug-topic-partitions, :value [0 1]}
"""


def mirror() -> History:
    """The same ops as EDN, written as kafka-chaos records them."""
    h = History()
    h.send(0, T0, 1, 0)
    h.send(1, T0, 2, 1)
    h.event("nemesis", "invoke", "kill", "primaries")
    h.event("nemesis", "info", "kill", {"nodes": [2]})
    h.send(0, T0, 3, 2)
    h.send(1, T1, 5, 0)
    h.event(0, "invoke", "send", [["send", T1, 6]])
    h.event(0, "fail", "send", [["send", T1, 6]], error=["not-enough-replicas"])
    h.event(1, "invoke", "send", [["send", T1, 7]])
    h.event(1, "info", "send", [["send", T1, 7]], error="timeout")
    h.event("nemesis", "invoke", "restart", "all")
    h.event("nemesis", "info", "restart", {"nodes": [2]})
    h.event(2, "invoke", "assign", [T0, T1])
    h.event(2, "ok", "assign", [T0, T1])
    h.poll(2, {T0: [(0, 1), (2, 3)], T1: [(0, 5), (1, 5)]})
    h.event(3, "invoke", "debug-topic-partitions", [T0, T1])
    return h


def store(tmp_path: Path, text: str = EDN) -> Path:
    (tmp_path / "store").mkdir(parents=True, exist_ok=True)
    (tmp_path / "store" / "history.edn").write_text(text)
    return tmp_path / "store"


def findings(r: dict[str, Any]) -> dict[str, list[tuple[Any, ...]]]:
    """Each anomaly's instances by (key, values): what must match between the two sources."""
    return {name: sorted((i.get("key"), json.dumps(i.get("values", i.get("value")))) for i in insts)
            for name, insts in r["anomalies"].items() if insts}


def test_a_jepsen_history_gives_the_anomalies_of_the_same_history_in_jsonl(tmp_path: Path) -> None:
    from_edn = check_run(import_jepsen(store(tmp_path), tmp_path / "edn"), write=False).to_json_dict()
    from_jsonl = check_run(mirror().write(tmp_path / "jsonl"), write=False).to_json_dict()
    assert from_edn["anomaly_counts"] == from_jsonl["anomaly_counts"]
    assert {"lost-write", "duplicate"} <= set(from_edn["anomaly_counts"]), from_edn["anomaly_counts"]
    assert findings(from_edn) == findings(from_jsonl)
    assert from_edn["run"]["op_counts"] == from_jsonl["run"]["op_counts"]
    assert [(w["f"], w["nodes"], w["heal"]) for w in from_edn["faults"]["windows"]] == [("kill", [2], "restart")]
    assert from_edn["complete"] is False  # Jepsen says nothing of its final reads having caught up


def test_ops_keep_jepsens_index_and_events_are_renumbered_in_file_order(tmp_path: Path) -> None:
    run = import_jepsen(store(tmp_path), tmp_path / "edn")
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert [e["index"] for e in events] == list(range(len(events)))
    assert [e["jepsen_index"] for e in events] == list(range(21))
    assert events[19]["value"] == [["poll", {T0: [[0, 1], [2, 3]], T1: [[0, 5], [1, 5]]}]]
    assert events[5]["value"] == {"nodes": [2], "jepsen": {"n2": "killed"}}


def test_a_rebalance_log_keeps_its_keys_named_as_kafka_chaos_names_them(tmp_path: Path) -> None:
    """Jepsen's `:rebalance-log` exempts its keys from `int-poll-skip` (jepsen_reference checks the rule)."""
    poll = ("{:index 19, :time 20000, :type :ok, :process 2, :f :poll, "
            ":value [[:poll {0 [[0 1] [2 3]], 1 [[0 5] [1 5]]}]]")
    edn = EDN.replace(poll + "}", poll + ", :rebalance-log [{:keys [0 1]}]}")
    run = import_jepsen(store(tmp_path, edn), tmp_path / "edn")
    events = [json.loads(line) for line in (run / "history.jsonl").read_text().splitlines()]
    assert events[19]["rebalance_log"] == [{"keys": [T0, T1]}]
    assert_agree((run / "history.jsonl").read_text())
    plain_run = check_run(import_jepsen(store(tmp_path / "p"), tmp_path / "p1"), write=False).to_json_dict()
    rebalanced = check_run(run, write=False).to_json_dict()
    assert "int-poll-skip" in plain_run["anomaly_counts"] and "int-poll-skip" not in rebalanced["anomaly_counts"]


def test_one_edn_vector_of_ops_reads_like_one_op_per_line(tmp_path: Path) -> None:
    lines = [line for line in EDN.splitlines() if not line.startswith("#")]
    as_vector = check_run(import_jepsen(store(tmp_path / "v", "[" + "\n ".join(lines) + "]\n"), tmp_path / "v1"),
                          write=False).to_json_dict()
    per_line = check_run(import_jepsen(store(tmp_path / "l", "\n".join(lines) + "\n"), tmp_path / "l1"),
                         write=False).to_json_dict()
    assert findings(as_vector) == findings(per_line) and as_vector["anomaly_counts"]


def test_a_configuration_gives_the_models_verdicts(tmp_path: Path) -> None:
    config = {"topic": {"replication_factor": 3, "min_insync_replicas": 2},
              "workload": {"acks": "all", "idempotence": True}}
    known = check_run(import_jepsen(store(tmp_path), tmp_path / "known", config=config), write=False).to_json_dict()
    unknown = check_run(import_jepsen(store(tmp_path), tmp_path / "unknown"), write=False).to_json_dict()
    (lost,) = [v for v in known["violations"] if v["name"] == "lost-write"]
    assert "min.insync.replicas=2 and RF=3" in lost["reason"] and "unknown" not in lost["reason"], lost
    (guessed,) = [v for v in unknown["violations"] if v["name"] == "lost-write"]
    assert "configuration unknown" in guessed["reason"], guessed
    assert known["anomaly_counts"] == unknown["anomaly_counts"]


def test_a_damaged_line_before_the_end_names_its_line(tmp_path: Path) -> None:
    lines = EDN.splitlines()
    lines[3] = lines[3][:30]
    with pytest.raises(HistoryError, match=r"history\.edn, line 4: not an EDN op"):
        import_jepsen(store(tmp_path, "\n".join(lines) + "\n"), tmp_path / "out")
    assert not (tmp_path / "out" / "history.jsonl").exists()
    with pytest.raises(HistoryError, match=r"line 2: not a Jepsen op"):
        list(read_ops(store(tmp_path / "b", EDN.splitlines()[0] + "\n[1 2 3]\n") / "history.edn"))


def test_a_cut_last_line_is_dropped(tmp_path: Path) -> None:
    ops = list(read_ops(store(tmp_path, EDN[:-25]) / "history.edn"))
    assert len(ops) == 20 and ops[-1]["index"] == 19


def test_cli_check_from_jepsen_writes_a_run_folder_and_exits_1_on_violations(tmp_path: Path) -> None:
    scenario = tmp_path / "config.toml"
    scenario.write_text('name = "jepsen-store"\n[topic]\nreplication_factor = 3\nmin_insync_replicas = 2\n'
                        '[workload]\nacks = "all"\n')
    cli = [sys.executable, "-m", "kafka_chaos.harness.cli", "check"]
    proc = subprocess.run([*cli, str(store(tmp_path)), "--from", "jepsen", "--config", str(scenario), "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr
    results = json.loads(proc.stdout)
    assert results["anomaly_counts"]["lost-write"] == 1
    assert (tmp_path / "store" / "kafka-chaos" / "results.json").exists()
    assert (tmp_path / "store" / "kafka-chaos" / "report.html").exists()
    bad = subprocess.run([*cli, str(tmp_path / "nowhere"), "--from", "jepsen"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and "no Jepsen history" in bad.stderr and "Traceback" not in bad.stderr


def test_jepsens_empty_history_test_is_not_valid(tmp_path: Path) -> None:
    """kafka_test.clj `empty-history-test`: an assign and nothing else is not valid in Jepsen's Kafka checker
    (`(is (not (:valid? check)))`); the check says so, and why."""
    edn = ("{:index 0, :time 0, :type :invoke, :process 0, :f :assign, :value [:x]}\n"
           "{:index 1, :time 1, :type :ok, :process 0, :f :assign, :value [:x]}\n")
    r = check_run(import_jepsen(store(tmp_path, edn), tmp_path / "edn"), write=False)
    assert r.valid is False and [v.name for v in r.violations] == ["empty-history"]
    assert r.violations[0].reason is not None and "no client operation" in r.violations[0].reason
