"""Replay: every run folder holds `scenario.resolved.toml`, the run's scenario with every fault made explicit.

Generated faults become `[[faults.schedule]]` entries (kind, rule, shape, start, duration, options) and each
entry records under `nodes` the node ids its rule resolved to when the run fired it; the file also keeps the
seed, the Kafka version and the image id. Run as it is, the file replays every fault by its rule (`leader` is
whoever leads at that moment on the re-run); `pin_nodes` (the CLI's `--replay-nodes`) aims each fault at the
ids it hit instead, because leadership can land elsewhere on a re-run.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kafka_chaos.errors import ScenarioError
from kafka_chaos.faults.schedule import FaultsConfig, PlannedFault, plan
from kafka_chaos.harness.scenario import Scenario, load_scenario, parse_scenario, to_toml
from kafka_chaos.rundir import RESOLVED_SCENARIO_FILE

RESOLVED_NAME = RESOLVED_SCENARIO_FILE


def scenario_data(s: Scenario) -> dict[str, Any]:
    """A scenario as plain TOML-ready data (no None values, which TOML cannot hold)."""
    data: dict[str, Any] = s.model_dump(mode="json", exclude_none=True)
    for f in data.get("faults", {}).get("schedule", []):
        # options of other kinds are defaults that would only make a reader wonder (to_spec writes the own ones)
        for option in _LINK_OPTIONS - _OWN_OPTIONS.get(f["kind"], set()):
            f.pop(option, None)
    return data


_LINK_OPTIONS = {"latency_ms", "jitter_ms", "rate_kbps"}
_OWN_OPTIONS: dict[str, set[str]] = {"latency": {"latency_ms", "jitter_ms"}, "bandwidth": {"rate_kbps"}}


def write_scenario(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(to_toml(data))
    return path


def resolved_scenario(s: Scenario, planned: list[PlannedFault], *, run_id: str | None = None,
                      image_id: str | None = None) -> Scenario:
    """`s` with its faults replaced by the explicit plan (generator gone), plus the run's record fields."""
    return s.model_copy(update={"faults": FaultsConfig.from_plan(planned), "run_id": run_id, "image_id": image_id})


def write_resolved(run_dir: Path, s: Scenario, planned: list[PlannedFault], *, run_id: str | None = None,
                   image_id: str | None = None) -> Path:
    resolved = resolved_scenario(s, planned, run_id=run_id, image_id=image_id)
    return write_scenario(run_dir / RESOLVED_NAME, scenario_data(resolved))


def load_resolved(path: Path) -> Scenario:
    """A resolved scenario from a run folder or the file itself."""
    path = Path(path)
    if path.is_dir():
        if not (path / RESOLVED_NAME).exists():
            raise ScenarioError(
                f"{path} holds no {RESOLVED_NAME}: it is not a run folder, or the run was made before runs "
                "recorded their resolved scenario (or it was interrupted before its faults were recorded). "
                "Re-run its scenario with `kafka-chaos run` to get one."
            )
        path = path / RESOLVED_NAME
    return load_scenario(path)


def pin_nodes(s: Scenario) -> Scenario:
    """Every fault aimed at the node ids it hit in the recorded run (`--replay-nodes`)."""
    if s.faults.generator is not None or not any(f.nodes is not None for f in s.faults.schedule):
        raise ScenarioError(
            f"scenario {s.name!r} records no node ids, so --replay-nodes has nothing to replay: pass the "
            f"{RESOLVED_NAME} of a run folder (a scenario whose faults.schedule entries carry `nodes`), or "
            "drop --replay-nodes to replay by rule."
        )
    pinned = [p.on_nodes() for p in plan(s.faults, s.duration_s, s.seed)]
    data = scenario_data(s)
    data["faults"] = scenario_data_faults(pinned)
    return parse_scenario(data, source=f"{s.name} (--replay-nodes)")


def scenario_data_faults(planned: list[PlannedFault]) -> dict[str, Any]:
    return {"schedule": [p.to_spec() for p in planned]}
