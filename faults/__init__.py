"""The nemesis: fault kinds with their heals, symbolic targets, partition shapes and schedules."""

from kafka_chaos.cluster.links import LinkFaults
from kafka_chaos.faults.kinds import HEAL_NAMES, LINK_FAULTS, NODE_FAULTS
from kafka_chaos.faults.nemesis import Nemesis
from kafka_chaos.faults.partitions import grudge
from kafka_chaos.faults.schedule import FaultGenerator, FaultsConfig, FaultSpec, PlannedFault, plan
from kafka_chaos.faults.targets import TargetError, resolve

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
