"""Cluster infrastructure: real KRaft clusters in containers, and nothing above them (docs/architecture.md).

    with KafkaCluster(ClusterSpec(nodes=3)) as cluster:
        cluster.create_topic("chaos", partitions=3, replication_factor=3, configs={"min.insync.replicas": "2"})
        cluster.node(2).kill(); cluster.node(2).start()

This package imports only `kafka_chaos.errors` and `kafka_chaos.interrupts`: the nemesis, workloads, checker and
harness build on it.
"""

from kafka_chaos.cluster.kafka import KafkaCluster, new_cluster_id
from kafka_chaos.cluster.labels import RUN_LABEL, labelled, new_run_id, remove_labelled
from kafka_chaos.cluster.node import KafkaNode
from kafka_chaos.cluster.pool import ClusterPool, spec_key
from kafka_chaos.cluster.spec import ClusterSpec

__all__ = [
    "RUN_LABEL",
    "ClusterPool",
    "ClusterSpec",
    "KafkaCluster",
    "KafkaNode",
    "labelled",
    "new_cluster_id",
    "new_run_id",
    "remove_labelled",
    "spec_key",
]
