"""The nemesis: fault kinds with their heals, symbolic targets, partition shapes and schedules."""

from faults.kinds import HEAL_NAMES, LINK_FAULTS, NODE_FAULTS
from faults.link import LinkFaults
from faults.nemesis import Nemesis
from faults.partitions import grudge
from faults.schedule import FaultGenerator, FaultsConfig, FaultSpec, PlannedFault, plan
from faults.targets import TargetError, resolve

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
