"""Fast-test Kafka settings, in one place (docs/architecture.md §6). Every run records them in its resolved scenario.

Small heaps and short timeouts so a 3-node cluster starts in seconds on two cores and a dead broker leaves the
ISR in seconds, not the production default of 30 s.
"""

from __future__ import annotations

NODE_HEAP_OPTS = "-Xms128m -Xmx384m"
# C1-only JIT and a small code cache: the brokers start faster and use less CPU on a 2-core host.
# DNS answers cached for 1 s, not the JVM's 30 s: a killed node comes back in a new container, often with a new
# address, and a peer that still dials the old one hangs in socket.connection.setup.timeout.ms (10 s) — its
# replica fetcher then falls out of the ISR and acks=all writes stall below min.insync (seen in the demo run).
NODE_JVM_OPTS = (
    "-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=64m "
    "-Djava.awt.headless=true -Dsun.net.inetaddr.ttl=1 -Dsun.net.inetaddr.negative.ttl=0"
)

CLIENT_PORT = 9092  # advertised to clients as 127.0.0.1:<host port>
INTERNAL_PORT = 19092  # inter-broker, by network alias
CONTROLLER_PORT = 9093  # KRaft quorum, by network alias
DIRECT_PORT = 9094  # harness-only listener that bypasses Toxiproxy (admin, observer)
# With link proxies each node has ports of its own (a node's proxy side-car listens on one address for every peer,
# so the peers cannot share a port): inter-broker 20000 + id, controller 21000 + id.
LINK_INTERNAL_PORT_BASE = 20000
LINK_CONTROLLER_PORT_BASE = 21000


def internal_port(node_id: int, link_proxies: bool) -> int:
    return LINK_INTERNAL_PORT_BASE + node_id if link_proxies else INTERNAL_PORT


def controller_port(node_id: int, link_proxies: bool) -> int:
    return LINK_CONTROLLER_PORT_BASE + node_id if link_proxies else CONTROLLER_PORT


# The `[cluster] timeouts` profiles. fast: a dead broker leaves the ISR and loses its leaderships in seconds
# (availability figures are then those of a tuned test cluster); kafka-defaults: Kafka's own defaults are kept
# (replica.lag.time.max.ms 30 s, broker.session.timeout.ms 9 s, heartbeat 2 s): production-like figures.
FAST_TIMEOUTS = {
    "replica.lag.time.max.ms": "5000",
    "broker.session.timeout.ms": "3000",
    "broker.heartbeat.interval.ms": "500",
}
TIMEOUT_PROFILES: dict[str, dict[str, str]] = {"fast": FAST_TIMEOUTS, "kafka-defaults": {}}


def fast_test_settings(brokers: int, timeouts: str = "fast") -> dict[str, str]:
    """Broker/controller settings for tests; internal topics fitted to the number of brokers; the timeouts of
    the named profile (TIMEOUT_PROFILES)."""
    rf = min(3, brokers)
    return {
        **TIMEOUT_PROFILES[timeouts],
        "group.initial.rebalance.delay.ms": "0",
        "log.cleaner.dedupe.buffer.size": "2097152",  # else the log cleaner alone takes 128 MiB of heap
        "offsets.topic.replication.factor": str(rf),
        "offsets.topic.num.partitions": "3",
        "transaction.state.log.replication.factor": str(rf),
        "transaction.state.log.min.isr": str(min(2, rf)),
        "transaction.state.log.num.partitions": "3",
        "share.coordinator.state.topic.replication.factor": str(rf),
        "share.coordinator.state.topic.min.isr": str(min(2, rf)),
        "default.replication.factor": str(rf),
        "auto.create.topics.enable": "false",
        "num.network.threads": "2",
        "num.io.threads": "2",
        "num.replica.fetchers": "1",
        "background.threads": "2",
        "log.flush.offset.checkpoint.interval.ms": "5000",
        "controlled.shutdown.enable": "true",
    }
