"""Reads of what should not be visible, and transaction cycles: `G1a`, `precommitted-read`, `G0`, `G1c`."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafka_chaos.checker.context import FAIL, Context


def g1a_cases(ctx: Context) -> list[dict[str, Any]]:
    """Aborted read: an ok poll read a value whose send failed (Jepsen's `g1a-cases`).

    `fail` means the send certainly did not happen (e.g. the broker rejected it), so no consumer may ever
    see its value. One instance per poll record that did.

    Instance: `key`, `value`, `offset` (where it was read), `process` (the reader), `writer_process`, `ops`
    [writer, reader] and `times`.
    """
    s, p = ctx.sends, ctx.polls
    w = ctx.writer[p.pid]
    rows = np.flatnonzero((w >= 0) & (s.type[np.maximum(w, 0)] == FAIL))
    out = []
    for r in rows.tolist():
        wr = int(w[r])
        out.append(
            {
                "key": ctx.keys[int(p.key[r])],
                "value": int(p.value[r]),
                "offset": int(p.offset[r]),
                "process": int(p.process[r]),
                "writer_process": int(s.process[wr]),
                "ops": [int(s.op[wr]), int(p.op[r])],
                "times": [int(s.time[wr]), int(p.time[r])],
            }
        )
    return out


def precommitted_read_cases(ctx: Context) -> list[dict[str, Any]]:
    """A transaction read its own value (Jepsen's `precommitted-read-cases`).

    Kafka consumers at read_committed must never see records of a transaction that has not committed, and
    a transaction's own sends are not committed while it runs: a `txn` that polls its own value read an
    uncommitted record. The tables do not link a txn's sends (indexed by its invoke) to its polls (indexed by
    its completion), but an op is identified by its process and completion time: a poll row whose value was
    sent by the same process, in an op that completed at that same time, is such a read. One instance per
    op, the first of its sends so read, as in Jepsen. Only `txn` ops can do this, so without a transactional
    workload this finds nothing.

    Instance: `key`, `value`, `offset` (as read), `process`, `ops` [the txn's invoke, its completion] and
    `times`.
    """
    s, p = ctx.sends, ctx.polls
    w = ctx.writer[p.pid]
    ws = np.maximum(w, 0)
    own = (w >= 0) & (s.process[ws] == p.process) & (s.complete_time[ws] == p.time)
    out = []
    seen_ops: set[int] = set()
    rows = np.flatnonzero(own)
    # per op, the first of its sends (in send order) that it read
    for r in rows[np.lexsort((w[rows], p.op[rows]))].tolist():
        op = int(p.op[r])
        if op in seen_ops:
            continue
        seen_ops.add(op)
        wr = int(w[r])
        out.append(
            {
                "key": ctx.keys[int(p.key[r])],
                "value": int(p.value[r]),
                "offset": int(p.offset[r]),
                "process": int(p.process[r]),
                "ops": [int(s.op[wr]), op],
                "times": [int(s.invoke_time[wr]), int(p.time[r])],
            }
        )
    return out


def g0_cases(ctx: Context) -> list[dict[str, Any]]:
    """Write-write cycles among transactions (Jepsen runs Elle on ww edges from the version order).

    Not implemented: a stub that finds nothing. Cycles need multi-key transactions, which no kafka-chaos
    workload produces yet; with single-op sends every op touches one key at a time and no cycle can form.
    G0 is not bad by default anyway (Kafka does not isolate writes).
    """
    del ctx
    return []


def g1c_cases(ctx: Context) -> list[dict[str, Any]]:
    """Write-read cycles among transactions (Jepsen runs Elle on ww + wr edges).

    Not implemented: a stub that finds nothing, until a transactional workload exists (see `g0_cases`).
    """
    del ctx
    return []
