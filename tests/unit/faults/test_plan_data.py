"""Schedules as data: the plan round-trips through the scenario's explicit schedule."""

from kafka_chaos.faults.schedule import FaultGenerator, FaultsConfig, FaultSpec, plan
from kafka_chaos.harness.replay import pin_nodes, resolved_scenario, scenario_data
from kafka_chaos.harness.scenario import parse_scenario


def _generated() -> FaultsConfig:
    return FaultsConfig(
        schedule=[FaultSpec(kind="kill", target="leader", at_s=1, duration_s=3)],
        generator=FaultGenerator(kinds=["pause", "partition", "stop"], targets=["leader", "one", "minority"],
                                 shapes=["isolate", "halves"], start_s=2, every_s=4, duration_s=3),
    )


def test_plan_is_a_pure_function_of_config_and_seed():
    assert plan(_generated(), 30, 5) == plan(_generated(), 30, 5)
    assert plan(_generated(), 30, 5) != plan(_generated(), 30, 6)


def test_explicit_schedule_of_a_plan_plans_the_same_faults():
    planned = plan(_generated(), 30, 5)
    again = plan(FaultsConfig.from_plan(planned), 30, 123)
    assert again == planned


def test_resolved_scenario_round_trips_through_toml_and_pins_nodes():
    import tomllib

    import tomli_w

    s = parse_scenario({"name": "g", "seed": 5, "duration_s": 30, "faults": _generated().model_dump()})
    planned = plan(s.faults, s.duration_s, s.seed)
    fired = [p.__class__(**{**p.__dict__, "nodes": (i % 3 + 1,)}) for i, p in enumerate(planned)]
    resolved = resolved_scenario(s, fired, run_id="r1", image_id="sha256:abc")
    text = tomli_w.dumps(scenario_data(resolved))
    back = parse_scenario(tomllib.loads(text))
    assert back.faults.generator is None
    assert back.image_id == "sha256:abc"
    assert plan(back.faults, back.duration_s, back.seed) == fired
    by_rule = [p.target for p in plan(back.faults, back.duration_s, back.seed)]
    assert by_rule == [p.target for p in planned]
    pinned = plan(pin_nodes(back).faults, back.duration_s, back.seed)
    assert [p.target for p in pinned] == [[i % 3 + 1] for i in range(len(planned))]
    assert [(p.at_s, p.duration_s, p.kind) for p in pinned] == [(p.at_s, p.duration_s, p.kind) for p in planned]


def test_replay_nodes_on_a_scenario_without_node_ids_is_bad_input():
    import pytest

    from kafka_chaos.errors import ScenarioError

    s = parse_scenario({"name": "g", "faults": _generated().model_dump()})
    with pytest.raises(ScenarioError, match="records no node ids"):
        pin_nodes(s)


def test_a_disk_replace_records_rejoin_only_when_asked_and_replays_it() -> None:
    config = FaultsConfig(schedule=[FaultSpec(kind="disk-replace", target="follower", at_s=1),
                                    FaultSpec(kind="disk-replace", target="follower", at_s=5, rejoin="unfenced")])
    first, second = plan(config, 30, 1)
    assert first.params == {} and second.params == {"rejoin": "unfenced"}
    assert plan(FaultsConfig.from_plan([first, second]), 30, 1) == [first, second]
