"""Elle-style dependency cycles among transactions: `G0` and `G1c` (docs/architecture.md §3-§4).

Jepsen's definitions (jepsen.tests.kafka, Elle): every client op that may have happened (`ok`, or `info` —
unknown) is a transaction, `txn` or not: a plain send or poll is a transaction of its micro-ops, so two
multi-send ops can form a G0 and a poll that read a value sent only after it completed a G1c-realtime. From all
reads and every ok send with a known offset comes the version order of each key (its log: offset → value).
A value's writer is the last op that sent it to that key (Jepsen's `writer-of`). Edges:

- `ww`  T1 → T2: T1's value sits right before T2's in a key's version order (values of certainly-failed
  transactions are skipped: they are not versions of anything a committed transaction depends on); a value
  appended twice (a retried send) is in the order at both offsets, as in Jepsen, and an edge at its later
  copy has the point REAPPEND;
- `wr`  T1 → T2: T2 read a value T1 wrote;
- `process` T1 → T2: the same process ran T1, completed, then ran T2;
- `realtime` T1 → T2: T1 completed before T2 was invoked. Encoded without the quadratic edge set through a
  chain of virtual "completion" nodes in time order (T1 → C(T1) → C(next) → … → T2), so reachability is
  exactly "completed before invoked" with O(n) edges.

Cycles are found as strongly connected components (scipy's vectorized SCC), one explained cycle per component
and layer, as Elle does: `G0` in the ww graph, `G1c` in ww+wr (a cycle through a wr edge), and their
`-process` / `-realtime` variants in the graph with those orders added (a cycle through such an edge).

The ops are columns (TxnHistory), from a pairing pass of the history reader, or, for a history without `txn`
ops, from its tables (`txn_history_from_tables`: no second pass over the file); the edges are built from them
with numpy, no Python object per op.

Each instance: `key` (of its first data edge), `variant` (Elle's name), `ops` (the transactions' history
indexes of their invokes, in cycle order), `processes`, `edges` (`from`, `to`, `kind`, and per kind `key`,
`values`, `offsets`, `isolation`; `from_point` / `to_point` are the micro-op indexes the edge orders, or
"commit" / "invoke": what the reference model needs to decide whether Kafka permits the cycle), and
`explanation`, one line a person can follow.
"""

from __future__ import annotations

import gc
import itertools
from array import array
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from kafka_chaos.checker.history_reader import HistoryRead, HistoryReader

if TYPE_CHECKING:
    from scipy.sparse import csr_matrix

I64 = npt.NDArray[np.int64]
I32 = npt.NDArray[np.int32]
READ_COMMITTED = "read_committed"
DEFAULT_ISOLATION = READ_COMMITTED
"""librdkafka's default isolation.level: readers that did not say (e.g. the final drain) read committed."""
WW, WR, PROCESS, REALTIME = 0, 1, 2, 3
KIND_NAMES = ("ww", "wr", "process", "realtime")
REAPPEND = "reappend"
"""An edge's point at a version that repeats a value of the key's log (a send appended more than once): the
reference model cannot order it against the micro-op's other append, as Jepsen's version order keeps both."""
MAX_CYCLES = 1000
"""Cycles explained per anomaly; further components are counted in `cycles_unexplained`."""


@dataclass(slots=True)
class Txn:
    """One `txn` op, its micro-ops rebuilt from the columns (what the transactional read checks walk)."""

    invoke: int
    process: int
    f: str
    type: str = "info"
    invoke_time: int = 0
    complete_time: int = -1
    mops: list[Any] = field(default_factory=list)


F_NAMES = ("send", "poll", "txn")
SEND, POLL, TXN = 0, 1, 2
TYPE_NAMES = ("ok", "info", "fail")
OK_T, INFO_T, FAIL_T = 0, 1, 2
_F_CODE = {f: i for i, f in enumerate(F_NAMES)}
_TYPE_CODE = {t: i for i, t in enumerate(TYPE_NAMES)}
NO_OFFSET = -1
"""An offset the history does not give (a send not acknowledged, a record read at no known place)."""


def _empty() -> I64:
    return np.zeros(0, dtype=np.int64)


@dataclass
class TxnHistory:
    """The client ops of a history as columns, one row per op in invoke order (`invoke`: its invoke's history
    index), one row per send micro-op (`w_*`) and per record a poll micro-op returned (`r_*`): the cycle graph
    is built from these without a Python object per op. `isolation`: each reader's isolation level (from its
    `assign` value). Offsets the history does not give are NO_OFFSET; `w_off` is the send's as acknowledged,
    whatever its op's outcome."""

    isolation: dict[int, str] = field(default_factory=dict)
    keys: list[str] = field(default_factory=list)
    invoke: I64 = field(default_factory=_empty)
    process: I64 = field(default_factory=_empty)
    f: I64 = field(default_factory=_empty)
    type: I64 = field(default_factory=_empty)
    invoke_time: I64 = field(default_factory=_empty)
    complete_time: I64 = field(default_factory=_empty)
    n_mops: I64 = field(default_factory=_empty)
    w_txn: I64 = field(default_factory=_empty)
    w_mop: I64 = field(default_factory=_empty)
    w_key: I64 = field(default_factory=_empty)
    w_val: I64 = field(default_factory=_empty)
    w_off: I64 = field(default_factory=_empty)
    r_txn: I64 = field(default_factory=_empty)
    r_mop: I64 = field(default_factory=_empty)
    r_key: I64 = field(default_factory=_empty)
    r_val: I64 = field(default_factory=_empty)
    r_off: I64 = field(default_factory=_empty)

    def __len__(self) -> int:
        return len(self.invoke)

    @property
    def has_transactions(self) -> bool:
        return bool(np.any(self.f == TXN))

    @property
    def micro_ops(self) -> int:
        """Sends plus records polled."""
        return len(self.w_txn) + len(self.r_txn)

    def isolation_of(self, process: int) -> str:
        return self.isolation.get(process, DEFAULT_ISOLATION)

    def txn_invokes(self) -> set[int]:
        """The invoke indexes of the `txn` ops."""
        return set(self.invoke[self.f == TXN].tolist())

    def txn_ops(self) -> list[Txn]:
        """The `txn` ops with their micro-ops rebuilt, in invoke order: each send as `["send", key, [offset,
        value]]` (offset None when not acknowledged), each poll as `["poll", {key: [[offset, value], ...]}]`,
        and `[]` where the history held something else."""
        rows = np.flatnonzero(self.f == TXN)
        if not len(rows):
            return []
        pos = np.full(len(self.invoke), -1, dtype=np.int64)
        pos[rows] = np.arange(len(rows))
        out = [Txn(int(self.invoke[r]), int(self.process[r]), "txn", TYPE_NAMES[int(self.type[r])],
                   int(self.invoke_time[r]), int(self.complete_time[r]), [[] for _ in range(int(self.n_mops[r]))])
               for r in rows.tolist()]
        keys = self.keys
        for ti, mi, k, v, o in zip(pos[self.w_txn].tolist(), self.w_mop.tolist(), self.w_key.tolist(),
                                   self.w_val.tolist(), self.w_off.tolist(), strict=True):
            if ti >= 0:
                out[ti].mops[mi] = ["send", keys[k], [None if o == NO_OFFSET else o, v]]
        for ti, mi, k, v, o in zip(pos[self.r_txn].tolist(), self.r_mop.tolist(), self.r_key.tolist(),
                                   self.r_val.tolist(), self.r_off.tolist(), strict=True):
            if ti >= 0:
                m = out[ti].mops[mi]
                if not m:
                    m.extend(("poll", {}))
                m[1].setdefault(keys[k], []).append([None if o == NO_OFFSET else o, v])
        return out


@contextmanager
def _gc_paused() -> Iterator[None]:
    """CPython's cycle collector off while a history's ops are read: each full collection walks every container
    alive, and collections triggered by the decoder's allocations made reading 10^6 micro-ops about 2.5x slower
    (bench/checker_speed.py --txn). Nothing built here forms a reference cycle."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def txn_history(events: Iterable[dict[str, Any]]) -> TxnHistory:
    """The client ops of decoded history events as columns, paired by the history reader."""
    return _transactions(lambda reader: reader.read_events(events))


def read_txn_history(path: Path) -> TxnHistory:
    """`txn_history` over a history.jsonl file: a pairing-only pass of the history reader (no table is built; a
    cut last line is dropped)."""
    with Path(path).open("rb", buffering=1 << 20) as fh:
        return _transactions(lambda reader: reader.read(fh, source=str(path)))


def _transactions(read: Callable[[HistoryReader], HistoryRead]) -> TxnHistory:
    """Every send, poll and txn op as a transaction, from the reader's pairs (an invoke never completed is an
    `info` transaction with its invoke's micro-ops), straight into flat int64 arrays (8 bytes a value, no
    Python object kept per op or micro-op); the readers' isolation levels from its `assign` handler."""
    op_cols = [array("q") for _ in range(7)]  # invoke, process, f, type, invoke time, completion time, mops
    w_cols = [array("q") for _ in range(5)]  # op, micro-op, key, value, offset
    r_cols = [array("q") for _ in range(5)]
    inv, proc, fs, types, itime, ctime, nmops = (c.append for c in op_cols)
    w_txn, w_mop, w_key, w_val, w_off = (c.append for c in w_cols)
    r_txn, r_mop, r_key, r_val, r_off = (c.append for c in r_cols)
    key_code: dict[str, int] = {}
    f_code, type_code, code_of = _F_CODE.get, _TYPE_CODE.get, key_code.get
    count = [0]

    def key(k: str) -> int:
        c = code_of(k)
        if c is None:
            c = key_code[k] = len(key_code)
        return c

    def pair(invoke: dict[str, Any] | None, completion: dict[str, Any] | None) -> None:
        # the hot loop: appends to typed arrays, no object per op
        if invoke is None:
            return  # a completion without its invoke: no transaction to speak of
        fc = f_code(invoke.get("f"))  # type: ignore[arg-type]
        if fc is None:
            return
        ti = count[0]
        count[0] = ti + 1
        mops = invoke.get("value") or ()
        if completion is None:
            types(INFO_T)
            ctime(-1)
        else:
            types(type_code(completion["type"], INFO_T))
            ctime(int(completion["time"]))
            value = completion.get("value")
            if type(value) is list and len(value) == len(mops):
                mops = value
        inv(int(invoke["index"]))
        proc(invoke["process"])
        fs(fc)
        itime(int(invoke["time"]))
        nmops(len(mops))
        i = -1
        for m in mops:
            i += 1
            if type(m) is not list or not m:
                continue
            what = m[0]
            if what == "send" and len(m) == 3:
                v = m[2]
                if type(v) is list:
                    o, v = v
                    if type(o) is not int:
                        o = NO_OFFSET
                else:
                    o = NO_OFFSET
                if type(v) is not int:
                    continue
                w_txn(ti)
                w_mop(i)
                w_key(key(m[1]))
                w_val(v)
                w_off(o)
            elif what == "poll" and len(m) == 2 and type(m[1]) is dict:
                for k, records in m[1].items():
                    kc = key(k)
                    for offset, value in records:
                        if type(value) is not int:
                            continue
                        r_txn(ti)
                        r_mop(i)
                        r_key(kc)
                        r_val(value)
                        r_off(offset if type(offset) is int else NO_OFFSET)

    with _gc_paused():
        found = read(HistoryReader(records=False, ops=False, sink=pair))
    invoke, process, f, typ, itimes, ctimes, n_mops = (np.frombuffer(c, dtype=np.int64) for c in op_cols)
    # the pairs arrive in completion order: ops, then their micro-ops, into invoke order (a stable sort keeps
    # each op's micro-ops in their order, so which send or read comes first is as the history has it)
    order = np.argsort(invoke, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    wt, wm, wk, wv, wo_ = (np.frombuffer(c, dtype=np.int64) for c in w_cols)
    rt, rm, rk, rv, ro_ = (np.frombuffer(c, dtype=np.int64) for c in r_cols)
    wt, rt = rank[wt], rank[rt]
    wo, ro = np.argsort(wt, kind="stable"), np.argsort(rt, kind="stable")
    return TxnHistory(
        isolation=found.isolation, keys=list(key_code), invoke=invoke[order], process=process[order],
        f=f[order], type=typ[order], invoke_time=itimes[order], complete_time=ctimes[order],
        n_mops=n_mops[order], w_txn=wt[wo], w_mop=wm[wo], w_key=wk[wo], w_val=wv[wo], w_off=wo_[wo],
        r_txn=rt[ro], r_mop=rm[ro], r_key=rk[ro], r_val=rv[ro], r_off=ro_[ro])


def _codes(columns: list[Any], names: dict[str, int]) -> list[I64]:
    """Each string column (plain or dictionary-encoded, chunked or not) as codes into `names`, which grows with
    every name first seen: the strings are hashed by Arrow, only the distinct ones pass through Python."""
    import pyarrow as pa
    import pyarrow.compute as pc

    out = []
    for col in columns:
        arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
        if not pa.types.is_dictionary(arr.type):
            arr = pc.dictionary_encode(arr)
        remap = np.asarray([names.setdefault(str(s), len(names)) for s in arr.dictionary.to_pylist()] or [0],
                           dtype=np.int64)
        out.append(remap[arr.indices.to_numpy(zero_copy_only=False).astype(np.int64)])
    return out


def _ints(col: Any, null: int = NO_OFFSET) -> I64:
    import pyarrow.compute as pc

    return np.asarray(pc.fill_null(col, null).to_numpy(), dtype=np.int64)


def txn_history_from_tables(sends: Any, polls: Any, reads: Any, ops: Any, isolation: dict[int, str]
                            ) -> TxnHistory | None:
    """The columns `read_txn_history` builds, from a history's tables instead of a second pass over its file,
    for a history without `txn` ops (a txn's sends and polls are not linked in the tables): the sends table
    (SENDS_SCHEMA: one row per send micro-op, in its op's order), the polls and extra reads (POLLS_SCHEMA,
    EXTRA_READS_SCHEMA) and the ops table (OPS_SCHEMA: each poll's invoke). None when the ops table does not
    name the invoke of every poll that returned records (then read the history).

    An ok poll that returned nothing is no transaction here: it has no data edge, and a cycle through it
    by process or real-time order is also one around it, as those orders are transitive. A poll's micro-op
    index (`to_point` of a read) is 0: a plain poll op's reads leave it by no data edge, so the verdicts do
    not look at it."""
    p_op = np.concatenate([_ints(polls["op_index"]), _ints(reads["op_index"])])
    o_index = _ints(ops["index"])
    pos = np.minimum(np.searchsorted(o_index, p_op), max(len(o_index) - 1, 0))
    if len(p_op) and (not len(o_index) or bool(np.any(o_index[pos] != p_op))):
        return None
    o_inv = _ints(ops["invoke_index"])
    if len(p_op) and bool(np.any(o_inv[pos] < 0)):
        return None
    names: dict[str, int] = {}
    type_codes = _codes([sends["type"], polls["type"], reads["type"]], {t: i for i, t in enumerate(TYPE_NAMES)})
    if any(len(c) and int(c.max()) >= len(TYPE_NAMES) for c in type_codes):
        return None
    w_key, pk, xk = _codes([sends["key"], polls["key"], reads["key"]], names)
    # send ops: one per invoke index, its rows in micro-op order
    s_op = _ints(sends["op_index"])
    sorder = np.argsort(s_op, kind="stable")
    s_sorted = s_op[sorder]
    first = np.flatnonzero(np.r_[True, s_sorted[1:] != s_sorted[:-1]]) if len(s_sorted) else np.zeros(0, np.int64)
    group = np.cumsum(np.r_[False, s_sorted[1:] != s_sorted[:-1]]) if len(s_sorted) else np.zeros(0, np.int64)
    w_mop = np.empty(len(s_op), dtype=np.int64)
    w_mop[sorder] = np.arange(len(s_op)) - first[group]
    w_op = np.empty(len(s_op), dtype=np.int64)
    w_op[sorder] = group
    s_first = sorder[first]
    # poll ops: one per completion index
    pop_order = np.argsort(p_op, kind="stable")
    p_sorted = p_op[pop_order]
    p_starts = np.flatnonzero(np.r_[True, p_sorted[1:] != p_sorted[:-1]]) if len(p_sorted) else p_sorted
    p_group = np.empty(len(p_op), dtype=np.int64)
    p_group[pop_order] = np.cumsum(np.r_[False, p_sorted[1:] != p_sorted[:-1]]) if len(p_sorted) else p_group
    p_one = pop_order[p_starts]  # a row of each poll op
    p_proc = np.concatenate([_ints(polls["process"]), _ints(reads["process"])])
    p_time = np.concatenate([_ints(polls["time"]), _ints(reads["time"])])
    p_type = np.concatenate(type_codes[1:])
    ns = len(first)
    invoke = np.concatenate([s_sorted[first], o_inv[pos[p_one]]])
    order = np.argsort(invoke, kind="stable")
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(len(order))
    w_txn = rank[w_op]
    r_txn = rank[ns + p_group]
    wo, ro = np.argsort(w_txn, kind="stable"), np.argsort(r_txn, kind="stable")
    r_val = np.concatenate([_ints(polls["value"]), _ints(reads["value"])])
    r_off = np.concatenate([_ints(polls["offset"]), _ints(reads["offset"])])
    r_key = np.concatenate([pk, xk])
    return TxnHistory(
        isolation=dict(isolation), keys=list(names), invoke=invoke[order],
        process=np.concatenate([_ints(sends["process"])[s_first], p_proc[p_one]])[order],
        f=np.concatenate([np.full(ns, SEND), np.full(len(p_one), POLL)]).astype(np.int64)[order],
        type=np.concatenate([type_codes[0][s_first], p_type[p_one]])[order],
        invoke_time=np.concatenate([_ints(sends["invoke_time"])[s_first],
                                    _ints(ops["invoke_time"], 0)[pos[p_one]]])[order],
        complete_time=np.concatenate([_ints(sends["complete_time"])[s_first], p_time[p_one]])[order],
        n_mops=np.zeros(len(order), dtype=np.int64),
        w_txn=w_txn[wo], w_mop=w_mop[wo], w_key=w_key[wo], w_val=_ints(sends["value"])[wo],
        w_off=_ints(sends["offset"])[wo], r_txn=r_txn[ro], r_mop=np.zeros(len(ro), dtype=np.int64), r_key=r_key[ro],
        r_val=r_val[ro], r_off=r_off[ro])


@dataclass
class _Graph:
    """Edges as arrays; `ref` points into the ww rows (`ww_a`, `ww_b`: version rows) or the wr rows (`wr_w`:
    writer row, `wr_r`: read row); attributes are built only for edges of reported cycles (`attrs`)."""

    src: I32
    dst: I32
    kind: npt.NDArray[np.int8]
    ref: I32
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
    v_again: npt.NDArray[np.bool_]

    def attrs(self, e: int) -> dict[str, Any]:
        k, ref = int(self.kind[e]), int(self.ref[e])
        if k == WW:
            a, b = ref, ref + 1
            return {"key": self.keys[int(self.v_key[a])], "values": [int(self.v_val[a]), int(self.v_val[b])],
                    "offsets": [int(self.v_off[a]), int(self.v_off[b])], "from_point": self._point(a),
                    "to_point": self._point(b)}
        if k == WR:
            rc = bool(self.r_iso_rc[ref])
            return {"key": self.keys[int(self.r_key[ref])], "values": [int(self.r_val[ref])],
                    "offsets": [int(self.r_off[ref])], "isolation": READ_COMMITTED if rc else "read_uncommitted",
                    "from_point": "commit" if rc else int(self.w_mop_of_read[ref]), "to_point": int(self.r_mop[ref])}
        return {"from_point": "commit", "to_point": "invoke"}

    def _point(self, version: int) -> int | str:
        """The micro-op that appended a version, or REAPPEND when its value is also at an earlier offset of the
        key: the micro-op appended it more than once (a retried send), so the index no longer names one event."""
        return REAPPEND if self.v_again[version] else int(self.v_mop[version])


def _a(xs: list[int]) -> I64:
    return np.asarray(xs, dtype=np.int64)


def _key_value(keys: I64, values: I64, w_keys: I64, w_values: I64) -> I64:
    """(key code, value) pairs as one int64 that sorts and compares as the pair, for values in the range the
    sends' values span (others cannot match a send: they map outside it)."""
    if not len(w_values):
        return np.full(len(values), -1, dtype=np.int64)
    lo, hi = int(w_values.min()), int(w_values.max())
    span = hi - lo + 3
    if span * (int(w_keys.max()) + 1) >= 1 << 62:  # values too spread for one int64: rank them instead
        distinct = np.unique(w_values)
        pos = np.minimum(np.searchsorted(distinct, values), len(distinct) - 1)
        rank = np.where(distinct[pos] == values, pos + 1, 0)
        return keys * (len(distinct) + 1) + rank
    return keys * span + np.clip(values - lo + 1, 0, span - 1)


def _first_edge_per_pair(src: I64, dst: I64, total: int) -> npt.NDArray[np.intp]:
    """Indexes of the first edge of each distinct (src, dst) pair, in their original order."""
    _, first = np.unique(src * total + dst, return_index=True)
    return np.sort(first)


def build_graph(h: TxnHistory) -> tuple[_Graph, int]:
    """Dependency edges between transactions (rows of h) plus realtime virtual nodes; returns the graph and the
    number of real nodes (virtual ones follow)."""
    n = len(h)
    wt, wm, wk, wv = h.w_txn, h.w_mop, h.w_key, h.w_val
    rt_, rm, rk, rv, ro_all = h.r_txn, h.r_mop, h.r_key, h.r_val, h.r_off
    # a send's offset places its value only when its op certainly happened
    wo = np.where(h.type[wt] == OK_T, h.w_off, NO_OFFSET) if len(wt) else h.w_off
    # what each read promised: a poll op's reader at its process's isolation level; transactions poll RC
    rc_procs = [p for p, iso in h.isolation.items() if iso != READ_COMMITTED]
    r_f = h.f[rt_]
    rrc = (r_f != POLL) | ~np.isin(h.process[rt_], np.asarray(rc_procs, dtype=np.int64))
    node = h.type != FAIL_T
    ok = h.type == OK_T
    # writer of each (key, value) (Jepsen's writer-of; the last send wins)
    wkv = _key_value(wk, wv, wk, wv)
    worder = np.argsort(wkv, kind="stable")
    wv_sorted = wkv[worder]

    def writer_row(keys: I64, values: I64) -> I64:
        if not len(wv_sorted):
            return np.full(len(values), -1, dtype=np.int64)
        kv = _key_value(keys, values, wk, wv)
        pos = np.searchsorted(wv_sorted, kv, side="right") - 1
        found = (pos >= 0) & (wv_sorted[np.maximum(pos, 0)] == kv)
        return np.where(found, worder[np.maximum(pos, 0)], -1).astype(np.int64)

    # version order: (key, offset) → value from reads at known offsets and ok sends with offsets; the first
    # seen wins
    r_placed = np.flatnonzero(ro_all != NO_OFFSET)
    has_off = np.flatnonzero(wo != NO_OFFSET)
    vk = np.concatenate([rk[r_placed], wk[has_off]])
    vo = np.concatenate([ro_all[r_placed], wo[has_off]])
    vv = np.concatenate([rv[r_placed], wv[has_off]])
    order = np.lexsort((vo, vk))  # stable: among equal (key, offset), reads in order, then sends
    vk, vo, vv = vk[order], vo[order], vv[order]
    keep = np.ones(len(vk), dtype=bool)
    keep[1:] = (vk[1:] != vk[:-1]) | (vo[1:] != vo[:-1])
    vk, vo, vv = vk[keep], vo[keep], vv[keep]
    del order, keep, r_placed, has_off, wo  # each step's temporaries go as it ends: they are the peak's bulk
    vw = writer_row(vk, vv)
    vtx = np.where(vw >= 0, wt[np.maximum(vw, 0)] if len(wt) else -1, -1)
    live = (vtx >= 0) & node[np.maximum(vtx, 0)] if n else np.zeros(len(vtx), dtype=bool)
    vk, vo, vv, vtx = vk[live], vo[live], vv[live], vtx[live]
    vmop = wm[vw[live]] if len(wm) else np.zeros(0, dtype=np.int64)
    # versions whose value the key's log already holds at an earlier offset (a duplicate append)
    vkv = _key_value(vk, vv, wk, wv)
    by_kv = np.lexsort((vo, vkv))
    again = np.zeros(len(vkv), dtype=bool)
    again[by_kv[1:]] = vkv[by_kv[1:]] == vkv[by_kv[:-1]]
    del vkv, by_kv, vw, live
    # ww: consecutive versions of a key written by different transactions
    ww_rows = np.flatnonzero((vk[1:] == vk[:-1]) & (vtx[1:] != vtx[:-1])) if len(vk) else np.zeros(0, np.int64)
    ww_src, ww_dst = vtx[ww_rows], vtx[ww_rows + 1]
    # wr: a transaction read another's value
    rw = writer_row(rk, rv)
    rwt = np.where(rw >= 0, wt[np.maximum(rw, 0)] if len(wt) else -1, -1)
    ok_read = (rwt >= 0) & (rwt != rt_)
    if n and len(rt_):
        ok_read &= node[np.maximum(rwt, 0)] & node[rt_]
    wr_rows = np.flatnonzero(ok_read)
    wr_rows = wr_rows[_first_edge_per_pair(rwt[wr_rows], rt_[wr_rows], max(n, 1))] if len(wr_rows) else wr_rows
    w_mop_of_read = np.where(rw >= 0, wm[np.maximum(rw, 0)] if len(wm) else -1, -1)
    del rw, ok_read, wkv
    # process order: consecutive transactions of one process (only a completed one orders the next)
    procs = h.process
    nodes_idx = np.flatnonzero(node)
    by_proc = nodes_idx[np.argsort(procs[nodes_idx], kind="stable")]
    same = procs[by_proc[1:]] == procs[by_proc[:-1]] if len(by_proc) else np.zeros(0, dtype=bool)
    pr = np.flatnonzero(same & ok[by_proc[:-1]]) if len(by_proc) else np.zeros(0, np.int64)
    p_src, p_dst = by_proc[pr], by_proc[pr + 1]
    del nodes_idx, by_proc, same, pr
    # realtime: ok transaction → its completion node; the completion chain; last completion before invoke → txn
    ctime, itime = h.complete_time, h.invoke_time
    if not _may_cycle(itime, ctime[ok & node] - itime[ok & node], (ww_src, ww_dst), (rwt[wr_rows], rt_[wr_rows]),
                      (p_src, p_dst)):
        return _Graph(*(np.zeros(0, np.int32),) * 2, np.zeros(0, np.int8), np.zeros(0, np.int32), h.keys, vk, vo,
                      vv, vmop, rk, ro_all, rv, rm, rrc, w_mop_of_read, again), n
    done = np.flatnonzero(node & ok)
    done = done[np.argsort(ctime[done], kind="stable")]
    nd = len(done)
    chain = n + np.arange(nd, dtype=np.int64)
    before = np.searchsorted(ctime[done], itime, side="left") - 1
    into = np.flatnonzero(node & (before >= 0)) if nd else np.zeros(0, np.int64)
    rt_src = np.concatenate([done, chain[:-1], n + before[into]])
    rt_dst = np.concatenate([chain, chain[1:], into])
    del done, chain, before, into
    # nodes as int32 (scipy's index type) and kinds as int8: the edges are most of the search's memory
    src = np.concatenate([ww_src, rwt[wr_rows], p_src, rt_src], dtype=np.int32, casting="unsafe")
    del rwt, ww_src, p_src, rt_src
    dst = np.concatenate([ww_dst, rt_[wr_rows], p_dst, rt_dst], dtype=np.int32, casting="unsafe")
    kind = np.repeat(np.array([WW, WR, PROCESS, REALTIME], dtype=np.int8),
                     [len(ww_dst), len(wr_rows), len(p_dst), len(rt_dst)])
    del ww_dst, p_dst, rt_dst
    ref = np.zeros(len(src), dtype=np.int32)
    ref[:len(ww_rows)] = ww_rows
    ref[len(ww_rows):len(ww_rows) + len(wr_rows)] = wr_rows
    g = _Graph(src, dst, kind, ref, h.keys, vk, vo, vv, vmop, rk, ro_all, rv, rm, rrc, w_mop_of_read, again)
    return g, n


def _may_cycle(itime: I64, durations: I64, *edges: tuple[I64, I64]) -> bool:
    """Whether the graph can hold a cycle at all, in O(edges) without the search: place each transaction at its
    invoke time and each completion node at its completion time. Real-time edges (into the completion chain, along
    it, and out of it to a later invoke) never go back in time, and the chain alone is a path; so a cycle needs
    an edge that does not go forward: a data or process edge to a transaction invoked no later than its source,
    or an op that completed no later than it was invoked. A clean history has none (offsets and reads follow
    invoke order), and is then done without building the real-time edges or the search."""
    if bool(np.any(durations <= 0)):
        return True
    return any(len(a) and bool(np.any(itime[b] <= itime[a])) for a, b in edges)


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
    invoke, process = h.invoke, h.process
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
        ia, ib = int(invoke[a]), int(invoke[b])
        edges.append({"from": ia, "to": ib, "kind": KIND_NAMES[k], **attr})
        if k == WW:
            lines.append(f"op {ia} wrote {attr['values'][0]} to {attr['key']} at offset {attr['offsets'][0]}"
                         f", before op {ib}'s {attr['values'][1]} at offset {attr['offsets'][1]}")
        elif k == WR:
            lines.append(f"op {ib} ({attr['isolation']}) read {attr['values'][0]} that op {ia} wrote "
                         f"to {attr['key']}")
        elif k == PROCESS:
            lines.append(f"process {int(process[a])} completed op {ia} before it invoked op {ib}")
        else:
            lines.append(f"op {ia} completed (t={int(h.complete_time[a])}) before op {ib} was invoked "
                         f"(t={int(h.invoke_time[b])})")
    kinds = {e["kind"] for e in edges}
    base = "G1c" if "wr" in kinds else "G0"
    variant = base + ("-realtime" if "realtime" in kinds else "-process" if "process" in kinds else "")
    ops = [e["from"] for e in edges]
    data = [e for e in edges if "key" in e]
    return {
        "key": data[0]["key"] if data else None,
        "variant": variant,
        "ops": ops,
        "processes": [int(process[a]) for a, _, _, _ in hops],
        "edges": edges,
        "explanation": "; ".join(lines) + f"; so each of ops {ops} must come before itself",
    }


@dataclass
class CycleFindings:
    G0: list[dict[str, Any]]
    G1c: list[dict[str, Any]]
    unexplained: int = 0


def _csr(src: I32, dst: I32, total: int) -> csr_matrix:
    """The adjacency matrix of edges src → dst, built straight into CSR (each row's columns sorted and distinct,
    as scipy's COO conversion leaves them, so searches visit neighbours in the same order) without COO's copies."""
    from scipy.sparse import csr_matrix

    order = np.lexsort((dst, src))
    s, d = src[order], dst[order]
    del order
    if len(s):
        distinct = np.r_[True, (s[1:] != s[:-1]) | (d[1:] != d[:-1])]
        s, d = s[distinct], d[distinct]
    indptr = np.zeros(total + 1, dtype=np.int32)
    np.cumsum(np.bincount(s, minlength=total), out=indptr[1:])
    return csr_matrix((np.ones(len(d)), d.astype(np.int32), indptr), shape=(total, total))


def find_cycles(h: TxnHistory) -> CycleFindings:
    """G0 / G1c instances (with their -process / -realtime variants), one cycle per component and layer."""
    with _gc_paused():
        g, n = build_graph(h)
    found = CycleFindings([], [])
    if not len(g.src):
        return found
    from scipy.sparse.csgraph import connected_components

    total = max(n, int(g.src.max()) + 1, int(g.dst.max()) + 1)
    layers = [(np.isin(g.kind, [WW]), [WW]), (np.isin(g.kind, [WW, WR]), [WR]),
              (np.ones(len(g.kind), dtype=bool), [PROCESS, REALTIME])]
    explained: set[tuple[str, tuple[int, ...]]] = set()
    for sel, through in layers:
        if sel.all():  # the last layer: every edge, without copies of them
            m = _csr(g.src, g.dst, total)
        else:
            ids = np.flatnonzero(sel)
            m = _csr(g.src[ids], g.dst[ids], total)
            del ids
        ncomp, labels = connected_components(m, directed=True, connection="strong")
        sizes = np.bincount(labels, minlength=ncomp)
        inside = sel & (labels[g.src] == labels[g.dst]) & (sizes[labels[g.src]] > 1)
        cand = np.flatnonzero(inside & np.isin(g.kind, through))
        if not len(cand):
            continue
        inner_ids = np.flatnonzero(inside)
        inner = _csr(g.src[inner_ids], g.dst[inner_ids], total)
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
