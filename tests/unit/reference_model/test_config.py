"""RunConfig: the one typed reading of a resolved scenario, with node ids and version defaults from one place."""

from __future__ import annotations

from typing import Any

import pytest

from kafka_chaos import node_ids, versions
from kafka_chaos.cluster.spec import ClusterSpec
from kafka_chaos.harness.scenario import parse_scenario
from kafka_chaos.reference_model.config import RunConfig, Timeouts
from kafka_chaos.report.view import elr_label


def resolved(**sections: Any) -> dict[str, Any]:
    """A scenario resolved as a run writes it: every default filled, the nodes' settings beside it."""
    s = parse_scenario({"name": "t", "duration_s": 10, **sections})
    return {**s.model_dump(exclude_none=True), "kafka_settings": s.cluster.settings()}


def test_a_resolved_scenario_becomes_one_config() -> None:
    d = resolved(cluster={"nodes": 3, "controllers": 3, "kafka_version": "4.0.1", "timeouts": "kafka-defaults"},
                 topic={"replication_factor": 3, "min_insync_replicas": 2},
                 workload={"acks": "1", "idempotence": False, "request_timeout_ms": 7000})
    cfg = RunConfig.from_scenario(d)
    assert (cfg.acks, cfg.idempotence, cfg.rf, cfg.min_insync, cfg.unclean) == ("1", False, 3, 2, False)
    assert cfg.brokers == (1, 2, 3) and cfg.controllers == (101, 102, 103)
    assert cfg.timeouts == Timeouts.from_config(d)
    assert cfg.timeouts.session_s == 9.0  # Kafka's own broker.session.timeout.ms under kafka-defaults
    assert cfg.timeouts.request_timeout_s == 7.0
    assert RunConfig.coerce(d) == (cfg, True)


def test_node_ids_are_the_clusters() -> None:
    for nodes, controllers in [(1, 0), (3, 0), (5, 3)]:
        spec = ClusterSpec(nodes=nodes, controllers=controllers)
        cfg = RunConfig.from_scenario({"cluster": {"nodes": nodes, "controllers": controllers}})
        assert list(cfg.brokers) == spec.broker_ids()
        assert list(cfg.controllers) == spec.controller_ids()
    assert node_ids.controller_ids(3, 2) == (node_ids.FIRST_CONTROLLER_ID, node_ids.FIRST_CONTROLLER_ID + 1)
    assert RunConfig().brokers == RunConfig().controllers == (1, 2, 3)  # Kafka's defaults: three combined nodes


@pytest.mark.parametrize(("version", "default"), [("3.9.1", False), ("4.0.1", False), ("4.1.0", True),
                                                  ("4.2", True), ("5.0.0", True)])
def test_elr_default_per_version_is_one_rule_for_model_and_report(version: str, default: bool) -> None:
    assert versions.elr_default(version) is default
    assert RunConfig.from_scenario({"cluster": {"kafka_version": version}}).elr is default
    assert elr_label({"cluster": {"kafka_version": version}}) == \
        f"ELR {'on' if default else 'off'} (Kafka {version}'s default)"


def test_an_explicit_elr_overrides_the_versions_default() -> None:
    assert RunConfig.from_scenario({"cluster": {"kafka_version": "4.1.0", "elr": False}}).elr is False
    assert RunConfig.from_scenario(resolved(cluster={"kafka_version": "4.0.1", "elr": True})).elr is True
    assert versions.elr_default(None) is None and elr_label({"cluster": {}}) == "ELR ?"
    assert RunConfig().elr is False


def test_the_cluster_validates_features_by_the_same_versions() -> None:
    with pytest.raises(ValueError, match=r"no eligible\.leader\.replicas"):
        ClusterSpec(kafka_version="3.9.1", elr=True)
    with pytest.raises(ValueError, match="no dynamic KRaft quorum"):
        ClusterSpec(kafka_version="3.8.1", dynamic_quorum=True)
    assert versions.major_minor("4.1.0-rc1") == (4, 1) and versions.major_minor("4") == (4, 0)
    assert versions.major_minor("latest") is None
