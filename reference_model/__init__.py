"""kafka-chaos: reference_model — an executable model of Kafka's ISR replication (KRaft) and what it permits.

- `model`: the state machine (`Cluster`, its events, `TopicConfig`) with its invariants.
- `explore`: exhaustive bounded exploration of a fault schedule (`explore`, `settle`, `fault_scripts`).
- `matrix`: the durability matrix computed from the model (`durability_matrix`, `render_matrix`, `predict`).
- `verdicts`: `judge(anomaly, instance, config, faults) -> Verdict` for the checker.
- `expectations`: what the model expects of one run (losses, availability bounds, ISR/ELR) beside what it measured.
- `synthetic`: seeded synthetic histories in docs/architecture.md §3 format with the anomalies they contain.
"""

from kafka_chaos.reference_model.config import RunConfig
from kafka_chaos.reference_model.matrix import (
    DurabilityPrediction,
    MatrixRow,
    durability_matrix,
    predict,
    render_matrix,
)
from kafka_chaos.reference_model.model import Cluster, InvariantViolation, TopicConfig
from kafka_chaos.reference_model.synthetic import synthetic_history
from kafka_chaos.reference_model.verdicts import FaultSummary, Verdict, judge

__all__ = [
    "Cluster",
    "DurabilityPrediction",
    "FaultSummary",
    "InvariantViolation",
    "MatrixRow",
    "RunConfig",
    "TopicConfig",
    "Verdict",
    "durability_matrix",
    "judge",
    "predict",
    "render_matrix",
    "synthetic_history",
]
