"""Shared fixture for spark/ tests: ONE local[2] SparkSession for the whole test session."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark_session() -> Iterator[Any]:
    pytest.importorskip("pyspark")
    from kafka_chaos.spark.session import start_session

    session = start_session("local[2]", driver_memory="1g", shuffle_partitions=4)
    yield session
    session.stop()
