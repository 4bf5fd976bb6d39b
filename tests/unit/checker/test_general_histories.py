"""Jepsen's rules on general histories (jepsen.tests.kafka): what other tools' histories hold and kafka-chaos's
own queue workload does not — records at unknown offsets, values nobody sent, values sent by a failed op and
another, assign / subscribe moving a consumer's partitions, what fail / info polls return, rebalance logs.
One history per rule; the conftest also runs each through the Jepsen transcription (jepsen_reference)."""

from __future__ import annotations

from typing import Any

import pytest
from checker_histories import K1, History, K

from kafka_chaos.checker.analysis import find_anomalies
from kafka_chaos.checker.tables import parse_history
from kafka_chaos.errors import HistoryError


def found(h: History) -> dict[str, list[dict[str, Any]]]:
    """Every anomaly with instances, by name (G0 / G1c are not checked without transactions)."""
    t = parse_history(h.text().encode())
    out, _ = find_anomalies(t.sends, t.polls, subscribe_processes=t.meta.subscribe_processes, extras=t.extras)
    return {name: insts for name, insts in out.items() if insts}


def _three(h: History) -> None:
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 1)
    h.send(0, K, 3, 2)


def test_a_record_at_an_unknown_offset_is_read() -> None:
    """op-reads keeps every record: read, so neither unseen nor lost (`unseen`, `lost-write-cases`)."""
    h = History()
    h.send(0, K, 1, 0)
    h.sends(0, [(K, 2, None)])  # ok, offset not known
    h.poll(1, {K: [(0, 1), (None, 2)]})
    assert found(h) == {}
    t = parse_history(h.text().encode())
    assert t.meta.unplaced_records == 1 and t.extras.reads.num_rows == 1


def test_an_unknown_offset_still_reads_a_placed_value_in_order() -> None:
    """`int-poll-skip+nonmonotonic-cases` compares positions of values, wherever the poll said they were."""
    h = History()
    _three(h)
    a = h.poll(1, {K: [(0, 1), (None, 3)]})
    h.poll(2, {K: [(1, 2)]})
    (skip,) = found(h)["int-poll-skip"]
    assert skip["values"] == [1, 3] and skip["offsets"] == [0, None] and skip["ops"] == [a]


def test_g1a_of_a_record_at_an_unknown_offset() -> None:
    h = History()
    w = h.send(0, K, 1, type_="fail")
    r = h.poll(1, {K: [(None, 1)]})
    (g1a,) = found(h)["G1a"]
    assert g1a["offset"] is None and g1a["ops"] == [w, r]


def test_g1a_counts_every_failed_writer() -> None:
    """`g1a-cases` reads `writes-by-type :fail`: a value a failed op sent is an aborted read even when another
    op sent it too, and completed later."""
    h = History()
    w = h.send(0, K, 1, type_="fail")
    h.send(2, K, 1, 0)  # the same value again, ok: the last writer
    r = h.poll(1, {K: [(0, 1)]})
    (g1a,) = found(h)["G1a"]
    assert g1a["ops"] == [w, r] and g1a["value"] == 1


def test_the_writer_is_the_last_to_complete() -> None:
    """`writer-of` walks completions: of two overlapping sends of one value, the one that completed last is
    its writer, whose commit `lost-write-cases` asks about (here it failed: nothing is lost)."""
    h = History()
    h.event(0, "invoke", "send", [["send", K, 1]])
    h.event(1, "invoke", "send", [["send", K, 1]])
    h.event(1, "ok", "send", [["send", K, [0, 1]]])
    h.event(0, "fail", "send", [["send", K, 1]])
    h.send(2, K, 2, 1)
    h.poll(3, {K: [(1, 2)]})
    assert "lost-write" not in found(h)


def test_a_value_nobody_sent_is_read_by_an_ok_poll() -> None:
    """Jepsen's rules need no writer for it, and find nothing; the read itself is a `garbage-read`: no producer
    of the run carried that value (Elle's garbage)."""
    h = History()
    h.send(0, K, 1, 0)
    r = h.poll(1, {K: [(0, 1), (1, 99)]})
    assert found(h) == {"garbage-read": [{"key": K, "value": 99, "offset": 1, "process": 1, "type": "ok",
                                          "ops": [r], "times": [h.events[r]["time"]]}]}


def test_every_read_of_a_value_nobody_sent_is_a_garbage_read() -> None:
    """Whatever the poll's type or offset, and inside a txn: one instance per read, in history order. A value
    sent by a failed op, or by an op that never completed, was carried by a send: not garbage."""
    h = History()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, type_="fail")
    h.event(0, "invoke", "send", [["send", K1, 3]])  # never completed
    a = h.poll(1, {K: [(0, 1), (3, 50)]})
    b = h.poll(2, {K: [(5, 51)], K1: [(0, 3)]}, "info", returned=True)
    _, c = h.txn(3, [["poll"]], [["poll", {K: [[0, 1], [1, 2]], K1: [[0, 50]]}]])
    got = found(h)["garbage-read"]
    assert [(i["ops"], i["key"], i["value"], i["offset"], i["type"], i["process"]) for i in got] == [
        ([a], K, 50, 3, "ok", 1), ([b], K, 51, 5, "info", 2), ([c], K1, 50, 0, "ok", 3)]


def test_a_garbage_read_at_an_unknown_offset() -> None:
    h = History()
    h.send(0, K, 1, 0)
    r = h.poll(1, {K: [(0, 1), (None, 60)]})
    (g,) = found(h)["garbage-read"]
    assert (g["value"], g["offset"], g["ops"]) == (60, None, [r])


def test_a_value_sent_to_another_key_is_garbage_in_this_one() -> None:
    """Values are pairs with their key (Jepsen's `writer-of` is per key): a value read from a key no send
    wrote it to is garbage there."""
    h = History()
    h.send(0, K, 7, 0)
    h.poll(1, {K: [(0, 7)]})
    r = h.poll(2, {K1: [(0, 7)]})
    (g,) = found(h)["garbage-read"]
    assert (g["key"], g["value"], g["ops"]) == (K1, 7, [r])


def test_a_value_nobody_sent_before_what_readers_reached_stops_the_check() -> None:
    """`lost-write-cases` throws `:no-writer-of` for a must-read value without a writer (only a fail or info
    poll can put one in the log unread): the checker refuses the history the same way."""
    h = History()
    h.send(0, K, 1, 0)
    h.send(0, K, 2, 2)
    h.poll(1, {K: [(1, 99)]}, "info", returned=True)
    h.poll(2, {K: [(0, 1), (2, 2)]})
    with pytest.raises(HistoryError, match=r"value 99 .* no op sent it"):
        found(h)


def test_fail_and_info_polls_make_the_log() -> None:
    """`version-orders` takes the log from every poll: an indefinite poll's record at an offset another op
    saw holding something else is an inconsistent offset."""
    h = History()
    h.send(0, K, 1, 0)
    h.poll(1, {K: [(0, 7)]}, "info", returned=True)
    (inc,) = found(h)["inconsistent-offsets"]
    assert inc["values"] == [1, 7]


def test_fail_polls_are_compared_but_do_not_move_the_position() -> None:
    """`poll-skip+nonmonotonic-cases-per-process`: a failed poll is checked against the last ok one, and the
    next poll is checked against that ok one too."""
    h = History()
    _three(h)
    a = h.poll(1, {K: [(0, 1)]})
    b = h.poll(1, {K: [(2, 3)]}, "fail", returned=True)
    c = h.poll(1, {K: [(1, 2)]})
    (skip,) = found(h)["poll-skip"]
    assert skip["ops"] == [a, b]
    assert c > b  # c follows a: no skip, no nonmonotonic poll


def test_an_int_poll_skip_of_a_failed_poll() -> None:
    h = History()
    _three(h)
    a = h.poll(1, {K: [(0, 1), (2, 3)]}, "fail", returned=True)
    h.poll(2, {K: [(1, 2)]})
    (skip,) = found(h)["int-poll-skip"]
    assert skip["ops"] == [a]


def test_a_rebalanced_key_is_exempt_inside_its_poll() -> None:
    """`int-poll-skip+nonmonotonic-cases` skips the keys of the op's `:rebalance-log`."""
    h = History()
    _three(h)
    h.poll(1, {K: [(0, 1), (2, 3)]}, rebalance_log=[{"keys": [K]}])
    h.poll(2, {K: [(1, 2)]})
    assert found(h) == {}


@pytest.mark.parametrize(("value", "skips"), [([K1], False), ([K], True), (["chaos"], True),
                                               ({"keys": [K1], "isolation": "read_committed"}, False)])
def test_assign_and_subscribe_keep_only_the_positions_they_name(value: Any, skips: bool) -> None:
    """`poll-skip+nonmonotonic-cases-per-process`: `(select-keys last-reads (:value op))` — a key no longer
    assigned starts afresh. kafka-chaos's subscribe names topics ("chaos" keeps "chaos/0")."""
    h = History()
    _three(h)
    h.poll(1, {K: [(0, 1)]})
    h.assign(1, value, f="subscribe" if value == ["chaos"] else "assign")
    h.poll(1, {K: [(2, 3)]})
    h.poll(2, {K: [(1, 2)]})
    assert ("poll-skip" in found(h)) is skips


def test_a_failed_assign_moves_nothing() -> None:
    h = History()
    _three(h)
    h.poll(1, {K: [(0, 1)]})
    h.assign(1, [K1], type_="fail")
    h.poll(1, {K: [(2, 3)]})
    h.poll(2, {K: [(1, 2)]})
    assert "poll-skip" in found(h)


def test_a_key_returned_empty_ends_the_position() -> None:
    """An ok poll returning `{k: []}` becomes the last read of k with no last value: the next poll of k has
    nothing to be compared with (Jepsen's delta is 1 when a value is unknown)."""
    h = History()
    _three(h)
    h.poll(1, {K: [(0, 1)]})
    h.poll(1, {K: []})
    h.poll(1, {K: [(2, 3)]})
    h.poll(2, {K: [(1, 2)]})
    assert found(h) == {}


def test_an_assign_ends_a_producers_order() -> None:
    """`nonmonotonic-send-cases` keeps `last-sends` of the assigned keys only."""
    h = History()
    h.send(0, K, 1, 1)
    h.assign(0, [K1])
    h.send(0, K, 2, 0)
    h.poll(1, {K: [(0, 2), (1, 1)]})
    assert "nonmonotonic-send" not in found(h)
    h2 = History()
    h2.send(0, K, 1, 1)
    h2.assign(0, [K])
    h2.send(0, K, 2, 0)
    h2.poll(1, {K: [(0, 2), (1, 1)]})
    assert "nonmonotonic-send" in found(h2)


def test_a_failed_txn_that_read_its_own_send_is_precommitted() -> None:
    """`precommitted-read-cases` looks at every op, whatever its type."""
    h = History()
    i = h.event(0, "invoke", "txn", [["poll"], ["send", K, 1]])
    c = h.event(0, "fail", "txn", [["poll", {K: [[0, 1]]}], ["send", K, 1]])
    (pre,) = found(h)["precommitted-read"]
    assert pre["ops"] == [i, c] and pre["value"] == 1
