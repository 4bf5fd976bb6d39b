"""Every scenario and campaign the project ships loads and validates (a typo in one fails here, not in a user's
run)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.campaign import load_campaign, predict
from kafka_chaos.harness.scenario import load_scenario, parse_scenario, to_toml

SCENARIOS = Path(__file__).resolve().parents[3] / "scenarios"


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_scenario_loads(path: Path) -> None:
    assert load_scenario(path).name


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_scenario_survives_its_resolved_toml(path: Path) -> None:
    """A run writes its scenario back as TOML (scenario.resolved.toml, replays, shrinks): it must read the same."""
    scenario = load_scenario(path)
    assert parse_scenario(tomllib.loads(to_toml(scenario.model_dump(exclude_none=True)))) == scenario


@pytest.mark.parametrize("path", sorted((SCENARIOS / "campaigns").glob("*.toml")), ids=lambda p: p.name)
def test_campaign_loads_and_every_run_has_a_prediction(path: Path) -> None:
    runs = load_campaign(path).runs
    assert runs
    assert all(predict(run) is not None for run in runs if run.model_fault_set)


def test_power_loss_campaign_crosses_versions_with_the_models_expectation() -> None:
    runs = load_campaign(SCENARIOS / "campaigns" / "power-loss-versions.toml").runs
    by = {(r.scenario.cluster.kafka_version, r.model_fault_set): predict(r) for r in runs}
    assert {v for v, _ in by} == {"3.9.1", "4.0.1", "4.3.1"}
    for version in ("3.9.1", "4.0.1", "4.3.1"):
        assert by[(version, "one-power-loss")] == {"loss_possible": False, "writes_available": True}
        for fault_set in ("last-isr-power-loss", "all-power-loss"):
            assert (by[(version, fault_set)] or {}).get("loss_possible") is True


def test_the_rack_example_puts_a_replica_in_each_rack_and_cuts_a_whole_rack() -> None:
    s = load_scenario(SCENARIOS / "rack-cut.toml")
    racks = {b: s.cluster.rack_of(b) for b in s.cluster.broker_ids()}
    assert racks == {1: "a", 2: "b", 3: "a"}
    assert s.topic.replication_factor == s.cluster.nodes  # every rack holds a replica of every partition
    assert s.workload.client_rack == "b"
    (fault,) = s.faults.schedule
    assert fault.kind == "partition" and fault.target == "rack:b"


def test_the_external_example_names_a_command_for_each_action_its_faults_need() -> None:
    s = load_scenario(SCENARIOS / "external-cluster.toml")
    assert s.cluster.bootstrap_servers and s.cluster.control is not None
    assert all(not s.cluster.control.missing_for(f.kind) for f in s.faults.schedule)
    assert all("{node}" in getattr(s.cluster.control, action) for action in ("kill", "start", "stop", "logs"))
    with pytest.raises(ScenarioError, match="not possible on an external cluster"):  # the file is not lenient
        parse_scenario({**tomllib.loads((SCENARIOS / "external-cluster.toml").read_text()),
                        "faults": {"schedule": [{"kind": "partition"}]}})


def test_one_toml_writer_leaves_out_none_and_writes_string_keys(tmp_path: Path) -> None:
    from kafka_chaos.harness.replay import write_scenario

    data = {"name": "t", "run_id": None, "operations": [{"kind": "reassign", "replicas": {0: [1, 2], 1: [2, 3]},
                                                         "nodes": None}], "cluster": {"racks": ("a", "b")}}
    text = to_toml(data)
    assert tomllib.loads(text) == {"name": "t", "operations": [{"kind": "reassign",
                                                               "replicas": {"0": [1, 2], "1": [2, 3]}}],
                                   "cluster": {"racks": ["a", "b"]}}
    assert write_scenario(tmp_path / "s.toml", data).read_text() == text  # replay and shrink write the same
