"""Acknowledged values that reads do not show: `lost-write` and `unseen`."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from kafka_chaos.checker.anomalies._common import with_ops
from kafka_chaos.checker.context import I64, OK, Context, sort_by
from kafka_chaos.errors import HistoryError

_BIG = np.iinfo(np.int64).max


def lost_write_cases(ctx: Context) -> list[dict[str, Any]]:
    """Values we must have read, and did not (Jepsen's `lost-write-cases`, exactly).

    We cannot expect to read everything: a value sent just before the end may never be polled, and a
    consumer may lag. What we can say is this: if an ok poll of key k read a value at position i, then a
    reader got that far into k's log, so every value *before* i should have been read by someone too.

    Precisely, per key k (positions are dense indexes in k's version order; see `VersionOrders`):

    1. `bound` = the largest, over all values read by ok polls of k, of the *first* position at which that
       value appears in the log (the first, so that a value duplicated further on does not stretch the
       bound). -1 if k was never read.
    2. must-read = the values whose *last* position is ≤ bound (the last, so that a value also found at a
       later offset, or one whose offset holds conflicting values, is not claimed too early).
    3. lost = must-read − values read by ok polls of k, keeping only values whose send must have committed
       (its op was ok, or info and some value it sent was read; the op is the value's last writer, Jepsen's
       `writer-of`). A value whose offset was never learned (from an ack or a read) has no position and is
       never lost: it can only be `unseen`; a value ok polls read only at unknown offsets does not move the
       bound.

    A must-read value nobody sent (a fail or info poll put it in the log) stops the check with a HistoryError,
    as Jepsen's `double-check` throws `:no-writer-of`: the history is not one run's, or the topic held data
    before it. Where every ok read of a key is unplaced (bound -1) Jepsen's `(nth last-index->values -1)`
    throws too; that is a crash, not a rule, and here such a key simply has nothing lost.

    Instance: `key`, `value`, `offset` (where its send was acknowledged), `index` (its first position),
    `max_read_index` (the bound), `process`, `ops` [writer, a reader at the bound] with `times`,
    `invoke_time` / `complete_time` of the send, and `max_read_value` / `max_read_offset`: what that reader
    saw at the bound (Jepsen names an arbitrary reader of a value at the bound; we name the earliest).
    """
    vo = ctx.vo
    s, p = ctx.sends, ctx.polls
    nk = len(ctx.keys)
    bound = np.full(nk, -1, dtype=np.int64)
    read_pids = np.flatnonzero(ctx.read)
    np.maximum.at(bound, ctx.pair_key[read_pids], vo.first_index[read_pids])

    last = vo.last_index
    # Only the few values that must have been read and were not need their writer looked up.
    must_read = np.flatnonzero((last >= 0) & (last <= bound[ctx.pair_key]) & ~ctx.read)
    w = ctx.writer
    must_w = w[must_read]
    orphans = must_read[must_w < 0]
    if len(orphans):
        pid = int(orphans[0])
        k = int(ctx.pair_key[pid])
        raise HistoryError(
            f"key {ctx.keys[k]}: value {int(ctx.pair_value[pid])} is in the log (a poll that did not succeed "
            f"read it) before what ok polls reached, but no op sent it ({len(orphans)} such values in all). "
            "Jepsen's lost-write-cases stops there (:no-writer-of): a history must hold every send of the "
            "values it reads (one run's, on a topic that was empty)")
    lost_pids = must_read[ctx.committed[must_w]]  # every writer is known by now
    if not len(lost_pids):
        return []

    # The earliest ok poll row that read, per key, a value whose first position is the bound.
    at_bound = (p.type == OK) & (vo.first_index[p.pid] == bound[p.key])
    max_read_row = np.full(nk, _BIG, dtype=np.int64)
    # rows are in op order, so the smallest row per key is the earliest reader
    np.minimum.at(max_read_row, p.key[at_bound], np.flatnonzero(at_bound))
    max_read_row[max_read_row == _BIG] = -1

    order = np.lexsort((vo.first_index[lost_pids], ctx.pair_key[lost_pids]))
    out = []
    for pid in lost_pids[order].tolist():
        k = int(ctx.pair_key[pid])
        row = int(w[pid])
        mr = int(max_read_row[k])
        refs = [(int(s.op[row]), int(s.time[row]))]
        inst: dict[str, Any] = {
            "key": ctx.keys[k],
            "value": int(ctx.pair_value[pid]),
            "offset": int(s.offset[row]) if s.has_offset[row] else None,
            "index": int(vo.first_index[pid]),
            "max_read_index": int(bound[k]),
            "process": int(s.process[row]),
            "invoke_time": int(s.invoke_time[row]),
            "complete_time": int(s.complete_time[row]) if s.complete_time[row] >= 0 else None,
        }
        if mr >= 0:
            refs.append((int(p.op[mr]), int(p.time[mr])))
            inst["max_read_value"] = int(p.value[mr])
            inst["max_read_offset"] = int(p.offset[mr]) if p.has_offset[mr] else None
        out.append(with_ops(inst, refs))
    return out


def unseen_cases(ctx: Context) -> list[dict[str, Any]]:
    """Acknowledged values no ok poll read by the end of the history (Jepsen's `unseen`, final state).

    An `ok` send is a promise that the record is in the log; if no poll ever returned it, it is either lost
    or merely not yet read (the consumer lagged, or the final drain read did not finish). Unseen alone
    cannot tell the two apart, `lost-write` can for the values below what readers reached. Only ok sends
    count (an info send may never have happened).

    As in Jepsen (`unseen`: sets of values), a value sent twice is one value. Jepsen's merge keeps, for a key
    only polled so far, the polled values as unseen after the op that polled it; in its last map that shows
    values read as unseen (a defect, not a rule: here only sent values can be unseen).

    One instance per key: `key`, `count`, `values` (ascending), the writers' `ops` and ack `times` (parallel
    to `values`: the earliest ok send of each), and `first_time` / `last_time` of those acks. The series over time is
    `unseen_series`.
    """
    s = ctx.sends
    rows = np.flatnonzero((s.type == OK) & ~ctx.read[s.pid])
    if not len(rows):
        return []
    order = sort_by(s.key[rows], s.value[rows])
    rows = rows[order]
    rows = rows[np.r_[True, s.pid[rows][1:] != s.pid[rows][:-1]]]  # a value sent twice is one value
    keys = s.key[rows]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    ends = np.r_[starts[1:], len(rows)]
    out = []
    for a, b in zip(starts.tolist(), ends.tolist(), strict=True):
        r = rows[a:b]
        times = s.time[r]
        out.append(
            {
                "key": ctx.keys[int(keys[a])],
                "count": int(b - a),
                "values": s.value[r].tolist(),
                "ops": s.op[r].tolist(),
                "times": times.tolist(),
                "first_time": int(times.min()),
                "last_time": int(times.max()),
            }
        )
    return out


def unseen_series(
    ctx: Context, *, end_time: int | None = None, bucket_ns: int = 1_000_000_000, max_keys: int = 32
) -> dict[str, Any]:
    """How many acknowledged values were unseen over time (Jepsen's `unseen` series, per time bucket).

    A value is unseen from its ack (the ok send's completion) until the first ok poll that read it (or, if
    a poll read it before the ack arrived, not at all). The series gives, at the end of each bucket, the
    number of unseen values in total and for the keys that ever had the most (at most `max_keys` of them).
    """
    s = ctx.sends
    ok = s.type == OK
    all_ok = bool(ok.all())  # the usual case: the columns as they are, not copied through a mask
    sent = s.time if all_ok else s.time[ok]
    keys = s.key if all_ok else s.key[ok]
    gone = ctx.first_read_time[s.pid if all_ok else s.pid[ok]]
    np.maximum(gone, sent, out=gone)  # _BIG when never read
    del ok
    end = int(end_time if end_time is not None else (int(sent.max()) if len(sent) else 0))
    nb = end // bucket_ns + 1
    nk = len(ctx.keys)
    read = gone < _BIG
    all_read = bool(read.all())
    ever = np.bincount(keys[gone > sent], minlength=nk)
    gone_read = gone if all_read else gone[read]
    del gone
    cand = [k for k in np.argsort(-ever, kind="stable")[: 4 * max_keys].tolist() if ever[k] > 0]
    if nk <= 4 * max_keys:
        # Few keys: one table of every key, whose sum is the total (one pass over the values, not two).
        table = _unseen_table(keys, sent, keys if all_read else keys[read], gone_read, nk, nb, bucket_ns)
        total = table.sum(axis=0)
        table = table[cand]
    else:
        zeros = np.zeros(len(sent), dtype=np.int64)
        total = _unseen_table(zeros, sent, zeros[read], gone_read, 1, nb, bucket_ns)[0]
        del zeros
        # Per key, for the keys with the most values ever unseen (bounded memory: keys × buckets).
        if cand:
            code = np.full(nk, -1, dtype=np.int64)
            code[cand] = np.arange(len(cand))
            c_all, c_read = code[keys], code[keys[read]]
            m_all, m_read = c_all >= 0, c_read >= 0
            table = _unseen_table(
                c_all[m_all], sent[m_all], c_read[m_read], gone_read[m_read], len(cand), nb, bucket_ns
            )
    by_key: dict[str, list[int]] = {}
    if cand:
        peak = table.max(axis=1)
        top = sorted(range(len(cand)), key=lambda i: (-int(peak[i]), cand[i]))[:max_keys]
        by_key = {ctx.keys[cand[i]]: table[i].tolist() for i in sorted(top, key=lambda i: cand[i])}
    return {"bucket_ns": bucket_ns, "total": total.tolist(), "by_key": by_key}


def _unseen_table(
    sent_rows: I64, sent_at: I64, read_rows: I64, read_at: I64, n: int, nb: int, bucket_ns: int
) -> npt.NDArray[np.int64]:
    """(rows × buckets): values acked by each bucket's end minus those read by then."""
    added = _per_bucket(sent_rows, sent_at, n, nb, bucket_ns)
    removed = _per_bucket(read_rows, read_at, n, nb, bucket_ns, drop_late=True)
    table: npt.NDArray[np.int64] = np.cumsum(added, axis=1) - np.cumsum(removed, axis=1)
    return table


def _per_bucket(
    keys: I64, times: I64, nk: int, nb: int, bucket_ns: int, *, drop_late: bool = False
) -> npt.NDArray[np.int64]:
    """A (keys × buckets) table of event counts; events past the last bucket are clipped into it, or
    dropped with `drop_late` (a value read after the end was unseen until the end)."""
    # In place where it can: these are as long as the sends table, and this is the check's peak of memory.
    bucket = times // bucket_ns
    if drop_late:
        keep = bucket < nb
        if not bool(keep.all()):
            keys, bucket = keys[keep], bucket[keep]
        del keep
    else:
        np.minimum(bucket, nb - 1, out=bucket)
    if nk > 1:
        bucket += keys * nb
    flat = np.bincount(bucket, minlength=nk * nb)
    del bucket
    table: npt.NDArray[np.int64] = flat.astype(np.int64).reshape(nk, nb)
    return table
