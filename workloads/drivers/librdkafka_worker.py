"""A client worker for a pinned confluent-kafka (librdkafka) release, run by the python of that release's own
environment: `python librdkafka_worker.py`. It speaks the client worker line protocol (docs/client-protocol.md)
on stdin/stdout and logs to stderr. Standalone on purpose: it imports only the standard library and
confluent_kafka, because it runs in an environment that has nothing else."""

from __future__ import annotations

import gc
import json
import logging
import sys
import threading
from typing import Any

import confluent_kafka
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

PROTOCOL_VERSION = 2  # the harness's protocol.PROTOCOL_VERSION (this file imports nothing of the harness)
_out = threading.Lock()


def emit(obj: dict[str, Any]) -> None:
    """One line out; flushed by the main loop after each request it must answer at once (`main`)."""
    line = json.dumps(obj, separators=(",", ":"))
    with _out:
        sys.stdout.write(line + "\n")


def flush() -> None:
    with _out:
        sys.stdout.flush()


def error_of(err: Any) -> dict[str, Any]:
    """ERROR of the protocol from a KafkaError, a KafkaException or any other exception."""
    e = err.args[0] if isinstance(err, KafkaException) and err.args else err
    if isinstance(e, KafkaError):
        return {"name": e.name(), "message": e.str(), "retriable": bool(e.retriable()), "fatal": bool(e.fatal()),
                "abortable": bool(e.txn_requires_abort())}
    if isinstance(err, BufferError):
        return {"name": "_QUEUE_FULL", "message": str(err), "retriable": True, "fatal": False, "abortable": False}
    return {"name": "_FAIL", "message": f"{type(err).__name__}: {err}", "retriable": False, "fatal": False,
            "abortable": False}


def stderr_logger() -> logging.Logger:
    """librdkafka's log lines to stderr (the harness forwards them to its client log)."""
    logger = logging.getLogger("librdkafka")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    return logger


class Worker:
    def __init__(self) -> None:
        self.clients: dict[str, Any] = {}
        self.logger = stderr_logger()
        self.reports: dict[str, list[list[Any]]] = {}
        """Delivery reports not written yet, by handle: written as one `deliveries` line per handle before the
        next reply (callbacks run only inside this thread's client calls, so a reply never overtakes them)."""

    def emit_reports(self) -> None:
        if self.reports:
            reports, self.reports = self.reports, {}
            for handle, batch in reports.items():
                emit({"event": "deliveries", "handle": handle, "reports": batch})

    def on_delivery(self, handle: str, tag: int) -> Any:
        def delivered(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                offset = msg.offset()
                report: list[Any] = [tag, offset if offset is not None else -1]
            else:
                report = [tag, None, error_of(err)]
            self.reports.setdefault(handle, []).append(report)

        return delivered

    def config(self, given: dict[str, str]) -> dict[str, Any]:
        return {**given, "logger": self.logger}

    def create(self, r: dict[str, Any]) -> None:
        kind = Producer if r["kind"] == "producer" else Consumer
        self.clients[r["handle"]] = kind(self.config(r["config"]))

    def produce(self, r: dict[str, Any]) -> None:
        handle = r["handle"]
        self.clients[handle].produce(r["topic"], value=r["value"].encode("latin-1"), partition=r["partition"],
                                     on_delivery=self.on_delivery(handle, r["tag"]))

    def produce_batch(self, r: dict[str, Any]) -> None:
        """Queues each record in order; one the client refuses is reported as its failed delivery (nobody waits
        on this request to raise it), and a full queue is waited out, serving the client, as the harness's
        produce() would have retried."""
        handle = r["handle"]
        client = self.clients[handle]
        for topic, partition, value, tag in r["records"]:
            delivered = self.on_delivery(handle, tag)
            data = value.encode("latin-1")
            while True:
                try:
                    client.produce(topic, value=data, partition=partition, on_delivery=delivered)
                    break
                except BufferError:
                    client.poll(0.05)
                except Exception as err:  # any refusal is this record's outcome
                    self.reports.setdefault(handle, []).append([tag, None, error_of(err)])
                    break

    def poll(self, r: dict[str, Any]) -> None:
        self.clients[r["handle"]].poll(r.get("timeout", 0))

    def flush(self, r: dict[str, Any]) -> int:
        return int(self.clients[r["handle"]].flush(r.get("timeout", 0)))

    def txn(self, r: dict[str, Any]) -> None:
        call = getattr(self.clients[r["handle"]], r["op"])
        if r.get("timeout") is None:
            call()
        else:
            call(r["timeout"])

    def send_offsets_to_transaction(self, r: dict[str, Any]) -> None:
        metadata = self.clients[r["consumer"]].consumer_group_metadata()
        offsets = [TopicPartition(t, p, o) for t, p, o in r["offsets"]]
        self.clients[r["handle"]].send_offsets_to_transaction(offsets, metadata, r["timeout"])

    def assign(self, r: dict[str, Any]) -> None:
        parts = [TopicPartition(t, p, OFFSET_BEGINNING if o == -2 else o) if o is not None else TopicPartition(t, p)
                 for t, p, o in r["partitions"]]
        self.clients[r["handle"]].assign(parts)

    def subscribe(self, r: dict[str, Any]) -> None:
        self.clients[r["handle"]].subscribe(list(r["topics"]))

    def consume(self, r: dict[str, Any]) -> list[list[Any]]:
        out = []
        for msg in self.clients[r["handle"]].consume(r["max"], timeout=r["timeout"]):
            if msg.error() is not None:
                continue
            value = msg.value()
            out.append([msg.topic(), msg.partition(), msg.offset(), (value or b"").decode("latin-1")])
        return out

    def position(self, r: dict[str, Any]) -> list[list[Any]]:
        parts = [TopicPartition(t, p) for t, p in r["partitions"]]
        return [[tp.topic, tp.partition, tp.offset] for tp in self.clients[r["handle"]].position(parts)]

    def assignment(self, r: dict[str, Any]) -> list[list[Any]]:
        return [[tp.topic, tp.partition] for tp in self.clients[r["handle"]].assignment()]

    def watermarks(self, r: dict[str, Any]) -> list[int]:
        low, high = self.clients[r["handle"]].get_watermark_offsets(TopicPartition(r["topic"], r["partition"]),
                                                                    timeout=r["timeout"])
        return [low, high]

    def close(self, r: dict[str, Any]) -> None:
        client = self.clients.pop(r["handle"], None)
        if isinstance(client, Consumer):
            client.close()

    def handle(self, r: dict[str, Any]) -> Any:
        op = r["op"]
        if op in ("init_transactions", "begin_transaction", "commit_transaction", "abort_transaction"):
            return self.txn(r)
        return getattr(self, op)(r)


YOUNG_THRESHOLD = 20_000
"""Allocations between two young collections: a busy producer keeps a few objects per record until it is
delivered, which Python's default (700) walks over and over (the harness's harness/collector.py, for the same
reason)."""


def main() -> int:
    gc.freeze()  # what the worker imported is never garbage
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
    emit({"event": "ready", "client": "librdkafka", "version": confluent_kafka.libversion()[0],
          "protocol": PROTOCOL_VERSION})
    flush()
    worker = Worker()
    for line in sys.stdin:
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("op") == "exit":
            worker.emit_reports()
            emit({"id": r["id"], "ok": None})
            flush()
            return 0
        try:
            reply: dict[str, Any] = {"id": r["id"], "ok": worker.handle(r)}
        except BaseException as err:  # every failure is the request's reply; the worker goes on
            reply = {"id": r["id"], "error": error_of(err)}
        worker.emit_reports()  # the deliveries a call made come before its reply (a flush's count relies on it)
        emit(reply)
        flush()
    flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
