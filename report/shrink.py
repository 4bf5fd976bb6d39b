"""The shrink page (`<run>/shrink/index.html`): each candidate the shrinker tried, its size and result with links
to its runs' reports, and the minimal reproducer with its reproduction rate (harness.shrink writes the journal)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from markupsafe import Markup

from kafka_chaos.report.page import environment, stylesheet
from kafka_chaos.rundir import RunDir


def _run(run_dir: str | None, base: Path, **extra: Any) -> dict[str, Any]:
    href = os.path.relpath(RunDir(Path(run_dir)).report, base.resolve()) if run_dir else None
    return {"href": href, **extra}


def render_shrink_index(journal: dict[str, Any], shrink_dir: Path, size_text: Any) -> str:
    confirm = [_run(t.get("run_dir"), shrink_dir, failed=bool(t["failed"])) for t in journal.get("confirm", [])]
    candidates = []
    for c in journal["candidates"]:
        result = c["result"] or "not finished"
        candidates.append({
            "n": c["n"], "step": c["step"], "size": size_text(c["size"]), "result": result,
            "result_class": result.split()[0], "minimal": c["key"] == journal.get("minimal"),
            "source": _run(c["source_run"], shrink_dir) if c.get("source_run") else None,
            "tries": [_run(t.get("run_dir"), shrink_dir, failed=bool(t["failed"])) for t in c["tries"]],
        })
    return environment().get_template("shrink.html.j2").render(
        journal=journal, candidates=candidates, confirm=confirm, css=Markup(stylesheet()),
        reproduced=sum(t["failed"] for t in confirm), source=Path(journal["source"]).name,
        source_href=_run(journal["source"], shrink_dir)["href"],
        spent=sum(len(c["tries"]) for c in journal["candidates"]) + len(confirm),
        minimal_path=str(shrink_dir / "minimal.toml"))
