"""Small helpers the anomaly functions share."""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np

from kafka_chaos.checker.context import BOOL, I64, Context, deltas, in_op_key_order, op_key_order

if TYPE_CHECKING:
    from kafka_chaos.checker.tables import Reset

MAX_LISTED = 1000
"""Lists that can grow with the run (`skipped`) keep at most this many values; `delta` has the full size."""


def op_refs(ctx: Context, sends_rows: BOOL | I64, polls_rows: BOOL | I64) -> list[tuple[int, int]]:
    """(history index, time) of the ops behind some sends rows and polls rows, sorted and distinct."""
    s, p = ctx.sends, ctx.polls
    refs = {(int(s.op[r]), int(s.time[r])) for r in _rows(sends_rows)}
    refs |= {(int(p.op[r]), int(p.time[r])) for r in _rows(polls_rows)}
    return sorted(refs)


def _rows(sel: BOOL | I64) -> Iterable[int]:
    arr = np.asarray(sel)
    return (int(i) for i in (np.flatnonzero(arr) if arr.dtype == np.bool_ else arr))


def refs_by(groups: I64, ops: I64, times: I64) -> dict[int, set[tuple[int, int]]]:
    """Group (op, time) pairs by an id (e.g. a pid or a log group)."""
    out: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for g, o, t in zip(groups.tolist(), ops.tolist(), times.tolist(), strict=True):
        out[g].add((o, t))
    return out


def with_ops(instance: dict[str, object], refs: Iterable[tuple[int, int]]) -> dict[str, object]:
    """Add `ops` (history indexes) and the parallel `times` to an instance."""
    ordered = sorted(refs)
    instance["ops"] = [o for o, _ in ordered]
    instance["times"] = [t for _, t in ordered]
    return instance


def within_op_steps(ctx: Context, table: str, cols: Any) -> Iterator[tuple[int, int, int, int, list[int] | None]]:
    """Successive records of one key inside one op (of `table`, "sends" or "polls", whose columns are `cols`)
    whose positions in the version order are not consecutive: (row a, row b, key, delta, skipped values when
    delta > 1). The shared scan behind the int-*-skip and int-nonmonotonic-* anomalies."""
    if len(cols) < 2:
        return
    order = op_key_order(ctx, table)
    op, key = in_op_key_order(ctx, table, cols.op), in_op_key_order(ctx, table, cols.key)
    same = np.zeros(len(order), dtype=bool)
    same[1:] = (op[1:] == op[:-1]) & (key[1:] == key[:-1])
    del op
    if not bool(same.any()):  # no op has two records of a key (sends, one value per op, usually)
        return
    idx = ctx.vo.by_value[in_op_key_order(ctx, table, cols.pid)]
    d = np.zeros(len(order), dtype=np.int64)
    deltas(idx[:-1], idx[1:], out=d[1:])
    for j in np.flatnonzero(same & ((d > 1) | (d < 1))).tolist():
        delta, k = int(d[j]), int(key[j])
        skipped = ctx.vo.values_between(k, int(idx[j - 1]), int(idx[j]), MAX_LISTED) if delta > 1 else None
        yield int(order[j - 1]), int(order[j]), k, delta, skipped


class PositionBreaks:
    """What, between two ops of a process, ends its position in a key: an assign / subscribe not naming the key
    (a `Reset`), or an ok poll that returned the key with no records."""

    def __init__(self, resets: Iterable[Reset], empty: Iterable[tuple[int, int, str, str]] = ()) -> None:
        self.resets: dict[int, list[tuple[int, Reset]]] = defaultdict(list)
        for r in resets:
            self.resets[r.process].append((r.index, r))
        for rs in self.resets.values():
            rs.sort(key=lambda x: x[0])
        self.empty: dict[tuple[int, str], list[int]] = defaultdict(list)
        for process, index, k, typ in empty:
            if typ == "ok":
                self.empty[(process, k)].append(index)
        for xs in self.empty.values():
            xs.sort()

    def between(self, process: int, key: str, a: int, b: int) -> bool:
        """Something ends `process`'s position in `key` strictly between history indexes a and b."""
        rs = self.resets.get(process)
        if rs:
            lo = bisect.bisect_right(rs, a, key=lambda x: x[0])
            for index, r in rs[lo:]:
                if index >= b:
                    break
                if not r.keeps(key):
                    return True
        xs = self.empty.get((process, key))
        if xs:
            i = bisect.bisect_right(xs, a)
            if i < len(xs) and xs[i] < b:
                return True
        return False
