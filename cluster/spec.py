"""What cluster to start: the scenario's `[cluster]` table, taken as it is (docs/architecture.md §2)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kafka_chaos import node_ids, versions
from kafka_chaos.cluster import settings
from kafka_chaos.cluster.external import NodeControl
from kafka_chaos.cluster.images import DEFAULT_KAFKA_VERSION, kafka_image


class ClusterSpec(BaseModel):
    """What to start. `nodes` are combined broker+controller nodes, or brokers when `controllers` > 0.

    Node ids: kafka_chaos.node_ids (combined nodes and brokers 1..N; dedicated controllers 101..100+C).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    nodes: int = Field(3, ge=1, le=9, description="combined nodes, or brokers when controllers > 0")
    controllers: int = Field(0, ge=0, le=5, description="dedicated controllers; 0 = combined nodes")
    kafka_version: str = DEFAULT_KAFKA_VERSION
    official_image: bool = False
    toxiproxy: bool = False
    link_proxies: bool = Field(False, description="every link between nodes through a proxy of its own, so link "
                                                  "faults (link-*) can degrade it; plain runs keep direct links")
    host_names: bool = Field(False, description="clients reach each broker by a name of its own, kept in /etc/hosts "
                                                "for the cluster's lifetime (cluster.host_names), so dns-fail can "
                                                "break it; set by the scenario when it schedules dns-fail")
    volatile_disks: str | None = Field(
        None, pattern=r"^(unsynced|last:\d+(\.\d+)?\s*s)$",
        description="each node's data on a disk that a power-loss fault can take unsynced writes from: "
                    "'unsynced' (everything not fsynced) or 'last:N s' (files dirty for less than N s, "
                    "as Linux writes dirty pages back after ~30 s)")
    disk_size_mb: int | None = Field(
        None, ge=16, le=4096,
        description="each node's data on a tmpfs of this many MiB mounted on the host, so disk-full can fill it")
    elr: bool | None = Field(None, description="None: the version's default; else eligible.leader.replicas.version")
    transaction_version: int | None = Field(
        None, ge=0, le=2,
        description="None: the version's default (a new 4.x cluster finalizes 2); else the transaction.version "
                    "feature the cluster is formatted with. Below 2 every client speaks transaction protocol 1 "
                    "(no epoch bump per transaction, KIP-890 part 2), the Java client 4.0+ included")
    dynamic_quorum: bool = Field(False, description="KIP-853: controllers found through controller.quorum."
                                                    "bootstrap.servers and formatted with --initial-controllers, so "
                                                    "add-controller/remove-controller can change the voters")
    broker_overrides: dict[str, str] = Field(default_factory=dict)
    bootstrap_servers: str | None = Field(None, description="an external cluster: run against it, start nothing")
    control: NodeControl | None = Field(None, description="an external cluster's node commands ({node} = id)")
    racks: list[str] = Field(default_factory=list, description="broker.rack of brokers 1, 2, … in turn")
    timeouts: Literal["fast", "kafka-defaults"] = Field(
        "fast", description="fast: short session/lag timeouts for quick tests; kafka-defaults: Kafka's own")
    heap_opts: str = settings.NODE_HEAP_OPTS
    start_timeout_s: float = Field(90.0, gt=0)

    @field_validator("broker_overrides", mode="before")
    @classmethod
    def _stringify(cls, v: Any) -> Any:
        if isinstance(v, dict):
            return {str(k): str(val).lower() if isinstance(val, bool) else str(val) for k, val in v.items()}
        return v

    @model_validator(mode="after")
    def _version_can_start(self) -> ClusterSpec:
        """A version kafka-chaos can build no image of is refused with the scenario, before anything starts (an
        external cluster's or an official image's version only labels the run)."""
        if not self.bootstrap_servers and not self.official_image and (why := versions.unbuildable(self.kafka_version)):
            raise ValueError(why)
        return self

    @model_validator(mode="after")
    def _elr_needs_4_0(self) -> ClusterSpec:
        if self.elr is not None and not versions.at_least(self.kafka_version, versions.ELR_FEATURE_FROM):
            raise ValueError(f"elr: Kafka {self.kafka_version} has no eligible.leader.replicas feature (it came in "
                             "4.0); remove cluster.elr or use kafka_version 4.0.1 or later")
        return self

    @model_validator(mode="after")
    def _transaction_version_needs_4_0(self) -> ClusterSpec:
        if self.transaction_version is None:
            return self
        if not versions.at_least(self.kafka_version, versions.TRANSACTION_V2_FROM):
            raise ValueError(f"transaction_version: Kafka {self.kafka_version} cannot be formatted with a "
                             "transaction.version feature (it came in 4.0, with transaction version 2); remove "
                             "cluster.transaction_version or use kafka_version 4.0.1 or later")
        if self.bootstrap_servers:
            raise ValueError("cluster.transaction_version formats the cluster kafka-chaos starts; an external "
                             "cluster's transaction.version is its own (kafka-features.sh): remove it for "
                             "bootstrap_servers")
        return self

    @model_validator(mode="after")
    def _dynamic_quorum_needs_3_9(self) -> ClusterSpec:
        if self.dynamic_quorum and not versions.at_least(self.kafka_version, versions.DYNAMIC_QUORUM_FROM):
            raise ValueError(f"dynamic_quorum: Kafka {self.kafka_version} has no dynamic KRaft quorum (KIP-853 came "
                             "in 3.9, kraft.version 1); remove cluster.dynamic_quorum or use 3.9.1 or later")
        if self.dynamic_quorum and self.bootstrap_servers:
            raise ValueError("cluster.dynamic_quorum formats the controllers kafka-chaos starts; remove it for "
                             "bootstrap_servers")
        return self

    @model_validator(mode="after")
    def _host_names_on_own_cluster(self) -> ClusterSpec:
        if self.host_names and self.bootstrap_servers:
            raise ValueError("dns-fail (cluster.host_names) breaks the names kafka-chaos gives the brokers it starts, "
                             "in this host's /etc/hosts; an external cluster's brokers advertise their own names, "
                             "which kafka-chaos does not own. Remove bootstrap_servers to run dns-fail on a cluster "
                             "kafka-chaos starts, or remove the dns-fail faults")
        return self

    @model_validator(mode="after")
    def _one_kind_of_disk(self) -> ClusterSpec:
        if self.volatile_disks and self.disk_size_mb:
            raise ValueError("volatile_disks and disk_size_mb each put the nodes' data on a disk of their own: "
                             "choose one (power-loss needs volatile_disks, disk-full needs disk_size_mb)")
        return self

    @property
    def disk_writeback_s(self) -> float | None:
        """The volatile disks' write-back age: None when only fsync makes data durable."""
        if not self.volatile_disks or self.volatile_disks == "unsynced":
            return None
        return float(self.volatile_disks.removeprefix("last:").removesuffix("s").strip())

    @property
    def image(self) -> str:
        return kafka_image(self.kafka_version, official=self.official_image)

    def broker_ids(self) -> list[int]:
        return list(node_ids.broker_ids(self.nodes))

    def controller_ids(self) -> list[int]:
        return list(node_ids.controller_ids(self.nodes, self.controllers))

    def rack_of(self, broker_id: int) -> str | None:
        """Brokers take the racks in turn: racks = ["a", "b"] puts 1 and 3 in a, 2 in b."""
        return self.racks[(broker_id - 1) % len(self.racks)] if self.racks and broker_id <= self.nodes else None

    def settings(self) -> dict[str, str]:
        """Fast-test settings plus the user's overrides: what every node runs with."""
        rack_aware = {"replica.selector.class": "org.apache.kafka.common.replica.RackAwareReplicaSelector"}
        return {**settings.fast_test_settings(self.nodes, self.timeouts), **(rack_aware if self.racks else {}),
                **self.broker_overrides}
