"""The protocol-aware proxy's cost: kafka-chaos producers (acks=all, RF=3, min.insync=2, idempotence, 100-byte
records, unthrottled, every op recorded) on a 3-node cluster with direct links, and on the same cluster shape with
every link through a proxy — clients through their brokers' client proxies (`[cluster] toxiproxy`), replication and
the quorum through the link proxies (`[cluster] link_proxies`) — with the `kafka` toxic (images/toxiproxy/kafkatoxic)
armed on every one of them, reading every frame's header and acting on none (a `request-delay` of 0 ms on an API
the run never sends). One cluster after the other in the same run (two real clusters never run at once). Prints
throughput and p99 send latency for both and the ratio (target ≥ 0.8).

    .venv/bin/python bench/request_faults.py [--seconds 20] [--rounds 2]
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from node_links import Side, compare  # noqa: E402  (this folder is on sys.path: run as a script)

from kafka_chaos.cluster import ClusterSpec, KafkaCluster  # noqa: E402
from kafka_chaos.faults.kinds import RequestFault  # noqa: E402

IDLE_API = "DescribeAcls"
"""An API the workload never sends: the toxic parses every frame and lets each through."""


def armed(cluster: KafkaCluster) -> list[RequestFault]:
    """The `kafka` toxic on every client proxy and every link between nodes."""
    brokers = [b.node_id for b in cluster.brokers]
    toxiproxy = cluster.toxiproxy
    assert toxiproxy is not None and cluster.link_proxies is not None
    faults = [RequestFault("request-delay", toxiproxy.links, None, {"api": [IDLE_API], "latency_ms": 0}),
              RequestFault("request-delay", None, cluster.link_proxies,
                           {"api": [IDLE_API], "latency_ms": 0, "links": "replication"}),
              RequestFault("request-delay", None, cluster.link_proxies,
                           {"api": [IDLE_API], "latency_ms": 0, "links": "quorum"})]
    for f in faults:
        f.start(brokers)
    return faults


def main() -> None:
    compare(__doc__.split("\n\n")[0], Side("direct", ClusterSpec(nodes=3)),
            Side("proxied, kafka toxic armed", ClusterSpec(nodes=3, toxiproxy=True, link_proxies=True), armed),
            title="acknowledged sends per second: every link through the kafka toxic vs direct links",
            column="links", ratio="proxied / direct", target=0.8)


if __name__ == "__main__":
    main()
