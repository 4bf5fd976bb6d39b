"""Kafka's request API names and keys, as Kafka's clients/src/main/resources/common/message/*Request.json declare them
(`apiKey`, `name` without `Request`, `listeners`), read from kafka-clients 4.3.1. The request faults
(faults.registry, family `request`) select frames by these keys; a scenario may name an API or give its key.

`listeners`: where a request is served, so which proxied link can carry it: `broker` (a broker's client or
inter-broker listener), `controller` (a controller's listener). An empty tuple: an API KRaft no longer serves
(the ZooKeeper-era LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Literal

Listener = Literal["broker", "controller"]

APIS: dict[str, tuple[int, tuple[Listener, ...]]] = {
    "Produce": (0, ("broker",)),
    "Fetch": (1, ("broker", "controller")),
    "ListOffsets": (2, ("broker",)),
    "Metadata": (3, ("broker",)),
    "LeaderAndIsr": (4, ()),
    "StopReplica": (5, ()),
    "UpdateMetadata": (6, ()),
    "ControlledShutdown": (7, ()),
    "OffsetCommit": (8, ("broker",)),
    "OffsetFetch": (9, ("broker",)),
    "FindCoordinator": (10, ("broker",)),
    "JoinGroup": (11, ("broker",)),
    "Heartbeat": (12, ("broker",)),
    "LeaveGroup": (13, ("broker",)),
    "SyncGroup": (14, ("broker",)),
    "DescribeGroups": (15, ("broker",)),
    "ListGroups": (16, ("broker",)),
    "SaslHandshake": (17, ("broker", "controller")),
    "ApiVersions": (18, ("broker", "controller")),
    "CreateTopics": (19, ("broker", "controller")),
    "DeleteTopics": (20, ("broker", "controller")),
    "DeleteRecords": (21, ("broker",)),
    "InitProducerId": (22, ("broker",)),
    "OffsetForLeaderEpoch": (23, ("broker",)),
    "AddPartitionsToTxn": (24, ("broker",)),
    "AddOffsetsToTxn": (25, ("broker",)),
    "EndTxn": (26, ("broker",)),
    "WriteTxnMarkers": (27, ("broker",)),
    "TxnOffsetCommit": (28, ("broker",)),
    "DescribeAcls": (29, ("broker", "controller")),
    "CreateAcls": (30, ("broker", "controller")),
    "DeleteAcls": (31, ("broker", "controller")),
    "DescribeConfigs": (32, ("broker", "controller")),
    "AlterConfigs": (33, ("broker", "controller")),
    "AlterReplicaLogDirs": (34, ("broker",)),
    "DescribeLogDirs": (35, ("broker",)),
    "SaslAuthenticate": (36, ("broker", "controller")),
    "CreatePartitions": (37, ("broker", "controller")),
    "CreateDelegationToken": (38, ("broker", "controller")),
    "RenewDelegationToken": (39, ("broker", "controller")),
    "ExpireDelegationToken": (40, ("broker", "controller")),
    "DescribeDelegationToken": (41, ("broker", "controller")),
    "DeleteGroups": (42, ("broker",)),
    "ElectLeaders": (43, ("broker", "controller")),
    "IncrementalAlterConfigs": (44, ("broker", "controller")),
    "AlterPartitionReassignments": (45, ("broker", "controller")),
    "ListPartitionReassignments": (46, ("broker", "controller")),
    "OffsetDelete": (47, ("broker",)),
    "DescribeClientQuotas": (48, ("broker",)),
    "AlterClientQuotas": (49, ("broker", "controller")),
    "DescribeUserScramCredentials": (50, ("broker", "controller")),
    "AlterUserScramCredentials": (51, ("broker", "controller")),
    "Vote": (52, ("controller",)),
    "BeginQuorumEpoch": (53, ("controller",)),
    "EndQuorumEpoch": (54, ("controller",)),
    "DescribeQuorum": (55, ("broker", "controller")),
    "AlterPartition": (56, ("controller",)),
    "UpdateFeatures": (57, ("broker", "controller")),
    "Envelope": (58, ("controller",)),
    "FetchSnapshot": (59, ("controller",)),
    "DescribeCluster": (60, ("broker", "controller")),
    "DescribeProducers": (61, ("broker",)),
    "BrokerRegistration": (62, ("controller",)),
    "BrokerHeartbeat": (63, ("controller",)),
    "UnregisterBroker": (64, ("broker", "controller")),
    "DescribeTransactions": (65, ("broker",)),
    "ListTransactions": (66, ("broker",)),
    "AllocateProducerIds": (67, ("controller",)),
    "ConsumerGroupHeartbeat": (68, ("broker",)),
    "ConsumerGroupDescribe": (69, ("broker",)),
    "ControllerRegistration": (70, ("controller",)),
    "GetTelemetrySubscriptions": (71, ("broker",)),
    "PushTelemetry": (72, ("broker",)),
    "AssignReplicasToDirs": (73, ("controller",)),
    "ListConfigResources": (74, ("broker",)),
    "DescribeTopicPartitions": (75, ("broker",)),
    "ShareGroupHeartbeat": (76, ("broker",)),
    "ShareGroupDescribe": (77, ("broker",)),
    "ShareFetch": (78, ("broker",)),
    "ShareAcknowledge": (79, ("broker",)),
    "AddRaftVoter": (80, ("broker", "controller")),
    "RemoveRaftVoter": (81, ("broker", "controller")),
    "UpdateRaftVoter": (82, ("controller",)),
    "InitializeShareGroupState": (83, ("broker",)),
    "ReadShareGroupState": (84, ("broker",)),
    "WriteShareGroupState": (85, ("broker",)),
    "DeleteShareGroupState": (86, ("broker",)),
    "ReadShareGroupStateSummary": (87, ("broker",)),
    "StreamsGroupHeartbeat": (88, ("broker",)),
    "StreamsGroupDescribe": (89, ("broker",)),
    "DescribeShareGroupOffsets": (90, ("broker",)),
    "AlterShareGroupOffsets": (91, ("broker",)),
    "DeleteShareGroupOffsets": (92, ("broker",)),
}
NAMES: dict[int, str] = {key: name for name, (key, _) in APIS.items()}


class UnknownApi(ValueError):
    """An API a scenario names that Kafka does not have."""


def api_key(api: str | int) -> int:
    """The key of an API given by name (`EndTxn`) or key (26, or "26")."""
    if isinstance(api, int) or api.isdigit():
        key = int(api)
        if key not in NAMES:
            raise UnknownApi(f"no Kafka API has key {key}; keys run from 0 to {max(NAMES)}")
        return key
    if api in APIS:
        return APIS[api][0]
    folded = {name.lower(): name for name in APIS}
    if api.lower() in folded:
        return APIS[folded[api.lower()]][0]
    near = difflib.get_close_matches(api, list(APIS), n=3)
    hint = f"did you mean {' or '.join(near)}? " if near else ""
    raise UnknownApi(f"unknown Kafka API {api!r}: {hint}APIs are named as Kafka's requests are, without "
                     "`Request` (Produce, Fetch, EndTxn, WriteTxnMarkers, AlterPartition, …), or given by key")


def api_keys(apis: Iterable[str | int]) -> list[int]:
    """The keys of the APIs a fault selects, sorted, without repeats."""
    return sorted({api_key(a) for a in apis})


def api_name(key: int) -> str:
    return NAMES.get(key, str(key))


def served_by(key: int) -> tuple[Listener, ...]:
    return APIS[NAMES[key]][1] if key in NAMES else ()
