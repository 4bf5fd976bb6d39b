"""The observer's DescribeQuorum and DescribeCluster samples, from responses in kafka-python's shape."""

from __future__ import annotations

from kafka_chaos.cluster.state import quorum_of, registrations_of


def test_quorum_of_a_describe_quorum_response() -> None:
    response = {"error_code": 0, "topics": [{"topic_name": "__cluster_metadata", "partitions": [{
        "partition_index": 0, "error_code": 0, "leader_id": 2, "leader_epoch": 7, "high_watermark": 120,
        "current_voters": [
            {"replica_id": 1, "log_end_offset": 118, "last_fetch_timestamp": 1000, "last_caught_up_timestamp": 990},
            {"replica_id": 2, "log_end_offset": 120},
        ],
        "observers": []}]}]}
    q = quorum_of(response)
    assert q is not None and (q["leader"], q["epoch"], q["high_watermark"]) == (2, 7, 120)
    assert q["voters"][0] == {"id": 1, "log_end_offset": 118, "last_fetch_timestamp": 1000,
                              "last_caught_up_timestamp": 990}
    assert q["voters"][1]["last_fetch_timestamp"] == -1


def test_no_leader_and_no_response() -> None:
    none_leader = {"topics": [{"partitions": [{"leader_id": -1, "leader_epoch": 3, "current_voters": []}]}]}
    assert quorum_of(none_leader) == {"leader": None, "epoch": 3, "high_watermark": None, "voters": []}
    assert quorum_of(None) is None and quorum_of({"topics": []}) is None


def test_registrations_of_a_describe_cluster_response() -> None:
    response = {"cluster_id": "c", "controller_id": 1, "brokers": [
        {"broker_id": 3, "host": "node-3", "port": 9092, "rack": None, "is_fenced": True},
        {"broker_id": 1, "host": "node-1", "port": 9092, "rack": None, "is_fenced": False},
        {"broker_id": 2, "host": "node-2", "port": 9092, "rack": None}]}  # before v2: no is_fenced
    assert registrations_of(response) == {"unfenced": [1, 2], "fenced": [3]}
    assert registrations_of(None) is None and registrations_of({"cluster_id": "c"}) is None
