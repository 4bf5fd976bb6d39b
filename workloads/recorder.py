"""What workloads need of the history: record events and hand out process numbers (harness.history.History)."""

from __future__ import annotations

import logging
from typing import Any, Protocol


class Recorder(Protocol):
    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None) -> int: ...
    def new_process(self) -> int: ...


def payload(value: int, size: int) -> bytes:
    """The record's bytes: the value in ASCII, space-padded to the configured record size."""
    return str(value).encode().ljust(size, b" ")


def parse_payload(data: bytes | None) -> int | None:
    if not data:
        return None
    try:
        return int(data)
    except ValueError:
        return None


def client_logger() -> logging.Logger:
    """librdkafka's own log lines (connection refused while a broker is down, …) are expected during chaos;
    they go to this logger instead of the terminal. Attach a handler to see them."""
    logger = logging.getLogger("kafka_chaos.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger
