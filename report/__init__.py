"""The HTML report of a run (`results/<run>/report.html`) and of a campaign, and the JUnit files
(docs/architecture.md §2): data (report.data) → view model (report.view) → Jinja2 templates (report/templates)
with the stylesheet in report/static; the timeline's geometry is pure functions in report.geometry.

    from kafka_chaos.report import write_report
    write_report(Path("results/<run>"))          # → results/<run>/report.html

One self-contained file (inline CSS and SVG, no script, nothing fetched), readable top to bottom: the verdict
and the configuration; a timeline of fault and operation bands over throughput, latency, unseen values and
leader / ISR changes; partition health; availability; one table per anomaly with the ops involved and the
faults active then; model conformance; the node logs. Every input file is optional.
"""

from kafka_chaos.checker.conformance import CONFORMANCE_NAMES
from kafka_chaos.report.data import DEFAULT_MAX_INSTANCES, RunData, load_run
from kafka_chaos.report.page import render_html, render_report, write_report
from kafka_chaos.rundir import REPORT_FILE

__all__ = [
    "CONFORMANCE_NAMES",
    "DEFAULT_MAX_INSTANCES",
    "REPORT_FILE",
    "RunData",
    "load_run",
    "render_html",
    "render_report",
    "write_report",
]
