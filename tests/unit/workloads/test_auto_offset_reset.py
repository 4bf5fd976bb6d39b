"""`[workload] auto_offset_reset`: where the workload's consumers go when the client resets their position; the
final drain reads from the earliest whatever the scenario says."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.consumer import ConsumerSettings, final_drain


class _Recorder:
    def __init__(self) -> None:
        self.processes = 0

    def record(self, *args: Any, **kwargs: Any) -> int:
        return 0

    def new_process(self) -> int:
        self.processes += 1
        return self.processes


class _Consumer:
    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return 0, 0  # an empty partition: the drain has nothing to read

    def assign(self, partitions: Any) -> None:
        pass

    def close(self) -> None:
        pass


class _Driver:
    def __init__(self) -> None:
        self.configs: list[dict[str, Any]] = []

    def consumer(self, config: dict[str, Any], process: int) -> _Consumer:
        self.configs.append(config)
        return _Consumer()

    def release(self, process: int) -> None:
        pass


def test_the_workloads_consumers_reset_where_the_scenario_says_and_the_drain_from_the_earliest() -> None:
    latest = ConsumerSettings("b:9092", "t", 1, auto_offset_reset="latest")
    assert latest.client_config()["auto.offset.reset"] == "latest"
    assert ConsumerSettings("b:9092", "t", 1).client_config()["auto.offset.reset"] == "earliest"
    driver = _Driver()
    assert final_drain(latest, _Recorder(), 5.0, driver)  # type: ignore[arg-type]
    assert [c["auto.offset.reset"] for c in driver.configs] == ["earliest"]


def test_latest_is_refused_for_subscribe_mode_consumers() -> None:
    assert WorkloadConfig(auto_offset_reset="latest").auto_offset_reset == "latest"
    with pytest.raises(ValidationError, match="consumer_mode"):
        WorkloadConfig(auto_offset_reset="latest", consumer_mode="subscribe")
    with pytest.raises(ValidationError):
        WorkloadConfig(auto_offset_reset="none")  # type: ignore[arg-type]
