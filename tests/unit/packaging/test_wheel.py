"""`pip install kafka-chaos` adds one package, kafka_chaos, with every part of a run inside it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
PARTS = ("cluster", "faults", "workloads", "checker", "reference_model", "spark", "harness")


def test_wheel_installs_only_the_kafka_chaos_namespace(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w",
                    str(tmp_path), str(ROOT)], check=True, capture_output=True, timeout=300)
    (wheel,) = tmp_path.glob("kafka_chaos-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    top = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert top == {"kafka_chaos"}
    for part in PARTS:
        assert f"kafka_chaos/{part}/__init__.py" in names, part
    assert "kafka_chaos/cluster/engine/setup-engine.sh" in names  # package data travels with it
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "kafka_chaos.harness.cli:main" in text and "kafka_chaos.harness.pytest_plugin" in text
