"""Hand-written histories, one or two anomalies each, plus the tricky cases of Jepsen's definitions."""

from __future__ import annotations

from collections.abc import Callable

from spark_helpers import History

K, K1 = "chaos/0", "chaos/1"

CORPUS: dict[str, Callable[[], History]] = {}


def case(fn: Callable[[History], None]) -> Callable[[History], None]:
    def build() -> History:
        h = History()
        fn(h)
        return h

    CORPUS[fn.__name__] = build
    return fn


@case
def clean(h: History) -> None:
    h.send(0, [(K, 10, 0)])
    h.send(0, [(K, 11, 1)])
    h.send(0, [(K1, 20, 0)])
    h.poll(1, {K: [(0, 10), (1, 11)], K1: [(0, 20)]})


@case
def lost_write(h: History) -> None:
    for v, o in ((1, 0), (2, 1), (3, 2)):
        h.send(0, [(K, v, o)])
    h.poll(1, {K: [(0, 1)]})
    h.poll(2, {K: [(2, 3)]})


@case
def unseen_tail(h: History) -> None:
    for v, o in ((1, 0), (2, 1), (3, 2)):
        h.send(0, [(K, v, o)])
    h.send(0, [(K1, 9, None)])  # ok, offset unknown, never read: unseen, never lost
    h.poll(1, {K: [(0, 1)]})


@case
def duplicate(h: History) -> None:
    h.send(0, [(K, 1, 0)])
    h.send(0, [(K, 2, 1)])
    h.poll(1, {K: [(0, 1), (1, 2), (3, 1)]})


@case
def inconsistent(h: History) -> None:
    h.send(0, [(K, 1, 0)])
    h.send(0, [(K, 2, 1)])
    h.poll(1, {K: [(0, 1), (1, 3)]})
    h.poll(2, {K: [(1, 2)]})


@case
def aborted_read(h: History) -> None:
    h.send(0, [(K, 1, None)], type_="fail")
    h.send(0, [(K, 2, 1)])
    h.poll(1, {K: [(0, 1), (1, 2)]})
    h.poll(2, {K: [(0, 1)]})  # a second record of the failed value: a second instance


@case
def duplicate_stretches_bound(h: History) -> None:
    """A value read at a low and a high offset: the bound is its *first* position, so the unread value
    between the two copies is not lost; the one below is."""
    for v, o in ((1, 0), (2, 1), (3, 2), (4, 3)):
        h.send(0, [(K, v, o)])
    h.poll(1, {K: [(0, 1), (2, 3), (4, 3)]})


@case
def info_committed_elsewhere(h: History) -> None:
    """An info send with offsets (acks arrived, op then timed out): its K1 value was read, so the op
    committed, so its K value (never read, below a read one) is lost."""
    h.send(0, [(K, 5, 0), (K1, 6, 0)], type_="info", offsets_on_info=True)
    h.send(1, [(K, 7, 1)])
    h.poll(2, {K1: [(0, 6)]})
    h.poll(3, {K: [(1, 7)]})


@case
def info_not_committed(h: History) -> None:
    """The same, but nothing of the info op was read: it may never have happened; nothing is lost."""
    h.send(0, [(K, 5, 0), (K1, 6, 0)], type_="info", offsets_on_info=True)
    h.send(1, [(K, 7, 1)])
    h.poll(3, {K: [(1, 7)]})


@case
def mixed(h: History) -> None:
    for i in range(12):
        h.send(i % 3, [(K if i % 2 else K1, 100 + i, i // 2)])
    h.send(0, [(K, 200, None)], type_="info")
    h.send(0, [(K1, 201, None)], type_="fail")
    h.poll(5, {K: [(0, 101), (2, 105), (3, 107), (3, 999)], K1: [(0, 100), (1, 102), (5, 110), (6, 110)]})
    h.poll(6, {K: [(5, 111)], K1: [(7, 201)]})


# ---- transactions (docs/architecture.md §3 `txn`) --------------------------------------------------------

TXN_EXPECTED: dict[str, dict[str, int]] = {
    "txn_aborted_read": {"G1a": 2},
    "txn_own_read": {"precommitted-read": 2},
    "txn_clean": {},
}
"""What the checker finds in each transactional history (the agreement tests also assert it, so that an
agreement on nothing cannot pass)."""


@case
def txn_aborted_read(h: History) -> None:
    """An aborted txn's two sends (fail: certainly not committed), read by a read_uncommitted consumer: G1a
    for each record; the committed txn's value beside them is fine."""
    h.txn(0, [["send", K, 1], ["send", K1, 2]], [["send", K, 1], ["send", K1, 2]], type_="fail")
    h.txn(1, [["send", K, 3]], [["send", K, [1, 3]]])
    h.assign(2, {"keys": [K, K1], "isolation": "read_uncommitted"})
    h.poll(2, {K: [(0, 1), (1, 3)], K1: [(0, 2)]})


@case
def txn_own_read(h: History) -> None:
    """Txns that polled their own uncommitted sends: one instance per op — the first, reading its sends to
    two keys, is named by the key it sent to first (chaos/1); the second read another txn's committed value
    (fine) and its own."""
    h.txn(0, [["poll"], ["send", K1, 10], ["send", K, 11], ["poll"]],
          [["poll", {}], ["send", K1, [0, 10]], ["send", K, [0, 11]], ["poll", {K: [[0, 11]], K1: [[0, 10]]}]])
    h.txn(1, [["send", K, 12], ["poll"]], [["send", K, [1, 12]], ["poll", {K: [[0, 11], [1, 12]]}]])
    h.poll(2, {K: [(0, 11), (1, 12)], K1: [(0, 10)]})


@case
def txn_clean(h: History) -> None:
    """Committed txns, read at read_committed by a txn that only polls: nothing to report."""
    h.txn(0, [["send", K, 1], ["send", K1, 2]], [["send", K, [0, 1]], ["send", K1, [0, 2]]])
    h.txn(1, [["send", K, 3]], [["send", K, [1, 3]]])
    h.assign(2, {"keys": [K, K1], "isolation": "read_committed"})
    h.txn(2, [["poll"]], [["poll", {K: [[0, 1], [1, 3]], K1: [[0, 2]]}]])


# ---- order: a process's successive ops, an op's successive records (checker.anomalies.polls, .sends) ------

ORDER_EXPECTED = {"poll-skip": 2, "nonmonotonic-poll": 1, "int-poll-skip": 1, "int-nonmonotonic-poll": 1,
                  "nonmonotonic-send": 1, "int-send-skip": 1, "int-nonmonotonic-send": 1}
"""What the checker finds in `order` (the agreement tests assert it too)."""


@case
def order(h: History) -> None:
    """Each order anomaly once, and what ends a comparison: an assign not naming the key, an ok poll that
    returned the key empty, a rebalance log naming it; a subscribe-mode consumer's nonmonotonic poll."""
    for v in range(1, 5):
        h.send(0, [(K, v, v - 1)])  # chaos/0: 1..4 at offsets 0..3
    h.send(5, [(K1, 11, 1), (K1, 10, 0)])  # one op, its offsets backwards: int-nonmonotonic-send
    h.send(6, [(K1, 12, 2)])
    h.send(5, [(K1, 13, 4), (K1, 15, 6)])  # 14 lands between: int-send-skip
    h.send(6, [(K1, 14, 5)])
    h.send(5, [(K1, 16, 3)])  # process 5 sent 15 at 6 before: nonmonotonic-send
    h.assign(1, [K, K1])
    h.poll(1, {K: [(0, 1), (1, 2)]})
    h.poll(1, {K: [(3, 4)]})  # skips 3: poll-skip
    h.assign(1, [K1])  # chaos/0's position ends
    h.poll(1, {K: [(0, 1)]})  # not compared
    h.poll(2, {K: [(0, 1)]})
    h.poll(2, {K: []})  # returned chaos/0 empty: the position ends
    h.poll(2, {K: [(3, 4)]})  # not compared
    h.event(3, "invoke", "subscribe", ["chaos"])
    h.event(3, "ok", "subscribe", ["chaos"])
    h.poll(3, {K: [(1, 2)]})
    h.poll(3, {K: [(0, 1)]})  # back: nonmonotonic-poll, of a subscribe-mode consumer
    h.event(4, "invoke", "poll", [["poll"]])
    h.event(4, "ok", "poll", [["poll", {K: [[2, 3], [0, 1]], K1: [[1, 11], [0, 10]]}]])
    h.events[-1]["rebalance_log"] = [{"keys": [K]}]  # chaos/0 exempt; chaos/1 goes back: int-nonmonotonic-poll
    h.poll(4, {K1: [(2, 12), (4, 13)]})  # chaos/1 jumps over 16 at 3: int-poll-skip (and a poll-skip)
