"""An independent reference for the cycle search (checker.anomalies.cycles): the dependency graph of a history
built straight from its events with every edge explicit (real-time order as all its pairs, quadratic, fine for
unit histories), and reachability by plain search. For every history the checker's unit tests write:

- each instance the checker reports is a cycle of that graph, its edges of the kinds it names, and the layer
  its variant names (`G0`: ww edges; `G1c`: ww and wr, through a wr edge; `-process` / `-realtime`: every
  kind, through a process or real-time edge) has a cycle in the reference, and the other way round;
- for a history without `txn` ops, the ops taken from the tables (what `checker.check` does for such a history)
  give the instances the second pass over the file gives.
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

from kafka_chaos.checker.anomalies.cycles import CycleFindings, find_cycles, txn_history, txn_history_from_tables
from kafka_chaos.checker.tables import parse_history

FS = ("send", "poll", "txn")


def _ops(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Client ops in invoke order: each invoke with its process's next completion (none: `info`)."""
    pending: dict[Any, dict[str, Any]] = {}
    ops: list[dict[str, Any]] = []
    for e in events:
        if not isinstance(e.get("process"), int) or e.get("f") not in FS:
            continue
        if e["type"] == "invoke":
            pending[e["process"]] = e
            ops.append({"invoke": e["index"], "process": e["process"], "type": "info", "itime": e["time"],
                        "ctime": None, "mops": list(e.get("value") or [])})
            continue
        inv = pending.pop(e["process"], None)
        if inv is None:
            continue
        op = next(o for o in reversed(ops) if o["invoke"] == inv["index"])
        op["type"], op["ctime"] = e["type"], e["time"]
        if isinstance(e.get("value"), list) and len(e["value"]) == len(op["mops"]):
            op["mops"] = e["value"]
    return ops


def reference_edges(events: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[tuple[int, int], set[str]]]:
    """The ops and every edge between them (invoke indexes → the kinds ordering them)."""
    ops = _ops(events)
    node = [o["type"] != "fail" for o in ops]
    writer: dict[tuple[str, int], int] = {}  # Jepsen's writer-of: by key and value
    sends: list[tuple[int, str, int, int | None]] = []  # (op, key, value, offset)
    reads: list[tuple[int, str, int, int | None]] = []
    for i, o in enumerate(ops):
        for m in o["mops"]:
            if isinstance(m, list) and len(m) == 3 and m[0] == "send":
                off, v = m[2] if isinstance(m[2], list) else (None, m[2])
                writer[(m[1], v)] = i
                sends.append((i, m[1], v, off if o["type"] == "ok" and isinstance(off, int) else None))
            elif isinstance(m, list) and len(m) == 2 and m[0] == "poll" and isinstance(m[1], dict):
                for k, records in m[1].items():
                    reads.extend((i, k, v, off if isinstance(off, int) else None) for off, v in records)
    versions: dict[str, dict[int, int]] = defaultdict(dict)
    for _, k, v, off in reads + sends:
        if off is not None:
            versions[k].setdefault(off, v)
    edges: dict[tuple[int, int], set[str]] = defaultdict(set)
    for k, log in versions.items():
        chain = [writer[(k, v)] for _, v in sorted(log.items()) if (k, v) in writer and node[writer[(k, v)]]]
        for a, b in itertools.pairwise(chain):
            if a != b:
                edges[(a, b)].add("ww")
    for i, k, v, _ in reads:
        w = writer.get((k, v))
        if w is not None and w != i and node[w] and node[i]:
            edges[(w, i)].add("wr")
    last: dict[int, int] = {}
    for i, o in enumerate(ops):
        if not node[i]:
            continue
        p = last.get(o["process"])
        if p is not None and ops[p]["type"] == "ok":
            edges[(p, i)].add("process")
        last[o["process"]] = i
    for a, oa in enumerate(ops):
        if node[a] and oa["type"] == "ok":
            for b, ob in enumerate(ops):
                if node[b] and oa["ctime"] < ob["itime"]:
                    edges[(a, b)].add("realtime")
    return ops, {(ops[a]["invoke"], ops[b]["invoke"]): ks for (a, b), ks in edges.items()}


LAYERS = {"G0": ({"ww"}, {"ww"}), "G1c": ({"ww", "wr"}, {"wr"}),
          "process": ({"ww", "wr", "process", "realtime"}, {"process", "realtime"})}


def _reaches(edges: dict[tuple[int, int], set[str]], kinds: set[str], src: int, dst: int) -> bool:
    out: dict[int, list[int]] = defaultdict(list)
    for (a, b), ks in edges.items():
        if ks & kinds:
            out[a].append(b)
    seen, todo = {src}, [src]
    while todo:
        x = todo.pop()
        if x == dst:
            return True
        for y in out[x]:
            if y not in seen:
                seen.add(y)
                todo.append(y)
    return False


def reference_layers(edges: dict[tuple[int, int], set[str]]) -> set[str]:
    """The layers with a cycle through an edge of the kinds they are about."""
    return {name for name, (kinds, through) in LAYERS.items()
            if any(ks & through and _reaches(edges, kinds, b, a) for (a, b), ks in edges.items())}


def _layer(variant: str) -> str:
    return "process" if "-" in variant else variant


def _instances(found: CycleFindings) -> list[dict[str, Any]]:
    return found.G0 + found.G1c


def assert_cycles_agree(text: str) -> None:
    events = [json.loads(line) for line in text.splitlines() if line.strip()]
    found = find_cycles(txn_history(events))
    _, edges = reference_edges(events)
    for inst in _instances(found):
        hops = inst["edges"]
        assert [e["to"] for e in hops] == [e["from"] for e in hops[1:]] + [hops[0]["from"]], inst
        for e in hops:
            assert e["kind"] in edges.get((e["from"], e["to"]), set()), (e, inst)
        kinds = {e["kind"] for e in hops}
        assert kinds <= LAYERS[_layer(inst["variant"])][0], inst
    if not found.unexplained:
        assert {_layer(i["variant"]) for i in _instances(found)} == reference_layers(edges), _instances(found)
    if not any(e.get("f") == "txn" for e in events):
        tables = parse_history(text.encode())
        from_tables = txn_history_from_tables(tables.sends, tables.polls, tables.extras.reads, tables.meta.ops,
                                              tables.meta.isolation)
        assert from_tables is not None
        assert _instances(find_cycles(from_tables)) == _instances(found)
