"""The Java client driver: its settings map, its build, and its worker without a cluster."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kafka_chaos.errors import ClientUnavailable
from kafka_chaos.workloads.consumer import ConsumerSettings
from kafka_chaos.workloads.drivers import java
from kafka_chaos.workloads.drivers.java import DEFAULT_JAVA_CLIENT_VERSION, java_settings, runtime_dependencies
from kafka_chaos.workloads.drivers.protocol import PROTOCOL_VERSION
from kafka_chaos.workloads.producer import ProducerSettings
from tests.unit.workloads.java_worker import GUARD_S, Worker

UNREACHABLE = "127.0.0.1:1"  # nothing listens on port 1: every connection is refused at once


# --- settings ------------------------------------------------------------------------------------------------------

def test_the_producer_workloads_settings_map_to_java_names_and_string_values() -> None:
    conf = ProducerSettings(bootstrap_servers="b:9092", topic="t", partitions=3, retries=7).client_config()
    out = java_settings(conf)
    assert out["enable.idempotence"] == "true" and out["acks"] == "all" and out["retries"] == "7"
    assert out["bootstrap.servers"] == "b:9092" and out["linger.ms"] == "5" and out["batch.size"] == "16384"
    assert out["delivery.timeout.ms"] == "15000" and out["request.timeout.ms"] == "5000"
    # librdkafka's 1 s topic refresh is the Java client's one periodic refresh, metadata.max.age.ms
    assert out["metadata.max.age.ms"] == "1000"
    # produce() must not block longer than a record may wait in librdkafka
    assert out["max.block.ms"] == "15000"
    assert not {"logger", "socket.timeout.ms", "topic.metadata.refresh.interval.ms"} & out.keys()
    assert all(isinstance(v, str) for v in out.values())


def test_the_consumer_workloads_settings_map_and_drop_the_eof_switch_that_is_off() -> None:
    out = java_settings(ConsumerSettings(bootstrap_servers="b:9092", topic="t", partitions=3,
                                         mode="subscribe").client_config())
    assert out["enable.auto.commit"] == "true" and out["auto.offset.reset"] == "earliest"
    assert out["session.timeout.ms"] == "6000" and out["heartbeat.interval.ms"] == "1000"
    assert out["group.id"] == "kafka-chaos" and "enable.partition.eof" not in out


@pytest.mark.parametrize(("given", "java_value"), [("smallest", "earliest"), ("end", "latest"), ("error", "none")])
def test_librdkafka_offset_reset_aliases_become_java_values(given: str, java_value: str) -> None:
    assert java_settings({"auto.offset.reset": given}) == {"auto.offset.reset": java_value}


def test_librdkafka_aliases_are_renamed() -> None:
    assert java_settings({"message.timeout.ms": 9000, "queue.buffering.max.ms": 2, "fetch.wait.max.ms": 50,
                          "compression.codec": "lz4"}) == {
        "delivery.timeout.ms": "9000", "linger.ms": "2", "fetch.max.wait.ms": "50", "compression.type": "lz4",
        "max.block.ms": "9000"}


def test_a_delivery_timeout_below_linger_plus_request_timeout_cuts_the_request_timeout() -> None:
    out = java_settings({"delivery.timeout.ms": 3000, "request.timeout.ms": 3000, "linger.ms": 5})
    assert out["delivery.timeout.ms"] == "3000" and out["request.timeout.ms"] == "2995"


@pytest.mark.parametrize(("conf", "named"), [
    ({"queue.buffering.backpressure.threshold": 1}, "queue.buffering.backpressure.threshold"),
    ({"enable.partition.eof": True}, "enable.partition.eof"),
    ({"socket.timeout.ms": 2000, "request.timeout.ms": 5000}, "socket.timeout.ms"),  # the txn producer's knob
    ({"transaction.version": 1}, "transaction.version"),
    ({"auto.offset.reset": "sideways"}, "auto.offset.reset"),
])
def test_a_setting_java_lacks_that_would_change_behaviour_is_refused_by_name(conf: dict[str, Any],
                                                                             named: str) -> None:
    with pytest.raises(ValueError, match=named.replace(".", r"\.")):
        java_settings(conf)


def test_a_socket_timeout_alone_becomes_the_request_timeout() -> None:
    assert java_settings({"socket.timeout.ms": 2000}) == {"request.timeout.ms": "2000"}


# --- build ---------------------------------------------------------------------------------------------------------

POM = b"""<?xml version="1.0"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <dependencies>
    <dependency><groupId>a</groupId><artifactId>compiled</artifactId><version>1</version></dependency>
    <dependency><groupId>a</groupId><artifactId>run</artifactId><version>2</version><scope>runtime</scope></dependency>
    <dependency><groupId>a</groupId><artifactId>tested</artifactId><version>3</version><scope>test</scope></dependency>
    <dependency><groupId>a</groupId><artifactId>given</artifactId><version>4</version><scope>provided</scope></dependency>
    <dependency><groupId>a</groupId><artifactId>maybe</artifactId><version>5</version><optional>true</optional>
    </dependency>
  </dependencies>
</project>"""


def test_only_compile_and_runtime_dependencies_that_are_not_optional_are_fetched() -> None:
    assert runtime_dependencies(POM) == [("a", "compiled", "1"), ("a", "run", "2")]


def test_no_jdk_on_path_is_a_clear_client_unavailable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda tool: None if tool == "javac" else f"/usr/bin/{tool}")
    with pytest.raises(ClientUnavailable, match=r"javac is not on PATH.*make setup"):
        java.java_worker_command(DEFAULT_JAVA_CLIENT_VERSION)


def test_a_version_maven_central_does_not_serve_is_a_clear_client_unavailable(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    with pytest.raises(ClientUnavailable, match=r"Maven Central does not serve .*kafka-clients:0\.0\.0-none"):
        java.java_worker_command("0.0.0-none")


# --- the worker, without a cluster ---------------------------------------------------------------------------------

@pytest.fixture
def worker() -> Iterator[Worker]:
    w = Worker(DEFAULT_JAVA_CLIENT_VERSION)  # the first run fetches the jars and compiles; later runs reuse them
    yield w
    w.kill()


@pytest.mark.slow
def test_the_worker_first_says_ready_with_the_client_version_and_exits_on_request(worker: Worker) -> None:
    assert worker.ready == {"event": "ready", "client": "java", "version": DEFAULT_JAVA_CLIENT_VERSION,
                            "protocol": PROTOCOL_VERSION}
    assert worker.exit() == 0


@pytest.mark.slow
def test_an_undeliverable_record_is_reported_as_a_timed_out_delivery_after_its_queued_reply(worker: Worker) -> None:
    config = java_settings({"bootstrap.servers": UNREACHABLE, "acks": "all", "enable.idempotence": True,
                            "delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0})
    assert worker.ok("create", handle="p", kind="producer", config=config) is None
    rid = worker.send("produce", handle="p", topic="t", partition=0, value="caf\u00e9 \x00\n\"", tag=41)
    delivery = worker.events.get(timeout=GUARD_S)
    assert delivery["event"] == "deliveries" and delivery["handle"] == "p"
    ((tag, offset, error),) = delivery["reports"]
    assert tag == 41 and offset is None and error["name"] == "_MSG_TIMED_OUT"
    assert error["retriable"] is True and error["fatal"] is False
    # the produce's own reply came first: "queued", then the outcome
    order = [worker.lines.get(timeout=GUARD_S) for _ in range(3)]  # the create's reply, then these two
    assert order[1:] == [{"id": rid, "ok": None}, delivery]
    assert worker.ok("flush", handle="p", timeout=5) == 0  # nothing left undelivered
    assert worker.exit() == 0


@pytest.mark.slow
def test_a_batch_reports_each_record_once_and_a_refused_send_as_its_failed_delivery(worker: Worker) -> None:
    """A plain producer's `produce_batch`: a record the client refuses at once (send() throws: here a record
    without a topic, which needs no broker to be refused) comes back as that record's failed delivery, the others
    with their own outcome, none twice; a flush counts the batch's records until their reports are out, and
    writes them before its reply."""
    config = java_settings({"bootstrap.servers": UNREACHABLE, "acks": "all", "enable.idempotence": True,
                            "delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0})
    worker.ok("create", handle="p", kind="producer", config=config)
    records = [["t", 0, "a", 1], [None, 0, "b", 2], ["t", 1, "c", 3], ["t", 0, "d", 4]]
    batch = worker.send("produce_batch", handle="p", records=records)
    flushed = worker.send("flush", handle="p", timeout=GUARD_S)
    assert worker.reply(flushed) == {"id": flushed, "ok": 0}
    assert worker.reply(batch) == {"id": batch, "ok": None}
    reports: dict[int, list[Any]] = {}
    while not worker.events.empty():  # every report was written before the flush's reply
        event = worker.events.get_nowait()
        assert event["event"] == "deliveries" and event["handle"] == "p"
        for report in event["reports"]:
            assert report[0] not in reports, f"tag {report[0]} reported twice"
            reports[report[0]] = report
    assert sorted(reports) == [1, 2, 3, 4]
    assert {tag: r[2]["name"] for tag, r in reports.items()} == {1: "_MSG_TIMED_OUT", 2: "_INVALID_ARG",
                                                                3: "_MSG_TIMED_OUT", 4: "_MSG_TIMED_OUT"}
    assert worker.exit() == 0


@pytest.mark.slow
def test_a_batch_reads_the_same_in_any_key_order_with_any_payload_text(worker: Worker) -> None:
    """The worker reads a batch's records straight into send()'s arguments when `op` comes before `records` (as
    the harness writes it), and as plain JSON values otherwise: either way, payloads with escapes or characters
    beyond ASCII, a repeated topic and a record without one come back as one report per tag."""
    config = java_settings({"bootstrap.servers": UNREACHABLE, "acks": "all", "enable.idempotence": True,
                            "delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0})
    worker.ok("create", handle="p", kind="producer", config=config)
    odd = ["plain", "caf\u00e9 \u00ff", "quote\" back\\slash \n\t\x00 /", ""]
    records: list[tuple[str | None, int, str | None, int]] = [("t", i % 2, v, 10 + i) for i, v in enumerate(odd)]
    records += [(None, 0, "x", 20), ("t", -1, None, 21)]
    op_first = worker.send("produce_batch", ascii_only=False, handle="p", records=records)
    records_first = 9_000_000
    line = json.dumps({"id": records_first, "records": [[t, p, v, tag + 100] for t, p, v, tag in records],
                       "handle": "p", "op": "produce_batch"})
    worker.write(line + "\n")
    flushed = worker.send("flush", handle="p", timeout=GUARD_S)
    assert worker.reply(flushed) == {"id": flushed, "ok": 0}
    assert worker.reply(op_first) == {"id": op_first, "ok": None}
    assert worker.reply(records_first) == {"id": records_first, "ok": None}
    reports: dict[int, str] = {}
    while not worker.events.empty():
        for report in worker.events.get_nowait()["reports"]:
            assert report[0] not in reports, f"tag {report[0]} reported twice"
            reports[report[0]] = report[2]["name"]
    tags = [tag for *_, tag in records]
    assert sorted(reports) == sorted(tags + [tag + 100 for tag in tags])
    assert reports[20] == reports[120] == "_INVALID_ARG"  # no topic: send() refused it
    assert {name for tag, name in reports.items() if tag % 100 != 20} == {"_MSG_TIMED_OUT"}
    assert worker.exit() == 0


@pytest.mark.slow
def test_the_producer_and_consumer_workload_settings_are_all_known_to_the_java_client(tmp_path: Path) -> None:
    log = tmp_path / "stderr"
    with log.open("w") as stderr:
        w = Worker(DEFAULT_JAVA_CLIENT_VERSION, stderr=stderr)
        try:
            producer = ProducerSettings(bootstrap_servers=UNREACHABLE, topic="t", partitions=1).client_config()
            consumer = ConsumerSettings(bootstrap_servers=UNREACHABLE, topic="t", partitions=1).client_config()
            assert w.ok("create", handle="p", kind="producer", config=java_settings(producer)) is None
            assert w.ok("create", handle="c", kind="consumer", config=java_settings(consumer)) is None
            assert w.exit() == 0
        finally:
            w.kill()
    assert "isn't a known config" not in log.read_text()


@pytest.mark.slow
def test_request_strings_read_the_same_escaped_or_raw_and_in_lines_of_any_length(worker: Worker) -> None:
    """The worker reads request lines as bytes: a string must come out the same whether it is plain ASCII, has
    escapes, carries characters beyond ASCII as UTF-8 (orjson, the harness's) or as \\u escapes (json.dumps), and
    whatever the line's length or ending. A handle's name comes back in the error naming it."""
    names = ["plain", "caf\u00e9 \u20ac \U0001f600 \u00ff", "quote\" back\\slash \n\t\x00 /", "x" * 200_000 + "\u00e9"]
    for name in names:
        for ascii_only in (True, False):
            for end in ("\n", "\r\n"):
                error = worker.reply(worker.send("consume", ascii_only=ascii_only, end=end, handle=name, max=1,
                                                 timeout=0))["error"]
                assert error["name"] == "_INVALID_ARG" and error["message"] == f"no client with handle {name}"
    worker.write("\n  \t\n")  # blank lines are skipped
    worker.write("{not json}\n")  # an unreadable line is logged and skipped
    big = 2**40 + 1  # ids and numbers beyond 32 bits, negative ones and floats with exponents
    worker.write(f'{{ "id" : {big}, "op":"consume", "handle":"nobody", "max":-1, "timeout":1e-3 }}\n')
    assert worker.reply(big)["error"]["message"] == "no client with handle nobody"
    assert worker.exit() == 0


@pytest.mark.slow
def test_client_errors_carry_librdkafka_names_and_the_java_flags(worker: Worker) -> None:
    assert worker.call("consume", handle="nobody", max=1, timeout=0)["error"]["name"] == "_INVALID_ARG"
    worker.ok("create", handle="p", kind="producer", config={"bootstrap.servers": UNREACHABLE})
    state = worker.call("begin_transaction", handle="p")["error"]  # not a transactional producer
    assert state["name"] == "_STATE" and state["fatal"] is False and state["retriable"] is False
    bad = worker.call("create", handle="x", kind="producer",
                      config={"bootstrap.servers": UNREACHABLE, "acks": "sometimes"})["error"]
    assert bad["name"] == "_INVALID_ARG" and "acks" in bad["message"]
    assert worker.exit() == 0


@pytest.mark.slow
def test_a_transactional_call_past_its_timeout_answers_a_retriable_timeout(worker: Worker) -> None:
    config = java_settings({"bootstrap.servers": UNREACHABLE, "transactional.id": "kc-test",
                            "enable.idempotence": True, "acks": "all", "delivery.timeout.ms": 60000})
    worker.ok("create", handle="p", kind="producer", config=config)
    timed_out = worker.call("init_transactions", handle="p", timeout=0.5)["error"]
    assert timed_out["name"] == "_TIMED_OUT" and timed_out["retriable"] is True and timed_out["fatal"] is False
    assert worker.exit() == 0  # exits though the Java call still waits for a coordinator


@pytest.mark.slow
def test_offsets_without_a_position_are_left_out_of_the_transaction_as_librdkafka_does(worker: Worker) -> None:
    """The workload sends its consumer's positions, -1001 where it has none yet: librdkafka leaves those out and
    sends nothing when none is left (rd_kafka_send_offsets_to_transaction); Java would refuse a negative offset."""
    config = java_settings({"bootstrap.servers": UNREACHABLE, "transactional.id": "kc-test",
                            "enable.idempotence": True, "acks": "all", "delivery.timeout.ms": 60000})
    worker.ok("create", handle="p", kind="producer", config=config)
    worker.ok("create", handle="c", kind="consumer",
              config=java_settings({"bootstrap.servers": UNREACHABLE, "group.id": "g", "enable.auto.commit": False}))
    assert worker.ok("send_offsets_to_transaction", handle="p", consumer="c",
                     offsets=[["t", 0, -1001], ["t", 1, -1001]], timeout=5) is None
    # a valid offset reaches the client, which refuses it outside a transaction
    state = worker.call("send_offsets_to_transaction", handle="p", consumer="c",
                        offsets=[["t", 0, -1001], ["t", 1, 7]], timeout=5)["error"]
    assert state["name"] == "_STATE", state
    assert worker.exit() == 0


@pytest.mark.slow
def test_a_consumer_assigns_and_knows_no_position_before_fetching(worker: Worker) -> None:
    worker.ok("create", handle="c", kind="consumer",
              config=java_settings({"bootstrap.servers": UNREACHABLE, "group.id": "g", "enable.auto.commit": False}))
    assert worker.ok("assign", handle="c", partitions=[["t", 0, -2], ["t", 1, None]]) is None
    assert sorted(worker.ok("assignment", handle="c")) == [["t", 0], ["t", 1]]
    assert worker.ok("position", handle="c", partitions=[["t", 0], ["u", 9]]) == [["t", 0, -1001], ["u", 9, -1001]]
    assert worker.ok("consume", handle="c", max=10, timeout=0.2) == []
    assert worker.call("watermarks", handle="c", topic="t", partition=0, timeout=0.2)["error"]["name"] == "_TIMED_OUT"
    assert worker.ok("close", handle="c") is None
    assert worker.call("assignment", handle="c")["error"]["name"] == "_INVALID_ARG"  # the handle is gone
    assert worker.exit() == 0


def test_a_worker_whose_stdin_closes_exits() -> None:
    proc = subprocess.Popen(java.java_worker_command(DEFAULT_JAVA_CLIENT_VERSION), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None and proc.stdin is not None
    assert b'"event":"ready"' in proc.stdout.readline()
    proc.stdin.close()
    assert proc.wait(timeout=GUARD_S) == 0


@pytest.mark.slow
def test_a_poll_with_a_timeout_returns_at_the_next_outcome_after_it_was_asked(worker: Worker) -> None:
    """A poll waits for the first delivery outcome after its request, not for its timeout: the worker wakes a
    waiting poll on each outcome (it does not wake every waiter for every record). The poll's timeout is ten
    times the guard, so a poll that only its timeout ended would fail the reply's wait."""
    config = java_settings({"bootstrap.servers": UNREACHABLE, "acks": "all", "enable.idempotence": True,
                            "delivery.timeout.ms": 1500, "request.timeout.ms": 1000, "linger.ms": 0})
    worker.ok("create", handle="p", kind="producer", config=config)
    polled = worker.send("poll", handle="p", timeout=10 * GUARD_S)
    worker.send("produce_batch", handle="p", records=[["t", 0, "a", 1]])
    assert worker.reply(polled) == {"id": polled, "ok": None}
    delivery = worker.events.get(timeout=GUARD_S)  # written before the poll's reply
    assert [report[0] for report in delivery["reports"]] == [1]
    assert worker.exit() == 0
