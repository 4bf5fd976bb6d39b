"""Clients that produce and consume uniquely tagged records and record every op in the history."""

from kafka_chaos.workloads.consumer import ConsumerSettings, ConsumerWorkload, final_drain
from kafka_chaos.workloads.producer import ProducerSettings, ProducerWorkload, classify
from kafka_chaos.workloads.recorder import Recorder, parse_payload, payload

__all__ = [
    "ConsumerSettings",
    "ConsumerWorkload",
    "ProducerSettings",
    "ProducerWorkload",
    "Recorder",
    "classify",
    "final_drain",
    "parse_payload",
    "payload",
]
