"""G0 / G1c (Elle's cycles) and the transactional reads (G1a by isolation level) on hand-written histories:
each history with the anomaly and one without; the checker reports exactly those instances."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from checker_histories import K1, History, K

from kafka_chaos.checker import check_run
from kafka_chaos.checker.anomalies.cycles import find_cycles, txn_history

K2 = "chaos/2"


def check(h: History, tmp_path: Path) -> dict[str, Any]:
    h.drain()
    return check_run(h.write(tmp_path / "run"), write=False).to_json_dict()


def sends(*records: tuple[str, int, int]) -> tuple[list[Any], list[Any]]:
    """A txn's invoke and completion values for sends of (key, value, offset)."""
    return [["send", k, v] for k, v, _ in records], [["send", k, [o, v]] for k, v, o in records]


def concurrent(h: History, ops: list[tuple[int, list[Any], list[Any]]]) -> list[int]:
    """Invoke every op, then complete them all: no real-time order between them. Returns their invokes."""
    invokes = [h.event(p, "invoke", "txn", inv) for p, inv, _ in ops]
    for p, _, done in ops:
        h.event(p, "ok", "txn", done)
    return invokes


def txn_violations(r: dict[str, Any]) -> list[str]:
    """Violations of the transactional checks (these histories leave values unread: `unseen` is not the point)."""
    return [v["name"] for v in r["violations"] if v["name"] in ("G0", "G1c", "G1a", "precommitted-read")]


def variants(r: dict[str, Any], name: str) -> list[tuple[str, list[int]]]:
    return [(i["variant"], sorted(i["ops"])) for i in r["anomalies"].get(name, [])]


def test_g0_of_two_concurrent_transactions_is_found_and_explained(tmp_path: Path) -> None:
    h = History()
    a, b = concurrent(h, [(1, *sends((K, 1, 0), (K1, 2, 1))), (2, *sends((K, 3, 1), (K1, 4, 0)))])
    r = check(h, tmp_path)
    assert variants(r, "G0") == [("G0", [a, b])] and "G1c" not in r["anomalies"]
    (inst,) = r["anomalies"]["G0"]
    assert {e["kind"] for e in inst["edges"]} == {"ww"} and len(inst["edges"]) == 2
    assert "wrote 1 to chaos/0 at offset 0" in inst["explanation"]
    assert "not_checked" not in r
    # G0 among concurrent writers is what Kafka allows (open transactions interleave appends)
    assert inst["verdict"] == "permitted" and not txn_violations(r)


def test_no_cycle_when_one_transaction_writes_every_key_first(tmp_path: Path) -> None:
    h = History()
    concurrent(h, [(1, *sends((K, 1, 0), (K1, 2, 0))), (2, *sends((K, 3, 1), (K1, 4, 1)))])
    r = check(h, tmp_path)
    assert "G0" not in r["anomalies"] and "G1c" not in r["anomalies"] and "not_checked" not in r


def test_g0_cycle_of_three_transactions(tmp_path: Path) -> None:
    # T1 writes K before T2, T2 writes K1 before T3, T3 writes K2 before T1
    h = History()
    ops = concurrent(h, [(1, *sends((K, 1, 0), (K2, 2, 1))), (2, *sends((K, 3, 1), (K1, 4, 0))),
                         (3, *sends((K1, 5, 1), (K2, 6, 0)))])
    r = check(h, tmp_path)
    assert variants(r, "G0") == [("G0", sorted(ops))]
    (inst,) = r["anomalies"]["G0"]
    assert len(inst["edges"]) == 3 and [e["kind"] for e in inst["edges"]] == ["ww"] * 3
    # the edges close a cycle: each edge starts where the previous ended
    assert all(inst["edges"][i]["to"] == inst["edges"][(i + 1) % 3]["from"] for i in range(3))


def test_g1c_two_transactions_reading_each_other_is_a_violation_at_read_committed(tmp_path: Path) -> None:
    h = History()
    a, b = concurrent(h, [
        (1, [["send", K, 1], ["poll"]], [["send", K, [0, 1]], ["poll", {K1: [[0, 2]]}]]),
        (2, [["send", K1, 2], ["poll"]], [["send", K1, [0, 2]], ["poll", {K: [[0, 1]]}]]),
    ])
    r = check(h, tmp_path)
    assert variants(r, "G1c") == [("G1c", [a, b])] and "G0" not in r["anomalies"]
    (inst,) = r["anomalies"]["G1c"]
    assert [e["kind"] for e in inst["edges"]] == ["wr", "wr"]
    # each committed only after the other's commit was visible to it: impossible at read_committed
    assert inst["verdict"] == "violation"
    assert txn_violations(r) == ["G1c"]


def test_g1c_through_a_ww_edge_is_permitted(tmp_path: Path) -> None:
    """T1 appends to K before T2 does; T2 commits; T1 reads T2's K1 and commits: Kafka orders appends, not
    commits, so this ww+wr cycle needs no broken promise."""
    h = History()
    a, b = concurrent(h, [
        (1, [["send", K, 1], ["poll"]], [["send", K, [0, 1]], ["poll", {K1: [[0, 4]]}]]),
        (2, *sends((K, 3, 1), (K1, 4, 0))),
    ])
    r = check(h, tmp_path)
    assert variants(r, "G1c") == [("G1c", [a, b])]
    assert r["anomalies"]["G1c"][0]["verdict"] == "permitted" and not txn_violations(r)


def test_no_g1c_when_reads_follow_one_direction(tmp_path: Path) -> None:
    h = History()
    concurrent(h, [
        (1, *sends((K, 1, 0), (K1, 2, 0))),
        (2, [["poll"], ["send", K2, 3]], [["poll", {K: [[0, 1]], K1: [[0, 2]]}], ["send", K2, [0, 3]]]),
    ])
    r = check(h, tmp_path)
    assert "G1c" not in r["anomalies"] and "G0" not in r["anomalies"]


def test_realtime_only_cycle(tmp_path: Path) -> None:
    """T2 began after T1 completed, yet T2's value sits before T1's in K: a cycle only through real time."""
    h = History()
    a, _ = h.txn(1, *sends((K, 1, 1), (K1, 2, 0)))
    b, _ = h.txn(2, *sends((K, 3, 0), (K2, 4, 0)))
    r = check(h, tmp_path)
    assert variants(r, "G0") == [("G0-realtime", [a, b])]
    (inst,) = r["anomalies"]["G0"]
    assert sorted(e["kind"] for e in inst["edges"]) == ["realtime", "ww"]
    assert "completed" in inst["explanation"] and "before op" in inst["explanation"]
    assert inst["verdict"] == "violation"  # a completed transaction's appends precede a later one's
    # without the real-time order (the two overlap) there is no cycle
    h2 = History()
    concurrent(h2, [(1, *sends((K, 1, 1), (K1, 2, 0))), (2, *sends((K, 3, 0), (K2, 4, 0)))])
    assert "G0" not in check(h2, tmp_path / "2")["anomalies"]


def test_realtime_cycle_through_a_chain_of_three(tmp_path: Path) -> None:
    """T3 overlaps T1; T2 starts after T1 completed; T1 →rt→ T2 →ww(K1)→ T3 →ww(K)→ T1, no shorter cycle."""
    h = History()
    inv3, done3 = sends((K1, 5, 1), (K, 6, 1))
    c = h.event(3, "invoke", "txn", inv3)
    a, _ = h.txn(1, *sends((K, 1, 2)))
    b, _ = h.txn(2, *sends((K1, 3, 0)))
    h.event(3, "ok", "txn", done3)
    found = find_cycles(txn_history(h.events))
    assert [(i["variant"], sorted(i["ops"])) for i in found.G0] == [("G0-realtime", sorted([a, b, c]))]


def test_aborted_read_is_g1a_permitted_read_uncommitted_violation_read_committed(tmp_path: Path) -> None:
    h = History()
    for p, iso in ((5, "read_committed"), (6, "read_uncommitted")):
        h.event(p, "invoke", "assign", {"keys": [K], "isolation": iso})
        h.event(p, "ok", "assign", {"keys": [K], "isolation": iso})
    h.event(1, "invoke", "txn", [["send", K, 1]])
    h.event(1, "fail", "txn", [["send", K, [0, 1]]], error=["abort", "aborted on purpose"])
    h.txn(2, *sends((K, 2, 2)))
    h.poll(6, {K: [(0, 1), (2, 2)]})
    h.poll(5, {K: [(2, 2)]})
    r = check(h, tmp_path)
    (inst,) = r["anomalies"]["G1a"]
    assert inst["isolation"] == "read_uncommitted" and inst["verdict"] == "permitted", inst
    assert not txn_violations(r)
    h.event(7, "invoke", "assign", {"keys": [K], "isolation": "read_committed"})
    h.event(7, "ok", "assign", {"keys": [K], "isolation": "read_committed"})
    h.poll(7, {K: [(0, 1)]})
    r = check(h, tmp_path / "2")
    by_iso = {i["isolation"]: i["verdict"] for i in r["anomalies"]["G1a"]}
    assert by_iso == {"read_uncommitted": "permitted", "read_committed": "violation"}


def test_fenced_producer_info_txn_read_is_no_anomaly_and_its_unread_value_no_cycle(tmp_path: Path) -> None:
    """A fenced producer's txn ends `info` (unknown): reading its value is no G1a; it joins cycles only as a
    transaction that may have happened, and the new process that fenced it orders after nothing it did."""
    h = History()
    h.event(1, "invoke", "txn", [["send", K, 1], ["send", K1, 2]])
    h.event(1, "info", "txn", [["send", K, [None, 1]], ["send", K1, [None, 2]]],
            error=["_FENCED", "producer fenced"])
    h.txn(2, *sends((K, 3, 1), (K1, 4, 1)))
    h.poll(5, {K: [(0, 1), (1, 3)], K1: [(0, 2), (1, 4)]})
    r = check(h, tmp_path)
    assert r["anomaly_counts"].get("G1a", 0) == 0 and "G0" not in r["anomalies"] and "G1c" not in r["anomalies"]
    # the same fenced txn seen at offsets that interleave with the new one's: a G0 with the info txn in it
    h2 = History()
    i, _ = (h2.event(1, "invoke", "txn", [["send", K, 1], ["send", K1, 2]]),
            h2.event(1, "info", "txn", [["send", K, [None, 1]], ["send", K1, [None, 2]]]))
    j = h2.event(2, "invoke", "txn", [["send", K, 3], ["send", K1, 4]])
    h2.event(2, "ok", "txn", [["send", K, [1, 3]], ["send", K1, [0, 4]]])
    h2.poll(5, {K: [(0, 1), (1, 3)], K1: [(0, 4), (1, 2)]})
    assert variants(check(h2, tmp_path / "2"), "G0") == [("G0", [i, j])]


def test_read_committed_skip_over_aborted_records_is_no_poll_skip_but_over_committed_ones_is(tmp_path: Path) -> None:
    def history(skipped_type: str) -> History:
        h = History()
        for p, iso in ((5, "read_committed"), (6, "read_uncommitted")):
            h.event(p, "invoke", "assign", {"keys": [K], "isolation": iso})
            h.event(p, "ok", "assign", {"keys": [K], "isolation": iso})
        h.txn(1, *sends((K, 1, 0)))
        h.event(2, "invoke", "txn", [["send", K, 2]])
        h.event(2, skipped_type, "txn", [["send", K, [1, 2]]])
        h.txn(3, *sends((K, 3, 2)))
        h.poll(6, {K: [(0, 1), (1, 2), (2, 3)]})
        h.poll(5, {K: [(0, 1)]})
        h.poll(5, {K: [(2, 3)]})
        return h

    r = check(history("fail"), tmp_path / "aborted")
    (skip,) = r["anomalies"]["poll-skip"]
    assert skip["skipped_uncommitted"] and not skip["bad"] and skip["verdict"] == "permitted"
    assert r["valid"] and not r["violations"]
    r = check(history("ok"), tmp_path / "committed")  # the skipped value committed: a real skip
    (skip,) = r["anomalies"]["poll-skip"]
    assert not skip["skipped_uncommitted"] and skip["bad"] and skip["verdict"] == "violation"


def test_a_history_without_transactions_is_read_once_with_the_same_result(tmp_path: Path, monkeypatch: Any) -> None:
    """A failed plain send read by a read_uncommitted and a read_committed consumer: G1a for both, with each
    reader's isolation from its `assign` — taken from the first pass, the file is not read a second time (the
    cycle search takes the ops from the tables)."""
    from kafka_chaos.checker import check as checker_check
    from kafka_chaos.checker.tables import HistoryMeta

    h = History()
    for p, iso in ((5, "read_committed"), (6, "read_uncommitted")):
        h.event(p, "invoke", "assign", {"keys": [K], "isolation": iso})
        h.event(p, "ok", "assign", {"keys": [K]})  # the level is said once, on the invoke
    h.send(1, K, 1, type_="fail")
    h.send(2, K, 2, 0)
    h.poll(5, {K: [(0, 2), (1, 1)]})
    h.poll(6, {K: [(0, 2), (1, 1)]})
    h.drain()
    run_dir = h.write(tmp_path / "run")
    with monkeypatch.context() as m:  # the reference: the second pass forced, as for a transactional history
        m.setattr(HistoryMeta, "has_transactions", property(lambda _: True))
        read_twice = check_run(run_dir, write=False).to_json_dict()

    def second_pass(path: Path) -> Any:
        raise AssertionError(f"{path} read a second time for a history without txn ops")

    monkeypatch.setattr(checker_check, "read_txn_history", second_pass)
    read_once = check_run(run_dir, write=False).to_json_dict()
    assert sorted(i["isolation"] for i in read_once["anomalies"]["G1a"]) == ["read_committed", "read_uncommitted"]
    assert read_once["anomalies"] == read_twice["anomalies"] and read_once["violations"] == read_twice["violations"]
    assert read_once.get("not_checked") == read_twice.get("not_checked")


def test_a_skip_over_what_the_reader_read_in_its_own_aborted_txn_is_permitted(tmp_path: Path) -> None:
    """Process 2 reads offset 0 in a committed txn, offsets 1-2 in a txn it then aborts, and offset 3 next:
    its position was not moved back by the abort (Kafka does not), so the skip is the application's, and the
    model permits it; the same skip over records it never read stays a violation."""

    def history(reread_in_abort: bool) -> History:
        h = History()
        h.txn(1, *sends((K, 1, 0), (K, 2, 1), (K, 3, 2), (K, 4, 3)))
        h.event(2, "invoke", "txn", [["poll"]])
        h.event(2, "ok", "txn", [["poll", {K: [[0, 1]]}]])
        h.event(2, "invoke", "txn", [["poll"]])
        h.event(2, "fail", "txn", [["poll", {K: [[1, 2], [2, 3]] if reread_in_abort else []}]])
        h.event(2, "invoke", "txn", [["poll"]])
        h.event(2, "ok", "txn", [["poll", {K: [[3, 4]]}]])
        h.poll(5, {K: [(0, 1), (1, 2), (2, 3), (3, 4)]})
        return h

    r = check(history(True), tmp_path / "read")
    (skip,) = [i for i in r["anomalies"]["poll-skip"] if i["process"] == 2]
    assert skip["skipped"] == [2, 3] and skip["skipped_read_in_aborted_txn"], skip
    assert skip["verdict"] == "permitted" and "aborted" in skip["reason"]
    r = check(history(False), tmp_path / "unread")
    (skip,) = [i for i in r["anomalies"]["poll-skip"] if i["process"] == 2]
    assert not skip["skipped_read_in_aborted_txn"] and skip["verdict"] == "violation", skip


def test_a_committed_value_acknowledged_at_an_aborted_sends_offset_is_the_reused_sequence(tmp_path: Path) -> None:
    """The loss of a real run (txn-kafka-17754 on 4.0.1, 2026-11-26): process 2's txn sends 5 to chaos/0, the
    request times out, the txn aborts with 5 unacknowledged; its next txn commits 6, acknowledged at offset 1,
    where the reader finds 5 (librdkafka reused 5's sequence, the leader took 6 for a retry of 5). The three
    anomalies that loss makes are found, marked and permitted by the model, naming librdkafka, also when a
    second abort with its send to chaos/0 unacknowledged comes between (a zoo run of 2026-11-29: that abort
    moved the sequence base back to 5's again); the same offsets without that shape (5 acknowledged, another
    process's abort, a commit or an abort whose send was acknowledged in between, an abort that did not return)
    stay violations."""

    def history(shape: str) -> History:
        h = History()
        h.event(5, "invoke", "assign", {"keys": [K], "isolation": "read_uncommitted"})
        h.event(5, "ok", "assign", {"keys": [K]})
        h.txn(1, *sends((K, 1, 0)))
        aborter = 3 if shape == "other process" else 2
        h.event(aborter, "invoke", "txn", [["send", K, 5], ["send", K1, 4]])
        h.event(aborter, "info" if shape == "abort unknown" else "fail", "txn",
                [["send", K, [1 if shape == "acknowledged" else None, 5]],
                 ["send", K1, [None, 4]]])
        read = [(0, 1), (1, 5), (3, 7)]
        if shape == "committed between":
            h.txn(2, *sends((K, 8, 2)))
            read.insert(2, (2, 8))
        elif shape in ("two aborts", "acknowledged abort between"):
            acknowledged = shape == "acknowledged abort between"
            h.event(2, "invoke", "txn", [["send", K, 9]])
            h.event(2, "fail", "txn", [["send", K, [2 if acknowledged else None, 9]]])
            if acknowledged:
                read.insert(2, (2, 9))
        h.txn(2, *sends((K, 6, 1)))
        h.txn(1, *sends((K, 7, 3)))
        h.poll(5, {K: read})
        return h

    for shape in ("reused", "two aborts"):
        r = check(history(shape), tmp_path / shape.replace(" ", "-"))
        marked = {name: [i for i in r["anomalies"].get(name, []) if i.get("reused_sequence")]
                  for name in ("inconsistent-offsets", "lost-write", "unseen")}
        assert all(len(insts) == 1 for insts in marked.values()), (shape, marked)
        mark = marked["lost-write"][0]["reused_sequence"]
        assert {k: mark[k] for k in ("process", "key", "offset", "value", "aborted_value")} == {
            "process": 2, "key": K, "offset": 1, "value": 6, "aborted_value": 5}, shape
        assert all(insts[0]["reused_sequence"] == mark for insts in marked.values())
        assert all(i["verdict"] == "known-defect" and i["defect"].startswith("librdkafka")
                   for insts in marked.values() for i in insts)
        assert sorted(i["name"] for i in r["known_defects"]) == ["inconsistent-offsets", "lost-write", "unseen"]
        assert not [v for v in r["violations"] if v["name"] in marked], (shape, r["violations"])
    for shape in ("acknowledged", "other process", "committed between", "acknowledged abort between",
                  "abort unknown"):
        r = check(history(shape), tmp_path / shape.replace(" ", "-"))
        found = [i for name in ("inconsistent-offsets", "lost-write", "unseen")
                 for i in r["anomalies"].get(name, [])]
        assert found and not any(i.get("reused_sequence") for i in found), (shape, found)
        assert {"lost-write", "inconsistent-offsets"} <= {v["name"] for v in r["violations"]}, (shape, r["violations"])


def test_g0_of_two_plain_multi_send_ops_writing_two_keys_in_opposite_orders(tmp_path: Path) -> None:
    """Jepsen's g0-test with plain `send` ops: every op is a transaction of its micro-ops, so a txn op is not
    needed for a write cycle. Concurrent, the two ops may interleave their appends: Kafka permits it."""
    def history(opposite: bool) -> tuple[History, list[int]]:
        h = History()
        a = h.event(0, "invoke", "send", [["send", K, 1], ["send", K1, 1]])
        b = h.event(1, "invoke", "send", [["send", K, 2], ["send", K1, 2]])
        h.event(0, "ok", "send", [["send", K, [0, 1]], ["send", K1, [1 if opposite else 0, 1]]])
        h.event(1, "ok", "send", [["send", K, [1, 2]], ["send", K1, [0 if opposite else 1, 2]]])
        h.poll(2, {K: [(0, 1), (1, 2)], K1: [(0, 2), (1, 1)] if opposite else [(0, 1), (1, 2)]})
        return h, [a, b]

    h, ops = history(opposite=True)
    r = check(h, tmp_path / "opposite")
    assert "not_checked" not in r or "G0" not in r["not_checked"]
    (inst,) = r["anomalies"]["G0"]
    assert inst["variant"] == "G0" and sorted(inst["ops"]) == ops
    assert {(e["kind"], e["key"]) for e in inst["edges"]} == {("ww", K), ("ww", K1)}
    assert inst["verdict"] == "permitted" and not txn_violations(r)
    r = check(history(opposite=False)[0], tmp_path / "same")
    assert "G0" not in r["anomalies"] and "G1c" not in r["anomalies"]


def test_a_poll_reading_a_value_sent_only_after_it_completed_is_g1c_realtime(tmp_path: Path) -> None:
    """A future read: the poll returned 5, but the send of 5 was invoked after the poll completed. The send
    precedes the poll (wr) and the poll precedes the send (real time): a G1c-realtime, every step forced in
    time, so a violation. The same read while the send was in flight is no cycle."""
    h = History()
    r_op = h.event(1, "invoke", "poll", [["poll"]])
    h.event(1, "ok", "poll", [["poll", {K: [[0, 5]]}]])
    s_op = h.send(0, K, 5, 0)
    r = check(h, tmp_path / "future")
    (inst,) = r["anomalies"]["G1c"]
    assert inst["variant"] == "G1c-realtime" and sorted(inst["ops"]) == sorted([r_op, s_op])
    assert {e["kind"] for e in inst["edges"]} == {"wr", "realtime"}
    assert inst["verdict"] == "violation" and "G1c" in txn_violations(r)
    assert not r["valid"]

    h2 = History()
    s2 = h2.event(0, "invoke", "send", [["send", K, 5]])
    h2.poll(1, {K: [(0, 5)]})
    h2.event(0, "ok", "send", [["send", K, [0, 5]]])
    assert s2 == 0
    r = check(h2, tmp_path / "in-flight")
    assert "G1c" not in r["anomalies"] and "G0" not in r["anomalies"] and r["valid"]


def test_plain_ops_give_the_same_cycles_from_the_tables_as_from_a_second_pass(tmp_path: Path) -> None:
    """A history without txn ops is searched from its tables (no second pass over the file): the instances are
    those the pass over the events finds: here two multi-send ops in opposite orders (a G0, and a G0-realtime as
    one completed before the other began) and a future read (G1c-realtime)."""
    from kafka_chaos.checker.anomalies.cycles import txn_history_from_tables
    from kafka_chaos.checker.tables import parse_history

    h = History()
    h.sends(0, [(K, 1, 1), (K1, 2, 0)])
    h.sends(1, [(K, 3, 0), (K1, 4, 1)])
    h.poll(2, {K2: [(0, 9)]})
    h.send(3, K2, 9, 0)
    h.poll(2, {K: [(0, 3), (1, 1)], K1: [(0, 2), (1, 4)]})
    h.drain()
    tables = parse_history(h.text().encode())
    from_tables = txn_history_from_tables(tables.sends, tables.polls, tables.extras.reads, tables.meta.ops,
                                          tables.meta.isolation)
    assert from_tables is not None
    a, b = find_cycles(from_tables), find_cycles(txn_history(h.events))
    assert sorted(i["variant"] for i in a.G0 + a.G1c) == ["G0", "G0-realtime", "G1c-realtime"]
    assert a.G0 == b.G0 and a.G1c == b.G1c
