"""The clients' known defects, per client and release: what a client, not Kafka, breaks of Kafka's promises.

Kafka's promises reach an application through its client, so an anomaly the general rules call a violation may be
the client's known bug at the release the run used (`[workload] client`, `client_version`, docs/architecture.md
§3): then its verdict is *known-defect*, named after the bug, with the release that fixed it. The same shape from
a release at or past the fix is a regression and stays a violation. A run whose client is the installed
confluent-kafka in process (no `client_version`) runs today's librdkafka, which has only the defects still open.

The shapes tied to transactions (librdkafka's reused sequence after an abort, KAFKA-17754) are judged where those
anomalies are (reference_model.verdicts), since their evidence is in the anomaly's instance; this table holds the
defects recognised by the anomaly, the client's release and the faults the run saw (and, where the anomaly has
more than one cause, the instance's shape).

A defect in a group consumer's committed offsets (`group_resume`) shows where the general rules permit any move
of a subscribe-mode consumer's position: a rebalance or restart resumes a partition from the group's committed
offset, which may be behind what this consumer read (a re-read: at-least-once) or ahead of it (another member
read the records in between, or the consumer was stopped after records were returned to it and their position
stored but before the history recorded them). The history of one consumer process cannot tell those from a
client that committed a position past what it returned, so that permission stays; such a defect is named in its
place only on the releases that have it and with the settings it needs.

Not here: librdkafka's duplicates on an epoch bump (confluentinc/librdkafka#4953, open). Its usual shape, a send
slower than request.timeout.ms re-sent under a bumped epoch, is already permitted by the duplicate rule
(reference_model.verdicts); a quick duplicate carries nothing in the history that tells the client's epoch bump
from a broker that failed to de-duplicate, so it stays a violation rather than hide a broker bug.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_chaos import versions
from kafka_chaos.reference_model.config import RunConfig


def _release(version: str | None) -> tuple[int, int, int] | None:
    return versions.release_number(version) if version else None


@dataclass(frozen=True)
class ClientDefect:
    """One client bug: the anomalies it makes, the releases that have it (`first` ≤ release < `fixed`; `fixed`
    None: still open), what else the run must have seen for it (`needs`), and why, from the client's code.
    `shape`: whether an anomaly instance has the bug's shape; `group_resume`: the bug is in a group consumer's
    committed offsets, so it is named in place of the subscribe-mode permission (module docstring)."""

    name: str
    client: str
    anomalies: frozenset[str]
    first: tuple[int, int, int]
    fixed: tuple[int, int, int] | None
    needs: Callable[[RunConfig, bool], bool]
    reason: str
    shape: Callable[[Mapping[str, Any]], bool] = lambda _instance: True
    group_resume: bool = False

    @property
    def fixed_in(self) -> str | None:
        return f"{self.client} {'.'.join(map(str, self.fixed))}" if self.fixed else None

    def applies(self, anomaly: str, cfg: RunConfig, leader_changed: bool, instance: Mapping[str, Any]) -> bool:
        if anomaly not in self.anomalies or cfg.client != self.client or not self.shape(instance):
            return False
        release = _release(cfg.client_version)
        if release is None:  # the installed client, today's release: only a defect still open applies
            has_it = self.fixed is None
        else:
            has_it = self.first <= release and (self.fixed is None or release < self.fixed)
        return has_it and self.needs(cfg, leader_changed)


def _leader_changed(_cfg: RunConfig, leader_changed: bool) -> bool:
    return leader_changed


def _partition_eof(cfg: RunConfig, _leader_changed: bool) -> bool:
    return cfg.partition_eof


def _resumed_past_the_end(instance: Mapping[str, Any]) -> bool:
    """librdkafka #5213's two faces across a group consumer's resume from an offset one past the partition's end
    when it was committed: exactly one known value skipped (the record that was written at that end: `delta` counts
    positions in the key's version order), or, when that offset was still past the log end, the consumer reset by
    auto.offset.reset=earliest back to the partition's first offset (0: a log that retention has not trimmed; a
    reset to a later log start stays with the general rules)."""
    delta, offsets = instance.get("delta"), instance.get("offsets")
    if not isinstance(delta, int):
        return False
    if delta > 1:
        return delta == 2
    return (isinstance(offsets, list | tuple) and len(offsets) == 2 and all(isinstance(o, int) for o in offsets)
            and offsets[1] == 0 < offsets[0])


DEFECTS: tuple[ClientDefect, ...] = (
    ClientDefect(
        "confluentinc/librdkafka#4261", "librdkafka", frozenset({"nonmonotonic-poll", "int-nonmonotonic-poll"}),
        (2, 1, 0), (2, 1, 1), _leader_changed,
        "librdkafka 2.1.0 (KIP-320's offset validation, new in it) sets a partition's next fetch position back to "
        "the application's position when metadata shows a higher leader epoch, keeps the records already fetched "
        "past it and the fetch responses that land during the validation, then fetches from that position again "
        "(rd_kafka_toppar_leader_update, rd_kafka_fetch_reply_handle_partition): the consumer is handed offsets it "
        "already had. 2.1.1 discards fetches outside the ACTIVE state and validates from a position of its own "
        "(#4261, #4264)"),
    ClientDefect(
        "confluentinc/librdkafka#5213", "librdkafka", frozenset({"poll-skip", "nonmonotonic-poll"}),
        (2, 1, 0), (2, 13, 2), _partition_eof,
        "with enable.partition.eof, a batch consume (rd_kafka_consume_batch_queue, which confluent-kafka's "
        "Consumer.consume() calls) sets the application position to offset + 1 of every message it returns "
        "(rd_kafka_q_serve_rkmessages, since 2.1.0), the end-of-partition event included, whose offset is the "
        "partition's end; auto offset store makes that end + 1 the offset a group consumer commits, so whoever "
        "resumes the partition from it skips the record written at the end, or, when none is written yet, fetches "
        "past the log end and is reset by auto.offset.reset. 2.13.2 moves the position only for fetched records "
        "(#5213, fixing #4844)",
        shape=_resumed_past_the_end, group_resume=True),
)


def client_defect(anomaly: str, cfg: RunConfig, *, leader_changed: bool, instance: Mapping[str, Any] | None = None,
                  group_resume: bool = False) -> ClientDefect | None:
    """The known defect of the run's client release that explains ``anomaly`` (of this ``instance``), if one does:
    with ``group_resume``, a defect in a group consumer's committed offsets (the module docstring), else one of the
    others (a committed offset is not what an assigned consumer, or a group consumer's own reads, go by)."""
    return next((d for d in DEFECTS if d.group_resume == group_resume
                 and d.applies(anomaly, cfg, leader_changed, instance or {})), None)
