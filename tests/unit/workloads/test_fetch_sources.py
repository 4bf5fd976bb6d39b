"""`fetch-from` events from librdkafka's statistics: one per change of the broker a partition is fetched from."""

from __future__ import annotations

import json
from typing import Any

from kafka_chaos.workloads.consumer import fetch_sources_recorder


class ListRecorder:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None,
               extra: Any = None) -> int:
        self.events.append((process, type_, f, value))
        return len(self.events) - 1

    def new_process(self) -> int:
        return 0


def stats(**partitions: tuple[int, int]) -> str:
    """librdkafka's statistics JSON with topic `t`'s partitions as (broker, leader); "-1" is its UA entry."""
    parts = {p.removeprefix("p"): {"partition": int(p.removeprefix("p")), "broker": b, "leader": ld}
             for p, (b, ld) in partitions.items()}
    parts["-1"] = {"partition": -1, "broker": -1, "leader": -1}
    return json.dumps({"topics": {"t": {"partitions": parts}, "other": {"partitions": {"0": {"broker": 9}}}}})


def test_a_change_of_fetch_source_or_leader_is_recorded_once() -> None:
    rec = ListRecorder()
    on_stats = fetch_sources_recorder(rec, 7, "t")
    on_stats(stats(p0=(1, 1), p1=(-1, 2)))  # partition 1 not fetched yet
    on_stats(stats(p0=(1, 1), p1=(3, 2)))   # follower fetching (KIP-392)
    on_stats(stats(p0=(1, 1), p1=(3, 2)))   # nothing changed
    on_stats(stats(p0=(1, 2), p1=(3, 2)))   # partition 0's leader moved; still fetched from 1
    assert [e[3] for e in rec.events] == [
        {"process": 7, "key": "t/0", "broker": 1, "leader": 1},
        {"process": 7, "key": "t/1", "broker": 3, "leader": 2},
        {"process": 7, "key": "t/0", "broker": 1, "leader": 2},
    ]
    assert {e[:3] for e in rec.events} == {("harness", "info", "fetch-from")}
