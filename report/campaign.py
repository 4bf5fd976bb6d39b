"""The campaign index page (`results/<campaign>/index.html`): every run with its verdict, the model's prediction
beside the measurement, and a picture of the matrix — configurations × fault sets, pass or violation — so the
pattern shows at a glance. Failures sort first; the table is also given sorted by configuration."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kafka_chaos.report.page import environment, stylesheet
from kafka_chaos.rundir import RunDir

CELL_W, CELL_H, ROW_LABEL_W, HEAD_H = 96, 22, 330, 60


@dataclass
class Row:
    index: int
    label: str
    status: str  # done | pending
    passed: bool | None
    config: str
    counts: str
    predicted: str
    measured: str
    mismatch: bool
    complete: str
    report: str | None
    shrink: str | None
    shrink_reproduced: str


def _yes_no(v: Any) -> str:
    return "—" if v is None else ("yes" if v else "no")


def _row(r: dict[str, Any], cdir: Path) -> Row:
    if r["status"] != "done":
        return Row(r["index"], r["label"], "pending", None, "", "", "", "", False, "", None, None, "")
    pred, meas = r.get("prediction") or {}, r.get("measured") or {}
    return Row(
        r["index"], r["label"], "done", bool(r["passed"]), r.get("config", ""),
        ", ".join(f"{k}: {v}" for k, v in sorted(r["anomaly_counts"].items())) or "none",
        f"{_yes_no(pred.get('loss_possible'))} / {_yes_no(pred.get('writes_available'))}",
        f"{_yes_no(meas.get('lost'))} / {_yes_no(meas.get('writes_available_during_fault'))}",
        bool(pred and meas.get("lost") and not pred.get("loss_possible")),
        "complete" if r.get("complete") else "incomplete",
        os.path.relpath(RunDir(Path(r["run_dir"])).report, cdir.resolve()),
        os.path.relpath(r["shrink"], cdir.resolve()) if r.get("shrink") else None,
        str(r.get("shrink_reproduced", "?")),
    )


def matrix(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Rows: each configuration (the matrix axes); columns: the fault sets; a cell: pass, violation or pending
    (several seeds: a violation if any seed violated)."""
    columns = list(dict.fromkeys(str(r.get("fault_set")) for r in runs))
    rows = list(dict.fromkeys(", ".join(f"{k}={v}" for k, v in sorted((r.get("axes") or {}).items())) or "base"
                              for r in runs))
    cells: dict[tuple[str, str], str] = {}
    for r in runs:
        key = (", ".join(f"{k}={v}" for k, v in sorted((r.get("axes") or {}).items())) or "base",
               str(r.get("fault_set")))
        state = "pending" if r["status"] != "done" else ("pass" if r["passed"] else "violation")
        if cells.get(key) != "violation":
            cells[key] = state if cells.get(key) in (None, "pending", "pass") else cells[key]
    return {"columns": columns, "rows": rows, "cells": cells, "cell_w": CELL_W, "cell_h": CELL_H,
            "label_w": ROW_LABEL_W, "head_h": HEAD_H, "width": ROW_LABEL_W + CELL_W * len(columns) + 10,
            "height": HEAD_H + CELL_H * len(rows) + 10}


def render_index(summary: dict[str, Any], cdir: Path) -> str:
    rows = [_row(r, cdir) for r in summary["runs"]]
    failures_first = sorted(rows, key=lambda r: (r.status != "done", r.passed is not False, r.index))
    by_config = sorted(rows, key=lambda r: (r.config, r.label))
    return environment().get_template("campaign.html.j2").render(
        summary=summary, rows=failures_first, rows_by_config=by_config, matrix=matrix(summary["runs"]),
        css=Markup(stylesheet()))
