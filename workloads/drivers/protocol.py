"""The harness's side of the client worker line protocol (docs/client-protocol.md): the one place that spells
its requests, replies and events, and turns a worker's ERROR into the confluent-kafka error the workloads
classify, so an outcome reads the same whichever client ran it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson
from confluent_kafka import KafkaError, KafkaException

PROTOCOL_VERSION = 2
"""The line protocol's version, said by a worker in its `ready` line: a worker that speaks another one is refused
at start (both ends ship together, so a mismatch is a stale build, not something to negotiate)."""

QUEUE_FULL = "_QUEUE_FULL"
"""A produce the worker's client refused because its queue is full: raised as BufferError, as confluent-kafka
does, so the workload polls and tries again."""


def request(id_: int, op: str, **fields: Any) -> bytes:
    """One request line, with its newline (the worker's stdin is a byte pipe: no text encoding per line)."""
    return orjson.dumps({"id": id_, "op": op, **fields}, option=orjson.OPT_APPEND_NEWLINE)


def config_values(config: dict[str, Any]) -> dict[str, str]:
    """A client config as the protocol carries it: every value a string, booleans as librdkafka spells them."""
    return {k: ("true" if v else "false") if isinstance(v, bool) else str(v) for k, v in config.items()}


def text(value: bytes | str | None) -> str:
    """A payload as protocol text (latin-1: every byte one character)."""
    if value is None:
        return ""
    return value if isinstance(value, str) else value.decode("latin-1")


def kafka_error(error: dict[str, Any]) -> KafkaError:
    """A worker's ERROR as confluent-kafka's KafkaError (an unknown name as _FAIL, its message kept)."""
    name = str(error.get("name", "_FAIL"))
    code = getattr(KafkaError, name, None)
    message = str(error.get("message", ""))
    if not isinstance(code, int):
        code, message = KafkaError._FAIL, f"{name}: {message}"
    return KafkaError(code, message, fatal=bool(error.get("fatal", False)),
                      retriable=bool(error.get("retriable", False)),
                      txn_requires_abort=bool(error.get("abortable", False)))


def raise_error(error: dict[str, Any]) -> None:
    if error.get("name") == QUEUE_FULL:
        raise BufferError(str(error.get("message", "queue full")))
    raise KafkaException(kafka_error(error))


def local_error(name: str, message: str) -> dict[str, Any]:
    """An ERROR the harness makes itself (a worker that exited or did not answer in time)."""
    return {"name": name, "message": message, "retriable": False, "fatal": False, "abortable": False}


@dataclass(frozen=True)
class Reply:
    id: int
    ok: Any = None
    error: dict[str, Any] | None = None


Report = list[Any]
"""One record's outcome as the worker wrote it: `[tag, offset]` (offset -1 or null: none known) or
`[tag, null, ERROR]`. Kept as parsed, not wrapped: a busy producer makes one per record, and an object per
report cost the harness more time than parsing the line (bench/client_drivers.py)."""


def failed_report(tag: int, error: dict[str, Any]) -> Report:
    return [tag, None, error]


def report_error(report: Report) -> dict[str, Any] | None:
    return report[2] if len(report) > 2 else None


def report_offset(report: Report) -> int | None:
    offset = report[1]
    return offset if offset is not None and offset >= 0 else None


@dataclass(frozen=True)
class Deliveries:
    """A `deliveries` event: a handle's delivery reports in the order its client made them."""

    handle: str
    reports: list[Report]


@dataclass(frozen=True)
class Ready:
    client: str
    version: str
    protocol: int = 0


def parse(line: str | bytes) -> Reply | Deliveries | Ready | None:
    """One line a worker wrote (None: not a protocol line, e.g. a library printing to stdout)."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(obj, dict):
        return None
    if "id" in obj:
        return Reply(int(obj["id"]), obj.get("ok"), obj.get("error"))
    event = obj.get("event")
    if event == "deliveries":
        return Deliveries(str(obj["handle"]), obj["reports"])
    if event == "ready":
        return Ready(str(obj.get("client", "")), str(obj.get("version", "")), int(obj.get("protocol", 0)))
    return None
