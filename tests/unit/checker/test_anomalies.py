"""One hand-written history per anomaly: the checker reports exactly that instance, and nothing else.

Histories are written as history.jsonl and checked end to end with `check_run` (no reference model: the
verdict bridge is tested separately, so these tests pin the fallback policy).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from checker_histories import K1, History, K

import kafka_chaos.checker.analysis
from kafka_chaos.checker import check_run

ALL_NAMES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "garbage-read",
    "poll-skip",
    "nonmonotonic-poll",
    "int-poll-skip",
    "int-nonmonotonic-poll",
    "nonmonotonic-send",
    "int-nonmonotonic-send",
    "int-send-skip",
    "G1a",
    "precommitted-read",
    "G0",
    "G1c",
)


@pytest.fixture(autouse=True)
def no_reference_model(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_chaos.checker.analysis, "load_judge", lambda: None)


def check(h: History, tmp_path: Path) -> dict[str, Any]:
    h.drain()
    return check_run(h.write(tmp_path / "run"), write=False).to_json_dict()


def only(result: dict[str, Any], *names: str) -> list[dict[str, Any]]:
    """Assert the result has exactly these anomaly names; return the instances of the first."""
    assert sorted(result["anomaly_counts"]) == sorted(names), result["anomalies"]
    return result["anomalies"][names[0]]


def core(inst: dict[str, Any], *fields: str) -> dict[str, Any]:
    return {f: inst.get(f) for f in fields}


def test_clean_history_has_no_anomalies(tmp_path: Path) -> None:
    h = History()
    s = [h.send(0, K, 10, 0), h.send(0, K, 11, 1), h.send(0, K1, 20, 0), h.send(0, K, 12, 2)]
    h.poll(1, {K: [(0, 10), (1, 11)], K1: [(0, 20)]})
    h.poll(1, {K: [(2, 12)]})
    h.poll(2, {K: [(0, 10), (1, 11), (2, 12)]})
    r = check(h, tmp_path)
    assert r["anomaly_counts"] == {} and r["anomalies"] == {} and r["violations"] == []
    assert r["valid"] is True and r["complete"] is True
    assert r["stats"]["records"] == {"sent": {"ok": 4, "info": 0, "fail": 0}, "polled": 7, "distinct_read": 4}
    assert r["stats"]["ops"]["send"] == {"ok": 4, "fail": 0, "info": 0}
    assert len(s) == 4


def test_lost_write(tmp_path: Path) -> None:
    """v2 is acknowledged at offset 1 below v3 at offset 2, which a reader saw; nobody read v2."""
    h = History()
    h.send(0, K, 1, 0)
    w = h.send(0, K, 2, 1)
    h.send(0, K, 3, 2)
    h.poll(1, {K: [(0, 1)]})
    r3 = h.poll(2, {K: [(2, 3)]})
    r = check(h, tmp_path)
    # Jepsen reports a lost acknowledged value under unseen as well.
    (lost,) = only(r, "lost-write", "unseen")
    assert core(lost, "key", "value", "offset", "index", "max_read_index", "ops", "process") == {
        "key": K,
        "value": 2,
        "offset": 1,
        "index": 1,
        "max_read_index": 2,
        "ops": [w, r3],
        "process": 0,
    }
    assert lost["max_read_value"] == 3 and lost["verdict"] == "violation" and lost["bad"] is True
    assert r["anomalies"]["unseen"][0]["values"] == [2]
    assert r["valid"] is False


def test_lost_write_of_an_info_send_proven_committed(tmp_path: Path) -> None:
    """Jepsen's must-have-committed?: an info op one of whose values was read did happen, so its other
    value (known offset, below what was read, never read) is lost — and, not being ok, is not unseen."""
    h = History()
    i = h.event(0, "invoke", "send", [["send", K, 1], ["send", K, 2]])
    h.event(0, "info", "send", [["send", K, [0, 1]], ["send", K, [1, 2]]])
    rd = h.poll(1, {K: [(1, 2)]})
    r = check(h, tmp_path)
    (lost,) = only(r, "lost-write")
    assert core(lost, "key", "value", "offset", "index", "max_read_index", "ops") == {
        "key": K,
        "value": 1,
        "offset": 0,
        "index": 0,
        "max_read_index": 1,
        "ops": [i, rd],
    }


def test_unseen_above_what_was_read_is_not_lost(tmp_path: Path) -> None:
    h = History()
    h.send(0, K, 1, 0)
    w2 = h.send(0, K, 2, 1)
    w3 = h.send(0, K1, 3, None)  # offset unknown: no position, never lost, still unseen
    h.poll(1, {K: [(0, 1)]})
    r = check(h, tmp_path)
    insts = only(r, "unseen")
    assert [core(u, "key", "count", "values", "ops") for u in insts] == [
        {"key": K, "count": 1, "values": [2], "ops": [w2]},
        {"key": K1, "count": 1, "values": [3], "ops": [w3]},
    ]
    series = r["stats"]["unseen_series"]
    assert series["total"][-1] == 2 and series["by_key"] == {K: [1], K1: [1]}


def test_duplicate(tmp_path: Path) -> None:
    """Value 7 acknowledged at offset 1, but also read at offset 0 (an earlier attempt that landed)."""
    h = History()
    h.send(3, K, 6, 2)
    w = h.send(0, K, 7, 1)
    r1 = h.poll(1, {K: [(0, 7)]})
    r2 = h.poll(2, {K: [(1, 7), (2, 6)]})
    r = check(h, tmp_path)
    (dup,) = only(r, "duplicate", "G0")
    # 7 at offset 0 precedes 6 at offset 2, yet 6 was acknowledged before 7 was sent: a real-time write cycle
    assert [(i["variant"], sorted(i["ops"])) for i in r["anomalies"]["G0"]] == [("G0-realtime", [0, w])]
    assert core(dup, "key", "value", "count", "offsets", "indexes", "ops") == {
        "key": K,
        "value": 7,
        "count": 2,
        "offsets": [0, 1],
        "indexes": [0, 1],
        "ops": [w, r1, r2],
    }


def test_duplicate_carries_its_longest_send(tmp_path: Path) -> None:
    """The verdicts ask whether the client can have timed a request out: `send_ms` is the longest completed
    send of the duplicated value, invoke to completion."""
    h = History()
    h.event(0, "invoke", "send", [["send", K, 7]])
    h.time += 6_000_000_000  # the acknowledgement comes 6 s later
    h.event(0, "ok", "send", [["send", K, [1, 7]]])
    h.send(1, K, 8, 2)
    h.poll(2, {K: [(0, 7)]})
    h.poll(3, {K: [(1, 7), (2, 8)]})
    (dup,) = only(check(h, tmp_path), "duplicate")
    assert dup["value"] == 7 and dup["send_ms"] == 6000


def test_inconsistent_offsets(tmp_path: Path) -> None:
    """Offset 0 of K holds 1 for one reader and 2 for another (the log was truncated and rewritten)."""
    h = History()
    w1 = h.send(0, K, 1, 0)
    w2 = h.send(3, K, 2, 0)
    r1 = h.poll(1, {K: [(0, 1)]})
    r2 = h.poll(2, {K: [(0, 2)]})
    r = check(h, tmp_path)
    (inc,) = only(r, "inconsistent-offsets")
    assert core(inc, "key", "offset", "index", "values", "ops") == {
        "key": K,
        "offset": 0,
        "index": 0,
        "values": [1, 2],
        "ops": [w1, w2, r1, r2],
    }


def _three(h: History) -> None:
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.send(0, K, 3, 2)


def test_poll_skip(tmp_path: Path) -> None:
    h = History()
    _three(h)
    a = h.poll(1, {K: [(0, 1)]})
    b = h.poll(1, {K: [(2, 3)]})
    h.poll(2, {K: [(1, 2)]})  # someone else read 2: it exists, and it is not lost
    r = check(h, tmp_path)
    (skip,) = only(r, "poll-skip")
    assert core(skip, "key", "process", "values", "offsets", "delta", "skipped", "ops", "subscribe") == {
        "key": K,
        "process": 1,
        "values": [1, 3],
        "offsets": [0, 2],
        "delta": 2,
        "skipped": [2],
        "ops": [a, b],
        "subscribe": False,
    }
    assert r["valid"] is False and r["violations"][0]["name"] == "poll-skip"


def test_poll_skip_of_a_subscribe_consumer_is_allowed(tmp_path: Path) -> None:
    h = History()
    _three(h)
    h.event(1, "invoke", "subscribe", [K])
    h.event(1, "ok", "subscribe", [K])
    a = h.poll(1, {K: [(0, 1)]})
    b = h.poll(1, {K: [(2, 3)]})
    h.poll(2, {K: [(1, 2)]})
    r = check(h, tmp_path)
    (skip,) = only(r, "poll-skip")
    assert skip["ops"] == [a, b] and skip["subscribe"] is True and skip["bad"] is False
    assert skip["verdict"] == "permitted"
    assert r["valid"] is True and r["violations"] == []


def test_nonmonotonic_poll(tmp_path: Path) -> None:
    h = History()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    a = h.poll(1, {K: [(0, 1), (1, 2)]})
    b = h.poll(1, {K: [(0, 1)]})
    r = check(h, tmp_path)
    (nm,) = only(r, "nonmonotonic-poll")
    assert core(nm, "key", "process", "values", "offsets", "delta", "ops") == {
        "key": K,
        "process": 1,
        "values": [2, 1],
        "offsets": [1, 0],
        "delta": -1,
        "ops": [a, b],
    }


def test_int_poll_skip(tmp_path: Path) -> None:
    h = History()
    _three(h)
    a = h.poll(1, {K: [(0, 1), (2, 3)]})
    h.poll(2, {K: [(1, 2)]})
    r = check(h, tmp_path)
    (skip,) = only(r, "int-poll-skip")
    assert core(skip, "key", "process", "values", "offsets", "delta", "skipped", "ops") == {
        "key": K,
        "process": 1,
        "values": [1, 3],
        "offsets": [0, 2],
        "delta": 2,
        "skipped": [2],
        "ops": [a],
    }


def test_int_nonmonotonic_poll(tmp_path: Path) -> None:
    h = History()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    a = h.poll(1, {K: [(1, 2), (0, 1)]})
    r = check(h, tmp_path)
    (nm,) = only(r, "int-nonmonotonic-poll")
    assert core(nm, "key", "values", "offsets", "delta", "ops") == {
        "key": K,
        "values": [2, 1],
        "offsets": [1, 0],
        "delta": -1,
        "ops": [a],
    }


def test_nonmonotonic_send(tmp_path: Path) -> None:
    """Process 0 sent 1 then 2, but 2 landed before 1."""
    h = History()
    a = h.send(0, K, 1, 1)
    b = h.send(0, K, 2, 0)
    h.poll(1, {K: [(0, 2), (1, 1)]})
    r = check(h, tmp_path)
    (nm,) = only(r, "nonmonotonic-send", "G0")
    # the same process's later send landed first: a write cycle through the process order
    assert [(i["variant"], sorted(i["ops"])) for i in r["anomalies"]["G0"]] == [("G0-process", [a, b])]
    assert core(nm, "key", "process", "values", "offsets", "delta", "ops") == {
        "key": K,
        "process": 0,
        "values": [1, 2],
        "offsets": [1, 0],
        "delta": -1,
        "ops": [a, b],
    }


def test_failed_sends_do_not_count_for_nonmonotonic_send(tmp_path: Path) -> None:
    h = History()
    h.send(0, K, 1, 1)
    h.send(0, K, 9, None, type_="fail")
    h.send(0, K, 2, 2)
    h.poll(1, {K: [(1, 1), (2, 2)]})
    r = check(h, tmp_path)
    assert r["anomaly_counts"] == {}


def test_int_nonmonotonic_send(tmp_path: Path) -> None:
    h = History()
    a = h.sends(0, [(K, 1, 1), (K, 2, 0)])
    h.poll(1, {K: [(0, 2), (1, 1)]})
    r = check(h, tmp_path)
    (nm,) = only(r, "int-nonmonotonic-send")
    assert core(nm, "key", "process", "values", "offsets", "delta", "ops") == {
        "key": K,
        "process": 0,
        "values": [1, 2],
        "offsets": [1, 0],
        "delta": -1,
        "ops": [a],
    }


def test_int_send_skip_is_reported_but_not_bad(tmp_path: Path) -> None:
    """Another producer's send landed between the two of an op in flight: an int-send-skip, and the G0 any
    such interleaving is (each op's write precedes one of the other's), which Kafka permits."""
    h = History()
    a = h.event(0, "invoke", "send", [["send", K, 1], ["send", K, 3]])
    b = h.event(5, "invoke", "send", [["send", K, 2]])
    h.event(5, "ok", "send", [["send", K, [1, 2]]])
    h.event(0, "ok", "send", [["send", K, [0, 1]], ["send", K, [2, 3]]])
    h.poll(1, {K: [(0, 1), (1, 2), (2, 3)]})
    r = check(h, tmp_path)
    (skip,) = only(r, "int-send-skip", "G0")
    (g0,) = r["anomalies"]["G0"]
    assert g0["variant"] == "G0" and sorted(g0["ops"]) == [a, b] and g0["verdict"] == "permitted"
    assert core(skip, "key", "values", "offsets", "delta", "skipped", "ops") == {
        "key": K,
        "values": [1, 3],
        "offsets": [0, 2],
        "delta": 2,
        "skipped": [2],
        "ops": [a],
    }
    assert skip["bad"] is False and skip["verdict"] == "permitted"
    assert r["valid"] is True and r["violations"] == []


def test_g1a_aborted_read(tmp_path: Path) -> None:
    h = History()
    w = h.send(0, K, 1, None, type_="fail")
    rd = h.poll(1, {K: [(0, 1)]})
    r = check(h, tmp_path)
    (g1a,) = only(r, "G1a")
    assert core(g1a, "key", "value", "offset", "process", "writer_process", "ops") == {
        "key": K,
        "value": 1,
        "offset": 0,
        "process": 1,
        "writer_process": 0,
        "ops": [w, rd],
    }


def test_info_send_read_is_not_g1a(tmp_path: Path) -> None:
    h = History()
    h.send(0, K, 1, None, type_="info")
    h.poll(1, {K: [(0, 1)]})
    assert check(h, tmp_path)["anomaly_counts"] == {}


def test_precommitted_read(tmp_path: Path) -> None:
    h = History()
    inv, done = h.txn(
        0,
        [["send", K, 1], ["poll"]],
        [["send", K, [0, 1]], ["poll", {K: [[0, 1]]}]],
    )
    r = check(h, tmp_path)
    (pre,) = only(r, "precommitted-read")
    assert core(pre, "key", "value", "offset", "process", "ops") == {
        "key": K,
        "value": 1,
        "offset": 0,
        "process": 0,
        "ops": [inv, done],
    }


def test_a_txn_reading_anothers_value_is_not_precommitted(tmp_path: Path) -> None:
    h = History()
    h.send(1, K, 1, 0)
    h.txn(0, [["send", K, 2], ["poll"]], [["send", K, [1, 2]], ["poll", {K: [[0, 1], [1, 2]]}]])
    r = check(h, tmp_path)
    assert r["anomaly_counts"] == {"precommitted-read": 1}  # it did read its own 2
    h2 = History()
    h2.send(1, K, 1, 0)
    h2.txn(0, [["send", K, 2], ["poll"]], [["send", K, [1, 2]], ["poll", {K: [[0, 1]]}]])
    h2.poll(3, {K: [(1, 2)]})
    assert check(h2, tmp_path / "2")["anomaly_counts"] == {}


def test_g0_and_g1c_are_checked_without_transactions(tmp_path: Path) -> None:
    """Plain send and poll ops are transactions of their micro-ops (Jepsen's graph takes every op): a history
    without a txn op is checked for cycles too, and a clean one has none."""
    h = History()
    h.send(0, K, 1, 0)
    h.poll(1, {K: [(0, 1)]})
    r = check(h, tmp_path)
    assert "G0" not in r.get("not_checked", {}) and "G1c" not in r.get("not_checked", {})
    assert "G0" not in r["anomaly_counts"] and "G1c" not in r["anomaly_counts"]


def test_every_anomaly_name_is_covered() -> None:
    assert set(ALL_NAMES) == set(kafka_chaos.checker.analysis.ANOMALY_NAMES)


def test_several_anomalies_are_counted_separately(tmp_path: Path) -> None:
    h = History()
    _three(h)
    h.send(4, K1, 100, None, type_="fail")
    h.poll(1, {K: [(0, 1)], K1: [(0, 100)]})
    h.poll(1, {K: [(2, 3)]})
    r = check(h, tmp_path)
    # 2 is below what process 1 reached and nobody read it: lost, unseen, and skipped by process 1.
    assert r["anomaly_counts"] == {"lost-write": 1, "unseen": 1, "poll-skip": 1, "G1a": 1}
    assert sorted(v["name"] for v in r["violations"]) == ["G1a", "lost-write", "poll-skip", "unseen"]


def test_a_value_reused_across_keys_is_two_values(tmp_path: Path) -> None:
    """Values are meant to be unique per run; if a workload reuses one on another key, Jepsen's per-key
    analysis still tells them apart."""
    h = History()
    h.send(0, K, 1, 0)
    w = h.send(0, K1, 1, 0)
    h.poll(1, {K: [(0, 1)]})
    r = check(h, tmp_path)
    (u,) = only(r, "unseen")
    assert (u["key"], u["values"], u["ops"]) == (K1, [1], [w])


def test_reads_without_any_send_are_checked(tmp_path: Path) -> None:
    """A history from another tool may hold reads and no sends (its producers recorded elsewhere): the
    write-side checks find nothing to judge instead of failing on the empty sends table, and every read is of a
    value no send in the history carried."""
    h = History()
    a = h.poll(3, {K: [(0, 7), (1, 8)]})
    h.drain()
    result = check(h, tmp_path)
    reads = only(result, "garbage-read")
    assert [(i["value"], i["offset"], i["ops"]) for i in reads] == [(7, 0, [a]), (8, 1, [a])]
    assert result["stats"]["records"]["polled"] == 2 and result["valid"] is False


def test_garbage_read_is_a_violation(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference model never permits a read of a value no producer sent, whatever the configuration."""
    from kafka_chaos.reference_model.verdicts import GARBAGE_READ, judge

    monkeypatch.setattr(kafka_chaos.checker.analysis, "load_judge", lambda: judge)
    h = History(run_start={"topic": {"replication_factor": 3, "unclean_leader_election": True},
                           "workload": {"acks": "0"}})
    h.send(0, K, 1, 0)
    r = h.poll(1, {K: [(0, 1), (1, 99)]})
    result = check(h, tmp_path)
    (g,) = only(result, "garbage-read")
    assert (g["key"], g["value"], g["offset"], g["process"], g["ops"]) == (K, 99, 1, 1, [r])
    assert g["verdict"] == "violation" and g["reason"] == GARBAGE_READ and g["bad"] is True
    assert [v["name"] for v in result["violations"]] == ["garbage-read"] and result["valid"] is False
