"""Elle-style dependency cycles among transactions: `G0` and `G1c` (docs/architecture.md §3-§4).

Jepsen's definitions (jepsen.tests.kafka, Elle): every client op that may have happened (`ok`, or `info` —
unknown) is a transaction; a plain send or poll is a transaction of one micro-op. From all reads and every
ok send with a known offset comes the version order of each key (its log: offset → value). Edges:

- `ww`  T1 → T2: T1's value sits right before T2's in a key's version order (values of certainly-failed
  transactions are skipped: they are not versions of anything a committed transaction depends on);
- `wr`  T1 → T2: T2 read a value T1 wrote;
- `process` T1 → T2: the same process ran T1, completed, then ran T2;
- `realtime` T1 → T2: T1 completed before T2 was invoked. Encoded without the quadratic edge set through a
  chain of virtual "completion" nodes in time order (T1 → C(T1) → C(next) → … → T2), so reachability is
  exactly "completed before invoked" with O(n) edges.

Cycles are found as strongly connected components (scipy's vectorized SCC), one explained cycle per component
and layer, as Elle does: `G0` in the ww graph, `G1c` in ww+wr (a cycle through a wr edge), and their
`-process` / `-realtime` variants in the graph with those orders added (a cycle through such an edge).

Each instance: `key` (of its first data edge), `variant` (Elle's name), `ops` (the transactions' history
indexes of their invokes, in cycle order), `processes`, `edges` (`from`, `to`, `kind`, and per kind `key`,
`values`, `offsets`, `isolation`; `from_point` / `to_point` are the micro-op indexes the edge orders, or
"commit" / "invoke": what the reference model needs to decide whether Kafka permits the cycle), and
`explanation`, one line a person can follow.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import breadth_first_order, connected_components

I64 = npt.NDArray[np.int64]
READ_COMMITTED = "read_committed"
DEFAULT_ISOLATION = READ_COMMITTED
"""librdkafka's default isolation.level: readers that did not say (e.g. the final drain) read committed."""
WW, WR, PROCESS, REALTIME = 0, 1, 2, 3
KIND_NAMES = ("ww", "wr", "process", "realtime")
MAX_CYCLES = 1000
"""Cycles explained per anomaly; further components are counted in `cycles_unexplained`."""


@dataclass
class Txn:
    """One client op as a transaction."""

    invoke: int
    process: int
    f: str
    type: str = "info"
    invoke_time: int = 0
    complete_time: int = -1
    mops: list[Any] = field(default_factory=list)


@dataclass
class TxnHistory:
    """The client ops of a history and each reader's isolation level (from its `assign` value)."""

    txns: list[Txn]
    isolation: dict[int, str]

    @property
    def has_transactions(self) -> bool:
        return any(t.f == "txn" for t in self.txns)

    def isolation_of(self, process: int) -> str:
        return self.isolation.get(process, DEFAULT_ISOLATION)


def txn_history(events: Iterable[dict[str, Any]]) -> TxnHistory:
    """Pair invokes with completions per process (a process runs one op at a time)."""
    txns: list[Txn] = []
    open_: dict[int, Txn] = {}
    isolation: dict[int, str] = {}
    for e in events:
        p, f, typ = e.get("process"), e.get("f"), e.get("type")
        if not isinstance(p, int) or isinstance(p, bool):
            continue
        if f == "assign" and isinstance(e.get("value"), dict) and "isolation" in e["value"]:
            isolation[p] = str(e["value"]["isolation"])
            continue
        if f not in ("send", "poll", "txn"):
            continue
        if typ == "invoke":
            t = Txn(int(e["index"]), p, str(f), invoke_time=int(e["time"]), mops=list(e.get("value") or []))
            open_[p] = t
            txns.append(t)
        elif p in open_:
            t = open_.pop(p)
            t.type, t.complete_time = str(typ), int(e["time"])
            value = e.get("value")
            if isinstance(value, list) and len(value) == len(t.mops):
                t.mops = value
    return TxnHistory(txns, isolation)


def read_txn_history(path: Path) -> TxnHistory:
    """`txn_history` over a history.jsonl file (a cut last line is skipped)."""
    from kafka_chaos.checker.tables import _LOADS

    def events() -> Iterable[dict[str, Any]]:
        with Path(path).open("rb") as fh:
            for line in fh:
                if line.strip():
                    try:
                        yield _LOADS(line)
                    except ValueError:
                        return

    return txn_history(events())


@dataclass
class _Graph:
    src: I64
    dst: I64
    kind: I64
    attrs: list[dict[str, Any]]


def _sends(t: Txn) -> Iterable[tuple[int, str, int, int | None]]:
    for i, m in enumerate(t.mops):
        if isinstance(m, list) and len(m) == 3 and m[0] == "send":
            v = m[2]
            if isinstance(v, list):
                yield i, str(m[1]), int(v[1]), (int(v[0]) if v[0] is not None else None)
            else:
                yield i, str(m[1]), int(v), None


def _reads(t: Txn) -> Iterable[tuple[int, str, int, int]]:
    for i, m in enumerate(t.mops):
        if isinstance(m, list) and len(m) == 2 and m[0] == "poll" and isinstance(m[1], dict):
            for key, records in m[1].items():
                for offset, value in records:
                    yield i, str(key), int(offset), int(value)


def build_graph(h: TxnHistory) -> tuple[_Graph, int]:
    """Dependency edges between transactions (indexes into h.txns) plus realtime virtual nodes; returns the
    graph and the number of real nodes (virtual ones follow)."""
    txns = h.txns
    n = len(txns)
    node = np.array([t.type != "fail" for t in txns], dtype=bool)
    writer: dict[int, tuple[int, int]] = {}  # value → (txn, micro-op)
    versions: dict[tuple[str, int], int] = {}  # (key, offset) → value; first seen wins
    reads: list[tuple[int, int, str, int, int]] = []
    for ti, t in enumerate(txns):
        for mop, key, value, offset in _sends(t):
            writer[value] = (ti, mop)
            if offset is not None and t.type == "ok":
                versions.setdefault((key, offset), value)
        for mop, key, offset, value in _reads(t):
            versions.setdefault((key, offset), value)
            reads.append((ti, mop, key, offset, value))
    src: list[int] = []
    dst: list[int] = []
    kind: list[int] = []
    attrs: list[dict[str, Any]] = []

    def edge(a: int, b: int, k: int, attr: dict[str, Any]) -> None:
        src.append(a)
        dst.append(b)
        kind.append(k)
        attrs.append(attr)

    # ww: consecutive versions of a key whose writers are transactions that may have happened
    previous: dict[str, tuple[int, int, int, int]] = {}
    for (key, offset), value in sorted(versions.items()):
        w = writer.get(value)
        if w is None or not node[w[0]]:
            continue
        prev = previous.get(key)
        if prev is not None and prev[0] != w[0]:
            edge(prev[0], w[0], WW, {"key": key, "values": [prev[2], value], "offsets": [prev[3], offset],
                                     "from_point": prev[1], "to_point": w[1]})
        previous[key] = (w[0], w[1], value, offset)
    # wr: a transaction read another's value
    seen: set[tuple[int, int]] = set()
    for ti, mop, key, offset, value in reads:
        w = writer.get(value)
        if w is None or not node[ti] or not node[w[0]] or w[0] == ti or (w[0], ti) in seen:
            continue
        seen.add((w[0], ti))
        iso = h.isolation_of(txns[ti].process) if txns[ti].f == "poll" else READ_COMMITTED
        edge(w[0], ti, WR, {"key": key, "values": [value], "offsets": [offset], "isolation": iso,
                            "from_point": "commit" if iso == READ_COMMITTED else w[1], "to_point": mop})
    # process order: consecutive transactions of one process (only a completed one orders the next)
    last: dict[int, int] = {}
    for ti, t in enumerate(txns):
        if not node[ti]:
            continue
        prev_t = last.get(t.process)
        if prev_t is not None and txns[prev_t].type == "ok":
            edge(prev_t, ti, PROCESS, {"from_point": "commit", "to_point": "invoke"})
        last[t.process] = ti
    # realtime: ok transactions → their completion node; completion chain; last completion before invoke → txn
    done = [ti for ti in range(n) if node[ti] and txns[ti].type == "ok"]
    done.sort(key=lambda ti: txns[ti].complete_time)
    ctimes = np.array([txns[ti].complete_time for ti in done], dtype=np.int64)
    rt = {"from_point": "commit", "to_point": "invoke"}
    for ci, ti in enumerate(done):
        edge(ti, n + ci, REALTIME, rt)
        if ci:
            edge(n + ci - 1, n + ci, REALTIME, rt)
    if len(done):
        invokes = np.array([t.invoke_time for t in txns], dtype=np.int64)
        before = np.searchsorted(ctimes, invokes, side="left") - 1  # last completion strictly before invoke
        for ti in np.flatnonzero(node & (before >= 0)).tolist():
            edge(n + int(before[ti]), ti, REALTIME, rt)
    g = _Graph(np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64), np.array(kind, dtype=np.int64), attrs)
    return g, n


def _cycle(g: _Graph, inner: csr_matrix, lookup: dict[tuple[int, int], int], first: int) -> list[int] | None:
    """Edge ids of a shortest cycle through edge `first`, over `inner` (the layer's edges inside components:
    a path from v back to u never leaves their component, so the search stays within it)."""
    u, v = int(g.src[first]), int(g.dst[first])
    _, pred = breadth_first_order(inner, v, directed=True, return_predecessors=True)
    if u != v and pred[u] < 0:
        return None
    path_nodes = [u]
    while path_nodes[-1] != v:
        path_nodes.append(int(pred[path_nodes[-1]]))
    path_nodes.reverse()  # v … u
    return [first] + [lookup[(a, b)] for a, b in itertools.pairwise(path_nodes)]


def _describe(h: TxnHistory, g: _Graph, n: int, edge_ids: list[int]) -> dict[str, Any]:
    """Collapse virtual realtime hops into one realtime edge between transactions and explain the cycle."""
    txns = h.txns
    hops: list[tuple[int, int, int, dict[str, Any]]] = []  # (from txn, to txn, kind, attrs)
    start: int | None = None
    for e in edge_ids:
        a, b, k = int(g.src[e]), int(g.dst[e]), int(g.kind[e])
        if b >= n:  # into the completion chain
            start = a if a < n else start
            continue
        hops.append((start if a >= n and start is not None else a, b, k, g.attrs[e]))
    if edge_ids and int(g.src[edge_ids[0]]) >= n:  # the cycle began inside the chain: close it
        a, b, k, attr = hops[0]
        hops[0] = (start if start is not None else a, b, k, attr)
    edges: list[dict[str, Any]] = []
    lines: list[str] = []
    for a, b, k, attr in hops:
        ta, tb = txns[a], txns[b]
        edges.append({"from": ta.invoke, "to": tb.invoke, "kind": KIND_NAMES[k], **attr})
        if k == WW:
            lines.append(f"op {ta.invoke} wrote {attr['values'][0]} to {attr['key']} at offset {attr['offsets'][0]}"
                         f", before op {tb.invoke}'s {attr['values'][1]} at offset {attr['offsets'][1]}")
        elif k == WR:
            lines.append(f"op {tb.invoke} ({attr['isolation']}) read {attr['values'][0]} that op {ta.invoke} wrote "
                         f"to {attr['key']}")
        elif k == PROCESS:
            lines.append(f"process {ta.process} completed op {ta.invoke} before it invoked op {tb.invoke}")
        else:
            lines.append(f"op {ta.invoke} completed (t={ta.complete_time}) before op {tb.invoke} was invoked "
                         f"(t={tb.invoke_time})")
    kinds = {e["kind"] for e in edges}
    base = "G1c" if "wr" in kinds else "G0"
    variant = base + ("-realtime" if "realtime" in kinds else "-process" if "process" in kinds else "")
    ops = [e["from"] for e in edges]
    data = [e for e in edges if "key" in e]
    return {
        "key": data[0]["key"] if data else None,
        "variant": variant,
        "ops": ops,
        "processes": [txns[a].process for a, _, _, _ in hops],
        "edges": edges,
        "explanation": "; ".join(lines) + f"; so each of ops {ops} must come before itself",
    }


@dataclass
class CycleFindings:
    G0: list[dict[str, Any]]
    G1c: list[dict[str, Any]]
    unexplained: int = 0


def find_cycles(h: TxnHistory) -> CycleFindings:
    """G0 / G1c instances (with their -process / -realtime variants), one cycle per component and layer."""
    g, n = build_graph(h)
    found = CycleFindings([], [])
    if not len(g.src):
        return found
    total = max(n, int(g.src.max()) + 1, int(g.dst.max()) + 1)
    layers = [(np.isin(g.kind, [WW]), [WW]), (np.isin(g.kind, [WW, WR]), [WR]),
              (np.ones(len(g.kind), dtype=bool), [PROCESS, REALTIME])]
    explained: set[tuple[str, tuple[int, ...]]] = set()
    for sel, through in layers:
        ids = np.flatnonzero(sel)
        m = csr_matrix((np.ones(len(ids)), (g.src[ids], g.dst[ids])), shape=(total, total))
        ncomp, labels = connected_components(m, directed=True, connection="strong")
        sizes = np.bincount(labels, minlength=ncomp)
        inside = sel & (labels[g.src] == labels[g.dst]) & (sizes[labels[g.src]] > 1)
        cand = np.flatnonzero(inside & np.isin(g.kind, through))
        if not len(cand):
            continue
        inner_ids = np.flatnonzero(inside)
        inner = csr_matrix((np.ones(len(inner_ids)), (g.src[inner_ids], g.dst[inner_ids])), shape=(total, total))
        lookup: dict[tuple[int, int], int] = {}  # per hop, the first edge by kind: ww, wr, process, realtime
        for e in inner_ids[np.argsort(g.kind[inner_ids], kind="stable")].tolist():
            lookup.setdefault((int(g.src[e]), int(g.dst[e])), e)
        # one starting edge per component: its first internal edge of the wanted kinds
        _, first_idx = np.unique(labels[g.src[cand]], return_index=True)
        for e in cand[first_idx].tolist():
            if len(found.G0) + len(found.G1c) >= MAX_CYCLES:
                found.unexplained += 1
                continue
            cyc = _cycle(g, inner, lookup, int(e))
            if cyc is None:
                continue
            inst = _describe(h, g, n, cyc)
            sig = (inst["variant"], tuple(sorted(inst["ops"])))
            if sig in explained:
                continue
            explained.add(sig)
            (found.G1c if inst["variant"].startswith("G1c") else found.G0).append(inst)
    return found
