"""A straight transcription of jepsen.tests.kafka's analysis, function by function, in plain Python.

Source: jepsen-io/jepsen `jepsen/src/jepsen/tests/kafka.clj` (commit c4c7473d, 2026-07-30). Each function
names the Clojure function it transcribes and follows it form by form; nothing here is shared with
`kafka_chaos.checker` (not even the history reader: `read_history` parses history.jsonl with `json`). It is
slow and literal on purpose: the tests run it beside the vectorised checker on hand-written and random
histories and require the same anomalies.

Where a transcription must choose, it says so:

- kafka-chaos's history format (docs/architecture.md §3) is read into Jepsen's ops by `read_history`: a key
  is a string, an invoke that never completed is completed as `info` at the end (its value the invoke's), and
  a send, txn, assign or subscribe completion without a value keeps its invoke's.
- Jepsen's `:by-index` takes `first` of an offset's *set* of values, an arbitrary one when the offset holds
  several (inconsistent offsets); here it is the smallest, as in the checker (any choice is Jepsen's).
- `assign` / `subscribe` name keys in Jepsen; kafka-chaos's `subscribe` names topics, and an assign may be
  `{"keys": [...], ...}`: `select_keys` keeps a key that is named or whose topic is named.
- `lost-write-cases` computes `max-read` with `(nth last-index->values bound)`, which throws when `bound` is
  -1 (every ok read of the key at an unknown place): a crash, not a rule. Here `max-read` is then None (no
  value is lost there, as `must-read` is empty).
- `unseen` is transcribed literally, Bifurcan's union merge included, so its last map can show values that
  ok polls read; the comparison (reference_agreement) leaves those out, saying so: the checker reports only
  values never read.
"""

from __future__ import annotations

import itertools
import json
from collections import Counter
from typing import Any

Op = dict[str, Any]
"""A Jepsen op: `index`, `process`, `type` (invoke|ok|info|fail), `f`, `value`, and `rebalance-log`, plus
`invoke-index` (its invoke's history index) on completions."""


class NoWriterOf(Exception):
    """Jepsen's `(throw+ {:type :no-writer-of, :key k, :value v})` in `lost-write-cases`."""

    def __init__(self, key: str, value: int) -> None:
        super().__init__(f"no writer of {value} in {key}")
        self.key, self.value = key, value


# -- The history -----------------------------------------------------------------------------------------


def read_history(text: str) -> list[Op]:
    """history.jsonl → Jepsen's `h/client-ops`: every event of an integer process, invokes included, in order."""
    ops: list[Op] = []
    pending: dict[int, Op] = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        e = json.loads(line)
        if type(e.get("process")) is not int:
            continue
        op: Op = {"index": e["index"], "process": e["process"], "type": e["type"], "f": e["f"],
                  "value": e.get("value"), "rebalance-log": e.get("rebalance_log", e.get("rebalance-log"))}
        if op["type"] == "invoke":
            pending[op["process"]] = op
        else:
            inv = pending.pop(op["process"], None)
            if inv is not None:
                op["invoke-index"] = inv["index"]
                if op["f"] in ("send", "txn") and not (isinstance(op["value"], list) and op["value"]):
                    op["value"] = inv["value"]
                if op["f"] in ("assign", "subscribe") and op["value"] is None:
                    op["value"] = inv["value"]
            else:
                op["invoke-index"] = op["index"]
        ops.append(op)
    end = max((op["index"] for op in ops), default=-1)
    for inv in sorted(pending.values(), key=lambda o: o["index"]):
        end += 1
        ops.append({**inv, "type": "info", "index": end, "invoke-index": inv["index"]})
    return ops


# -- Micro-ops (kafka.clj: op-writes-helper … op-reads) --------------------------------------------------


def op_writes_helper(op: Op, f: Any) -> dict[str, list[Any]]:
    """`op-writes-helper`: keys an op sent to → `(f [offset value])` of each send, in order."""
    writes: dict[str, list[Any]] = {}
    if op["f"] not in ("txn", "send"):
        return writes
    for mop in op["value"] or ():
        if mop[0] == "send":
            _, k, v = mop
            value = f(tuple(v)) if isinstance(v, list) else f((None, v))
            writes.setdefault(k, []).append(value)
    return writes


def op_writes(op: Op) -> dict[str, list[int]]:
    """`op-writes`."""
    return op_writes_helper(op, lambda pair: pair[1])


def op_reads_helper(op: Op, f: Any) -> dict[str, list[Any]]:
    """`op-reads-helper`: keys an op polled → `(f [offset value])` of each record, in order (a key returned
    with no records maps to an empty list)."""
    res: dict[str, list[Any]] = {}
    if op["f"] not in ("txn", "poll"):
        return res
    value = op["value"] if isinstance(op["value"], list) else ()
    for mop in value:
        if mop[0] == "poll" and len(mop) >= 2:
            for k, pairs in (mop[1] or {}).items():
                vs = res.setdefault(k, [])
                for pair in pairs:
                    vs.append(f(tuple(pair)))
    return res


def op_reads(op: Op) -> dict[str, list[int]]:
    """`op-reads`."""
    return op_reads_helper(op, lambda pair: pair[1])


def writes_by_type(history: list[Op]) -> dict[str, dict[str, set[int]]]:
    """`writes-by-type`."""
    out: dict[str, dict[str, set[int]]] = {}
    for op in history:
        if op["type"] != "invoke" and op["f"] in ("txn", "send"):
            by_key = out.setdefault(op["type"], {})
            for k, vs in op_writes(op).items():
                by_key.setdefault(k, set()).update(vs)
    return out


def reads_by_type(history: list[Op]) -> dict[str, dict[str, set[int]]]:
    """`reads-by-type`."""
    out: dict[str, dict[str, set[int]]] = {}
    for op in history:
        if op["type"] != "invoke" and op["f"] in ("txn", "poll"):
            by_key = out.setdefault(op["type"], {})
            for k, vs in op_reads(op).items():
                by_key.setdefault(k, set()).update(vs)
    return out


def must_have_committed(rbt: dict[str, dict[str, set[int]]], op: Op) -> bool:
    """`must-have-committed?`."""
    if op["type"] == "ok":
        return True
    if op["type"] == "info":
        ok = rbt.get("ok", {})
        return any(v in ok.get(k, set()) for k, vs in op_writes(op).items() for v in vs)
    return False


# -- Version orders (kafka.clj: version-orders-reduce-mop … version-orders) ------------------------------


def version_orders_reduce_mop(logs: dict[str, dict[int, set[int]]], mop: list[Any]) -> None:
    """`version-orders-reduce-mop`."""
    if mop[0] == "send":
        _, k, v = mop
        if isinstance(v, list):
            offset, value = v
            if offset is not None:
                logs.setdefault(k, {}).setdefault(offset, set()).add(value)
    elif mop[0] == "poll":
        for k, pairs in (mop[1] if len(mop) >= 2 and mop[1] else {}).items():
            for offset, value in pairs:
                if offset is not None:
                    logs.setdefault(k, {}).setdefault(offset, set()).add(value)


def datafy_version_order_log(m: dict[int, set[int]]) -> list[set[int] | None]:
    """`datafy-version-order-log`: a vector with a slot for every offset up to the largest."""
    if not m:
        return []
    return [m.get(i) for i in range(max(m) + 1)]


def index_seq(xs: list[int]) -> dict[str, Any]:
    """`index-seq`: `:by-value` is `(into {} ...)`, so a value listed twice keeps its last index."""
    return {"by-index": list(xs), "by-value": {x: i for i, x in enumerate(xs)}}


def version_orders(history: list[Op], rbt: dict[str, dict[str, set[int]]]) -> dict[str, Any]:
    """`version-orders`: logs from the sends of ops that must have committed and from *all* polls."""
    logs: dict[str, dict[int, set[int]]] = {}
    for op in history:
        if op["f"] in ("poll", "send", "txn"):
            value = op["value"] if isinstance(op["value"], list) else []
            if must_have_committed(rbt, op):
                for mop in value:
                    version_orders_reduce_mop(logs, mop)
            else:
                for mop in value:
                    if mop[0] == "poll":
                        version_orders_reduce_mop(logs, mop)
    vlogs = {k: datafy_version_order_log(m) for k, m in logs.items()}
    errors = []
    for k, log in vlogs.items():
        offset = index = 0
        for values in log:
            n = len(values) if values else 0
            if n >= 2 and values:
                errors.append({"key": k, "offset": offset, "index": index, "values": sorted(values)})
                offset, index = offset + 1, index + 1
            elif n == 1:
                offset, index = offset + 1, index + 1
            else:
                offset += 1
    orders = {
        k: {**index_seq([min(vs) for vs in log if vs is not None]), "log": log}  # `first` of a set: see above
        for k, log in vlogs.items()
    }
    return {"errors": errors, "orders": orders}


def log_value_first_index(log: list[set[int] | None]) -> dict[int, int]:
    """`log->value->first-index`."""
    earliest: dict[int, int] = {}
    for i, values in enumerate(v for v in log if v is not None):
        for value in values:
            earliest.setdefault(value, i)
    return earliest


def log_last_index_values(log: list[set[int] | None]) -> list[set[int] | None]:
    """`log->last-index->values`."""
    latest: dict[int, int] = {}
    for i, values in enumerate(v for v in log if v is not None):
        for value in values:
            latest[value] = i
    out: list[set[int] | None] = []
    for value, index in latest.items():
        while len(out) <= index:
            out.append(None)  # assocv pads with nils
        out[index] = (out[index] or set()) | {value}
    return out


def writer_of(history: list[Op]) -> dict[str, dict[int, Op]]:
    """`writer-of`: the last completion (in history order) that sent each value."""
    out: dict[str, dict[int, Op]] = {}
    for op in history:
        if op["type"] != "invoke":
            for k, vs in op_writes(op).items():
                for v in vs:
                    out.setdefault(k, {})[v] = op
    return out


def readers_of(history: list[Op]) -> dict[str, dict[int, list[Op]]]:
    """`readers-of`."""
    out: dict[str, dict[int, list[Op]]] = {}
    for op in history:
        if op["type"] != "invoke":
            for k, vs in op_reads(op).items():
                for v in vs:
                    out.setdefault(k, {}).setdefault(v, []).append(op)
    return out


# -- The anomalies ---------------------------------------------------------------------------------------


def g1a_cases(history: list[Op], wbt: dict[str, dict[str, set[int]]], wo: dict[str, dict[int, Op]]) -> list[Any]:
    """`g1a-cases`: every value an ok poll/txn read that some failed op sent."""
    failed = wbt.get("fail", {})
    return [
        {"key": k, "value": v, "writer": wo.get(k, {}).get(v), "reader": op}
        for op in history
        if op["type"] == "ok" and op["f"] in ("txn", "poll")
        for k, vs in op_reads(op).items()
        for v in vs
        if v in failed.get(k, set())
    ]


def precommitted_read_cases(history: list[Op]) -> list[Any]:
    """`precommitted-read-cases`: one per op that read some value it sent itself (`bad` lists them all, Jepsen
    names `(first bad)`)."""
    out = []
    for op in history:
        reads, writes = op_reads(op), op_writes(op)
        for k, vs in writes.items():
            bad = set(vs) & set(reads.get(k, ()))
            if bad:
                out.append({"op": op, "key": k, "bad": bad})
                break
    return out


def lost_write_cases(history: list[Op], vos: dict[str, Any], rbt: dict[str, dict[str, set[int]]],
                     wo: dict[str, dict[int, Op]], ro: dict[str, dict[int, list[Op]]]) -> list[Any]:
    """`lost-write-cases`."""
    out = []
    for k, vs in rbt.get("ok", {}).items():
        vo = vos.get(k, {})
        value_first_index = log_value_first_index(vo.get("log", []))
        last_index_values = log_last_index_values(vo.get("log", []))
        bound = max((value_first_index[v] for v in vs if v in value_first_index), default=-1)
        must_read = []
        for values in last_index_values[: bound + 1]:
            for v in sorted(values or ()):
                if v not in must_read:
                    must_read.append(v)
        max_read = None
        if bound >= 0:  # Jepsen's (nth last-index->values -1) throws: see the module's docstring
            at = last_index_values[bound]
            first = min(at) if at else None
            readers = ro.get(k, {}).get(first, []) if first is not None else []
            max_read = readers[0] if readers else None
        lost = [v for v in must_read if v not in vs]

        def double_check(v: int, k: str = k) -> bool:
            w = wo.get(k, {}).get(v)
            if w is None:
                raise NoWriterOf(k, v)
            return must_have_committed(rbt, w)

        lost = [v for v in lost if double_check(v)]
        out += [{"key": k, "value": v, "index": value_first_index.get(v), "max-read-index": bound,
                 "writer": wo[k][v], "max-read": max_read} for v in lost]
    return out


def int_poll_skip_nonmonotonic_cases(history: list[Op], vos: dict[str, Any]) -> list[Any]:
    """`int-poll-skip+nonmonotonic-cases` and its `-per-key` reducer: every op, every type."""
    errs = []
    for op in history:
        rebalanced = {k for r in (op.get("rebalance-log") or ()) for k in r.get("keys", ())}
        for k, vs in op_reads(op).items():
            if k in rebalanced:
                continue
            order = vos.get(k, {})
            by_index, by_value = order.get("by-index", []), order.get("by-value", {})
            i1: int | None = None
            v1: Any = "::init"
            for v2 in vs:
                i2 = by_value.get(v2)
                delta = i2 - i1 if i1 is not None and i2 is not None else 1
                if delta > 1:
                    assert i1 is not None and i2 is not None
                    errs.append({"type": "skip", "key": k, "values": [v1, v2], "delta": delta,
                                 "skipped": [by_index[i] for i in range(i1 + 1, i2)], "op": op})
                elif delta < 1:
                    errs.append({"type": "nonmonotonic", "key": k, "values": [v1, v2], "delta": delta, "op": op})
                i1, v1 = i2, v2
    return errs


def int_send_skip_nonmonotonic_cases(history: list[Op], vos: dict[str, Any]) -> list[Any]:
    """`int-send-skip+nonmonotonic-cases`: completions of every type."""
    errs = []
    for op in history:
        if op["type"] == "invoke":
            continue
        for k, vs in op_writes(op).items():
            for v1, v2 in itertools.pairwise(vs):
                order = vos.get(k, {})
                by_index, by_value = order.get("by-index", []), order.get("by-value", {})
                i1, i2 = by_value.get(v1), by_value.get(v2)
                delta = i2 - i1 if i1 is not None and i2 is not None else 1
                if delta > 1:
                    assert i1 is not None and i2 is not None
                    errs.append({"type": "skip", "key": k, "values": [v1, v2], "delta": delta,
                                 "skipped": [by_index[i] for i in range(i1 + 1, i2)], "op": op})
                elif delta < 1:
                    errs.append({"type": "nonmonotonic", "key": k, "values": [v1, v2], "delta": delta, "op": op})
    return errs


def select_keys(m: dict[str, Op], value: Any) -> dict[str, Op]:
    """Clojure's `(select-keys m (:value op))` on an assign / subscribe value; see the module's docstring for
    topics and `{"keys": [...]}`."""
    if isinstance(value, dict):
        value = value.get("keys")
    names = {str(x) for x in value} if isinstance(value, list) else set()
    return {k: op for k, op in m.items() if k in names or k.rpartition("/")[0] in names}


def by_process(history: list[Op]) -> dict[int, list[Op]]:
    """`(group-by :process history)`."""
    out: dict[int, list[Op]] = {}
    for op in history:
        out.setdefault(op["process"], []).append(op)
    return out


def poll_skip_nonmonotonic_cases_per_process(vos: dict[str, Any], ops: list[Op]) -> list[Any]:
    """`poll-skip+nonmonotonic-cases-per-process`. (Jepsen's `:skip` maps hold no `:values`; v and v' are
    computed there all the same, and kept here for the comparison.)"""
    errors: list[Any] = []
    last_reads: dict[str, Op] = {}
    for op in ops:
        if op["f"] in ("assign", "subscribe"):
            if op["type"] not in ("invoke", "fail"):
                last_reads = select_keys(last_reads, op["value"])
        elif op["f"] in ("txn", "poll"):
            reads = op_reads(op)
            for k, ks_reads in reads.items():
                last_op = last_reads.get(k)
                if last_op is None:
                    continue
                order = vos.get(k, {})
                vo = order.get("by-value", {})
                prev = op_reads(last_op).get(k)
                v = prev[-1] if prev else None
                v2 = ks_reads[0] if ks_reads else None
                i, i2 = vo.get(v), vo.get(v2)
                delta = i2 - i if i is not None and i2 is not None else 1
                if delta > 1:
                    assert i is not None and i2 is not None
                    voi = order.get("by-index", [])
                    errors.append({"type": "skip", "key": k, "delta": delta, "values": [v, v2],
                                   "skipped": [voi[x] for x in range(i + 1, i2)], "ops": [last_op, op]})
                if delta < 1:
                    errors.append({"type": "nonmonotonic", "key": k, "values": [v, v2], "delta": delta,
                                   "ops": [last_op, op]})
            if op["type"] == "ok":
                for k in reads:
                    last_reads[k] = op
    return errors


def poll_skip_nonmonotonic_cases(history: list[Op], vos: dict[str, Any]) -> list[Any]:
    """`poll-skip+nonmonotonic-cases`."""
    return [e for ops in by_process(history).values() for e in poll_skip_nonmonotonic_cases_per_process(vos, ops)]


def nonmonotonic_send_cases(history: list[Op], vos: dict[str, Any]) -> list[Any]:
    """`nonmonotonic-send-cases`: each process's ok and info ops in order."""
    errors: list[Any] = []
    for ops in by_process(history).values():
        last_sends: dict[str, Op] = {}
        for op in ops:
            if op["type"] not in ("ok", "info"):
                continue
            if op["f"] in ("assign", "subscribe"):
                last_sends = select_keys(last_sends, op["value"])
            elif op["f"] in ("send", "txn"):
                sends = op_writes(op)
                for k, ks_sends in sends.items():
                    last_op = last_sends.get(k)
                    if last_op is None:
                        continue
                    vo = vos.get(k, {}).get("by-value", {})
                    v = op_writes(last_op)[k][-1]
                    v2 = ks_sends[0]
                    i, i2 = vo.get(v), vo.get(v2)
                    delta = i2 - i if i is not None and i2 is not None else 1
                    if delta < 1:
                        errors.append({"key": k, "values": [v, v2], "delta": delta, "ops": [last_op, op]})
                for k in sends:
                    last_sends[k] = op
    return errors


def duplicate_cases(vos: dict[str, Any]) -> list[Any]:
    """`duplicate-cases`: a value at more than one offset of a key's log."""
    out = []
    for k, order in vos.items():
        log = order["log"]
        freq = Counter(v for vs in log if vs for v in vs)
        for value, number in freq.items():
            if number > 1:
                out.append({"key": k, "value": value, "count": number,
                            "offsets": [i for i, vs in enumerate(log) if vs and value in vs]})
    return out


def bm_merge(a: dict[str, set[int]], b: dict[str, set[int]], f: Any) -> dict[str, set[int]]:
    """Bifurcan's `(bm/merge a b f)`: the union of both maps' entries, `f` where a key is in both."""
    out = {k: set(vs) for k, vs in a.items()}
    for k, vs in b.items():
        out[k] = f(out[k], vs) if k in out else set(vs)
    return out


def unseen(history: list[Op]) -> dict[str, set[int]]:
    """`unseen`: its last map's `:messages`, as `analysis` keeps them (keys with something unseen).

    Literal: `unseen` is `(bm/merge sent' polled' bs/difference)`, a union, so a key no ok op had sent to yet
    keeps the values polled from it; when the last ok op is such a poll, they stay in `:messages` (values read,
    shown as unseen). The comparison drops values read by ok ops from this result, explicitly
    (reference_agreement): the checker reports only sent values as unseen."""
    sent: dict[str, set[int]] = {}
    polled: dict[str, set[int]] = {}
    for op in history:
        if op["type"] != "ok" or op["f"] not in ("poll", "send", "txn"):
            continue
        sent2 = bm_merge(sent, {k: set(vs) for k, vs in op_writes(op).items()}, set.union)
        polled = bm_merge(polled, {k: set(vs) for k, vs in op_reads(op).items()}, set.union)
        sent = bm_merge(sent2, polled, set.difference)
    return {k: vs for k, vs in sent.items() if vs}


def analysis(history: list[Op]) -> dict[str, Any]:
    """`analysis`: every anomaly by Jepsen's name (`:skip` / `:nonmonotonic` split as `analysis` does)."""
    wbt = writes_by_type(history)
    rbt = reads_by_type(history)
    vos_all = version_orders(history, rbt)
    vos = vos_all["orders"]
    wo = writer_of(history)
    ro = readers_of(history)
    poll = poll_skip_nonmonotonic_cases(history, vos)
    int_poll = int_poll_skip_nonmonotonic_cases(history, vos)
    int_send = int_send_skip_nonmonotonic_cases(history, vos)
    return {
        "duplicate": duplicate_cases(vos),
        "int-poll-skip": [e for e in int_poll if e["type"] == "skip"],
        "int-nonmonotonic-poll": [e for e in int_poll if e["type"] == "nonmonotonic"],
        "int-nonmonotonic-send": [e for e in int_send if e["type"] == "nonmonotonic"],
        "int-send-skip": [e for e in int_send if e["type"] == "skip"],
        "inconsistent-offsets": vos_all["errors"],
        "precommitted-read": precommitted_read_cases(history),
        "G1a": g1a_cases(history, wbt, wo),
        "lost-write": lost_write_cases(history, vos, rbt, wo, ro),
        "nonmonotonic-poll": [e for e in poll if e["type"] == "nonmonotonic"],
        "nonmonotonic-send": nonmonotonic_send_cases(history, vos),
        "poll-skip": [e for e in poll if e["type"] == "skip"],
        "unseen": unseen(history),
    }
