"""The report page: the run's data → the view model → Jinja2 templates (autoescaped), with the CSS as a file,
into one self-contained report.html (docs/architecture.md §2)."""

from __future__ import annotations

import os
from functools import cache
from importlib.resources import files
from pathlib import Path

from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.report import view
from kafka_chaos.report.data import DEFAULT_MAX_INSTANCES, RunData, load_run, short, size_text
from kafka_chaos.report.timeline import timeline_svg
from kafka_chaos.rundir import REPORT_FILE


@cache
def environment() -> Environment:
    env = Environment(loader=PackageLoader("kafka_chaos.report", "templates"),
                      autoescape=select_autoescape(default=True, default_for_string=True),
                      trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["short"] = short
    env.filters["size_text"] = size_text
    return env


@cache
def stylesheet() -> str:
    return files("kafka_chaos.report").joinpath("static/report.css").read_text(encoding="utf-8")


def render_html(data: RunData) -> str:
    """The report page for the data of one run."""
    context = view.page(data)
    # The SVG is built element by element with every text escaped (report.timeline), so it goes in as markup.
    return environment().get_template("report.html.j2").render(
        **context, css=Markup(stylesheet()), timeline_svg=Markup(timeline_svg(data)))


def render_report(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> str:
    """The report page of a run directory, as a string."""
    return render_html(load_run(run_dir, max_instances=max_instances))


def write_report(run_dir: Path, *, max_instances: int = DEFAULT_MAX_INSTANCES) -> Path:
    """Write `run_dir/report.html` (atomically) and return its path."""
    run_dir = Path(run_dir)
    page = render_report(run_dir, max_instances=max_instances)
    out = run_dir / REPORT_FILE
    tmp = run_dir / (REPORT_FILE + ".tmp")
    try:
        tmp.write_text(page, encoding="utf-8")
        os.replace(tmp, out)
    except OSError as e:
        raise KafkaChaosError(f"cannot write {out}: {e.strerror or e}") from e
    return out
