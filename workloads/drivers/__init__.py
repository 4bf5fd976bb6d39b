"""Client drivers: how the workloads' sends, polls, assignments and transactions are carried out
(docs/architecture.md §3, docs/client-protocol.md). The workloads decide what to do and record the history; a
driver only makes the clients, with the subset of confluent-kafka's Producer and Consumer the workloads use, so
the history is recorded the same way whichever driver ran it.

- `librdkafka` without `client_version`: confluent-kafka's clients in this process (the default).
- `librdkafka` with `client_version`: that confluent-kafka release in a cached environment of its own
  (workloads.drivers.environment), one worker process per history process (workloads.drivers.remote).
- `java`: the Apache Kafka Java client, the same way; its module (workloads/drivers/java.py) supplies the
  worker command and the mapping of librdkafka's setting names to the Java client's.

An out-of-process client plugs in with two functions (`ClientKind`): the command that starts a worker for a
version (preparing whatever it needs, cached, telling `progress` what it does) and the mapping of a config
given with librdkafka's names to the client's own (ValueError for a setting the client lacks).
"""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from kafka_chaos.errors import ClientUnavailable
from kafka_chaos.workloads.drivers.environment import Progress, confluent_kafka_python
from kafka_chaos.workloads.drivers.remote import NOT_PASSED, OutOfProcessDriver, WorkerProcess

if TYPE_CHECKING:
    from kafka_chaos.workloads.config import WorkloadConfig

CLIENTS = ("librdkafka", "java")
"""The clients a scenario can choose (`[workload] client`)."""
JAVA_MODULE = "kafka_chaos.workloads.drivers.java"
WORKER_SCRIPT = Path(__file__).with_name("librdkafka_worker.py")
_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?([.-]?[A-Za-z0-9]+)*$")


class Producer(Protocol):
    """What the workloads call on a producer (confluent_kafka.Producer's names and semantics)."""

    def produce(self, topic: str, value: bytes | None = ..., partition: int = ...,
                on_delivery: Callable[..., None] | None = ...) -> None: ...
    def poll(self, timeout: float = ...) -> int: ...
    def flush(self, timeout: float = ...) -> int: ...
    def init_transactions(self, timeout: float = ...) -> None: ...
    def begin_transaction(self) -> None: ...
    def commit_transaction(self, timeout: float = ...) -> None: ...
    def abort_transaction(self, timeout: float = ...) -> None: ...
    def send_offsets_to_transaction(self, positions: Any, metadata: Any, timeout: float = ...) -> None: ...


class Consumer(Protocol):
    """What the workloads call on a consumer (confluent_kafka.Consumer's names and semantics)."""

    def assign(self, partitions: Any) -> None: ...
    def subscribe(self, topics: Any) -> None: ...
    def consume(self, num_messages: int = ..., timeout: float = ...) -> Any: ...
    def position(self, partitions: Any) -> Any: ...
    def assignment(self) -> Any: ...
    def get_watermark_offsets(self, partition: Any, timeout: float = ...) -> Any: ...
    def consumer_group_metadata(self) -> Any: ...
    def close(self) -> None: ...


class Driver(Protocol):
    """Makes a history process's clients. `release(process)`: that process's clients are done with;
    `thaw()`: nothing stays frozen; `close()`: every client gone (the end of the run, or an interrupt)."""

    @property
    def client(self) -> str: ...
    @property
    def version(self) -> str: ...
    @property
    def out_of_process(self) -> bool: ...

    def producer(self, config: dict[str, Any], process: int) -> Any: ...
    def consumer(self, config: dict[str, Any], process: int) -> Any: ...
    def release(self, process: int) -> None: ...
    def thaw(self) -> None: ...
    def close(self) -> None: ...


class InProcessDriver:
    """confluent-kafka's clients in this process, at the installed version (today's behaviour)."""

    client = "librdkafka"
    out_of_process = False

    @property
    def version(self) -> str:
        from confluent_kafka import libversion

        return str(libversion()[0])

    def producer(self, config: dict[str, Any], process: int) -> Any:
        from confluent_kafka import Producer as KafkaProducer

        return KafkaProducer(config)

    def consumer(self, config: dict[str, Any], process: int) -> Any:
        from confluent_kafka import Consumer as KafkaConsumer

        return KafkaConsumer(config)

    def release(self, process: int) -> None:
        pass

    def thaw(self) -> None:
        pass

    def close(self) -> None:
        pass


IN_PROCESS = InProcessDriver()


@dataclass(frozen=True)
class ClientKind:
    """How an out-of-process client plugs in: the command of a worker at a version, and the settings mapping."""

    command: Callable[[str, Progress], list[str]]
    settings: Callable[[dict[str, Any]], dict[str, Any]]


def _librdkafka_command(version: str, progress: Progress) -> list[str]:
    return [str(confluent_kafka_python(version, progress)), "-u", str(WORKER_SCRIPT)]


def java_available() -> bool:
    return importlib.util.find_spec(JAVA_MODULE) is not None


def client_kind(client: str) -> ClientKind:
    if client == "librdkafka":
        return ClientKind(_librdkafka_command, lambda conf: conf)
    if client == "java":
        java = importlib.import_module(JAVA_MODULE)
        return ClientKind(java.java_worker_command, java.java_settings)
    raise ClientUnavailable(f"unknown client {client!r}; known: {', '.join(CLIENTS)}")


def check_client(client: str, version: str | None) -> None:
    """A scenario's client choice, checked without installing anything (ValueError: bad input)."""
    if client not in CLIENTS:
        raise ValueError(f"client = {client!r} is not a client kafka-chaos drives; choose one of "
                         f"{', '.join(repr(c) for c in CLIENTS)}")
    if version is not None and not _VERSION.match(version):
        raise ValueError(f'client_version = "{version}" is not a release version (e.g. "2.6.1" for librdkafka, '
                         '"4.1.0" for java)')
    if client == "java":
        if version is None:
            raise ValueError('client = "java" needs client_version, the Apache Kafka client release to run '
                             '(e.g. "4.1.0")')
        if not java_available():
            raise ValueError('client = "java": this kafka-chaos has no Java client driver yet '
                             "(workloads/drivers/java.py is missing); use client = \"librdkafka\"")


def out_of_process(config: WorkloadConfig) -> bool:
    """Whether the scenario's clients run in worker processes (which `client-pause` can freeze)."""
    return config.client != "librdkafka" or config.client_version is not None


def client_record(config: WorkloadConfig) -> dict[str, Any]:
    """The client the workload runs, as the history records it (the run-start record, the faults whose effect
    depends on the client): its name, its version (the in-process one's is the installed librdkafka's: the
    scenario does not name it) and whether it runs in this process."""
    pinned = config.client_version
    return {"client": config.client, "version": pinned or IN_PROCESS.version, "in_process": pinned is None}


ACTIVE: list[OutOfProcessDriver] = []
"""The out-of-process drivers of the runs in progress (the `client-pause` fault finds workers through them)."""


def make_driver(config: WorkloadConfig, progress: Progress | None = None) -> Driver:
    """The scenario's driver; an out-of-process one has its environment prepared (installed on first use)."""
    if not out_of_process(config):
        return IN_PROCESS
    kind = client_kind(config.client)
    version = str(config.client_version)
    try:
        command = kind.command(version, progress or (lambda _: None))
    except ValueError as err:
        raise ClientUnavailable(str(err)) from None
    driver = OutOfProcessDriver(config.client, version, command, kind.settings, on_close=_forget)
    ACTIVE.append(driver)
    return driver


def prepare(config: WorkloadConfig, progress: Progress | None = None) -> None:
    """Install what the scenario's client needs (before any container starts): a client or version that cannot
    be had, or a setting the client lacks, raises ClientUnavailable (bad input)."""
    if not out_of_process(config):
        return
    kind = client_kind(config.client)
    try:
        kind.command(str(config.client_version), progress or (lambda _: None))
        for conf in _sample_configs(config):
            kind.settings(conf)
    except ValueError as err:
        raise ClientUnavailable(f"[workload] client = \"{config.client}\": {err}") from None


def _sample_configs(config: WorkloadConfig) -> list[dict[str, Any]]:
    """The settings the scenario's workload gives its clients (with a stand-in address), as a worker gets them."""
    from kafka_chaos.workloads.consumer import ConsumerSettings
    from kafka_chaos.workloads.producer import ProducerSettings

    consumer = ConsumerSettings("localhost:9092", "t", 1, mode=config.consumer_mode,
                                partition_eof=config.partition_eof,
                                auto_offset_reset=config.auto_offset_reset).client_config()
    producer = ProducerSettings("localhost:9092", "t", 1, acks=config.acks, idempotence=config.idempotence,
                                retries=config.retries).client_config()
    return [{k: v for k, v in conf.items() if k not in NOT_PASSED} for conf in (consumer, producer)]


def workers_of(process: int) -> list[WorkerProcess]:
    """The live workers of a history process, in every run in progress."""
    return [w for driver in list(ACTIVE) for w in driver.workers_of(process)]


def _forget(driver: OutOfProcessDriver) -> None:
    if driver in ACTIVE:
        ACTIVE.remove(driver)

