"""Render an HTML file in headless Chromium (Debian's `chromium`): the DOM after load, console messages, a
screenshot. Shared by the report tests; usable on any report (e.g. from a real run):

    from tests.unit.report.chromium import chromium_path, render_in_chromium
    result = render_in_chromium(run_dir / "report.html", run_dir / "report.png")
    assert not result.console_errors, result.console_errors

One Chromium process does both `--dump-dom` (stdout) and `--screenshot`. With `--enable-logging=stderr`,
Chromium writes every console message of the page, and every uncaught JS error, as a line like

    [pid:tid:date:INFO:CONSOLE:12] "Uncaught ReferenceError: f is not defined", source: file:///… (12)

For ordinary pages (not chrome:// ones) Chromium logs them all at INFO, whatever the console level (its
render_frame_host passes the level through only for built-in pages), so the level cannot be read from the
log. `console_errors` therefore holds the messages that are errors by their text (uncaught exceptions,
resources that failed to load, blocked or refused content, console messages that read as errors) and any
CONSOLE line logged above INFO; `console` holds every console message, for pages that should be silent (the
report has no script at all, so any message from it is a fault).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--enable-logging=stderr",
    "--v=0",
)

_CONSOLE = re.compile(r"^\[[^\]]*:(?P<level>[A-Z0-9]+):CONSOLE[^\]]*\]\s*(?P<msg>.*)$")
_ERRORISH = re.compile(
    r"Uncaught|Failed to load|net::ERR_|Refused to|blocked|Not allowed to load|"
    r"\b\w*Error\b|\berror\b|Content Security Policy|Mixed Content",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class ChromiumResult:
    dom: str
    """The serialised DOM after load (`--dump-dom`)."""
    console_errors: list[str]
    """Console messages that are errors (see the module docstring)."""
    screenshot: Path
    console: list[str] = field(default_factory=list)
    """Every console message the page produced."""
    stderr: str = ""


def chromium_path() -> str | None:
    """The Chromium binary, or None (`chromium` is Debian's package; CI installs it)."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


def parse_console(stderr: str) -> tuple[list[str], list[str]]:
    """(every console message, the error ones) from Chromium's stderr log."""
    messages: list[str] = []
    errors: list[str] = []
    for line in stderr.splitlines():
        m = _CONSOLE.match(line.strip())
        if m is None:
            continue
        msg = m.group("msg")
        messages.append(msg)
        if m.group("level") not in ("INFO", "VERBOSE1", "VERBOSE2") or _ERRORISH.search(msg):
            errors.append(msg)
    return messages, errors


def render_in_chromium(
    html_path: Path,
    png_path: Path,
    *,
    window: tuple[int, int] = (1280, 2000),
    timeout_s: float = 120,
) -> ChromiumResult:
    """Load `html_path` from disk in headless Chromium; save a screenshot to `png_path`."""
    binary = chromium_path()
    if binary is None:
        raise FileNotFoundError("chromium not found on PATH (Debian: apt-get install chromium)")
    html_path = Path(html_path).resolve()
    png_path = Path(png_path).resolve()
    png_path.parent.mkdir(parents=True, exist_ok=True)
    png_path.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="kafka-chaos-chromium-") as profile:
        cmd = [
            binary,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--screenshot={png_path}",
            f"--window-size={window[0]},{window[1]}",
            "--dump-dom",
            html_path.as_uri(),
        ]
        env = {**os.environ, "HOME": profile}  # keep Chromium's caches out of the real home
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env, check=False)
    if proc.returncode != 0 or not png_path.is_file():
        raise RuntimeError(f"chromium failed (exit {proc.returncode}) on {html_path}:\n{proc.stderr[-4000:]}")
    console, errors = parse_console(proc.stderr)
    return ChromiumResult(
        dom=proc.stdout, console_errors=errors, screenshot=png_path, console=console, stderr=proc.stderr
    )
