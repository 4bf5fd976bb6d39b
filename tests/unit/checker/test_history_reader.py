"""The one history reader (checker.history_reader): each handler, the pairing, the pair sink, the pairing-only
pass, the lenient reading and the one definition of a complete run."""

from __future__ import annotations

from typing import Any

import pytest
from checker_histories import K1, History, K

from kafka_chaos.checker.history_reader import (
    CLIENT_FS,
    CLIENT_OP_FS,
    OP_TYPES,
    SIDE_PROCESSES,
    HistoryRead,
    HistoryReader,
    is_complete,
)
from kafka_chaos.errors import HistoryError


def read(h: History | str | bytes, **options: Any) -> HistoryRead:
    text = h.text() if isinstance(h, History) else h
    data = text.encode() if isinstance(text, str) else text
    return HistoryReader(**options).read(data.splitlines(keepends=True), source="history.jsonl")


def pairs_of(h: History) -> list[tuple[int | None, int | None]]:
    """(invoke index, completion index) of every pair the sink was given, in the order given."""
    got: list[tuple[int | None, int | None]] = []

    def sink(inv: dict[str, Any] | None, done: dict[str, Any] | None) -> None:
        got.append((inv["index"] if inv else None, done["index"] if done else None))

    read(h, sink=sink)
    return got


def test_send_handler_takes_offsets_from_the_completion_and_values_from_the_invoke_when_it_has_none() -> None:
    h = History()
    i_ok = h.send(1, K, 10, 4)
    i_fail = h.send(2, K1, 11, type_="fail")
    r = read(h)
    rows = r.sends.to_pylist()
    assert [(x["op_index"], x["value"], x["offset"], x["type"]) for x in rows] == [
        (i_ok, 10, 4, "ok"), (i_fail, 11, None, "fail")]
    assert rows[0]["invoke_time"] == 1000 and rows[0]["complete_time"] == 2000
    assert r.op_counts["send"] == {"ok": 1, "fail": 1, "info": 0}


def test_poll_handler_keeps_placed_ok_records_and_sends_the_rest_to_the_extra_reads() -> None:
    h = History()
    done = h.poll(3, {K: [(0, 1), (None, 2)], K1: []}, rebalance_log=[{"keys": [K1]}])
    h.poll(4, {K: [(5, 9)]}, "info", returned=True)
    r = read(h)
    assert [(x["op_index"], x["value"], x["offset"]) for x in r.polls.to_pylist()] == [(done, 1, 0)]
    assert sorted((x["value"], x["type"]) for x in r.extra_reads.to_pylist()) == [(2, "ok"), (9, "info")]
    assert r.unplaced_records == 1
    assert r.empty_reads == [(3, done, K1, "ok")]
    assert r.rebalanced == {done: frozenset({K1})}
    assert r.ok_poll_times.tolist() == [h.events[done]["time"]]


def test_txn_handler_gives_both_its_sends_and_its_reads() -> None:
    h = History()
    _, done = h.txn(2, [["send", K, 3], ["poll"]], [["send", K, [1, 3]], ["poll", {K1: [[0, 2]]}]])
    r = read(h)
    assert [(x["value"], x["offset"]) for x in r.sends.to_pylist()] == [(3, 1)]
    assert [(x["value"], x["op_index"]) for x in r.polls.to_pylist()] == [(2, done)]


def test_membership_handler_records_subscribers_resets_and_isolation() -> None:
    h = History()
    h.event(5, "invoke", "assign", {"keys": [K], "isolation": "read_uncommitted"})
    a = h.event(5, "ok", "assign", {"keys": [K]})
    s = h.assign(6, ["chaos"], f="subscribe")
    h.assign(7, [K], type_="fail")  # a failed assign moves no position
    r = read(h)
    assert r.isolation == {5: "read_uncommitted"}
    assert r.subscribe_processes == {6}
    assert r.resets == [(5, a, frozenset({K})), (6, s, frozenset({"chaos"}))]


def test_side_handlers_keep_faults_operations_and_the_harness_events() -> None:
    h = History(run_start={"scenario": "demo"})
    h.nemesis("kill", {"nodes": [2]})
    h.event("operator", "info", "rolling-restart-done", {"ok": True})
    h.event("harness", "info", "drain-start", None)
    h.event("harness", "info", "fetch-from", {"process": 1, "key": K, "broker": 2, "leader": 1})
    h.event("elsewhere", "info", "hello", None)
    h.drain()
    r = read(h)
    assert r.run_start == {"scenario": "demo"}
    assert [(e[2], e[3], e[6]) for e in r.fault_events] == [
        ("invoke", "kill", "nemesis"), ("info", "kill", "nemesis"), ("info", "rolling-restart-done", "operator")]
    assert r.drain_start == h.events[4]["time"]
    assert r.fetch_from == [{"process": 1, "key": K, "broker": 2, "leader": 1, "time": h.events[5]["time"]}]
    assert r.drain_complete is True and r.complete
    assert r.ignored == 2  # the fetch-from (kept for the report only) and the unknown process
    assert r.events == len(h.events)


def test_pairing_pairs_each_completion_with_its_process_invoke_and_ends_the_unfinished_as_info() -> None:
    h = History()
    a = h.event(1, "invoke", "send", [["send", K, 1]])
    b = h.event(2, "invoke", "send", [["send", K, 2]])
    b_done = h.event(2, "ok", "send", [["send", K, [0, 2]]])
    a_done = h.event(1, "info", "send", [["send", K, 1]])
    replaced = h.event(3, "invoke", "poll", [["poll"]])  # replaced by process 3's next invoke
    c = h.event(3, "invoke", "send", [["send", K1, 3]])  # pending at the end
    orphan = h.event(4, "ok", "poll", [["poll", {}]])  # a completion without its invoke
    assert pairs_of(h) == [(b, b_done), (a, a_done), (replaced, None), (None, orphan), (c, None)]
    r = read(h)
    assert r.unfinished == {"poll": 1, "send": 1}
    assert r.op_counts["send"] == {"ok": 1, "fail": 0, "info": 2, "unfinished": 1}
    ops = r.ops.to_pylist()
    assert [(o["index"], o["invoke_index"]) for o in ops] == [(b_done, b), (a_done, a), (orphan, None)]
    assert [(x["op_index"], x["type"], x["complete_time"]) for x in r.sends.to_pylist()] == [
        (a, "info", h.events[a_done]["time"]), (b, "ok", h.events[b_done]["time"]), (c, "info", None)]


def test_a_pairing_only_pass_builds_no_record_tables_but_gives_the_same_pairs_and_metadata() -> None:
    h = History()
    h.event(5, "invoke", "assign", {"keys": [K], "isolation": "read_uncommitted"})
    h.event(5, "ok", "assign", {"keys": [K]})
    h.send(1, K, 1, 0)
    h.poll(5, {K: [(0, 1)]})
    h.drain()
    full, pairing = read(h), read(h, records=False, ops=False)
    assert pairing.sends.num_rows == pairing.polls.num_rows == pairing.ops.num_rows == 0
    assert full.sends.num_rows == full.polls.num_rows == 1 and full.ops.num_rows == 3
    assert pairing.op_counts == full.op_counts and pairing.isolation == full.isolation
    assert pairing.complete and pairing.end_time == full.end_time
    seen: list[tuple[str, str]] = []
    read(h, records=False, ops=False, sink=lambda inv, done: seen.append((inv["f"], done["type"])))  # type: ignore[index]
    assert seen == [("assign", "ok"), ("send", "ok"), ("poll", "ok")]


def test_events_already_decoded_are_read_the_same() -> None:
    h = History()
    h.send(1, K, 1, 0)
    h.drain()
    r = HistoryReader().read_events(h.events)
    assert r.sends.equals(read(h).sends) and r.complete


def test_is_complete_needs_the_drain_and_nothing_cut_or_malformed() -> None:
    assert is_complete(True, truncated=False)
    assert not is_complete(None, truncated=False)  # no drain-complete: the run stopped before its end
    assert not is_complete(False, truncated=False)  # a final read did not finish
    assert not is_complete(True, truncated=True)
    assert not is_complete(True, truncated=False, malformed=1)


def test_a_cut_last_line_is_dropped_and_the_run_is_incomplete() -> None:
    h = History()
    h.send(1, K, 1, 0)
    h.drain()
    text = h.text() + '{"index": 3, "time": 9000, "process": 1, "type": "inv'
    r = read(text)
    assert r.truncated and not r.complete and r.drain_complete is True
    assert r.events == len(h.events) and r.sends.num_rows == 1


def test_a_malformed_line_before_the_last_is_an_error_naming_it() -> None:
    h = History()
    h.send(1, K, 1, 0)
    lines = h.text().splitlines(keepends=True)
    with pytest.raises(HistoryError, match="line 2: not a valid history event"):
        read("".join([lines[0], "{not json\n", *lines[1:]]))
    h.event(1, "invoke", "sned", [["send", K, 2]])
    h.event(1, "ok", "sned", [["send", K, [1, 2]]])
    with pytest.raises(HistoryError, match="line 4: f 'sned'"):
        read(h)


def test_with_on_bad_line_a_malformed_line_is_skipped_listed_and_makes_the_run_incomplete() -> None:
    h = History()
    h.send(1, K, 1, 0)
    h.drain()
    lines = h.text().splitlines(keepends=True)
    text = "".join([lines[0], "{not json\n", '{"process": 1}\n', *lines[1:]])
    bad: list[int] = []
    r = read(text, records=False, on_bad_line=lambda lineno, error: bad.append(lineno))
    assert bad == r.bad_lines == [2, 3]
    assert r.ops.num_rows == 1 and r.drain_complete is True and not r.complete
    assert r.events == len(h.events)
    with pytest.raises(ValueError, match="records=False"):
        HistoryReader(on_bad_line=lambda lineno, error: None)
    # an op of an unknown f between an invoke and its completion leaves the pairing as it was
    text = "".join([lines[0], '{"index": 9, "time": 1500, "process": 1, "type": "ok", "f": "sned"}\n', *lines[1:]])
    r = read(text, records=False, on_bad_line=lambda lineno, error: None)
    assert r.bad_lines == [2] and r.ops.to_pylist()[0]["invoke_index"] == 0 and "sned" not in r.op_counts


def test_the_public_names_are_what_the_history_format_says() -> None:
    assert OP_TYPES == ("invoke", "ok", "fail", "info")
    assert set(CLIENT_OP_FS) <= set(CLIENT_FS) and {"assign", "subscribe", "crash"} <= set(CLIENT_FS)
    assert SIDE_PROCESSES == ("nemesis", "operator", "harness")
