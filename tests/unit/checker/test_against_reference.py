"""The vectorised checker agrees with a literal transcription of Jepsen's analysis on random histories.

Histories are small and messy on purpose: offsets collide, values are read at offsets they were not
acknowledged at, processes send to and read from several keys, ops fail or end indefinitely.
"""

from __future__ import annotations

import random
from typing import Any

import jepsen_reference
from checker_histories import History
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_chaos.checker.analysis import find_anomalies
from kafka_chaos.checker.tables import parse_history

KEYS = ("chaos/0", "chaos/1")


def random_ops(seed: int) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    ops: list[dict[str, Any]] = []
    written: list[tuple[str, int, int]] = []  # (key, value, offset) that could be read
    next_value = 1
    next_offset = {k: 0 for k in KEYS}
    for _ in range(rng.randint(1, 14)):
        process = rng.randint(0, 3)
        kind = rng.random()
        if kind < 0.5:
            writes = []
            for _ in range(rng.choice((1, 1, 1, 2, 3))):
                k = rng.choice(KEYS)
                if rng.random() < 0.75:
                    o: int | None = next_offset[k]
                    next_offset[k] += 1
                else:
                    o = rng.randint(0, max(next_offset[k], 1))  # a collision, or a gap
                if rng.random() < 0.1:
                    o = None
                writes.append((k, next_value, o))
                written.append((k, next_value, o if o is not None else rng.randint(0, 3)))
                next_value += 1
            typ = rng.choices(("ok", "info", "fail"), (8, 1, 1))[0]
            ops.append({"process": process, "type": typ, "f": "send", "writes": writes, "reads": []})
        else:
            reads = []
            for k in rng.sample(KEYS, rng.randint(1, 2)):
                pool = sorted((o, v) for kk, v, o in written if kk == k)
                if not pool:
                    continue
                start = rng.randint(0, len(pool) - 1)
                pairs = pool[start : start + rng.randint(1, 4)]
                if len(pairs) > 1 and rng.random() < 0.2:
                    pairs = [pairs[-1], *pairs[:-1]]  # out of order
                if len(pairs) > 2 and rng.random() < 0.2:
                    del pairs[1]  # a hole
                if rng.random() < 0.15:
                    o, v = pairs[0]
                    pairs[0] = (max(0, o + rng.choice((-1, 1, 2))), v)  # read where it was not acknowledged
                reads.append((k, pairs))
            typ = "ok" if rng.random() < 0.9 else "fail"
            ops.append({"process": process, "type": typ, "f": "poll", "writes": [], "reads": reads})
    return ops


def to_history(ops: list[dict[str, Any]]) -> History:
    h = History()
    for op in ops:
        p = op["process"]
        if op["f"] == "send":
            op["invoke"] = h.event(p, "invoke", "send", [["send", k, v] for k, v, _ in op["writes"]])
            if op["type"] == "ok" or (op["type"] == "info" and op["invoke"] % 4 == 0):
                # ok sends, and some info ones, know their offsets
                value = [["send", k, [o, v]] for k, v, o in op["writes"]]
            else:
                value = [["send", k, v] for k, v, _ in op["writes"]]
                op["writes"] = [(k, v, None) for k, v, _ in op["writes"]]
            op["complete"] = h.event(p, op["type"], "send", value)
        else:
            op["invoke"] = h.event(p, "invoke", "poll", [["poll"]])
            if op["type"] == "ok":
                result = {k: [[o, v] for o, v in pairs] for k, pairs in op["reads"]}
                op["complete"] = h.event(p, "ok", "poll", [["poll", result]])
            else:
                op["reads"] = []
                op["complete"] = h.event(p, op["type"], "poll", [["poll"]])
    return h


def summarise(found: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """The checker's instances in the reference's shape."""

    def pair(i: dict[str, Any]) -> tuple[int, int]:
        a, b = i["values"]
        return (a, b)

    return {
        "lost-write": {(i["key"], i["value"]) for i in found["lost-write"]},
        "unseen": {i["key"]: tuple(i["values"]) for i in found["unseen"]},
        "duplicate": {(i["key"], i["value"], tuple(i["offsets"])) for i in found["duplicate"]},
        "inconsistent-offsets": {
            (i["key"], i["offset"], i["index"], tuple(i["values"])) for i in found["inconsistent-offsets"]
        },
        **{
            name: {(i["key"], i["ops"][0], pair(i), i["delta"]) for i in found[name]}
            for name in ("int-poll-skip", "int-nonmonotonic-poll", "int-send-skip", "int-nonmonotonic-send")
        },
        **{
            name: {(i["key"], tuple(i["ops"]), pair(i), i["delta"]) for i in found[name]}
            for name in ("poll-skip", "nonmonotonic-poll", "nonmonotonic-send")
        },
        "G1a": {(i["key"], i["value"], i["ops"][1]) for i in found["G1a"]},
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(min_value=0, max_value=2**32))
def test_agrees_with_jepsen_transcription(seed: int) -> None:
    ops = random_ops(seed)
    tables = parse_history(to_history(ops).text().encode())
    found, _ = find_anomalies(tables.sends, tables.polls)
    # Same instance counts as sets: no instance is reported twice.
    got = summarise(found)
    for name in got:
        if name != "unseen":
            assert len(got[name]) == len(found[name]), name
    want = jepsen_reference.analysis([op for op in ops if op["f"] in ("send", "poll")])
    assert got == want


def test_the_generator_produces_every_kind_of_anomaly() -> None:
    """Guard against a cross-check that passes because its histories are too tame."""
    seen: set[str] = set()
    for seed in range(250):
        ops = random_ops(seed)
        tables = parse_history(to_history(ops).text().encode())
        found, _ = find_anomalies(tables.sends, tables.polls)
        seen |= {name for name, insts in found.items() if insts}
    assert seen >= {
        "lost-write",
        "unseen",
        "duplicate",
        "inconsistent-offsets",
        "int-poll-skip",
        "int-nonmonotonic-poll",
        "int-send-skip",
        "int-nonmonotonic-send",
        "poll-skip",
        "nonmonotonic-poll",
        "nonmonotonic-send",
        "G1a",
    }
