"""The columnar tables the checker and spark/ read (docs/architecture.md §3) and the anomaly names (§4).

One definition, shared: spark/ imports these so the two engines cannot drift apart.
"""

from __future__ import annotations

import pyarrow as pa


def empty_table(schema: pa.Schema) -> pa.Table:
    """A table of `schema` with no rows. Not `schema.empty_table()`: that imports pandas (~0.4 s a check)."""
    return pa.Table.from_batches([], schema=schema)


SENDS_SCHEMA = pa.schema(
    [
        pa.field("value", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=True),  # null when the broker's offset is unknown
        pa.field("process", pa.int64(), nullable=False),
        pa.field("op_index", pa.int64(), nullable=False),  # index of the invoke event in history.jsonl
        pa.field("type", pa.string(), nullable=False),  # ok | info | fail (info also for ops cut short)
        pa.field("invoke_time", pa.int64(), nullable=False),  # ns since run start
        pa.field("complete_time", pa.int64(), nullable=True),  # null when the op never completed
    ]
)

POLLS_SCHEMA = pa.schema(
    [
        pa.field("value", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("process", pa.int64(), nullable=False),
        pa.field("op_index", pa.int64(), nullable=False),  # index of the completion event in history.jsonl
        pa.field("type", pa.string(), nullable=False),  # ok (only completed polls carry records)
        pa.field("time", pa.int64(), nullable=False),  # completion time, ns since run start
    ]
)

EXTRA_READS_SCHEMA = pa.schema(
    [
        pa.field("value", pa.int64(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=True),  # null when the poll did not say
        pa.field("process", pa.int64(), nullable=False),
        pa.field("op_index", pa.int64(), nullable=False),  # index of the completion event in history.jsonl
        pa.field("type", pa.string(), nullable=False),  # ok (at an unknown offset) | fail | info
        pa.field("time", pa.int64(), nullable=False),  # completion time, ns since run start
        pa.field("pos", pa.int64(), nullable=False),  # position among the op's records of this key
    ]
)
"""Poll records that are not in POLLS_SCHEMA's table but that Jepsen's rules read (checker.tables.PollExtras):
the checker derives them from history.jsonl each time, and writes them beside the two tables as
`extra_reads.parquet` for readers of the tables (spark/)."""

OPS_SCHEMA = pa.schema(
    [
        pa.field("index", pa.int64(), nullable=False),  # index of the completion event in history.jsonl
        pa.field("f", pa.string(), nullable=False),
        pa.field("type", pa.string(), nullable=False),  # ok | fail | info
        pa.field("time", pa.int64(), nullable=False),  # completion time, ns since run start
        pa.field("invoke_index", pa.int64(), nullable=True),  # null when no invoke preceded it
        pa.field("invoke_time", pa.int64(), nullable=True),
    ]
)
"""Every completed client op, in history order (checker.tables.HistoryMeta.ops): what the report draws
(throughput, send latency) and how it finds the lines an anomaly cites, without reading history.jsonl again."""

# Jepsen's Kafka-workload anomaly names (jepsen.tests.kafka), and whether each is bad by default.
ANOMALIES_BAD_BY_DEFAULT: dict[str, bool] = {
    "lost-write": True,
    "unseen": True,
    "duplicate": True,
    "inconsistent-offsets": True,
    "garbage-read": True,  # a read of a value no send carried: never allowed
    "poll-skip": True,  # allowed for subscribe-mode consumers (rebalances); see checker
    "nonmonotonic-poll": True,  # likewise
    "int-poll-skip": True,
    "int-nonmonotonic-poll": True,
    "nonmonotonic-send": True,
    "int-nonmonotonic-send": True,
    "int-send-skip": False,
    "G1a": True,
    "precommitted-read": True,
    "G0": False,
    "G1c": True,
}
