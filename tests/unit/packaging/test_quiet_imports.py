"""Importing kafka-chaos (what a user's pytest does when it loads the plugin) warns about nothing: kafka-python's
schema loading used to print two DeprecationWarnings per protocol schema into every user's test output."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

IMPORT_ALL = """
import importlib, pkgutil
import kafka_chaos
for module in pkgutil.walk_packages(kafka_chaos.__path__, "kafka_chaos."):
    importlib.import_module(module.name)
import kafka.admin, kafka.protocol.metadata.find_coordinator  # what kafka-chaos imports later, inside functions
print("imported")
"""


def test_importing_every_module_emits_no_warning_with_warnings_as_errors() -> None:
    # a fresh interpreter: in this one kafka-python is imported already, and pytest's own filters apply
    proc = subprocess.run([sys.executable, "-W", "error", "-c", IMPORT_ALL], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "imported", proc.stderr[-3000:]
    assert "Warning" not in proc.stderr, proc.stderr[-3000:]
