"""Real Kafka request bytes for the kafka toxic's frame parser (images/toxiproxy/kafkatoxic): a transactional
confluent-kafka producer talks to a one-broker cluster through a plain socket relay that keeps what each client
connection sent. The test checks the bytes split into whole Kafka frames with the APIs a transaction uses; with
KAFKA_CHAOS_WRITE_FIXTURE=1 it also writes them as the Go parser test's fixture (kafka/testdata/*.requests),
which is committed: the Go test then runs without a cluster."""

from __future__ import annotations

import contextlib
import os
import socket
import struct
import threading
from pathlib import Path

import pytest
from confluent_kafka import Producer

from kafka_chaos.cluster import KafkaCluster
from kafka_chaos.cluster import node as node_module
from kafka_chaos.cluster.logs import client_logger
from kafka_chaos.cluster.node import free_port
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.faults.kafka_apis import APIS

pytestmark = [pytest.mark.cluster]

FIXTURES = Path(__file__).resolve().parents[2] / "images" / "toxiproxy" / "kafkatoxic" / "kafka" / "testdata"


class Relay:
    """Listens on 127.0.0.1:`port`, forwards each connection to 127.0.0.1:`upstream`, keeps the client's bytes."""

    def __init__(self, port: int, upstream: int) -> None:
        self.upstream = upstream
        self.server = socket.create_server(("127.0.0.1", port))
        self.sent: list[bytearray] = []
        self.lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                client.close()
                continue
            kept = bytearray()
            with self.lock:
                self.sent.append(kept)
            threading.Thread(target=self._pipe, args=(client, broker, kept), daemon=True).start()
            threading.Thread(target=self._pipe, args=(broker, client, None), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket, kept: bytearray | None) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                if kept is not None:
                    kept += data
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        self.server.close()


def frames(stream: bytes) -> list[tuple[int, int, int]]:
    """(api key, version, correlation id) of each whole request frame; asserts they cover the stream."""
    out, i = [], 0
    while i < len(stream):
        (size,) = struct.unpack_from(">i", stream, i)
        assert i + 4 + size <= len(stream), "a frame cut short"
        out.append(struct.unpack_from(">hhi", stream, i + 4))
        i += 4 + size
    return out


def test_a_transactional_producers_requests_split_into_kafka_frames(monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = KafkaCluster(ClusterSpec(nodes=1))
    broker = cluster.nodes[1]
    advertised, hidden = broker.client_port, free_port()
    assert advertised is not None
    bind = node_module.bind_loopback
    # the broker advertises its client port, where the relay listens; the container is published behind it
    monkeypatch.setattr(node_module, "bind_loopback",
                        lambda c, port, host: bind(c, port, hidden if host == advertised else host))
    relay = Relay(advertised, hidden)
    try:
        with cluster:
            cluster.create_topic("capture", partitions=1, replication_factor=1, configs={})
            kept_before = len(relay.sent)
            producer = Producer({"bootstrap.servers": f"127.0.0.1:{advertised}", "transactional.id": "capture",
                                 "client.id": "kafka-chaos-capture", "linger.ms": 0, "logger": client_logger()})
            producer.init_transactions(30)
            for commit in (True, False):
                producer.begin_transaction()
                for i in range(3):
                    producer.produce("capture", value=str(i).encode(), partition=0)
                producer.flush(30)
                (producer.commit_transaction if commit else producer.abort_transaction)(30)
            producer.flush(10)
            del producer
    finally:
        relay.close()
    with relay.lock:
        streams = [bytes(s) for s in relay.sent[kept_before:] if s]
    parsed = [frames(s) for s in streams]
    keys = {key for conn in parsed for key, _, _ in conn}
    names = {key: name for name, (key, _) in APIS.items()}
    seen = {names[k] for k in keys}
    assert {"ApiVersions", "Metadata", "InitProducerId", "Produce", "EndTxn"} <= seen, seen
    assert {"AddPartitionsToTxn", "FindCoordinator"} & seen, seen
    if os.environ.get("KAFKA_CHAOS_WRITE_FIXTURE"):
        FIXTURES.mkdir(parents=True, exist_ok=True)
        for old in FIXTURES.glob("*.requests"):
            old.unlink()
        for i, s in enumerate(streams):
            (FIXTURES / f"txn-producer-{i}.requests").write_bytes(s)
