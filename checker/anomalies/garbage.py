"""Reads of values no send carried: `garbage-read`."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafka_chaos.checker.context import TYPE_CODES, Context

_TYPE_NAMES = {code: name for name, code in TYPE_CODES.items()}


def garbage_read_cases(ctx: Context) -> list[dict[str, Any]]:
    """Records a poll returned whose (key, value) no send ever carried (Elle's *garbage* reads).

    Every value a run writes is unique to its send (docs/architecture.md §3), and every send is in the history
    whatever its outcome — ok, fail, info, or an invoke that never completed, micro-ops of a `txn` included
    (`writer[pid]` is -1 only for a pair no sends row holds). A poll that returns a pair nobody sent read
    something no producer of this run wrote: a corrupted record, or a foreign writer on the topic (a topic
    that was not empty, another tool producing to it). Kafka never invents a record, so this is a violation
    under every configuration.

    Every poll counts, whatever its type and whether its offset is known (a failed or indefinite poll that
    returned records still returned them), and so does each poll micro-op of a `txn`; a pair read twice is two
    instances, one per read. One gather over the polls' pair ids: no Python per record unless it is garbage.

    Instances, in history order: `key`, `value`, `offset` (null when the poll did not say), `process`, `type`
    (of the poll op), `ops` [the poll's completion] and `times` [its completion time].
    """
    p = ctx.polls
    if not len(p):
        return []
    rows = np.flatnonzero(ctx.writer[p.pid] < 0)
    out = []
    for r in rows.tolist():
        out.append({
            "key": ctx.keys[int(p.key[r])],
            "value": int(p.value[r]),
            "offset": int(p.offset[r]) if p.has_offset[r] else None,
            "process": int(p.process[r]),
            "type": _TYPE_NAMES.get(int(p.type[r]), "info"),
            "ops": [int(p.op[r])],
            "times": [int(p.time[r])],
        })
    return out
