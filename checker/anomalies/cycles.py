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

import gc
import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kafka_chaos.checker.history_reader import CLIENT_OP_FS, HistoryRead, HistoryReader

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

I64 = npt.NDArray[np.int64]
READ_COMMITTED = "read_committed"
DEFAULT_ISOLATION = READ_COMMITTED
"""librdkafka's default isolation.level: readers that did not say (e.g. the final drain) read committed."""
WW, WR, PROCESS, REALTIME = 0, 1, 2, 3
KIND_NAMES = ("ww", "wr", "process", "realtime")
MAX_CYCLES = 1000
"""Cycles explained per anomaly; further components are counted in `cycles_unexplained`."""


@dataclass(slots=True)
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


@contextmanager
def _gc_paused() -> Iterator[None]:
    """CPython's cycle collector off while a history's transactions are built or walked: each full collection
    walks every container alive, and a history's micro-ops are millions of small lists that live until the
    check ends, so collections triggered by the allocations themselves made reading 10^6 micro-ops about 2.5x
    slower (bench/checker_speed.py --txn). Nothing built here forms a reference cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def txn_history(events: Iterable[dict[str, Any]]) -> TxnHistory:
    """The client ops of decoded history events as transactions, paired by the history reader."""
    return _transactions(lambda reader: reader.read_events(events))


def read_txn_history(path: Path) -> TxnHistory:
    """`txn_history` over a history.jsonl file: a pairing-only pass of the history reader (no table is built; a
    cut last line is dropped)."""
    with Path(path).open("rb", buffering=1 << 20) as fh:
        return _transactions(lambda reader: reader.read(fh, source=str(path)))


def _transactions(read: Callable[[HistoryReader], HistoryRead]) -> TxnHistory:
    """Every send, poll and txn op as a transaction, in invoke order, from the reader's pairs (an invoke never
    completed is an `info` transaction with its invoke's micro-ops); the readers' isolation levels from its
    `assign` handler."""
    txns: list[Txn] = []
    add = txns.append

    def pair(invoke: dict[str, Any] | None, completion: dict[str, Any] | None) -> None:
        if invoke is None:
            return  # a completion without its invoke: no transaction to speak of
        f = invoke.get("f")
        if f not in CLIENT_OP_FS:
            return
        t = Txn(int(invoke["index"]), invoke["process"], f, invoke_time=int(invoke["time"]),
                mops=list(invoke.get("value") or []))
        if completion is not None:
            t.type, t.complete_time = str(completion["type"]), int(completion["time"])
            value = completion.get("value")
            if isinstance(value, list) and len(value) == len(t.mops):
                t.mops = value
        add(t)

    with _gc_paused():
        found = read(HistoryReader(records=False, ops=False, sink=pair))
        txns.sort(key=_invoke_index)
    return TxnHistory(txns, found.isolation)


def _invoke_index(t: Txn) -> int:
    return t.invoke


@dataclass
class _Graph:
    """Edges as arrays; `ref` points into the ww rows (`ww_a`, `ww_b`: version rows) or the wr rows (`wr_w`:
    writer row, `wr_r`: read row); attributes are built only for edges of reported cycles (`attrs`)."""

    src: I64
    dst: I64
    kind: I64
    ref: I64
    keys: list[str]
    v_key: I64
    v_off: I64
    v_val: I64
    v_mop: I64
    r_key: I64
    r_off: I64
    r_val: I64
    r_mop: I64
    r_iso_rc: npt.NDArray[np.bool_]
    w_mop_of_read: I64

    def attrs(self, e: int) -> dict[str, Any]:
        k, ref = int(self.kind[e]), int(self.ref[e])
        if k == WW:
            a, b = ref, ref + 1
            return {"key": self.keys[int(self.v_key[a])], "values": [int(self.v_val[a]), int(self.v_val[b])],
                    "offsets": [int(self.v_off[a]), int(self.v_off[b])], "from_point": int(self.v_mop[a]),
                    "to_point": int(self.v_mop[b])}
        if k == WR:
            rc = bool(self.r_iso_rc[ref])
            return {"key": self.keys[int(self.r_key[ref])], "values": [int(self.r_val[ref])],
                    "offsets": [int(self.r_off[ref])], "isolation": READ_COMMITTED if rc else "read_uncommitted",
                    "from_point": "commit" if rc else int(self.w_mop_of_read[ref]), "to_point": int(self.r_mop[ref])}
        return {"from_point": "commit", "to_point": "invoke"}


def _a(xs: list[int]) -> I64:
    return np.asarray(xs, dtype=np.int64)


def _first_edge_per_pair(src: I64, dst: I64, total: int) -> npt.NDArray[np.intp]:
    """Indexes of the first edge of each distinct (src, dst) pair, in their original order."""
    _, first = np.unique(src * total + dst, return_index=True)
    return np.sort(first)


def build_graph(h: TxnHistory) -> tuple[_Graph, int]:
    """Dependency edges between transactions (indexes into h.txns) plus realtime virtual nodes; returns the
    graph and the number of real nodes (virtual ones follow)."""
    txns = h.txns
    n = len(txns)
    key_code: dict[str, int] = {}
    w_txn: list[int] = []
    w_mop: list[int] = []
    w_key: list[int] = []
    w_val: list[int] = []
    w_off: list[int] = []
    r_txn: list[int] = []
    r_mop: list[int] = []
    r_key: list[int] = []
    r_val: list[int] = []
    r_off: list[int] = []
    r_rc: list[bool] = []
    iso = h.isolation
    for ti, t in enumerate(txns):  # the hot loop: plain appends, no generators
        rc = iso.get(t.process, DEFAULT_ISOLATION) == READ_COMMITTED if t.f == "poll" else True  # txns poll RC
        ok_t = t.type == "ok"
        for i, m in enumerate(t.mops):
            if type(m) is not list:
                continue
            if m[0] == "send" and len(m) == 3:
                v = m[2]
                w_txn.append(ti)
                w_mop.append(i)
                w_key.append(key_code.setdefault(m[1], len(key_code)))
                if type(v) is list:
                    w_val.append(v[1])
                    w_off.append(v[0] if ok_t and v[0] is not None else -1)
                else:
                    w_val.append(v)
                    w_off.append(-1)
            elif m[0] == "poll" and len(m) == 2 and type(m[1]) is dict:
                for key, records in m[1].items():
                    k = key_code.setdefault(key, len(key_code))
                    for offset, value in records:
                        r_txn.append(ti)
                        r_mop.append(i)
                        r_key.append(k)
                        r_val.append(value)
                        r_off.append(offset)
                        r_rc.append(rc)
    keys = list(key_code)
    node = np.array([t.type != "fail" for t in txns], dtype=bool)
    ok = np.array([t.type == "ok" for t in txns], dtype=bool)
    wt, wm, wk, wv, wo = _a(w_txn), _a(w_mop), _a(w_key), _a(w_val), _a(w_off)
    rt_, rm, rk, rv, ro = _a(r_txn), _a(r_mop), _a(r_key), _a(r_val), _a(r_off)
    rrc = np.asarray(r_rc, dtype=bool)
    # writer of each value (values are unique in a run; the last send wins, as in Jepsen)
    worder = np.argsort(wv, kind="stable")
    wv_sorted = wv[worder]

    def writer_row(values: I64) -> I64:
        if not len(wv_sorted):
            return np.full(len(values), -1, dtype=np.int64)
        pos = np.searchsorted(wv_sorted, values, side="right") - 1
        found = (pos >= 0) & (wv_sorted[np.maximum(pos, 0)] == values)
        return np.where(found, worder[np.maximum(pos, 0)], -1).astype(np.int64)

    # version order: (key, offset) → value from reads and ok sends with offsets; the first seen wins
    has_off = wo >= 0
    vk = np.concatenate([rk, wk[has_off]])
    vo = np.concatenate([ro, wo[has_off]])
    vv = np.concatenate([rv, wv[has_off]])
    seen_first = np.concatenate([np.arange(len(rk)), len(rk) + np.arange(int(has_off.sum()))])
    order = np.lexsort((seen_first, vo, vk))
    vk, vo, vv = vk[order], vo[order], vv[order]
    keep = np.ones(len(vk), dtype=bool)
    keep[1:] = (vk[1:] != vk[:-1]) | (vo[1:] != vo[:-1])
    vk, vo, vv = vk[keep], vo[keep], vv[keep]
    vw = writer_row(vv)
    vtx = np.where(vw >= 0, wt[np.maximum(vw, 0)] if len(wt) else -1, -1)
    live = (vtx >= 0) & node[np.maximum(vtx, 0)] if n else np.zeros(len(vtx), dtype=bool)
    vk, vo, vv, vtx = vk[live], vo[live], vv[live], vtx[live]
    vmop = wm[vw[live]] if len(wm) else np.zeros(0, dtype=np.int64)
    # ww: consecutive versions of a key written by different transactions
    ww_rows = np.flatnonzero((vk[1:] == vk[:-1]) & (vtx[1:] != vtx[:-1])) if len(vk) else np.zeros(0, np.int64)
    ww_src, ww_dst = vtx[ww_rows], vtx[ww_rows + 1]
    # wr: a transaction read another's value
    rw = writer_row(rv)
    rwt = np.where(rw >= 0, wt[np.maximum(rw, 0)] if len(wt) else -1, -1)
    ok_read = (rwt >= 0) & (rwt != rt_)
    if n:
        ok_read &= node[np.maximum(rwt, 0)] & node[rt_] if len(rt_) else ok_read
    wr_rows = np.flatnonzero(ok_read)
    wr_rows = wr_rows[_first_edge_per_pair(rwt[wr_rows], rt_[wr_rows], max(n, 1))] if len(wr_rows) else wr_rows
    w_mop_of_read = np.where(rw >= 0, wm[np.maximum(rw, 0)] if len(wm) else -1, -1)
    # process order: consecutive transactions of one process (only a completed one orders the next)
    procs = np.array([t.process for t in txns], dtype=np.int64)
    nodes_idx = np.flatnonzero(node)
    by_proc = nodes_idx[np.argsort(procs[nodes_idx], kind="stable")]
    same = procs[by_proc[1:]] == procs[by_proc[:-1]] if len(by_proc) else np.zeros(0, dtype=bool)
    pr = np.flatnonzero(same & ok[by_proc[:-1]]) if len(by_proc) else np.zeros(0, np.int64)
    p_src, p_dst = by_proc[pr], by_proc[pr + 1]
    # realtime: ok transaction → its completion node; the completion chain; last completion before invoke → txn
    ctime = np.array([t.complete_time for t in txns], dtype=np.int64)
    itime = np.array([t.invoke_time for t in txns], dtype=np.int64)
    done = np.flatnonzero(node & ok)
    done = done[np.argsort(ctime[done], kind="stable")]
    nd = len(done)
    chain = n + np.arange(nd, dtype=np.int64)
    before = np.searchsorted(ctime[done], itime, side="left") - 1
    into = np.flatnonzero(node & (before >= 0)) if nd else np.zeros(0, np.int64)
    rt_src = np.concatenate([done, chain[:-1], n + before[into]])
    rt_dst = np.concatenate([chain, chain[1:], into])
    src = np.concatenate([ww_src, rwt[wr_rows], p_src, rt_src]).astype(np.int64)
    dst = np.concatenate([ww_dst, rt_[wr_rows], p_dst, rt_dst]).astype(np.int64)
    kind = np.concatenate([np.full(len(ww_src), WW), np.full(len(wr_rows), WR), np.full(len(p_src), PROCESS),
                           np.full(len(rt_src), REALTIME)]).astype(np.int64)
    ref = np.concatenate([ww_rows, wr_rows, np.zeros(len(p_src) + len(rt_src), dtype=np.int64)]).astype(np.int64)
    g = _Graph(src, dst, kind, ref, keys, vk, vo, vv, vmop, rk, ro, rv, rm, rrc, w_mop_of_read)
    return g, n


def _cycle(g: _Graph, inner: csr_matrix, lookup: dict[tuple[int, int], int], first: int) -> list[int] | None:
    """Edge ids of a shortest cycle through edge `first`, over `inner` (the layer's edges inside components:
    a path from v back to u never leaves their component, so the search stays within it)."""
    u, v = int(g.src[first]), int(g.dst[first])
    from scipy.sparse.csgraph import breadth_first_order

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
        hops.append((start if a >= n and start is not None else a, b, k, g.attrs(e)))
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
    with _gc_paused():
        g, n = build_graph(h)
    found = CycleFindings([], [])
    if not len(g.src):
        return found
    from scipy.sparse import csr_matrix  # here: a check of a history without transactions does not need scipy
    from scipy.sparse.csgraph import connected_components

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
