"""The out-of-process driver: one worker process per history process that owns clients, hosting them by handle
and speaking the client worker line protocol (docs/client-protocol.md) over its stdin and stdout.

A reader thread per worker routes each reply to the call waiting for it and queues delivery reports;
`poll()` and `flush()` run the `on_delivery` callbacks on the caller's thread, as confluent-kafka does. The
worker's stderr goes to the client log. A worker can be frozen (SIGSTOP, the `client-pause` fault): its calls
then wait without counting the time frozen against their bound, so a pause shows in the history as ops that
complete only after the thaw. Workers are killed at the driver's close, at exit, and when interrupted.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.interrupts import STOPPING
from kafka_chaos.workloads.drivers import protocol

CALL_GRACE_S = 30.0
"""How long past a call's own timeout the harness waits for its reply while the worker is not frozen, before
taking the worker for hung (the call then raises _TIMED_OUT, and a late reply is dropped)."""
READY_TIMEOUT_S = 120.0
"""How long a new worker has to say `ready` (a JVM with cold caches is the slow case)."""
STOPPING_WAIT_S = 3.0
"""Once the run is interrupted, no call waits longer than this."""
BATCH_RECORDS = 1000
"""A plain producer's sends go to its worker in `produce_batch` lines of at most this many records: a line per
record costs the harness more Python time than the client spends sending it."""
LINGER_S = 0.003
"""How long a plain producer's send may wait in the harness for more to join its batch when no call of the
workload (poll, flush) sends it first: far below the client's own linger.ms, so a slow workload barely notices."""
NOT_PASSED = ("logger", "stats_cb", "error_cb", "throttle_cb", "oauth_cb", "on_commit", "statistics.interval.ms")
"""Settings that are Python objects of the harness (or need one): a worker logs to stderr instead."""


class WorkerError(Exception):
    """A worker that could not be started or did not say it was ready."""


class WorkerProcess:
    """One worker: its process, the reader threads and the calls waiting for replies."""

    def __init__(self, command: list[str], name: str) -> None:
        self.name = name
        self.frozen = False
        self.client = ""
        self.version = ""
        self.protocol = 0
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._write = threading.Lock()
        self._replies: dict[int, protocol.Reply | None] = {}
        self._arrived = threading.Condition(self._lock)
        self._deliveries: dict[str, list[protocol.Report]] = {}
        self._sent: dict[int, tuple[str, list[int]]] = {}
        """Batches sent without waiting (`send_batch`): request id → (handle, tags), until the worker answers."""
        self._fatal: dict[str, dict[str, Any]] = {}
        """A client's fatal error that a request sent without waiting met (a posted poll): handle → ERROR, until
        the client's next poll raises it, as confluent-kafka's poll raises a fatal error."""
        self._ready = threading.Event()
        self._dead = False
        self.transaction_written = threading.Event()
        """Set while a producer of this worker holds a transaction open with a send acknowledged (its coordinator
        has the transaction open): from the delivery, as the caller served it, until commit or abort is asked."""
        # its own session: a Ctrl-C at the terminal reaches the harness, which stops the worker itself
        # byte pipes: protocol lines are JSON in UTF-8 both ways (orjson reads and writes bytes), so no line pays for
        # a text decoding; stderr lines are decoded for the log
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     start_new_session=True)
        _LIVE.add(self)
        threading.Thread(target=self._read, name=f"{name}-out", daemon=True).start()
        threading.Thread(target=self._log, name=f"{name}-err", daemon=True).start()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        if not self._ready.wait(timeout_s) or self._dead:
            self.kill()
            raise WorkerError(f"client worker {self.name} did not start (no `ready` line within {timeout_s:.0f}s; "
                              "its stderr is in the client log)")
        if self.protocol != protocol.PROTOCOL_VERSION:
            self.kill()
            raise WorkerError(f"client worker {self.name} speaks line protocol {self.protocol}, the harness "
                              f"{protocol.PROTOCOL_VERSION}: its build is stale (clear the client cache)")

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            msg = protocol.parse(line)
            if isinstance(msg, protocol.Ready):
                self.client, self.version, self.protocol = msg.client, msg.version, msg.protocol
                self._ready.set()
            elif isinstance(msg, protocol.Deliveries):
                with self._lock:
                    self._deliveries.setdefault(msg.handle, []).extend(msg.reports)
                    self._arrived.notify_all()
            elif isinstance(msg, protocol.Reply):
                with self._lock:
                    sent = self._sent.pop(msg.id, None)
                    if sent is not None:  # a batch sent without waiting: its refusal is its records' failure
                        if msg.error is not None:
                            self._refuse(*sent, msg.error)
                            if msg.error.get("fatal"):
                                self._fatal.setdefault(sent[0], msg.error)
                    elif msg.id in self._replies:  # else: a call that gave up long ago
                        self._replies[msg.id] = msg
                        self._arrived.notify_all()
            elif line.strip():
                client_logger().info("%s: %s", self.name, line.decode("utf-8", "replace").rstrip())
        with self._lock:
            self._dead = True
            self._arrived.notify_all()
        self._ready.set()

    def _log(self) -> None:
        assert self.proc.stderr is not None
        log = client_logger()
        for line in self.proc.stderr:
            log.info("%s: %s", self.name, line.decode("utf-8", "replace").rstrip())

    def _gone(self) -> dict[str, Any]:
        return protocol.local_error("_TRANSPORT", f"client worker {self.name} has exited")

    def _post(self, op: str, pending: dict[int, Any], entry: Any, *, flush: bool, **fields: Any) -> int:
        """Write one request under a new id, kept in `pending` (with `entry`) until its reply; a worker that has
        exited raises _TRANSPORT, as confluent-kafka raises a transport error, and keeps nothing pending."""
        id_ = next(self._ids)
        with self._lock:
            if self._dead:
                protocol.raise_error(self._gone())
            pending[id_] = entry
        try:
            with self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write(protocol.request(id_, op, **fields))
                if flush:
                    self.proc.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            with self._lock:
                pending.pop(id_, None)
            protocol.raise_error(self._gone())
        return id_

    def call(self, op: str, timeout_s: float | None = None, **fields: Any) -> Any:
        """One request; its reply's value, or its error raised as confluent-kafka raises it. `timeout_s`: the
        call's own timeout (None: none), beyond which the harness waits CALL_GRACE_S of unfrozen time."""
        id_ = self._post(op, self._replies, None, flush=True, **fields)
        reply = self._wait(id_, None if timeout_s is None else timeout_s + CALL_GRACE_S)
        if reply.error is not None:
            protocol.raise_error(reply.error)
        return reply.ok

    def send_batch(self, handle: str, records: list[list[Any]]) -> None:
        """A `produce_batch` written without waiting for its reply, so sends stream to the worker (one round trip
        per record would cap a worker's throughput far below the client's): the worker queues the records in
        order, waiting itself while its client's queue is full, and a record it refuses comes back as that
        record's failed delivery, as librdkafka reports an error it finds after produce() returned. Never
        raises: a worker that is gone fails the batch's records the same way."""
        tags = [r[3] for r in records]
        try:
            self._post("produce_batch", self._sent, (handle, tags), flush=True, handle=handle, records=records)
        except KafkaException:
            with self._lock:
                self._refuse(handle, tags, self._gone())

    def post_poll(self, handle: str) -> None:
        """A `poll` with timeout 0 written without waiting for its reply: a worker that has exited raises
        _TRANSPORT as `call` does; an error in the reply fails no record, and a fatal one is kept for the
        handle's next poll to raise (`take_fatal`)."""
        self._post("poll", self._sent, (handle, []), flush=True, handle=handle, timeout=0)

    def take_fatal(self, handle: str) -> dict[str, Any] | None:
        """The fatal error a posted request of the handle met since the last call (None: none)."""
        with self._lock:
            return self._fatal.pop(handle, None)

    def _refuse(self, handle: str, tags: list[int], error: dict[str, Any]) -> None:
        """Failed deliveries for records the worker never queued (the caller holds the lock)."""
        self._deliveries.setdefault(handle, []).extend(protocol.failed_report(tag, error) for tag in tags)
        self._arrived.notify_all()

    def _wait(self, id_: int, budget_s: float | None) -> protocol.Reply:
        """The reply to `id_`; time spent frozen does not count against `budget_s` (None: wait as long as the
        worker lives)."""
        last = time.monotonic()
        with self._lock:
            while True:
                reply = self._replies.get(id_)
                if reply is not None:
                    del self._replies[id_]
                    return reply
                if self._dead:
                    del self._replies[id_]
                    return protocol.Reply(id_, error=self._gone())
                now = time.monotonic()
                if budget_s is not None and not self.frozen:
                    budget_s -= now - last
                if STOPPING.is_set():
                    budget_s = min(budget_s if budget_s is not None else STOPPING_WAIT_S, STOPPING_WAIT_S)
                last = now
                if budget_s is not None and budget_s <= 0:
                    del self._replies[id_]
                    return protocol.Reply(id_, error=protocol.local_error(
                        "_TIMED_OUT", f"client worker {self.name} did not answer {id_}"))
                self._arrived.wait(0.2 if budget_s is None else min(0.2, budget_s))

    def deliveries(self, handle: str, timeout_s: float) -> list[protocol.Report]:
        """The delivery events of a handle received so far, waiting up to `timeout_s` for the first."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while not self._deliveries.get(handle) and not self._dead:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self._arrived.wait(left)
            return self._deliveries.pop(handle, [])

    def freeze(self) -> None:
        self.frozen = True
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGSTOP)

    def thaw(self) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGCONT)
        self.frozen = False

    def exit(self, timeout_s: float = 5.0) -> None:
        """Ask the worker to exit; killed if it does not within `timeout_s` (or is frozen)."""
        if self.proc.poll() is None and not self.frozen:
            with contextlib.suppress(Exception), self._write:
                assert self.proc.stdin is not None
                self.proc.stdin.write(protocol.request(next(self._ids), "exit"))
                self.proc.stdin.flush()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout_s)
        self.kill()

    def kill(self) -> None:
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
                os.kill(self.pid, signal.SIGCONT)  # a stopped process dies only once it runs
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(5)
        _LIVE.discard(self)
        if self.proc.stdin is not None:
            with contextlib.suppress(Exception):
                self.proc.stdin.close()


_LIVE: set[WorkerProcess] = set()


@atexit.register
def _kill_all() -> None:
    """Nothing left behind, whatever way the harness ends (but os._exit)."""
    for worker in list(_LIVE):
        worker.kill()


@dataclass(slots=True)
class _Message:
    """The subset of confluent_kafka.Message the workloads read."""

    _topic: str
    _partition: int
    _offset: int | None
    _value: bytes | None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int | None:
        return self._offset

    def value(self) -> bytes | None:
        return self._value

    def error(self) -> None:
        return None


@dataclass(frozen=True)
class GroupMetadata:
    """A consumer's group metadata, by handle: used inside the worker that hosts both clients."""

    worker: WorkerProcess
    handle: str


class RemoteProducer:
    """A producer in a worker, with confluent_kafka.Producer's methods the workloads use."""

    def __init__(self, worker: WorkerProcess, handle: str, streamed: bool = False) -> None:
        self.worker, self.handle = worker, handle
        self.streamed = streamed
        """Sends batched and written without waiting for the worker's answer (`WorkerProcess.send_batch`): a
        plain producer's. A transactional producer waits for each, since a send refused in a failed transaction
        must raise at once, as confluent-kafka's produce() does, for the workload to abort."""
        self._tags = itertools.count()
        self._pending: dict[int, tuple[Callable[..., None] | None, str, int, bytes]] = {}
        self._batch: list[list[Any]] = []
        """Streamed sends not written yet: `[topic, partition, value, tag]`, in produce() order."""
        self._batch_lock = threading.Lock()
        """Guards `_batch` and orders the writes: a batch is written while it is held, so batches reach the
        worker in the order their records were produced. A plain lock, taken by produce() for every record
        (a Condition's own `with` runs Python code each time)."""
        self._batched = threading.Condition(self._batch_lock)
        """Wakes the linger thread when a batch starts."""
        self._linger: threading.Thread | None = None
        self._in_transaction = False

    def produce(self, topic: str, value: bytes | None = None, partition: int = -1,
                on_delivery: Callable[..., None] | None = None) -> None:
        tag = next(self._tags)
        self._pending[tag] = (on_delivery, topic, partition, value or b"")
        if self.streamed:
            with self._batch_lock:
                batch = self._batch
                batch.append([topic, partition, protocol.text(value), tag])
                n = len(batch)
                if n >= BATCH_RECORDS:
                    self._send_batch()
                elif n == 1:
                    if self._linger is None:
                        self._linger = threading.Thread(target=self._lingering, name=f"{self.worker.name}-linger",
                                                        daemon=True)
                        self._linger.start()
                    self._batched.notify()
            return
        try:
            self.worker.call("produce", handle=self.handle, topic=topic, partition=partition,
                             value=protocol.text(value), tag=tag)
        except BaseException:
            del self._pending[tag]
            raise

    def _send_batch(self) -> None:
        """Write the batch (the caller holds `_batch_lock`)."""
        if self._batch:
            batch, self._batch = self._batch, []
            self.worker.send_batch(self.handle, batch)

    def _flush_batch(self) -> None:
        if self.streamed:
            with self._batch_lock:
                self._send_batch()

    def _lingering(self) -> None:
        """Writes a batch LINGER_S after its first record unless a call or a full batch wrote it first; ends with
        its worker."""
        with self._batched:
            while self.worker.proc.poll() is None:
                if not self._batch:
                    self._batched.wait(1.0)
                    continue
                first = self._batch[0]
                self._batched.wait(LINGER_S)
                if self._batch and self._batch[0] is first:
                    self._send_batch()

    def _serve(self, timeout_s: float) -> int:
        served = 0
        pending, unknown = self._pending, (None, "", -1, b"")
        for report in self.worker.deliveries(self.handle, timeout_s):
            on_delivery, topic, partition, value = pending.pop(report[0], unknown)
            served += 1
            error = protocol.report_error(report)
            if self._in_transaction and error is None:
                self.worker.transaction_written.set()
            if on_delivery is None:
                continue
            if error is None:
                on_delivery(None, _Message(topic, partition, protocol.report_offset(report), value))
            else:
                on_delivery(protocol.kafka_error(error), _Message(topic, partition, None, value))
        return served

    def poll(self, timeout: float = 0) -> int:
        self._flush_batch()
        if self.streamed and timeout <= 0:
            # A plain producer's poll(0) serves the reports already here and asks the worker to serve its client
            # after the batches before it, without waiting: a wait would stall the harness until the worker has
            # read every batch it was sent. A fatal error the worker's poll raised is raised by the next poll(0).
            self.worker.post_poll(self.handle)
        else:
            # the worker's own poll serves its callbacks (and raises a fatal error, as confluent-kafka's does)
            self.worker.call("poll", timeout_s=timeout, handle=self.handle, timeout=timeout)
        served = self._serve(0)
        fatal = self.worker.take_fatal(self.handle)
        if fatal is not None:
            protocol.raise_error(fatal)
        return served

    def flush(self, timeout: float = 0) -> int:
        self._flush_batch()
        left = int(self.worker.call("flush", timeout_s=timeout, handle=self.handle, timeout=timeout))
        self._serve(0)
        return left

    def _txn(self, op: str, timeout: float | None) -> None:
        self._flush_batch()
        if op in ("commit_transaction", "abort_transaction"):
            self._in_transaction = False
            self.worker.transaction_written.clear()
        fields = {} if timeout is None else {"timeout": timeout}
        self.worker.call(op, timeout_s=timeout, handle=self.handle, **fields)
        if op == "begin_transaction":
            self._in_transaction = True
        self._serve(0)

    def init_transactions(self, timeout: float | None = None) -> None:
        self._txn("init_transactions", timeout)

    def begin_transaction(self) -> None:
        self._txn("begin_transaction", None)

    def commit_transaction(self, timeout: float | None = None) -> None:
        self._txn("commit_transaction", timeout)

    def abort_transaction(self, timeout: float | None = None) -> None:
        self._txn("abort_transaction", timeout)

    def send_offsets_to_transaction(self, positions: list[TopicPartition], metadata: GroupMetadata,
                                    timeout: float) -> None:
        if metadata.worker is not self.worker:
            raise ValueError("send_offsets_to_transaction needs the consumer in the producer's own worker")
        self._flush_batch()
        self.worker.call("send_offsets_to_transaction", timeout_s=timeout, handle=self.handle,
                         consumer=metadata.handle, offsets=[[tp.topic, tp.partition, tp.offset] for tp in positions],
                         timeout=timeout)


class RemoteConsumer:
    """A consumer in a worker, with confluent_kafka.Consumer's methods the workloads use."""

    def __init__(self, worker: WorkerProcess, handle: str) -> None:
        self.worker, self.handle = worker, handle

    def assign(self, partitions: list[TopicPartition]) -> None:
        # confluent-kafka's TopicPartition without an offset has OFFSET_INVALID (-1001): "the committed one"
        self.worker.call("assign", handle=self.handle, partitions=[
            [tp.topic, tp.partition, None if tp.offset == -1001 else tp.offset] for tp in partitions])

    def subscribe(self, topics: list[str]) -> None:
        self.worker.call("subscribe", handle=self.handle, topics=list(topics))

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[_Message]:
        records = self.worker.call("consume", timeout_s=max(timeout, 0), handle=self.handle, max=num_messages,
                                   timeout=timeout)
        return [_Message(t, p, o, v.encode("latin-1")) for t, p, o, v in records]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        got = self.worker.call("position", handle=self.handle, partitions=[[tp.topic, tp.partition]
                                                                           for tp in partitions])
        return [TopicPartition(t, p, o) for t, p, o in got]

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.worker.call("assignment", handle=self.handle)]

    def get_watermark_offsets(self, partition: TopicPartition, timeout: float | None = None,
                              cached: bool = False) -> tuple[int, int]:
        t = 5.0 if timeout is None else timeout
        low, high = self.worker.call("watermarks", timeout_s=t, handle=self.handle, topic=partition.topic,
                                     partition=partition.partition, timeout=t)
        return int(low), int(high)

    def consumer_group_metadata(self) -> GroupMetadata:
        return GroupMetadata(self.worker, self.handle)

    def close(self) -> None:
        with contextlib.suppress(KafkaException):
            self.worker.call("close", timeout_s=10.0, handle=self.handle)


@dataclass
class OutOfProcessDriver:
    """Clients in worker processes: `command` starts one; `settings` maps librdkafka's setting names to the
    client's own (raising ValueError for one it lacks)."""

    client: str
    version: str
    command: list[str]
    settings: Callable[[dict[str, Any]], dict[str, Any]] = field(default=lambda conf: conf)
    out_of_process: bool = True
    _workers: dict[int, WorkerProcess] = field(default_factory=dict)
    _handles: itertools.count = field(default_factory=itertools.count)  # type: ignore[type-arg]
    on_close: Callable[[OutOfProcessDriver], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closed: bool = False

    def worker(self, process: int) -> WorkerProcess:
        """The worker of a history process, started on first use."""
        with self._lock:
            if self._closed:
                protocol.raise_error(protocol.local_error("_DESTROY", "the run's clients are closed"))
            existing = self._workers.get(process)
            if existing is not None:
                return existing
            worker = WorkerProcess(self.command, f"{self.client}-p{process}")
            self._workers[process] = worker
        worker.wait_ready()
        return worker

    def workers_of(self, process: int) -> list[WorkerProcess]:
        """The live worker of a process (none: it has not started one yet, or was released)."""
        with self._lock:
            w = self._workers.get(process)
        return [w] if w is not None else []

    def _create(self, kind: str, config: dict[str, Any], process: int) -> tuple[WorkerProcess, str]:
        worker = self.worker(process)
        handle = f"{kind[0]}{next(self._handles)}"
        conf = self.settings({k: v for k, v in config.items() if k not in NOT_PASSED})
        worker.call("create", timeout_s=30.0, handle=handle, kind=kind, config=protocol.config_values(conf))
        return worker, handle

    def producer(self, config: dict[str, Any], process: int) -> RemoteProducer:
        return RemoteProducer(*self._create("producer", config, process), streamed="transactional.id" not in config)

    def consumer(self, config: dict[str, Any], process: int) -> RemoteConsumer:
        return RemoteConsumer(*self._create("consumer", config, process))

    def release(self, process: int) -> None:
        with self._lock:
            worker = self._workers.pop(process, None)
        if worker is not None:
            worker.exit()

    def thaw(self) -> None:
        """Every worker running again (a pause left on must not hold the run's stop)."""
        with self._lock:
            workers = list(self._workers.values())
        for w in workers:
            if w.frozen:
                w.thaw()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._workers = list(self._workers.values()), {}
        for w in workers:
            w.kill()
        if self.on_close is not None:
            self.on_close(self)
