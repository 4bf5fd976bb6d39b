"""The nemesis: fault kinds with their heals, symbolic targets, partition shapes and schedules.

The names below are imported on first use (PEP 562): the checker reads only `faults.registry`, and importing the
nemesis would bring the Docker client and the cluster code into every `kafka-chaos check`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kafka_chaos.cluster.links import LinkFaults
    from kafka_chaos.faults.kinds import HEAL_NAMES, LINK_FAULTS, NODE_FAULTS
    from kafka_chaos.faults.nemesis import Nemesis
    from kafka_chaos.faults.partitions import grudge
    from kafka_chaos.faults.schedule import FaultGenerator, FaultsConfig, FaultSpec, PlannedFault, plan
    from kafka_chaos.faults.targets import TargetError, resolve

_FROM = {
    "LinkFaults": "kafka_chaos.cluster.links",
    "HEAL_NAMES": "kafka_chaos.faults.kinds",
    "LINK_FAULTS": "kafka_chaos.faults.kinds",
    "NODE_FAULTS": "kafka_chaos.faults.kinds",
    "Nemesis": "kafka_chaos.faults.nemesis",
    "grudge": "kafka_chaos.faults.partitions",
    "FaultGenerator": "kafka_chaos.faults.schedule",
    "FaultsConfig": "kafka_chaos.faults.schedule",
    "FaultSpec": "kafka_chaos.faults.schedule",
    "PlannedFault": "kafka_chaos.faults.schedule",
    "plan": "kafka_chaos.faults.schedule",
    "TargetError": "kafka_chaos.faults.targets",
    "resolve": "kafka_chaos.faults.targets",
}

__all__ = [
    "HEAL_NAMES",
    "LINK_FAULTS",
    "NODE_FAULTS",
    "FaultGenerator",
    "FaultSpec",
    "FaultsConfig",
    "LinkFaults",
    "Nemesis",
    "PlannedFault",
    "TargetError",
    "grudge",
    "plan",
    "resolve",
]


def __getattr__(name: str) -> Any:
    if name not in _FROM:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_FROM[name]), name)
