"""The out-of-process client driver against a fake worker (the protocol client), the librdkafka worker script
run by this interpreter (no broker: only what needs none), and the client choice's validation."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from kafka_chaos.errors import ClientUnavailable, ScenarioError
from kafka_chaos.faults.client_pause import ClientPause
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.workloads import drivers
from kafka_chaos.workloads.config import WorkloadConfig
from kafka_chaos.workloads.drivers import remote
from kafka_chaos.workloads.drivers.protocol import PROTOCOL_VERSION
from kafka_chaos.workloads.drivers.remote import OutOfProcessDriver, RemoteProducer, WorkerError

FAKE_WORKER = textwrap.dedent('''
    import json, sys
    def out(o):
        sys.stdout.write(json.dumps(o) + "\\n"); sys.stdout.flush()
    out({"event": "ready", "client": "fake", "version": "9.9.9", "protocol": PROTOCOL})
    configs, received = {}, []
    NOT_ENOUGH = {"name": "NOT_ENOUGH_REPLICAS", "message": "nope", "retriable": True, "fatal": False,
                  "abortable": False}
    TOO_LARGE = {"name": "MSG_SIZE_TOO_LARGE", "message": "refused", "retriable": False, "fatal": False,
                 "abortable": False}
    def outcome(partition, tag):
        # partition 7: the client refuses the send; 9: the broker fails it; else the offset is 100 + tag
        if partition == 7:
            return [tag, None, TOO_LARGE]
        return [tag, None, NOT_ENOUGH] if partition == 9 else [tag, 100 + tag]
    for line in sys.stdin:
        r = json.loads(line)
        op, h = r["op"], r.get("handle")
        if op == "exit":
            out({"id": r["id"], "ok": None}); break
        if op == "create":
            configs[h] = r["config"]; out({"id": r["id"], "ok": None})
        elif op == "produce":
            if r["partition"] == 7:
                out({"id": r["id"], "error": {"name": "_QUEUE_FULL", "message": "full"}}); continue
            out({"id": r["id"], "ok": None})
            out({"event": "deliveries", "handle": h, "reports": [outcome(r["partition"], r["tag"])]})
        elif op == "produce_batch":
            if h not in configs:
                out({"id": r["id"], "error": {"name": "_INVALID_ARG", "message": "no client " + str(h)}}); continue
            received.extend(value for _t, _p, value, _tag in r["records"])
            out({"id": r["id"], "ok": None})
            # reports in two lines, so a batch's outcomes arrive over more than one event
            reports = [outcome(p, tag) for _t, p, _v, tag in r["records"]]
            half = len(reports) // 2
            for part in (reports[:half], reports[half:]):
                if part:
                    out({"event": "deliveries", "handle": h, "reports": part})
        elif op == "received":
            out({"id": r["id"], "ok": received})
        elif op == "commit_transaction":
            out({"id": r["id"], "error": {"name": "INVALID_PRODUCER_EPOCH", "message": "bumped", "retriable": False,
                 "fatal": False, "abortable": True}})
        elif op == "consume":
            out({"id": r["id"], "ok": [["t", 1, 5, "v\\u00ff"]]})
        elif op == "config":
            out({"id": r["id"], "ok": configs[h]})
        elif op == "flush":
            out({"id": r["id"], "ok": 0})
        elif op == "crash":
            sys.exit(3)
        elif op == "poll" and configs.get(h, {}).get("test.fatal.poll"):
            out({"id": r["id"], "error": {"name": "OUT_OF_ORDER_SEQUENCE_NUMBER", "message": "desync",
                 "retriable": False, "fatal": True, "abortable": False}})
        else:
            out({"id": r["id"], "ok": None})
''')


def fake_driver(tmp_path: Path, protocol_version: int = PROTOCOL_VERSION) -> OutOfProcessDriver:
    script = tmp_path / "worker.py"
    script.write_text(FAKE_WORKER.replace("PROTOCOL", str(protocol_version)))
    return OutOfProcessDriver("fake", "9.9.9", [sys.executable, "-u", str(script)])


@pytest.fixture
def fake(tmp_path: Path) -> Any:
    driver = fake_driver(tmp_path)
    yield driver
    driver.close()


def test_deliveries_run_their_callbacks_on_the_polling_thread_with_the_workers_outcome(fake: Any) -> None:
    producer = fake.producer({"bootstrap.servers": "x", "enable.idempotence": True, "logger": object()}, 3)
    seen: list[tuple[Any, Any, Any, str]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        seen.append((err, msg.offset(), msg.value(), threading.current_thread().name))

    producer.produce("t", value=b"a\xff", partition=0, on_delivery=on_delivery)
    producer.produce("t", value=b"b", partition=9, on_delivery=on_delivery)
    assert producer.flush(5) == 0
    ok, failed = seen
    assert ok[:3] == (None, 100, b"a\xff") and ok[3] == threading.current_thread().name
    assert failed[0].code() == KafkaError.NOT_ENOUGH_REPLICAS and failed[0].retriable() and failed[1] is None
    # the logger (a Python object) stays in the harness; booleans go as librdkafka spells them
    assert fake.workers_of(3)[0].call("config", handle=producer.handle) == {"bootstrap.servers": "x",
                                                                             "enable.idempotence": "true"}


def test_errors_are_raised_as_confluent_kafka_raises_them(fake: Any) -> None:
    producer = fake.producer({"transactional.id": "t-1"}, 1)
    with pytest.raises(BufferError):
        producer.produce("t", value=b"x", partition=7)
    with pytest.raises(KafkaException) as raised:
        producer.commit_transaction(5)
    err = raised.value.args[0]
    assert err.code() == KafkaError.INVALID_PRODUCER_EPOCH and err.txn_requires_abort() and not err.fatal()


def test_a_plain_producers_batched_send_comes_back_refused_as_its_failed_delivery(fake: Any) -> None:
    """A plain producer does not wait for each send's answer (throughput): the worker's refusal of one record of
    a batch becomes that record's delivery error, served by poll like any other, between its neighbours' own
    outcomes; a transactional producer waits and raises."""
    producer = fake.producer({}, 11)
    assert producer.streamed and not fake.producer({"transactional.id": "t-2"}, 12).streamed
    outcomes: list[tuple[Any, Any]] = []
    for partition in (0, 7, 1):
        producer.produce("t", value=b"x%d" % partition, partition=partition,
                         on_delivery=lambda err, msg: outcomes.append((err, msg)))
    deadline = time.monotonic() + 30  # only against a hung worker
    while len(outcomes) < 3 and time.monotonic() < deadline:
        producer.poll(0.1)
    assert [(None if err is None else err.code(), msg.partition(), msg.offset(), msg.value())
            for err, msg in outcomes] == [(None, 0, 100, b"x0"), (KafkaError.MSG_SIZE_TOO_LARGE, 7, None, b"x7"),
                                          (None, 1, 102, b"x1")]


def test_batched_sends_deliver_every_record_once_in_the_order_produced(fake: Any) -> None:
    """More records than one batch holds, flushed in full batches, by a poll and by flush: the worker receives
    them in produce() order, and every callback runs exactly once, with its own record's outcome."""
    producer = fake.producer({}, 13)
    count = remote.BATCH_RECORDS * 2 + remote.BATCH_RECORDS // 2
    seen: list[tuple[int | None, bytes | None]] = []

    def on_delivery(err: KafkaError | None, msg: Any) -> None:
        seen.append((msg.offset(), msg.value()))

    for i in range(count):
        producer.produce("t", value=str(i).encode(), partition=i % 3, on_delivery=on_delivery)
        if i == count - 7:
            producer.poll(0)  # sends the partial batch it finds, as any call does
    assert producer.flush(30) == 0
    values = [str(i) for i in range(count)]
    assert producer.worker.call("received") == values
    assert seen == [(100 + i, v.encode()) for i, v in enumerate(values)]
    assert producer.flush(1) == 0 and len(seen) == count  # nothing delivered twice


def test_a_plain_producers_poll_0_serves_what_arrived_without_waiting_for_the_worker(fake: Any) -> None:
    """poll(0) of a plain producer does not wait for the worker to read every batch before it (a frozen worker
    shows it: the poll returns while the worker cannot answer); the poll it asks for is served in order, and
    the deliveries come back at a later poll or flush."""
    producer = fake.producer({}, 15)
    seen: list[int | None] = []
    producer.produce("t", value=b"a", partition=0, on_delivery=lambda err, msg: seen.append(msg.offset()))
    worker = producer.worker
    worker.freeze()
    try:
        polled = threading.Thread(target=producer.poll, args=(0,))
        polled.start()
        polled.join(10)  # only against a hang: a poll that waited for its reply would stay blocked until the thaw
        assert not polled.is_alive()
    finally:
        worker.thaw()
    assert producer.flush(30) == 0 and seen == [100]
    transactional = fake.producer({"transactional.id": "x"}, 16)
    assert not transactional.streamed  # its poll still waits: a refusal must reach the workload at once


def test_a_fatal_error_a_posted_poll_met_in_the_worker_is_raised_by_a_later_poll(fake: Any) -> None:
    """A plain producer's poll(0) does not wait for the worker's answer; when its client raised a fatal error
    there (librdkafka's, in the pinned worker), a later poll raises it, as confluent-kafka's poll does in
    process, so the workload replaces the dead client."""
    producer = fake.producer({"test.fatal.poll": True}, 21)
    assert producer.streamed
    deadline = time.monotonic() + 30  # only against a lost error: the worker answers at once
    with pytest.raises(KafkaException) as raised:
        while time.monotonic() < deadline:
            producer.poll(0)
            time.sleep(0.01)
    err = raised.value.args[0]
    assert err.fatal() and err.name() == "OUT_OF_ORDER_SEQUENCE_NUMBER" and err.str() == "desync"
    assert fake.producer({}, 22).poll(0) == 0  # another client of the worker is not affected


def test_a_lone_batched_send_reaches_the_worker_without_any_further_call(fake: Any) -> None:
    """A workload that produces and then waits (no poll, no flush) still gets its record sent: the linger
    timer writes a partial batch."""
    producer = fake.producer({}, 14)
    producer.produce("t", value=b"alone", partition=0)
    worker = producer.worker
    deadline = time.monotonic() + 30  # only against a hung worker: asks the worker directly, not via the producer
    while not worker.call("received") and time.monotonic() < deadline:
        time.sleep(0.01)
    assert worker.call("received") == ["alone"]


def test_a_batch_the_worker_refuses_whole_fails_each_of_its_records(fake: Any) -> None:
    worker = fake.producer({}, 15).worker
    producer = RemoteProducer(worker, "nobody", streamed=True)  # a handle the worker does not host
    failed: list[tuple[int, bytes | None]] = []
    for i in range(3):
        producer.produce("t", value=b"%d" % i, partition=0,
                         on_delivery=lambda err, msg: failed.append((err.code(), msg.value())))
    deadline = time.monotonic() + 30  # only against a hung worker
    while len(failed) < 3 and time.monotonic() < deadline:
        producer.poll(0.1)
    assert failed == [(KafkaError._INVALID_ARG, b"0"), (KafkaError._INVALID_ARG, b"1"), (KafkaError._INVALID_ARG, b"2")]


def test_a_worker_of_another_protocol_version_is_refused_at_start(tmp_path: Path) -> None:
    driver = fake_driver(tmp_path, protocol_version=PROTOCOL_VERSION - 1)
    try:
        with pytest.raises(WorkerError, match="protocol"):
            driver.producer({}, 0)
    finally:
        driver.close()


def test_a_consumer_reads_records_as_messages_and_shares_the_producers_worker(fake: Any) -> None:
    producer, consumer = fake.producer({}, 2), fake.consumer({}, 2)
    assert consumer.worker is producer.worker  # one worker per history process
    (msg,) = consumer.consume(10, timeout=0.1)
    assert (msg.topic(), msg.partition(), msg.offset(), msg.value(), msg.error()) == ("t", 1, 5, b"v\xff", None)
    metadata = consumer.consumer_group_metadata()
    producer.send_offsets_to_transaction([TopicPartition("t", 1, 6)], metadata, 5)


def test_a_worker_that_exited_fails_every_call_with_a_transport_error(fake: Any) -> None:
    producer = fake.producer({}, 4)
    with pytest.raises(KafkaException) as raised:
        producer.worker.call("crash")
    assert raised.value.args[0].code() == KafkaError._TRANSPORT
    with pytest.raises(KafkaException):
        producer.poll(0)


def test_a_frozen_worker_answers_only_after_it_is_thawed(fake: Any) -> None:
    consumer = fake.consumer({}, 5)
    worker = consumer.worker
    worker.freeze()
    got: list[Any] = []
    call = threading.Thread(target=lambda: got.append(consumer.consume(1, timeout=0.0)))
    call.start()
    call.join(1.0)
    assert call.is_alive() and not got  # a stopped process cannot have answered
    worker.thaw()
    call.join(30)
    assert len(got) == 1 and got[0][0].offset() == 5


def test_release_ends_the_worker_and_close_kills_the_rest(fake: Any) -> None:
    a, b = fake.producer({}, 10).worker, fake.producer({}, 11).worker
    b.freeze()
    fake.release(10)
    assert a.proc.poll() == 0 and fake.workers_of(10) == []
    fake.close()
    assert b.proc.poll() is not None  # a frozen worker is killed too
    with pytest.raises(KafkaException):
        fake.producer({}, 12)


def test_client_pause_freezes_the_chosen_processes_workers_and_records_the_client(fake: Any) -> None:
    worker = fake.consumer({}, 0).worker
    drivers.ACTIVE.append(fake)
    try:
        pause = ClientPause({"clients": [0]})
        value = pause.start([])
        assert worker.frozen and value["client"] == "fake" and value["version"] == "9.9.9"
        assert value["pids"] == {"0": [worker.pid]} and value["nodes"] == []
        assert pause.heal([])["pids"] == [worker.pid] and not worker.frozen
        with pytest.raises(ValueError, match="no client worker"):
            _no_worker()
    finally:
        drivers.ACTIVE.remove(fake)


def test_client_pause_during_a_transaction_freezes_once_a_send_of_an_open_transaction_is_acknowledged(
        fake: Any) -> None:
    """The worker knows a transaction is open at its coordinator only from an acknowledged send of it, served
    between begin and commit (the workload's txn_commit_delay_ms flush); the pause waits for that."""
    producer = fake.producer({"transactional.id": "x"}, 0)
    worker = producer.worker
    drivers.ACTIVE.append(fake)
    try:
        producer.begin_transaction()
        producer.produce("t", b"v", partition=1)
        assert not worker.transaction_written.is_set(), "not acknowledged until a poll or flush serves it"
        producer.flush(1.0)
        assert worker.transaction_written.is_set()
        pause = ClientPause({"clients": [0], "during": "transaction"})
        value = pause.start([])
        assert worker.frozen and value["during"] == "transaction" and value["in_transaction"] == [worker.pid]
        pause.heal([])
        with pytest.raises(KafkaException):
            producer.commit_transaction(5.0)  # the fake refuses it; the transaction is over either way
        assert not worker.transaction_written.is_set()
        with pytest.raises(ValueError, match="no transaction open"):
            stop = threading.Event()
            stop.set()
            ClientPause({"clients": [0], "during": "transaction"}, stop=stop).start([])
        assert not worker.frozen, "no transaction, no freeze"
    finally:
        drivers.ACTIVE.remove(fake)


def _no_worker() -> None:
    stop = threading.Event()
    stop.set()  # no waiting for a worker that will never come
    ClientPause({"clients": [42]}, stop=stop).start([])


def test_the_librdkafka_worker_script_speaks_the_protocol() -> None:
    driver = OutOfProcessDriver("librdkafka", "installed", [sys.executable, "-u", str(drivers.WORKER_SCRIPT)])
    try:
        producer = driver.producer({"bootstrap.servers": "127.0.0.1:1", "message.timeout.ms": 500,
                                    "message.max.bytes": 1000}, 0)
        assert producer.worker.version == confluent_kafka.libversion()[0]
        errors: list[tuple[int, bytes | None]] = []
        # one batch: the client refuses the middle record at once (too large), the others time out later
        for value in (b"a", b"b" * 2000, b"c"):
            producer.produce("t", value=value, partition=0,
                             on_delivery=lambda err, msg: errors.append((err.code(), msg.value())))
        assert producer.flush(30) == 0
        assert sorted(errors) == sorted([(KafkaError._MSG_TIMED_OUT, b"a"), (KafkaError._MSG_TIMED_OUT, b"c"),
                                         (KafkaError.MSG_SIZE_TOO_LARGE, b"b" * 2000)])
        consumer = driver.consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g"}, 0)
        consumer.assign([TopicPartition("t", 0, confluent_kafka.OFFSET_BEGINNING), TopicPartition("t", 1)])
        assert sorted((tp.topic, tp.partition) for tp in consumer.assignment()) == [("t", 0), ("t", 1)]
        consumer.close()
    finally:
        driver.close()


# --- the scenario's client choice ---------------------------------------------------------------------------

def test_an_unknown_client_or_a_version_that_is_no_release_is_bad_input() -> None:
    with pytest.raises(ScenarioError, match="not a client kafka-chaos drives"):
        parse_scenario({"name": "t", "workload": {"client": "kafkajs"}})
    with pytest.raises(ScenarioError, match="not a release version"):
        parse_scenario({"name": "t", "workload": {"client_version": "latest please"}})
    assert not drivers.out_of_process(WorkloadConfig())
    assert drivers.out_of_process(WorkloadConfig(client_version="2.6.1"))


def test_java_is_accepted_only_with_its_driver_and_a_version(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(drivers, "java_available", lambda: False)
    with pytest.raises(ScenarioError, match="no Java client driver"):
        parse_scenario({"name": "t", "workload": {"client": "java", "client_version": "4.1.0"}})
    monkeypatch.setattr(drivers, "java_available", lambda: True)
    with pytest.raises(ScenarioError, match="needs client_version"):
        parse_scenario({"name": "t", "workload": {"client": "java"}})
    assert parse_scenario({"name": "t", "workload": {"client": "java", "client_version": "4.1.0"}}).workload.client \
        == "java"


def test_a_version_pypi_does_not_serve_is_one_paragraph_of_bad_input(monkeypatch: pytest.MonkeyPatch,
                                                                    tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    said: list[str] = []

    def run(command: list[str], **kw: Any) -> subprocess.CompletedProcess[str]:
        failed = "pip" in command
        return subprocess.CompletedProcess(command, 1 if failed else 0, "", "ERROR: No matching distribution "
                                           "found for confluent-kafka==0.0.1" if failed else "")

    monkeypatch.setattr(subprocess, "run", run)
    with pytest.raises(ClientUnavailable) as raised:
        drivers.prepare(WorkloadConfig(client_version="0.0.1"), said.append)
    message = str(raised.value)
    assert raised.value.exit_code == 2 and "\n" not in message
    assert "0.0.1" in message and "No matching distribution" in message
    assert any("installing" in s for s in said)
    assert not (tmp_path / "kafka-chaos" / "clients" / "confluent-kafka-0.0.1").exists()  # nothing half-installed


def test_client_pause_needs_clients_of_an_out_of_process_client() -> None:
    pause = {"kind": "client-pause", "at_s": 1, "duration_s": 5, "clients": [0]}
    with pytest.raises(ScenarioError, match="client_version"):
        parse_scenario({"name": "t", "faults": {"schedule": [pause]}})
    pinned = {"client_version": "2.6.1"}
    with pytest.raises(ScenarioError, match="needs clients"):
        parse_scenario({"name": "t", "workload": pinned, "faults": {"schedule": [{**pause, "clients": []}]}})
    with pytest.raises(ScenarioError, match="own no client"):
        parse_scenario({"name": "t", "workload": pinned, "faults": {"schedule": [{**pause, "clients": [99]}]}})
    with pytest.raises(ScenarioError, match="generator"):
        parse_scenario({"name": "t", "workload": pinned, "faults": {"generator": {"kinds": ["client-pause"]}}})
    s = parse_scenario({"name": "t", "workload": pinned, "faults": {"schedule": [pause]}})
    from kafka_chaos.faults.schedule import plan

    (planned,) = plan(s.faults, s.duration_s, s.seed)
    assert planned.params == {"clients": [0]}
    txn = {**pinned, "kind": "txn"}
    s = parse_scenario({"name": "t", "workload": txn, "faults": {"schedule": [{**pause, "during": "transaction"}]}})
    (planned,) = plan(s.faults, s.duration_s, s.seed)
    assert planned.params == {"clients": [0], "during": "transaction"}
    with pytest.raises(ScenarioError, match='kind = "txn"'):
        parse_scenario({"name": "t", "workload": pinned,
                        "faults": {"schedule": [{**pause, "during": "transaction"}]}})
    with pytest.raises(ScenarioError, match="during is client-pause's"):
        parse_scenario({"name": "t", "faults": {"schedule": [{"kind": "kill", "during": "transaction"}]}})


def test_a_setting_the_client_lacks_is_bad_input_and_the_harness_objects_never_reach_it(
        monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[dict[str, Any]] = []

    def settings(conf: dict[str, Any]) -> dict[str, Any]:
        given.append(conf)
        if "enable.partition.eof" in conf:
            raise ValueError("enable.partition.eof has no Java equivalent")
        return conf

    monkeypatch.setattr(drivers, "client_kind", lambda client: drivers.ClientKind(lambda v, p: ["true"], settings))
    monkeypatch.setattr(drivers, "java_available", lambda: True)
    with pytest.raises(ClientUnavailable, match=r"enable\.partition\.eof") as raised:
        drivers.prepare(WorkloadConfig(client="java", client_version="4.1.0"))
    assert raised.value.exit_code == 2
    assert given and all("logger" not in conf for conf in given)


def test_the_client_is_a_campaign_axis_and_named_in_the_report_header() -> None:
    from kafka_chaos.report.view import client_label

    s = parse_scenario({"name": "t"}).with_overrides(**{"workload.client_version": "2.6.1"})
    assert (s.workload.client, s.workload.client_version) == ("librdkafka", "2.6.1")
    assert client_label(s.workload.model_dump()) == "client librdkafka 2.6.1"
    assert client_label(parse_scenario({"name": "t"}).workload.model_dump()) == "client librdkafka (in process)"
