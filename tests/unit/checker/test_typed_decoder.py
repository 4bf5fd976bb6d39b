"""The history reader's typed decoder (checker.history_reader.read_typed, what `kafka-chaos check` parses a history
with when it has no stored tables) finds what the handlers find, on hand-written histories, on the general
histories of the cross-check with Jepsen and on those histories reduced to the shapes it reads itself; what it does
not read it hands to the handlers, refusals included."""

from __future__ import annotations

import json
import random

from checker_histories import K1, History, K
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_against_reference import general_history
from typed_agreement import BLOCKS, assert_typed_agrees, handlers_read, typed_read

from kafka_chaos.checker.history_reader import HistoryRead


def every_typed_shape() -> str:
    """One of each event the typed decoder reads itself."""
    h = History(run_start={"workload": "queue"})
    h.nemesis("kill", {"nodes": [2]})
    h.event("operator", "info", "roll", None, error="slow")
    h.event("harness", "info", "fetch-from", {"replica": 2})
    h.event(0, "invoke", "assign", {"keys": [K, K1], "isolation": "read_committed"})
    h.event(0, "ok", "assign", None)  # a reset of the keys its invoke named
    h.assign(1, ["chaos"], f="subscribe")
    h.assign(9, [K], type_="fail")
    h.sends(2, [(K, 1, 0), (K1, 2, 0)])
    h.send(3, K, 3, type_="fail")
    h.event(3, "invoke", "send", [["send", K, 4]])
    h.event(3, "info", "send", None)  # the value comes from the invoke
    h.event(4, "invoke", "send", [["send", K, 5]])  # never completed: replaced by the process's next invoke
    h.poll(4, {K: [(0, 1), (2, 4)], K1: []})
    h.event(5, "invoke", "poll", [["poll"]])
    h.event(5, "ok", "poll", [["poll", {K: [[0, 1]]}], ["poll", {K: [], K1: [[0, 2]]}]])
    h.poll(6, {}, "fail")
    h.poll(6, {}, "info")
    h.event(7, "ok", "crash", None)  # a completion without its invoke
    h.event(7, "invoke", "debug-topic-partitions", None)
    h.event(7, "ok", "debug-topic-partitions", {"chaos": [0]})
    h.event("someone-else", "info", "hello", 1)
    h.event(8, "invoke", "send", [["send", K, 6]])  # pending at the end: info, outcome unknown
    h.event(10, "invoke", "assign", {"keys": [K], "isolation": "read_uncommitted"})
    h.drain()
    return h.text() + raw_lines()


def raw_lines() -> str:
    """Lines the History builder does not write: an event without an index, a process named with digits."""
    no_index = {"time": 10**9, "process": 11, "type": "invoke", "f": "send", "value": [["send", 12, 7]]}
    named = {**no_index, "process": "11"}  # a process named, not numbered: not a client
    return "".join(json.dumps(e) + "\n" for e in (no_index, named, {**no_index, "type": "ok",
                                                                    "value": [["send", 12, [3, 7]]]}))


def test_the_typed_decoder_reads_every_shape_it_knows_itself_and_finds_what_the_handlers_find() -> None:
    text = every_typed_shape()
    assert assert_typed_agrees(text)
    for block in BLOCKS:
        assert typed_read(text.encode(), block) is not None, block
    r = handlers_read(text.encode())
    assert isinstance(r, HistoryRead)
    assert r.empty_reads and r.resets and r.isolation and r.subscribe_processes and r.fault_events and r.fetch_from
    assert r.unfinished == {"send": 2, "assign": 1} and r.op_counts["send"]["unfinished"] == 1 and r.ignored == 4
    assert r.isolation == {0: "read_committed", 10: "read_uncommitted"}
    assert "12" in r.sends.column("key").to_pylist()  # a key written as a number, read as its text


def test_what_only_the_handlers_read_goes_to_them() -> None:
    base = History()
    base.send(1, K, 1, 0)
    text = base.text()
    odd = {
        "a txn": [{"process": 2, "type": "invoke", "f": "txn", "value": [["send", K, 2]]}],
        "a rebalance log": [{"process": 2, "type": "ok", "f": "poll", "value": [["poll", {K: [[0, 1]]}]],
                             "rebalance_log": [{"keys": [K]}]}],
        "an unknown offset": [{"process": 2, "type": "ok", "f": "poll", "value": [["poll", {K: [[None, 1]]}]]}],
        "records of a failed poll": [{"process": 2, "type": "fail", "f": "poll", "value": [["poll", {K: [[0, 1]]}]]}],
        "an unknown f": [{"process": 2, "type": "ok", "f": "sned", "value": None}],
        "a time that is not an integer": [{"process": "nemesis", "type": "info", "f": "kill", "time": 1.5}],
    }
    for name, events in odd.items():
        extra = "".join(json.dumps({"time": 9000, **e}) + "\n" for e in events)
        data = (text + extra).encode()
        assert typed_read(data) is None, name
        assert not assert_typed_agrees(data), name
    for name, data in {"a blank line": text + "\n" + text, "a damaged line": text + "{oops\n" + text}.items():
        assert typed_read(data.encode()) is None, name
        assert not assert_typed_agrees(data), name


def test_a_cut_last_line_is_dropped_by_the_typed_decoder_too() -> None:
    h = History()
    h.send(1, K, 1, 0)
    h.drain()
    text = h.text()[:-7]
    assert assert_typed_agrees(text)
    r = typed_read(text.encode())
    assert r is not None and r.truncated and not r.complete and r.events == 2


def typed_shapes(text: str) -> str:
    """A general history reduced to the shapes the typed decoder reads itself: no txn, no rebalance log, failed and
    indefinite polls that returned nothing, ok polls' records only at known offsets."""
    events = [json.loads(line) for line in text.splitlines()]
    kept = []
    for e in events:
        if e["f"] == "txn":
            continue
        e.pop("rebalance_log", None)
        if e["f"] == "poll" and e["type"] not in ("invoke", "ok"):
            e["value"] = [["poll"]]
        elif e["f"] == "poll" and e["type"] == "ok":
            e["value"] = [["poll", {k: [r for r in rs if r[0] is not None] for k, rs in m[1].items()}]
                          for m in e["value"]]
        kept.append(json.dumps(e) + "\n")
    return "".join(kept)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False))
def test_the_typed_decoder_agrees_with_the_handlers_on_general_histories(rng: random.Random) -> None:
    text = general_history(rng)
    assert_typed_agrees(text)
    assert assert_typed_agrees(typed_shapes(text))
