"""A slow, literal transcription of jepsen.tests.kafka's analysis, op by op, in plain Python.

Used only to cross-check the vectorised checker on random histories. Ops are dicts:
`{"process", "type" (ok|info|fail), "f" (send|poll|txn), "invoke", "complete" (history indexes),
"writes": [(key, value, offset|None)], "reads": [(key, [(offset, value), ...])]}` in completion order.
Only ok ops carry reads, as in kafka-chaos histories.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from typing import Any

Op = dict[str, Any]


def op_reads(op: Op) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for k, pairs in op["reads"]:
        out[k].extend(v for _, v in pairs)
    return out


def op_writes(op: Op) -> dict[str, list[int]]:
    out: dict[str, list[int]] = defaultdict(list)
    for k, v, _ in op["writes"]:
        out[k].append(v)
    return out


def analysis(ops: list[Op]) -> dict[str, Any]:
    ok_reads: dict[str, set[int]] = defaultdict(set)
    for op in ops:
        if op["type"] == "ok":
            for k, vs in op_reads(op).items():
                ok_reads[k] |= set(vs)

    def committed(op: Op) -> bool:
        read = any(v in ok_reads.get(k, ()) for k, vs in op_writes(op).items() for v in vs)
        return op["type"] == "ok" or (op["type"] == "info" and read)

    writer_of: dict[tuple[str, int], Op] = {}
    for op in ops:
        for k, v, _ in op["writes"]:
            writer_of[(k, v)] = op

    logs: dict[str, dict[int, set[int]]] = defaultdict(lambda: defaultdict(set))
    for op in ops:
        if committed(op):
            for k, v, o in op["writes"]:
                if o is not None:
                    logs[k][o].add(v)
        for k, pairs in op["reads"]:
            for o, v in pairs:
                logs[k][o].add(v)

    by_value: dict[str, dict[int, int]] = {}
    by_index: dict[str, list[int]] = {}
    first_index: dict[str, dict[int, int]] = {}
    last_index: dict[str, dict[int, int]] = {}
    inconsistent = set()
    duplicate = set()
    for k, log in logs.items():
        offsets = sorted(log)
        by_index[k] = [min(log[o]) for o in offsets]
        by_value[k] = {}
        first_index[k], last_index[k] = {}, {}
        where: dict[int, list[int]] = defaultdict(list)
        for i, o in enumerate(offsets):
            by_value[k][min(log[o])] = i
            if len(log[o]) > 1:
                inconsistent.add((k, o, i, tuple(sorted(log[o]))))
            for v in log[o]:
                first_index[k].setdefault(v, i)
                last_index[k][v] = i
                where[v].append(o)
        for v, os_ in where.items():
            if len(os_) > 1:
                duplicate.add((k, v, tuple(os_)))

    lost = set()
    for k, read_vs in ok_reads.items():
        bound = max((first_index[k][v] for v in read_vs if v in first_index[k]), default=-1)
        for v, last in last_index[k].items():
            if last <= bound and v not in read_vs and committed(writer_of[(k, v)]):
                lost.add((k, v))

    sent: dict[str, set[int]] = defaultdict(set)
    for op in ops:
        if op["type"] == "ok":
            for k, vs in op_writes(op).items():
                sent[k] |= set(vs)
    unseen = {k: tuple(sorted(vs - ok_reads.get(k, set()))) for k, vs in sent.items()}
    unseen = {k: vs for k, vs in unseen.items() if vs}

    def delta(k: str, v1: int, v2: int) -> int:
        bv = by_value.get(k, {})
        return bv[v2] - bv[v1] if v1 in bv and v2 in bv else 1

    int_poll: dict[str, set[Any]] = {"skip": set(), "nm": set()}
    int_send: dict[str, set[Any]] = {"skip": set(), "nm": set()}
    for op in ops:
        for k, vs in op_reads(op).items():
            for v1, v2 in itertools.pairwise(vs):
                d = delta(k, v1, v2)
                if d != 1:
                    int_poll["skip" if d > 1 else "nm"].add((k, op["complete"], (v1, v2), d))
        for k, vs in op_writes(op).items():
            for v1, v2 in itertools.pairwise(vs):
                d = delta(k, v1, v2)
                if d != 1:
                    int_send["skip" if d > 1 else "nm"].add((k, op["invoke"], (v1, v2), d))

    poll: dict[str, set[Any]] = {"skip": set(), "nm": set()}
    last_reads: dict[tuple[int, str], Op] = {}
    for op in ops:
        if op["type"] != "ok":
            continue
        for k, vs in op_reads(op).items():
            prev = last_reads.get((op["process"], k))
            if prev is not None:
                v = op_reads(prev)[k][-1]
                d = delta(k, v, vs[0])
                if d != 1:
                    ops_ = (prev["complete"], op["complete"])
                    poll["skip" if d > 1 else "nm"].add((k, ops_, (v, vs[0]), d))
            last_reads[(op["process"], k)] = op

    nm_send = set()
    last_sends: dict[tuple[int, str], Op] = {}
    for op in ops:
        if op["type"] == "fail":
            continue
        for k, vs in op_writes(op).items():
            prev = last_sends.get((op["process"], k))
            if prev is not None:
                v = op_writes(prev)[k][-1]
                d = delta(k, v, vs[0])
                if d < 1:
                    nm_send.add((k, (prev["invoke"], op["invoke"]), (v, vs[0]), d))
            last_sends[(op["process"], k)] = op

    failed = {(k, v) for op in ops if op["type"] == "fail" for k, v, _ in op["writes"]}
    g1a = set()
    for op in ops:
        if op["type"] == "ok":
            for k, pairs in op["reads"]:
                for _, v in pairs:
                    if (k, v) in failed:
                        g1a.add((k, v, op["complete"]))

    return {
        "lost-write": lost,
        "unseen": unseen,
        "duplicate": duplicate,
        "inconsistent-offsets": inconsistent,
        "int-poll-skip": int_poll["skip"],
        "int-nonmonotonic-poll": int_poll["nm"],
        "int-send-skip": int_send["skip"],
        "int-nonmonotonic-send": int_send["nm"],
        "poll-skip": poll["skip"],
        "nonmonotonic-poll": poll["nm"],
        "nonmonotonic-send": nm_send,
        "G1a": g1a,
    }
