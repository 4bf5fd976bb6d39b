"""A producer client that raises a fatal error (librdkafka's idempotent producer after an unclean election: the
broker's log lost the sequence the client holds) ends that client, not the workload: the crash is in the history
and the thread goes on with a new client and new processes, as an application makes a new producer."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException

from kafka_chaos.workloads.producer import ProducerSettings, ProducerWorkload

FATAL = KafkaError(KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, "sequence desynchronization", fatal=True)


class History:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._n = itertools.count()
        self._lock = threading.Lock()

    def new_process(self) -> int:
        return next(self._n)

    def record(self, process: int | str, type_: str, f: str, value: Any, error: Any = None,
               extra: Any = None) -> int:
        with self._lock:
            self.events.append((process, type_, f, value, error))
            return len(self.events)


class Delivered:
    def __init__(self, offset: int) -> None:
        self._offset = offset

    def offset(self) -> int:
        return self._offset


class FakeProducer:
    """Acknowledges what it was given at each poll; `fatal_after` polls in, it raises a fatal error instead (and
    keeps raising it, as a dead librdkafka producer does)."""

    def __init__(self, fatal_after: int | None) -> None:
        self.fatal_after = fatal_after
        self.polls = 0
        self.pending: list[Callable[[Any, Any], None]] = []
        self.offset = itertools.count()

    def produce(self, topic: str, value: bytes | None = None, partition: int = 0,
                on_delivery: Callable[[Any, Any], None] | None = None) -> None:
        if self.fatal_after is not None and self.polls >= self.fatal_after:
            raise KafkaException(FATAL)
        assert on_delivery is not None
        self.pending.append(on_delivery)

    def poll(self, timeout: float = 0) -> int:
        self.polls += 1
        if self.fatal_after is not None and self.polls >= self.fatal_after:
            raise KafkaException(FATAL)
        return self.deliver()

    def deliver(self) -> int:
        served, self.pending = self.pending, []
        for callback in served:
            callback(None, Delivered(next(self.offset)))
        time.sleep(0.001)
        return len(served)

    def flush(self, timeout: float = 0) -> int:
        self.poll(0)
        return 0


class RefusingProducer(FakeProducer):
    """librdkafka's order when the fatal error lands between two calls: produce() refuses with `_FATAL` only,
    and the next poll raises the error that made the client unusable."""

    refused = False

    def produce(self, topic: str, value: bytes | None = None, partition: int = 0,
                on_delivery: Callable[[Any, Any], None] | None = None) -> None:
        if self.fatal_after is not None and self.polls >= self.fatal_after:
            self.refused = True
            raise KafkaException(KafkaError(KafkaError._FATAL, "Local: Fatal error"))
        assert on_delivery is not None
        self.pending.append(on_delivery)

    def poll(self, timeout: float = 0) -> int:
        if self.refused:
            raise KafkaException(FATAL)
        self.polls += 1
        return self.deliver()


class Driver:
    client, version, out_of_process = "fake", "0", False

    def __init__(self, first: type[FakeProducer] = FakeProducer) -> None:
        self.first = first
        self.made: list[tuple[int, str, FakeProducer]] = []
        self.released: list[int] = []

    def producer(self, config: dict[str, Any], process: int) -> FakeProducer:
        # only the first client dies
        made = self.first(fatal_after=5) if not self.made else FakeProducer(fatal_after=None)
        self.made.append((process, config["client.id"], made))
        return made

    def consumer(self, config: dict[str, Any], process: int) -> Any:
        raise AssertionError("a producer workload makes no consumer")

    def release(self, process: int) -> None:
        self.released.append(process)

    def thaw(self) -> None:
        pass

    def close(self) -> None:
        pass


def test_a_fatal_client_error_is_a_recorded_crash_and_a_new_client_carries_on() -> None:
    history, driver = History(), Driver()
    workload = ProducerWorkload(ProducerSettings("localhost:1", "t", 3, in_flight=2), history, itertools.count(),
                                seed=1, driver=driver)
    workload.start()
    deadline = time.monotonic() + 30  # only against a hung thread: the second client acknowledges at once
    while (len(driver.made) < 2 or driver.made[1][2].polls < 5) and time.monotonic() < deadline:
        time.sleep(0.01)
    workload.stop(flush_timeout_s=1)

    assert not workload._thread.is_alive()
    # the fake dies in a poll, when both processes have a send open: the crash gets a process of its own (2), the
    # new client the next two
    assert [process for process, _, _ in driver.made] == [0, 3]
    assert [client for _, client, _ in driver.made] == ["kafka-chaos-producer-p0", "kafka-chaos-producer-p3"]
    assert driver.released == [0, 3]  # both clients let go, the dead one too
    crashes = [e for e in history.events if e[2] == "crash"]
    assert crashes == [(crashes[0][0], "info", "crash", None, ["OUT_OF_ORDER_SEQUENCE_NUMBER",
                                                               "sequence desynchronization"])]
    crashed = crashes[0][0]
    crash_at = history.events.index(crashes[0])
    # recorded on a process with no op open: on one with a send open it would be read as that send's completion
    assert crashed == 2 and not [e for e in history.events[:crash_at] if e[0] == crashed]
    last = {e[0]: e[1] for e in history.events[:crash_at]}
    open_sends = {process for process, type_ in last.items() if type_ == "invoke"}
    assert open_sends == {0, 1}  # the dead client's last sends stay open: their outcome is unknown
    after = history.events[crash_at + 1:]
    assert any(e[1] == "ok" and e[2] == "send" for e in after)  # the new client's sends are acknowledged
    assert {e[0] for e in after} == {3, 4}  # by the new processes only


def test_a_send_refused_for_a_fatal_error_never_happened_and_the_crash_names_the_error_behind_it() -> None:
    history, driver = History(), Driver(RefusingProducer)
    workload = ProducerWorkload(ProducerSettings("localhost:1", "t", 3, in_flight=1), history, itertools.count(),
                                seed=1, driver=driver)
    workload.start()
    deadline = time.monotonic() + 30  # only against a hung thread
    while len(driver.made) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    workload.stop(flush_timeout_s=1)
    crashes = [i for i, e in enumerate(history.events) if e[2] == "crash"]
    assert len(crashes) == 1
    refused = history.events[crashes[0] - 1]
    assert refused[1:3] == ("fail", "send") and refused[4] == ["_FATAL", "Local: Fatal error"]
    assert refused[3][0][2][0] is None  # no offset: it was never queued
    # the crash is recorded on the refused send's process, which has no op open any more
    assert history.events[crashes[0]] == (refused[0], "info", "crash", None,
                                          ["OUT_OF_ORDER_SEQUENCE_NUMBER", "sequence desynchronization"])


def test_a_non_fatal_error_raised_by_the_client_is_not_taken_for_a_crash() -> None:
    history, driver = History(), Driver()
    workload = ProducerWorkload(ProducerSettings("localhost:1", "t", 3, in_flight=1), history, itertools.count(),
                                seed=1, driver=driver)
    transport = KafkaException(KafkaError(KafkaError._TRANSPORT, "worker gone"))
    failing = FakeProducer(fatal_after=None)

    def poll(timeout: float = 0) -> int:
        raise transport

    failing.poll = poll  # type: ignore[method-assign]
    driver.producer = lambda config, process: failing  # type: ignore[method-assign]
    raised: list[BaseException] = []
    workload._thread = threading.Thread(target=lambda: _capture(workload._run, raised))
    workload.start()
    workload._thread.join(30)
    assert raised == [transport]
    assert not [e for e in history.events if e[2] == "crash"]


def _capture(target: Callable[[], None], raised: list[BaseException]) -> None:
    try:
        target()
    except BaseException as err:  # the test inspects what escaped the thread
        raised.append(err)
