"""Reads of what should not be visible, and transaction cycles: `G1a`, `precommitted-read`, `G0`, `G1c`
(the cycles are found in checker.anomalies.cycles)."""

from __future__ import annotations

from typing import Any

import numpy as np

from kafka_chaos.checker.anomalies.cycles import OK_T, TXN, Txn, TxnHistory, find_cycles
from kafka_chaos.checker.context import BOOL, FAIL, I64, OK, Context, last_writer, segment_starts


def g1a_cases(ctx: Context) -> list[dict[str, Any]]:
    """Aborted read: an ok poll read a value some failed send wrote (Jepsen's `g1a-cases`).

    `fail` means the send certainly did not happen (e.g. the broker rejected it), so no consumer may ever
    see its value. As in Jepsen, a value counts when *any* failed op sent it (`writes-by-type :fail`), even
    if another op sent it too; every record an ok poll returned counts, at a known offset or not. One
    instance per poll record that did.

    Instance: `key`, `value`, `offset` (where it was read, null when unknown), `process` (the reader),
    `writer_process`, `ops` [the failed writer (the last to complete, if several), reader] and `times`.
    Jepsen's `:writer` is the value's `writer-of` whatever its type; here it is the failed one, the evidence.
    """
    s, p = ctx.sends, ctx.polls
    failed = last_writer(ctx, np.flatnonzero(s.type == FAIL))
    w = failed[p.pid]
    rows = np.flatnonzero((w >= 0) & (p.type == OK))
    out = []
    for r in rows.tolist():
        wr = int(w[r])
        out.append(
            {
                "key": ctx.keys[int(p.key[r])],
                "value": int(p.value[r]),
                "offset": int(p.offset[r]) if p.has_offset[r] else None,
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
    sent (by any of its sends) in an op of the same process that completed at that same time is such a read.
    As in Jepsen every completed op counts, whatever its type. One instance per op: its first key (in the
    order the op first sent to each key) with such a read, and that key's first send (in send order) that
    was read (Jepsen names an arbitrary one of them). Only `txn` ops can do this, so without a transactional
    workload this finds nothing.

    Instance: `key`, `value`, `offset` (as read, null when unknown), `process`, `ops` [the txn's invoke, its
    completion] and `times`.
    """
    s, p = ctx.sends, ctx.polls
    if not len(s) or not len(p):
        return []
    # Sends rows that completed when some poll row of their process did: only those can be one op's.
    cand = np.flatnonzero((s.complete_time >= 0) & _isin_times(s.complete_time, p.time))
    if not len(cand):
        return []
    sent: dict[tuple[int, int], dict[int, int]] = {}  # (process, completion) → pid → its first sends row
    for r in cand.tolist():
        sent.setdefault((int(s.process[r]), int(s.complete_time[r])), {}).setdefault(int(s.pid[r]), r)
    reads: dict[tuple[int, int], dict[int, int]] = {}  # op → sends row → a poll row that read it
    for r in np.flatnonzero(np.isin(p.time, s.complete_time[cand])).tolist():
        own = sent.get((int(p.process[r]), int(p.time[r])))
        w = own.get(int(p.pid[r])) if own else None
        if w is not None:
            reads.setdefault((int(p.op[r]), int(p.process[r])), {}).setdefault(w, r)
    out = []
    for (op, _), by_send in sorted(reads.items()):
        rows = sorted(by_send)
        first_of_key: dict[int, int] = {}  # the op's first send to each key it read its own value of
        op_rows = np.flatnonzero(s.op == s.op[rows[0]])
        for r in op_rows.tolist():
            first_of_key.setdefault(int(s.key[r]), r)
        wr = min(rows, key=lambda r: (first_of_key[int(s.key[r])], r))
        pr = by_send[wr]
        out.append(
            {
                "key": ctx.keys[int(p.key[pr])],
                "value": int(p.value[pr]),
                "offset": int(p.offset[pr]) if p.has_offset[pr] else None,
                "process": int(p.process[pr]),
                "ops": [int(s.op[wr]), op],
                "times": [int(s.invoke_time[wr]), int(p.time[pr])],
            }
        )
    return out


def _isin_times(x: I64, times: I64) -> BOOL:
    """`np.isin(x, times)`. Poll rows are in op order, and a poll's op index is its completion's, so their
    times are usually sorted already: then a binary search answers without hashing both columns (at 10^7
    history lines, hashing took a second)."""
    if len(times) < 2 or bool(np.any(times[1:] < times[:-1])):
        return np.isin(x, times)
    distinct = times[segment_starts(times)]
    pos = np.minimum(np.searchsorted(distinct, x), len(distinct) - 1)
    found: BOOL = distinct[pos] == x
    return found


NO_HISTORY = ("needs the history's transactions (checker.check reads them); the tables alone do not link a "
              "transaction's sends to its polls")


def cycle_cases(txns: TxnHistory | None) -> tuple[dict[str, list[dict[str, Any]]], dict[str, str]]:
    """`G0` and `G1c` (checker.anomalies.cycles) over every client op, as Jepsen builds its graph from all send,
    poll and txn ops: plain multi-send ops form cycles too, and so does a poll that read what was sent only
    after it completed. Without the history's ops the checks could not run: the reason, not zero instances."""
    if txns is None:
        return {"G0": [], "G1c": []}, {"G0": NO_HISTORY, "G1c": NO_HISTORY}
    found = find_cycles(txns)
    return {"G0": found.G0, "G1c": found.G1c}, {}


def with_isolation(instances: list[dict[str, Any]], txns: TxnHistory | None) -> list[dict[str, Any]]:
    """Name the reader's isolation level on each read instance (`process` is the reader): what the reader was
    promised decides the verdict (reference_model.verdicts); `writer_txn`: the value's writer was a transaction."""
    if txns is not None:
        txn_invokes = txns.txn_invokes()
        for inst in instances:
            inst["isolation"] = txns.isolation_of(int(inst["process"]))
            inst["writer_txn"] = int(inst["ops"][0]) in txn_invokes
    return instances


def with_uncommitted_skips(instances: list[dict[str, Any]], txns: TxnHistory | None) -> list[dict[str, Any]]:
    """On each poll-skip instance, the reader's `isolation` and `skipped_uncommitted`: every skipped value was
    written by a transaction that did not certainly commit (aborted, or of unknown outcome). A read_committed
    consumer skips exactly such records (another reader, at read_uncommitted, put them in the version order).

    Otherwise `skipped_read_in_aborted_txn` says whether each skipped value that did commit was read by the
    same process in a transaction that did not commit, completed between the two reads: a consumer's position
    moves on whatever it returns, committed or not, and aborting the transaction does not move it back (only
    the offsets sent with the transaction are atomic with it, KIP-98/KIP-447); re-reading is the
    application's job. The verdict (reference_model.verdicts) says so; Jepsen's `poll-skip` counts it."""
    if txns is None or not instances or not txns.has_transactions:
        return instances
    # the last op (in invoke order) that sent each value: whether it is a txn that did not certainly commit
    pending = (txns.f == TXN) & (txns.type != OK_T)
    outcome: dict[int, bool] = dict(zip(txns.w_val.tolist(), pending[txns.w_txn].tolist(), strict=True))
    aborted_reads: dict[int, list[tuple[int, set[int]]]] = {}  # process → (completion time, values read)
    for t in txns.txn_ops():
        read = {int(r[1]) for m in t.mops if m and m[0] == "poll" for rs in m[1].values() for r in rs}
        if t.type in ("fail", "info") and read:
            aborted_reads.setdefault(t.process, []).append((t.complete_time, read))

    def uncommitted(v: Any) -> bool:
        return outcome.get(int(v), False)

    for inst in instances:
        skipped = inst.get("skipped") or []
        process = int(inst["process"])
        inst["isolation"] = txns.isolation_of(process)
        whole = bool(skipped) and len(skipped) == int(inst.get("delta", 0)) - 1
        inst["skipped_uncommitted"] = whole and all(uncommitted(v) for v in skipped)
        times = inst.get("times") or []
        if whole and not inst["skipped_uncommitted"] and len(times) == 2:
            between: set[int] = set()
            for done, read in aborted_reads.get(process, []):
                if times[0] < done < times[1]:
                    between |= read
            # the reader itself read them, in a transaction that did not commit between the two reads
            inst["skipped_read_in_aborted_txn"] = all(uncommitted(v) or int(v) in between for v in skipped)
    return instances


def with_reused_sequences(found: dict[str, list[dict[str, Any]]], txns: TxnHistory | None) -> None:
    """Mark the losses a transactional producer's reused sequence explains: `reused_sequence` on each
    `inconsistent-offsets`, `lost-write` and `unseen` instance (`unseen`: when it explains all its values).

    The shape, all in the history: a process's `txn` op failed (its abort returned) with a send to a partition
    that was never acknowledged (no offset), its next op that sent to that partition committed a value there,
    acknowledged at an offset where readers found the aborted send's value instead. Ops between the two that
    also aborted with their send to that partition unacknowledged do not break the shape: each abort moves the
    sequence base back to the same place. librdkafka purges the
    messages still queued when a transaction aborts, and moves the partition's sequence base past them as if
    they had never been sent (rd_kafka_toppar_purge_queues; since v2.3.0, #4438, a message whose request timed
    out counts as not persisted); but a timed-out request may have been appended. The next transaction's first
    message to that partition then carries the aborted message's producer epoch and sequence (transaction
    protocol v1 bumps no epoch on abort), the leader takes it for a retry of the batch it already has and
    answers with that batch's offset (UnifiedLog: a duplicate batch returns the first one's offsets), and the
    committed value is never written. The reference model says whose defect that is.

    `reused_sequence`: `process`, `key`, `offset`, `value` and `op` (the committed send and its op's invoke),
    `aborted_value` and `aborted_op`. Nothing is marked without transactions in the history."""
    shapes = found.get("inconsistent-offsets") or []
    if txns is None or not shapes or not txns.has_transactions:
        return
    values = {int(v) for inst in shapes for v in inst.get("values") or []}
    by_process: dict[int, list[Txn]] = {}
    acked: dict[tuple[str, int, int], tuple[Txn, int]] = {}  # (key, offset, value) → committed op, its position
    for t in txns.txn_ops():
        ops = by_process.setdefault(t.process, [])
        ops.append(t)
        if t.type == "ok":
            for key, offset, value in _sends(t):
                if offset is not None and value in values:
                    acked[(key, offset, value)] = (t, len(ops) - 1)
    reused: dict[tuple[str, int], dict[str, Any]] = {}  # (key, committed value) → the mark
    for inst in shapes:
        key, offset = str(inst["key"]), int(inst["offset"])
        others = [int(v) for v in inst.get("values") or []]
        for value in others:
            if (key, offset, value) not in acked:
                continue
            committed, position = acked[(key, offset, value)]
            found_abort = _aborted_send_at(by_process[committed.process][:position], key, set(others) - {value})
            if found_abort is not None:
                before, lost = found_abort
                mark: dict[str, Any] = {"process": committed.process, "key": key, "offset": offset,
                                        "value": value, "op": committed.invoke, "aborted_value": lost,
                                        "aborted_op": before.invoke}
                inst["reused_sequence"] = mark
                reused[(key, value)] = mark
    if not reused:
        return
    for inst in found.get("lost-write") or []:
        lost_mark = reused.get((str(inst["key"]), int(inst["value"])))
        if lost_mark is not None:
            inst["reused_sequence"] = lost_mark
    for inst in found.get("unseen") or []:
        marks = [reused.get((str(inst["key"]), int(v))) for v in inst.get("values") or []]
        if marks and all(marks):
            inst["reused_sequence"] = marks[0] if len(marks) == 1 else marks


def _aborted_send_at(earlier: list[Txn], key: str, at_offset: set[int]) -> tuple[Txn, int] | None:
    """The aborted op (and its value) whose sequence the process's next send to `key` carried: walking back from
    the committed op through the ops that sent to `key`, each one aborted with that send unacknowledged (every
    such abort purged the send and moved the sequence base back again, so a run of them hands the first one's
    sequence on), the first whose value the log holds at the committed value's offset (`at_offset`). None when
    an op that committed, ended unknown or had its send to `key` acknowledged comes first: the sequence moved on."""
    for t in reversed(earlier):
        sent = [(o, v) for k, o, v in _sends(t) if k == key]
        if not sent:
            continue
        if t.type != "fail" or any(o is not None for o, _ in sent):
            return None
        lost = [v for _, v in sent if v in at_offset]
        if lost:
            return t, lost[0]
    return None


def _sends(t: Txn) -> list[tuple[str, int | None, int]]:
    """A txn op's sends as (key, acknowledged offset or None, value), completed or not."""
    out = []
    for m in t.mops:
        if isinstance(m, list) and len(m) == 3 and m[0] == "send":
            sent = m[2]
            if isinstance(sent, list) and len(sent) == 2 and isinstance(sent[1], int):
                out.append((str(m[1]), sent[0] if isinstance(sent[0], int) else None, sent[1]))
            elif isinstance(sent, int):
                out.append((str(m[1]), None, sent))
    return out
