"""What workloads need of the history: record events and hand out process numbers (kafka_chaos.history.History)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from confluent_kafka import KafkaError


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




def kafka_error(err: BaseException) -> KafkaError | None:
    """The KafkaError a client's exception carries (confluent-kafka's KafkaException, or a driver's raised as it)."""
    return err.args[0] if err.args and isinstance(err.args[0], KafkaError) else None


def error_field(err: BaseException) -> list[str]:
    """An exception as the history's `error`: [name, message] (the KafkaError's, else the exception's)."""
    e = kafka_error(err)
    return [e.name(), e.str()] if e is not None else [type(err).__name__, str(err)]
