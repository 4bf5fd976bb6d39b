"""What the report draws of a run's ops, per second: completions by f and type, and the sends' latencies (p50,
p99, max). Computed once, when the ops table is written (checker.tables.write_tables, at the end of a run or by a
check that parsed the history), and kept in `ops.parquet`'s metadata, so that drawing a large run does not read
its millions of ops again (report.data.scan_ops; without that file, report.data.scan_history computes them from
one pass of the history reader).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa
import pyarrow.compute as pc

from kafka_chaos.checker.stats import BUCKET_NS


def latency_percentiles(secs: npt.NDArray[np.int64], waits: npt.NDArray[np.int64]) -> dict[int, tuple[int, int, int]]:
    """Per second: p50, p99 and max of the latencies, a percentile being the ceil(q·n)-th smallest value."""
    order = np.lexsort((waits, secs))
    secs, waits = secs[order], waits[order]
    first = np.flatnonzero(np.r_[True, secs[1:] != secs[:-1]])
    n = np.diff(np.r_[first, len(secs)])

    def at(q: float) -> list[int]:
        k = np.clip(np.ceil(q * n).astype(np.int64) - 1, 0, n - 1)
        return [int(x) for x in waits[first + k]]

    return dict(zip((int(s) for s in secs[first]), zip(at(0.5), at(0.99), at(1.0), strict=True), strict=True))


def ops_series(ops: pa.Table) -> dict[str, Any]:
    """JSON of the ops table (OPS_SCHEMA): `counts` as [f, type, second, n] and `latency` as [second, p50, p99,
    max] of the sends completed after their invoke was seen."""
    time = ops.column("time").to_numpy()
    secs = time // BUCKET_NS
    grouped = pa.table({"f": ops.column("f"), "type": ops.column("type"), "sec": secs}).group_by(
        ["f", "type", "sec"]).aggregate([([], "count_all")])
    counts = [list(row) for row in zip(grouped.column("f").to_pylist(), grouped.column("type").to_pylist(),
                                       grouped.column("sec").to_pylist(), grouped.column("count_all").to_pylist(),
                                       strict=True)]
    sends = np.asarray(pc.and_(pc.equal(ops.column("f"), "send"), pc.is_valid(ops.column("invoke_time")))
                       .to_numpy(zero_copy_only=False), dtype=bool)
    latency: list[list[int]] = []
    if sends.any():
        waits = time[sends] - pc.fill_null(ops.column("invoke_time"), 0).to_numpy()[sends]
        latency = [[s, *p] for s, p in latency_percentiles(secs[sends], waits).items()]
    return {"counts": counts, "latency": latency}


def read_ops_series(series: dict[str, Any]) -> tuple[dict[tuple[str, str, int], int], dict[int, tuple[int, int, int]]]:
    """`ops_series`' JSON back as the report's (counts, latency_percentiles)."""
    counts = {(str(f), str(t), int(s)): int(n) for f, t, s, n in series["counts"]}
    latency = {int(s): (int(a), int(b), int(c)) for s, a, b, c in series["latency"]}
    return counts, latency
