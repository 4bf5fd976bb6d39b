"""What workloads need of the history: record events and hand out process numbers (kafka_chaos.history.History)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol


class Recorder(Protocol):
    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None,
               extra: Mapping[str, Any] | None = None) -> int: ...
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


