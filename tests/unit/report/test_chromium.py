"""The report in a real browser: headless Chromium loads it from disk without console errors, the
verdict and an anomaly row are in the DOM after load, and a screenshot is saved next to it (report.png).

Skipped when `chromium` is not installed (Debian: `apt-get install chromium`); CI installs it. The same
helper checks a report from a real run (`render_in_chromium`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kafka_chaos.report import write_report
from tests.unit.report.chromium import ChromiumResult, chromium_path, parse_console, render_in_chromium
from tests.unit.report.fake_run import make_run

needs_chromium = pytest.mark.skipif(
    chromium_path() is None, reason="chromium is not installed (apt-get install chromium); CI installs it"
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def check_report_in_browser(report: Path) -> ChromiumResult:
    """What every report must pass in Chromium; reusable on a real run's report. Saves report.png next
    to it."""
    result = render_in_chromium(report, report.with_name("report.png"))
    assert not result.console_errors, f"console errors: {result.console_errors}"
    assert not result.console, f"the report has no script, yet the console said: {result.console}"
    assert 'id="verdict"' in result.dom
    assert any(v in result.dom for v in ('<span class="big">FAIL</span>', '<span class="big">PASS</span>'))
    assert result.screenshot.read_bytes()[:8] == PNG_MAGIC
    assert result.screenshot.stat().st_size > 20_000  # a rendered page, not a blank one
    return result


@needs_chromium
@pytest.mark.slow
def test_report_renders_in_chromium(tmp_path: Path) -> None:
    base = Path(os.environ.get("KAFKA_CHAOS_REPORT_SHOTS", tmp_path))
    run = make_run(base / "fake-run")
    report = write_report(run.run_dir)
    dom = check_report_in_browser(report).dom
    assert '<span class="big">FAIL</span>' in dom and "1 violation" in dom
    assert dom.count('class="anomaly-row"') >= 1
    assert 'data-anomaly="lost-write"' in dom and "kill n2" in dom
    assert (run.run_dir / "report.png").is_file()


@needs_chromium
@pytest.mark.slow
def test_console_errors_are_caught(tmp_path: Path) -> None:
    """The check is not vacuous: a page with an uncaught error and a missing resource is flagged."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><body><p>x</p><img src='missing.png'>"
        "<script>console.log('just a log'); undefinedFunction();</script></body></html>"
    )
    result = render_in_chromium(page, tmp_path / "bad.png")
    assert any("Uncaught ReferenceError" in e for e in result.console_errors), result.stderr[-2000:]
    assert "just a log" in " ".join(result.console)
    assert not any("just a log" in e for e in result.console_errors)


def test_parse_console_lines() -> None:
    stderr = "\n".join(
        [
            "[1:1:1122/164928.506090:WARNING:ui/base/idle/idle_linux.cc:111] None of the known services",
            '[1:1:1122/164929.695601:INFO:CONSOLE:1] "a log", source: file:///tmp/t.html (1)',
            '[1:1:1122/164929.697375:INFO:CONSOLE:1] "Uncaught TypeError: x is null", source: t (1)',
            '[1:1:1122/164929.697375:INFO:CONSOLE(3)] "Failed to load resource: net::ERR_FILE_NOT_FOUND"',
            '[1:1:1122/164929.697375:ERROR:CONSOLE:7] "something", source: chrome://x (7)',
        ]
    )
    messages, errors = parse_console(stderr)
    assert len(messages) == 4
    assert errors == [m for m in messages if "a log" not in m]
