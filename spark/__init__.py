"""kafka-chaos spark: PySpark reconciliation of produced vs consumed records, agreeing with checker/.

    from kafka_chaos.spark import reconcile, reconcile_runs, SparkReconcileError
    result = reconcile(["results/<run>"], master="local[*]")      # the `kafka-chaos check --json` shape
    reconcile_runs(["results/a", "results/b"], engine="spark", out="out/")   # what the CLI calls

`python -m spark.job RUN_DIR... [--master URL] [--out DIR]` runs it from a shell (or under spark-submit);
`python -m spark.synthetic OUT --records N …` writes large synthetic histories with seeded anomalies.

Importing this package does not import pyspark: the names below load their modules on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kafka_chaos.errors import SparkReconcileError

if TYPE_CHECKING:
    from kafka_chaos.spark.job import reconcile, reconcile_runs
    from kafka_chaos.spark.synthetic import SyntheticSpec, generate

__all__ = ["SparkReconcileError", "SyntheticSpec", "generate", "reconcile", "reconcile_runs"]


def __getattr__(name: str) -> Any:
    if name in ("reconcile", "reconcile_runs"):
        from kafka_chaos.spark import job

        return getattr(job, name)
    if name in ("SyntheticSpec", "generate"):
        from kafka_chaos.spark import synthetic

        return getattr(synthetic, name)
    raise AttributeError(f"module 'spark' has no attribute {name!r}")
