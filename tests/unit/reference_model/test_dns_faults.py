"""The dns-fail rule: a client-side availability fault with no data anomaly, except librdkafka 2.1-2.2's offset
reset on a failed lookup during offset validation (confluentinc/librdkafka#4427, fixed by #4447 in 2.3.0)."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos.reference_model import judge
from kafka_chaos.reference_model.dns_faults import LIBRDKAFKA_4447, OFFSET_RESET_ANOMALIES, rule_for
from kafka_chaos.reference_model.verdicts import FaultSummary

SKIP = {"offsets": [3, 9], "delta": 6, "partition": 0}  # an assigned consumer jumped over six offsets


@pytest.mark.parametrize(("mode", "librdkafka", "defect"), [
    ("unresolvable", "2.1.0", True),
    ("unresolvable", "2.2.0", True),
    ("unresolvable", "2.3.0", False),
    ("unresolvable", "2.16.0", False),
    ("unresolvable", "2.0.2", False),  # no offset validation (KIP-320) before 2.1.0
    ("dead-address", "2.2.0", False),  # a refused connection was retried: a transport error, not permanent
    ("unresolvable", None, False),
])
def test_only_a_failed_lookup_under_librdkafka_2_1_to_2_2_permits_an_offset_reset(
        mode: str, librdkafka: str | None, defect: bool) -> None:
    rule = rule_for(mode, librdkafka)
    assert (rule.defect == LIBRDKAFKA_4447) is defect
    assert rule.permits == (OFFSET_RESET_ANOMALIES if defect else frozenset())
    assert "lost-write" not in rule.permits, "an acknowledged write is never lost by a client's lookup"
    if defect:
        assert rule.fixed_in == "librdkafka 2.3.0"


def events(mode: str, librdkafka: str | None) -> list[dict[str, Any]]:
    return [
        {"process": "nemesis", "type": "invoke", "f": "dns-fail", "time": 1, "value": {"target": "leader"}},
        {"process": "nemesis", "type": "info", "f": "dns-fail", "time": 2,
         "value": {"nodes": [2], "mode": mode, "names": {"kc-t-broker-2": None}, "librdkafka": librdkafka}},
        {"process": "nemesis", "type": "invoke", "f": "dns-restore", "time": 8, "value": {"nodes": [2]}},
        {"process": "nemesis", "type": "info", "f": "dns-restore", "time": 9, "value": {"nodes": [2]}},
    ]


def test_the_fault_summary_keeps_each_mode_with_the_clients_librdkafka() -> None:
    summary = FaultSummary.from_events(events("unresolvable", "2.2.0"))
    assert summary.names == {("unresolvable", "2.2.0")}
    assert summary.link_faults is False and summary.replication_faults is False
    assert summary.max_down == 0, "the broker itself never went down"


def test_a_consumer_skip_under_a_dns_fail_is_the_known_defect_only_on_an_affected_client() -> None:
    old = judge("poll-skip", SKIP, {"acks": "all"}, events("unresolvable", "2.2.0"))
    assert old.verdict == "known-defect" and old.defect == LIBRDKAFKA_4447 and "dns-fail" in old.reason
    fixed = judge("poll-skip", SKIP, {"acks": "all"}, events("unresolvable", "2.16.0"))
    assert fixed.verdict == "violation", "a fixed client resets nothing: a skip is a broken promise"
    assert judge("poll-skip", SKIP, {"acks": "all"}, events("dead-address", "2.2.0")).verdict == "violation"


def test_a_lost_acknowledged_write_under_a_dns_fail_stays_a_violation() -> None:
    lost = {"value": 7, "partition": 0, "offset": 4}
    assert judge("lost-write", lost, {"acks": "all", "min_insync": 2, "replication_factor": 3},
                 events("unresolvable", "2.2.0")).verdict == "violation"
