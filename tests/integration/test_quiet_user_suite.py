"""A user's own suite, outside this repository, that uses the plugin's `kafka_cluster` fixture and the `chaos`
marker: its pytest output carries no warning from kafka-chaos or its dependencies (kafka-python's schema loading
used to add over 200 DeprecationWarnings to it)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.cluster

USER_TESTS = '''
import pytest

TINY = {"name": "user-tiny", "duration_s": 6, "cluster": {"nodes": 3},
        "topic": {"partitions": 1, "replication_factor": 3, "min_insync_replicas": 2},
        "workload": {"producers": 1, "rate": 100}}


def test_my_cluster_has_three_in_sync_replicas(kafka_cluster, make_topic):
    topic = make_topic(partitions=1, replication_factor=3)
    assert sorted(kafka_cluster.partition_states(topic)[0].isr) == [1, 2, 3]


@pytest.mark.chaos(scenario=TINY)
def test_my_chaos_run(chaos_result):
    assert chaos_result.results["complete"]
'''


def test_a_users_suite_outside_the_repo_prints_no_warnings(tmp_path: Path, kafka_chaos_pool) -> None:
    kafka_chaos_pool.release()  # the user's session starts its own cluster; never two at once
    suite = tmp_path / "user-suite"
    suite.mkdir()
    (suite / "test_mine.py").write_text(USER_TESTS)
    # the user's own rootdir (no pyproject of ours, so none of our warning filters), the plugin from its entry point
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-W", "default",
                           f"--kafka-chaos-results={tmp_path / 'results'}", str(suite)],
                          cwd=suite, capture_output=True, text=True, timeout=600)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "2 passed" in out, out[-5000:]
    assert f"rootdir: {suite}" in out, out[:2000]
    warned = [line for line in out.splitlines() if "Warning" in line or "warnings summary" in line]
    assert warned == [], "\n".join(warned[:20])
