"""The transactional workload (`[workload] kind = "txn"`): Jepsen's Kafka transactions (docs/architecture.md §3).

Each producer thread is a series of Jepsen processes. A process owns one transactional confluent-kafka Producer
and runs one `txn` op at a time: begin, optionally poll (a consumer at read_committed) and send the positions it
reached as the transaction's consumer offsets (`send_offsets_to_transaction`, the consume-transform-produce loop),
send one value to each of `txn_keys` distinct partitions, then commit — or abort on purpose for a share of them.

History, Jepsen's rules: `ok` only after `commit_transaction` returned; `fail` only after `abort_transaction`
returned (the transaction certainly did not commit); anything else — a commit that raised, a fenced or fatally
failed producer — is `info`, and that process never runs again: the thread starts a new process with a new
Producer. The thread keeps its `transactional.id` across its processes, as a restarted application instance
would, so each new process fences the previous one's producer epoch (KIP-98 zombie fencing).

Micro-ops in order: invoke `[["poll"], ["send", key, value], …]`, completion
`[["poll", {key: [[offset, value], …]}], ["send", key, [offset, value]], …]`.

Standalone consumers, one per isolation level in `txn_isolation`, read every partition from the beginning; their
`assign` op's value names the isolation level (`{"keys": […], "isolation": "read_uncommitted"}`) so the checker
knows what each reader was promised. The final drain reads at read_committed (`txn_final_drain`).
"""

from __future__ import annotations

import contextlib
import enum
import itertools
import random
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Message, Producer, TopicPartition

from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.interrupts import join
from kafka_chaos.workloads.clients import client_id
from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.consumer import ConsumerSettings, ConsumerWorkload, end_offsets, poll_once, start_reading
from kafka_chaos.workloads.drivers import IN_PROCESS, Driver, make_driver
from kafka_chaos.workloads.recorder import Recorder, error_field, kafka_error, parse_payload, payload

if TYPE_CHECKING:  # types only: workloads never import the harness at run time
    from kafka_chaos.harness.testmap import RunContext

TXN_TIMEOUT_MS = 10000
"""transaction.timeout.ms: a transaction left open by a dead process is aborted by its coordinator after this,
so read_committed readers (and the final drain) are not held at the last stable offset for Kafka's 60 s."""


def transactional_id(topic: str, thread: int) -> str:
    """The `transactional.id` of producer thread `thread` (faults' `txn-coordinator` target resolves thread 0's)."""
    return f"kafka-chaos-txn-{topic}-{thread}"


OFFSETS_HUNG = ("send_offsets_to_transaction did not return within its timeout (librdkafka ignores it while a "
                "coordinator is down: confluentinc/librdkafka#5456, #5511); the process is abandoned")
STOP_GRACE_S = 5.0
"""How long `stop` waits beyond an op's own timeouts for a producer thread before leaving it (its op stays
open: unknown, as Jepsen records a process that never answered)."""


def _returns_within(call: Any, seconds: float) -> bool:
    """Run a blocking client call with a deadline: True when it returned (its exception is raised here), False
    when it is still blocked (it is left running in a daemon thread: a C call cannot be interrupted)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as err:  # handed to the caller's thread
            outcome.append(err)

    thread = threading.Thread(target=run, name="txn-bounded-call", daemon=True)
    thread.start()
    thread.join(seconds)
    if not outcome:
        return False
    if outcome[0] is not None:
        raise outcome[0]
    return True


def _serve_callbacks(producer: Producer) -> bool:
    """Serve delivery reports; False when the producer raised a (fatal) error there: its process must end."""
    try:
        producer.poll(0)
    except KafkaException:
        return False
    return True


class _Next(enum.Enum):
    """What a process does after a txn op."""

    OP = "op"
    REREAD = "reread"  # an op after making a new consumer, which starts at the group's committed offsets
    END = "end"  # nothing: the op ended `info` or the producer is unusable; the thread starts a new process


class _Outcome(Exception):
    """Ends one txn op with a history type (`fail` / `info`) and the error that decided it."""

    def __init__(self, type_: str, err: Any) -> None:
        super().__init__(str(err))
        self.type = type_
        self.err = err


class TxnProducerThread:
    """One producer thread: processes one after another, one transaction at a time (a Jepsen process is
    single-threaded)."""

    def __init__(self, ctx_bootstrap: str, topic: str, partitions: int, config: WorkloadConfig, recorder: Recorder,
                 values: Iterator[int], thread: int, seed: int, driver: Driver = IN_PROCESS) -> None:
        self.bootstrap, self.topic, self.partitions = ctx_bootstrap, topic, partitions
        self.config, self.recorder, self.values, self.thread = config, recorder, values, thread
        self.driver = driver
        self.rng = random.Random(seed)
        self.stop_event = threading.Event()
        self.counts = {"ok": 0, "fail": 0, "info": 0}
        self._thread = threading.Thread(target=self._run, name=f"txn-producer-{thread}", daemon=True)
        # numbered here, before any thread runs, so a scenario can name it (workloads.clients)
        self._first_process: int | None = recorder.new_process()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.stop_event.set()
        # an op waits at most its own timeouts (commit, then abort); beyond that a client call is hung
        join(self._thread, self.config.request_timeout_ms / 1000 * 3 * 2 + STOP_GRACE_S)

    def _producer(self, process: int) -> Producer:
        c = self.config
        socket_timeout = {"socket.timeout.ms": c.txn_socket_timeout_ms} if c.txn_socket_timeout_ms else {}
        producer: Producer = self.driver.producer({
            **socket_timeout,
            "bootstrap.servers": self.bootstrap,
            "transactional.id": transactional_id(self.topic, self.thread),
            "transaction.timeout.ms": TXN_TIMEOUT_MS,
            "enable.idempotence": True,
            "acks": "all",
            "linger.ms": c.linger_ms,
            "request.timeout.ms": c.request_timeout_ms,
            "delivery.timeout.ms": min(c.delivery_timeout_ms, TXN_TIMEOUT_MS),  # librdkafka: <= the txn timeout
            "metadata.max.age.ms": 5000,
            "topic.metadata.refresh.interval.ms": 1000,
            "client.id": client_id("txn", process),
            "logger": client_logger(),
        }, process)
        return producer

    def _consumer(self, process: int) -> Consumer:
        consumer: Consumer = self.driver.consumer({
            "bootstrap.servers": self.bootstrap,
            "group.id": f"kafka-chaos-txn-{self.topic}-{self.thread}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "enable.partition.eof": False,
            "topic.metadata.refresh.interval.ms": 1000,
            "client.id": client_id("txn-consumer", process),
            "logger": client_logger(),
        }, process)
        consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
        return consumer

    def _run(self) -> None:
        timeout = self.config.request_timeout_ms / 1000 * 3
        while not self.stop_event.is_set():
            process = self._first_process if self._first_process is not None else self.recorder.new_process()
            self._first_process = None
            consumer: Consumer | None = None
            try:
                producer = self._producer(process)
                producer.init_transactions(timeout)
                consumer = self._consumer(process) if self.config.txn_mixed_share > 0 else None
            except KafkaException as err:  # no op of this process was invoked: just try a new one
                self.recorder.record(process, "info", "crash", None, error=error_field(err))
                self.driver.release(process)
                self.stop_event.wait(1.0)
                continue
            try:
                while not self.stop_event.is_set():
                    step = self._one(process, producer, consumer, timeout)
                    if step is _Next.END:
                        break
                    if step is _Next.REREAD and consumer is not None:
                        consumer = self._reread(consumer, process)
                        if consumer is None:
                            break
            finally:
                if consumer is not None:
                    with contextlib.suppress(Exception):
                        consumer.close()
                with contextlib.suppress(KafkaException):  # a fenced producer may raise its fatal error here
                    producer.flush(0)
                self.driver.release(process)

    def _reread(self, consumer: Consumer, process: int) -> Consumer | None:
        """After an aborted transaction that polled: a new consumer, which starts at the offsets the group
        committed with its last committed transaction (at read_committed librdkafka fetches them with
        require_stable, KIP-447), so the next transaction reads again what the aborted one read, as an
        exactly-once application must. Seeking the old consumer back did not do it: in a run of 2026-11-26 a
        process's next transaction read on from the aborted one's position (`seek` is applied asynchronously
        and `position()` kept the consumed position), and its committed offsets then skipped the records the
        aborted transaction had read. None when no consumer could be made: the process ends."""
        with contextlib.suppress(Exception):
            consumer.close()
        try:
            return self._consumer(process)
        except KafkaException:
            return None

    def _one(self, process: int, producer: Producer, consumer: Consumer | None, timeout: float) -> _Next:
        """One txn op; returns what the process does next: another op, another after reading again from its
        committed offsets (the op aborted after polling), or nothing (after an `info`)."""
        c = self.config
        keys = self.rng.sample(range(self.partitions), min(c.txn_keys, self.partitions))
        writes = [(p, next(self.values)) for p in keys]
        mixed = consumer is not None and self.rng.random() < c.txn_mixed_share
        abort = self.rng.random() < c.txn_abort_share
        invoke: list[Any] = ([["poll"]] if mixed else []) + [["send", f"{self.topic}/{p}", v] for p, v in writes]
        self.recorder.record(process, "invoke", "txn", invoke)
        offsets: dict[int, int | None] = {}
        read: dict[str, list[list[int]]] = defaultdict(list)

        def completion() -> list[Any]:
            sends = [["send", f"{self.topic}/{p}", [offsets.get(v), v]] for p, v in writes]
            return ([["poll", dict(read)]] if mixed else []) + sends

        end_txn: dict[str, Any] = {}

        def timing(ended: int) -> dict[str, Any] | None:
            """`end_txn`: which EndTxn the op sent and how long before its completion it was asked for (ns):
            the window in which that request was in flight (the KAFKA-17754 shape)."""
            if not end_txn:
                return None
            return {"end_txn": {"result": end_txn["result"], "ns": ended - end_txn["started"]}}

        def on_delivery(err: KafkaError | None, msg: Message) -> None:
            value, offset = parse_payload(msg.value()), msg.offset()
            if err is None and value is not None and offset is not None and offset >= 0:
                offsets[value] = offset

        try:
            try:
                producer.begin_transaction()
                if mixed:
                    assert consumer is not None
                    for msg in consumer.consume(c.poll_max_records, timeout=0.2):
                        value = parse_payload(msg.value()) if msg.error() is None else None
                        offset = msg.offset()
                        if value is not None and offset is not None:
                            read[f"{msg.topic()}/{msg.partition()}"].append([offset, value])
                for p, v in writes:
                    producer.produce(self.topic, value=payload(v, c.record_size), partition=p,
                                     on_delivery=on_delivery)
                if mixed:
                    assert consumer is not None
                    positions = consumer.position(consumer.assignment())
                    metadata = consumer.consumer_group_metadata()
                    if not _returns_within(lambda: producer.send_offsets_to_transaction(positions, metadata, timeout),
                                           timeout + 5):
                        raise _Outcome("info", OFFSETS_HUNG)
            except (KafkaException, BufferError) as err:
                # before the commit: aborting is certain to leave nothing committed, if the abort succeeds
                raise _Outcome("fail", err) from err
            if abort:
                if c.txn_abort_wait_ms:
                    # a flush may end early on a failed delivery: the abort goes ahead whatever was acknowledged
                    producer.flush(c.txn_abort_wait_ms / 1000)
                raise _Outcome("fail", "aborted on purpose")
            if c.txn_commit_delay_ms:
                producer.flush(c.txn_commit_delay_ms / 1000)  # acknowledged: the coordinator has the transaction
                self.stop_event.wait(c.txn_commit_delay_ms / 1000)
            try:
                end_txn.update(result="commit", started=time.monotonic_ns())
                producer.commit_transaction(timeout)
            except KafkaException as err:
                e = kafka_error(err)
                if e is not None and e.txn_requires_abort():  # librdkafka: not committed; abort it
                    raise _Outcome("fail", err) from err
                raise _Outcome("info", err) from err  # the commit may or may not have happened
            ended = time.monotonic_ns()
            healthy = _serve_callbacks(producer)  # the commit returned: ok, even if the producer is now unusable
            self.recorder.record(process, "ok", "txn", completion(), extra=timing(ended))
            self.counts["ok"] += 1
            return _Next.OP if healthy else _Next.END
        except _Outcome as outcome:
            type_ = outcome.type
            if type_ == "fail":
                try:
                    end_txn.update(result="abort", started=time.monotonic_ns())
                    producer.abort_transaction(timeout)
                except KafkaException:
                    type_ = "info"  # the abort did not return: the transaction's end is unknown
            if not _serve_callbacks(producer):
                type_ = "info"  # a fatal error surfaced (e.g. "Failed to end transaction"): trust no outcome
            ended = time.monotonic_ns()
            cause = outcome.err
            self.recorder.record(process, type_, "txn", completion(),
                                 error=error_field(cause) if isinstance(cause, BaseException)
                                 else ["abort" if type_ == "fail" else "client", str(cause)],
                                 extra=timing(ended))
            self.counts[type_] += 1
            if type_ != "fail":
                return _Next.END
            # what the aborted transaction read is read again by the next one (its offsets were not committed)
            return _Next.REREAD if mixed else _Next.OP


class IsolatedConsumer(ConsumerWorkload):
    """A standalone reader at one isolation level: every partition from the beginning, no group."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, isolation: str, recorder: Recorder,
                 max_records: int, driver: Driver = IN_PROCESS) -> None:
        self.isolation = isolation
        self.thread_name = f"consumer-{isolation}"
        super().__init__(ConsumerSettings(bootstrap, topic, partitions, max_records=max_records), recorder, driver)

    def client_config(self) -> dict[str, Any]:
        return {**self.settings.client_config(), "isolation.level": self.isolation,
                "client.id": client_id(f"consumer-{self.isolation}", self.process)}

    def start_reading(self, consumer: Consumer, process: int) -> None:
        s = self.settings
        value = {"keys": s.keys(), "isolation": self.isolation}
        self.recorder.record(process, "invoke", "assign", value)
        consumer.assign([TopicPartition(s.topic, p, OFFSET_BEGINNING) for p in range(s.partitions)])
        self.recorder.record(process, "ok", "assign", value)


def txn_final_drain(settings: ConsumerSettings, recorder: Recorder, timeout_s: float,
                    driver: Driver = IN_PROCESS) -> bool:
    """The final drain at read_committed: like consumers.final_drain, but progress is the consumer's position,
    not the last record read + 1: a transactional partition ends with a commit or abort marker (a control
    record no consumer returns) and may end with aborted records a read_committed reader skips."""
    deadline = time.monotonic() + timeout_s
    process = recorder.new_process()
    consumer = driver.consumer({**settings.client_config(), "isolation.level": "read_committed",
                                "client.id": client_id("drain", process)}, process)
    try:
        ends = end_offsets(consumer, settings, deadline)
        if ends is None:
            return False
        start_reading(consumer, process, recorder, settings)
        parts = [TopicPartition(settings.topic, p) for p in range(settings.partitions)]
        position = {p: 0 for p in range(settings.partitions)}
        while any(position[p] < ends[p] for p in position) and time.monotonic() < deadline:
            poll_once(consumer, process, recorder, settings, timeout_s=1.0)
            with contextlib.suppress(KafkaException):
                for tp in consumer.position(parts):
                    if tp.offset >= 0:
                        position[tp.partition] = max(position[tp.partition], tp.offset)
        return all(position[p] >= ends[p] for p in position)
    except KafkaException as err:
        recorder.record(process, "info", "poll", [["poll"]], error=error_field(err))
        return False
    finally:
        try:
            consumer.close()
        finally:
            driver.release(process)


class TxnWorkload:
    """`[workload] kind = "txn"`: `producers` transactional producer threads, a consumer per isolation level
    (when `consumers` > 0), the final drain at read_committed."""

    def __init__(self, config: WorkloadConfig) -> None:
        self.config = config
        self.producers: list[TxnProducerThread] = []
        self.consumers: list[IsolatedConsumer] = []
        self._drain: ConsumerSettings | None = None
        self.driver: Driver = IN_PROCESS

    def start(self, ctx: RunContext) -> None:
        w, partitions = self.config, ctx.scenario.topic.partitions
        bootstrap = ctx.cluster.bootstrap_servers()
        self._drain = ConsumerSettings(bootstrap, ctx.topic, partitions, max_records=w.poll_max_records)
        values = itertools.count()  # run-wide unique values
        self.driver = make_driver(w)
        self.producers = [TxnProducerThread(bootstrap, ctx.topic, partitions, w, ctx.history, values, i,
                                            seed=ctx.scenario.seed * 1000 + i, driver=self.driver)
                          for i in range(w.producers)]
        if w.consumers > 0:
            self.consumers = [IsolatedConsumer(bootstrap, ctx.topic, partitions, iso, ctx.history,
                                               w.poll_max_records, self.driver) for iso in w.txn_isolation]
        for consumer in self.consumers:
            consumer.start()
        for producer in self.producers:
            producer.start()

    def progress(self) -> str:
        counts = {t: sum(p.counts[t] for p in self.producers) for t in ("ok", "fail", "info")}
        polls = sum(c.polls for c in self.consumers)
        return f"txns ok {counts['ok']} fail {counts['fail']} info {counts['info']} · polls {polls}"

    def stop(self, ctx: RunContext, *, interrupted: bool) -> None:
        self.driver.thaw()
        try:
            for producer in self.producers:
                producer.stop()
            for consumer in self.consumers:
                consumer.stop()
        finally:
            if interrupted:  # no final read follows
                self.driver.close()

    def final_read(self, ctx: RunContext) -> dict[str, Any] | None:
        assert self._drain is not None, "final_read before start"
        try:
            return {"complete": txn_final_drain(self._drain, ctx.history, timeout_s=self.config.drain_timeout_s,
                                                driver=self.driver)}
        finally:
            self.driver.close()
