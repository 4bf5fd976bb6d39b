"""The clients' known defects, per client and release: what a client, not Kafka, breaks of Kafka's promises.

Kafka's promises reach an application through its client, so an anomaly the general rules call a violation may be
the client's known bug at the release the run used (`[workload] client`, `client_version`, docs/architecture.md
§3): then its verdict is *known-defect*, named after the bug, with the release that fixed it. The same shape from
a release at or past the fix is a regression and stays a violation. A run whose client is the installed
confluent-kafka in process (no `client_version`) runs today's librdkafka, which has only the defects still open.

The shapes tied to transactions (librdkafka's reused sequence after an abort, KAFKA-17754) are judged where those
anomalies are (reference_model.verdicts), since their evidence is in the anomaly's instance; this table holds the
defects recognised by the anomaly, the client's release and the faults the run saw.

Not here: librdkafka's duplicates on an epoch bump (confluentinc/librdkafka#4953, open). Its usual shape, a send
slower than request.timeout.ms re-sent under a bumped epoch, is already permitted by the duplicate rule
(reference_model.verdicts); a quick duplicate carries nothing in the history that tells the client's epoch bump
from a broker that failed to de-duplicate, so it stays a violation rather than hide a broker bug.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from kafka_chaos import versions
from kafka_chaos.reference_model.config import RunConfig


def _release(version: str | None) -> tuple[int, int, int] | None:
    return versions.release_number(version) if version else None


@dataclass(frozen=True)
class ClientDefect:
    """One client bug: the anomalies it makes, the releases that have it (`first` ≤ release < `fixed`; `fixed`
    None: still open), what else the run must have seen for it (`needs`), and why, from the client's code."""

    name: str
    client: str
    anomalies: frozenset[str]
    first: tuple[int, int, int]
    fixed: tuple[int, int, int] | None
    needs: Callable[[RunConfig, bool], bool]
    reason: str

    @property
    def fixed_in(self) -> str | None:
        return f"{self.client} {'.'.join(map(str, self.fixed))}" if self.fixed else None

    def applies(self, anomaly: str, cfg: RunConfig, leader_changed: bool) -> bool:
        if anomaly not in self.anomalies or cfg.client != self.client:
            return False
        release = _release(cfg.client_version)
        if release is None:  # the installed client, today's release: only a defect still open applies
            has_it = self.fixed is None
        else:
            has_it = self.first <= release and (self.fixed is None or release < self.fixed)
        return has_it and self.needs(cfg, leader_changed)


def _leader_changed(_cfg: RunConfig, leader_changed: bool) -> bool:
    return leader_changed


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
)


def client_defect(anomaly: str, cfg: RunConfig, *, leader_changed: bool) -> ClientDefect | None:
    """The known defect of the run's client release that explains ``anomaly``, if one does."""
    return next((d for d in DEFECTS if d.applies(anomaly, cfg, leader_changed)), None)
