"""The Apache Kafka Java client as an out-of-process client driver (docs/architecture.md, client drivers).

`java_worker_command(version)` fetches `org.apache.kafka:kafka-clients:<version>` and its runtime jars from Maven
Central on first use (each checked against Central's .sha1), compiles java/KafkaChaosWorker.java against them and
returns the command that starts one worker; everything is cached under the kafka-chaos cache directory and
reused. `java_settings(conf)` turns the librdkafka settings the workloads use into the Java client's.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from kafka_chaos.errors import ClientUnavailable
from kafka_chaos.workloads.drivers.environment import Progress, clients_cache, locked

DEFAULT_JAVA_CLIENT_VERSION = "4.1.0"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"
WORKER_SOURCE = Path(__file__).resolve().parent / "java" / "KafkaChaosWorker.java"
WORKER_CLASS = "KafkaChaosWorker"
JVM_OPTIONS = (
    # a busy producer keeps up to buffer.memory (32 MB) of batches and a callback per record alive: ~70 MB. At
    # 128 MB the old generation filled and young collections turned into full ones (ProducerPerformance runs
    # with 256 MB too); memory untouched is not taken
    "-Xmx256m",
    "-XX:+UseSerialGC",  # no parallel GC threads competing with the brokers for the cores
    # C1 only, as the brokers run (cluster/settings.py): a worker lives for one run, and C2 compiling the client's
    # send path costs over a second of CPU, taken from the brokers on a small machine, which its faster code
    # repays only after millions of records
    "-XX:TieredStopAtLevel=1",
    "-XX:+DisplayVMOutputToStderr",  # stdout carries the protocol's lines only
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",  # like librdkafka's default log: warnings and errors
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    # which transaction protocol a transactional producer chose (KIP-890) is worth a line
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.producer.internals.TransactionManager=info",
    # a group member's joins, and why (a consumer removed after a pause learns it from its coordinator), a few
    # lines per rebalance (the classic protocol's coordinator logs under its subclass's name)
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals.AbstractCoordinator=info",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka.clients.consumer.internals.ConsumerCoordinator=info",
)
SLF4J_FALLBACK_VERSION = "1.7.36"
DOWNLOAD_TIMEOUT_S = 60


def java_worker_command(version: str = DEFAULT_JAVA_CLIENT_VERSION, progress: Progress | None = None) -> list[str]:
    """The command that starts one Java client worker for kafka-clients `version`, built on first use.

    Raises ClientUnavailable when no JDK is on PATH or Maven Central does not serve the version.
    """
    say = progress or (lambda _line: None)
    missing = [tool for tool in ("java", "javac") if shutil.which(tool) is None]
    if missing:
        raise ClientUnavailable(
            f"The Java client driver needs a JDK (11 or newer) but {' and '.join(missing)} is not on PATH. "
            "Run `make setup` (it installs Debian's openjdk-17-jdk-headless) or install a JDK yourself.")
    root = clients_cache() / f"java-{version}"
    root.mkdir(parents=True, exist_ok=True)
    source = WORKER_SOURCE.read_bytes()
    classes = root / f"classes-{hashlib.sha256(source).hexdigest()[:12]}"  # a changed worker builds anew
    with locked(root / ".lock"):
        jars = _fetch_jars(version, root / "lib", say)
        if not (classes / f"{WORKER_CLASS}.class").exists():
            say(f"java client {version}: compiling the worker")
            building = root / f".build-{os.getpid()}"
            shutil.rmtree(building, ignore_errors=True)
            building.mkdir()
            done = subprocess.run(
                ["javac", "-nowarn", "-proc:none", "-encoding", "UTF-8", "-d", str(building),
                 "-cp", os.pathsep.join(map(str, jars)), str(WORKER_SOURCE)],
                capture_output=True, text=True, check=False)
            if done.returncode != 0:
                shutil.rmtree(building, ignore_errors=True)
                raise ClientUnavailable(
                    f"The Java client worker does not compile against kafka-clients {version}:\n"
                    f"{done.stderr.strip()[-2000:]}")
            building.rename(classes)
    return ["java", *JVM_OPTIONS, "-cp", os.pathsep.join([str(classes), *map(str, jars)]), WORKER_CLASS]


def _url(group: str, artifact: str, version: str, ext: str) -> str:
    return f"{MAVEN_CENTRAL}/{group.replace('.', '/')}/{artifact}/{version}/{artifact}-{version}.{ext}"


def _get(url: str) -> bytes:
    with urllib.request.urlopen(url, timeout=DOWNLOAD_TIMEOUT_S) as response:
        body: bytes = response.read()
        return body


def _verified(url: str) -> bytes:
    """The file at `url`, checked against Maven Central's .sha1 of it."""
    body = _get(url)
    expected = _get(url + ".sha1").decode().split()[0].strip().lower()
    actual = hashlib.sha1(body).hexdigest()
    if actual != expected:
        raise ClientUnavailable(f"{url} does not match Maven Central's SHA-1 ({actual} != {expected}); "
                                "the download was damaged: run again.")
    return body


def runtime_dependencies(pom: bytes) -> list[tuple[str, str, str]]:
    """(group, artifact, version) of a POM's compile and runtime dependencies that are not optional."""
    root = ET.fromstring(pom)
    ns = {"m": root.tag[1:].split("}")[0]} if root.tag.startswith("{") else {}
    prefix = "m:" if ns else ""
    deps = []
    for dep in root.findall(f"{prefix}dependencies/{prefix}dependency", ns):
        def field(name: str, default: str = "", dep: ET.Element = dep) -> str:
            node = dep.find(prefix + name, ns)
            return (node.text or "").strip() if node is not None else default
        if field("scope", "compile") in ("compile", "runtime") and field("optional", "false") != "true":
            deps.append((field("groupId"), field("artifactId"), field("version")))
    return deps


def _fetch_jars(version: str, lib: Path, say: Progress) -> list[Path]:
    """kafka-clients `version`, its runtime dependencies and an SLF4J binding that logs to stderr, in `lib`."""
    listing = lib / "jars.txt"  # written last: its presence says every jar is here and verified
    if listing.exists():
        return [lib / name for name in listing.read_text().split()]
    try:
        pom = _verified(_url("org.apache.kafka", "kafka-clients", version, "pom"))
    except urllib.error.HTTPError as err:
        if err.code == 404:
            raise ClientUnavailable(
                f"Maven Central does not serve org.apache.kafka:kafka-clients:{version}; "
                f"choose a released version (listed at {MAVEN_CENTRAL}/org/apache/kafka/kafka-clients/), "
                f"e.g. {DEFAULT_JAVA_CLIENT_VERSION}.") from err
        raise ClientUnavailable(f"Maven Central answered {err.code} for kafka-clients {version}: {err}") from err
    except urllib.error.URLError as err:
        raise ClientUnavailable(f"Maven Central cannot be reached to fetch kafka-clients {version} ({err.reason}); "
                                "the Java client is fetched once on first use and cached afterwards.") from err
    deps = [("org.apache.kafka", "kafka-clients", version), *runtime_dependencies(pom)]
    slf4j = next((v for g, a, v in deps if (g, a) == ("org.slf4j", "slf4j-api")), SLF4J_FALLBACK_VERSION)
    deps.append(("org.slf4j", "slf4j-simple", slf4j))  # the client logs through SLF4J; simple writes to stderr
    lib.mkdir(parents=True, exist_ok=True)
    names = []
    for group, artifact, ver in deps:
        if not ver or "$" in ver:
            raise ClientUnavailable(f"kafka-clients {version}'s POM gives {group}:{artifact} no plain version "
                                    f"({ver!r}); this driver reads only literal versions.")
        name = f"{artifact}-{ver}.jar"
        target = lib / name
        if not target.exists():
            say(f"java client {version}: downloading {group}:{artifact}:{ver}")
            partial = lib / f".{name}.part"
            partial.write_bytes(_verified(_url(group, artifact, ver, "jar")))
            partial.rename(target)
        names.append(name)
    listing.write_text("\n".join(names) + "\n")
    return [lib / name for name in names]


# --- settings ------------------------------------------------------------------------------------------------------

SAME_NAME = frozenset({
    "bootstrap.servers", "acks", "enable.idempotence", "linger.ms", "batch.size", "delivery.timeout.ms",
    "request.timeout.ms", "metadata.max.age.ms", "client.id", "transactional.id", "transaction.timeout.ms",
    "isolation.level", "group.id", "group.instance.id", "group.protocol", "enable.auto.commit",
    "auto.commit.interval.ms", "session.timeout.ms", "heartbeat.interval.ms", "max.poll.interval.ms",
    "max.poll.records", "client.rack", "retries", "retry.backoff.ms", "retry.backoff.max.ms",
    "reconnect.backoff.ms", "reconnect.backoff.max.ms", "max.in.flight.requests.per.connection",
    "compression.type", "fetch.min.bytes", "fetch.max.bytes", "max.partition.fetch.bytes", "security.protocol",
    "connections.max.idle.ms", "max.block.ms",
})
RENAMED = {  # librdkafka's name (or alias) -> the Java client's
    "message.timeout.ms": "delivery.timeout.ms",
    "queue.buffering.max.ms": "linger.ms",
    "message.send.max.retries": "retries",
    "max.in.flight": "max.in.flight.requests.per.connection",
    "compression.codec": "compression.type",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "fetch.max.wait.ms": "fetch.max.wait.ms",
    "metadata.broker.list": "bootstrap.servers",
}
DROPPED = {  # librdkafka settings with no Java counterpart whose absence changes nothing the history records
    # in-process callbacks and loggers: the worker logs to stderr and reports deliveries itself
    "logger", "error_cb", "throttle_cb", "stats_cb", "on_delivery", "on_commit", "oauth_cb",
    # librdkafka's statistics JSON; the Java client keeps metrics in-process (JMX) and the worker emits none
    "statistics.interval.ms",
    # librdkafka's own memory and queue tuning; the Java client buffers by buffer.memory with its defaults
    "queue.buffering.max.messages", "queue.buffering.max.kbytes", "queued.min.messages",
    "queued.max.messages.kbytes",
    # librdkafka's choice of the EOS internal API (Java has one path)
    "api.version.request",
}
AUTO_OFFSET_RESET = {"smallest": "earliest", "earliest": "earliest", "beginning": "earliest",
                     "largest": "latest", "latest": "latest", "end": "latest", "error": "none"}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def java_settings(conf: dict[str, Any]) -> dict[str, str]:
    """The Java client's settings for librdkafka-named `conf` (the names the workloads use).

    Raises ValueError naming a setting the Java client does not have when leaving it out would change what the
    client does. Only the settings given are mapped: a default that differs between the clients (Java 3.0+
    producers are idempotent unless told otherwise, librdkafka's are not) stays the Java client's, which is why the
    workloads always give enable.idempotence and acks.
    """
    out: dict[str, str] = {}
    for name, value in conf.items():
        if name in DROPPED:
            continue
        if name in SAME_NAME:
            out[name] = _text(value)
        elif name in RENAMED:
            out[RENAMED[name]] = _text(value)
        elif name == "auto.offset.reset":
            if str(value) not in AUTO_OFFSET_RESET:
                raise ValueError(f"auto.offset.reset={value!r} is not a librdkafka value")
            out[name] = AUTO_OFFSET_RESET[str(value)]
        elif name == "enable.partition.eof":
            if _text(value) == "true":
                raise ValueError("enable.partition.eof=true: the Java client has no partition-EOF events")
        elif name in ("topic.metadata.refresh.interval.ms", "socket.timeout.ms", "transaction.version"):
            continue  # decided below, from the settings they interact with
        else:
            raise ValueError(f"{name}: the Java client has no such setting")
    # librdkafka refreshes known topics' metadata every topic.metadata.refresh.interval.ms and expires its cache
    # after metadata.max.age.ms; the Java client's one periodic refresh is metadata.max.age.ms
    ages = [int(conf[n]) for n in ("topic.metadata.refresh.interval.ms", "metadata.max.age.ms") if n in conf]
    if ages:
        out["metadata.max.age.ms"] = str(min(ages))
    if "socket.timeout.ms" in conf:
        # librdkafka times out Produce requests after request.timeout.ms and the others (EndTxn, Fetch, ...) after
        # socket.timeout.ms; the Java client has request.timeout.ms for all of them
        socket_ms = int(conf["socket.timeout.ms"])
        if "request.timeout.ms" not in conf:
            out["request.timeout.ms"] = str(socket_ms)
        elif socket_ms != max(int(conf["request.timeout.ms"]), 10):  # the producer workload's max(request, 10)
            raise ValueError(f"socket.timeout.ms={socket_ms} differs from request.timeout.ms="
                             f"{conf['request.timeout.ms']}: the Java client has one timeout for every request")
    if "transaction.version" in conf:
        raise ValueError("transaction.version is not a Java client setting: kafka-clients 4.0+ speaks transaction "
                         "protocol 2 whenever the brokers' finalized transaction.version feature is 2 (set it on "
                         "the cluster), older clients speak version 1")
    _fit_delivery_timeout(out)
    if "delivery.timeout.ms" in out and "max.block.ms" not in out:
        # librdkafka's produce() never blocks: a record waits for metadata up to its message timeout. The Java
        # send() blocks for metadata (and a full buffer) up to max.block.ms, 60 s by default; keep the same bound
        out["max.block.ms"] = out["delivery.timeout.ms"]
    return out


def _fit_delivery_timeout(out: dict[str, str]) -> None:
    """The Java producer refuses delivery.timeout.ms < linger.ms + request.timeout.ms (a ConfigException at
    create); librdkafka instead cuts a request's timeout to its message's remaining time. Do the same here: the
    delivery timeout, which the history's outcomes depend on, stays as asked."""
    if "delivery.timeout.ms" not in out or "request.timeout.ms" not in out:
        return
    delivery, linger = int(out["delivery.timeout.ms"]), int(out.get("linger.ms", "5"))
    if delivery < linger + int(out["request.timeout.ms"]):
        out["request.timeout.ms"] = str(max(1, delivery - linger))
