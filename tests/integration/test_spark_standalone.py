"""Spark as a real distributed engine: a standalone master and two workers started from the installed PySpark
distribution (its own `bin/spark-class`, nothing home-made), and `kafka-chaos reconcile --master spark://…`
on several runs that hold only their history.jsonl. The answer must be the checker's, run by run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow

SPARK_TESTS = Path(__file__).resolve().parent.parent / "unit" / "spark"
sys.path.insert(0, str(SPARK_TESTS))

from spark_corpus import CORPUS  # noqa: E402
from spark_helpers import FIELDS, core  # noqa: E402

from kafka_chaos.checker.check import check_run  # noqa: E402


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def alive_workers(web_port: int) -> int:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as answer:
            return int(json.load(answer).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`spark://127.0.0.1:PORT` with two one-core workers, stopped (and waited for) at the end."""
    pyspark = pytest.importorskip("pyspark")
    home = Path(pyspark.__file__).parent
    spark_class = home / "bin" / "spark-class"
    logs = tmp_path_factory.mktemp("spark-standalone")
    env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOG_DIR": str(logs), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, "SPARK_DAEMON_MEMORY": "256m"}
    port, web = free_port(), free_port()
    url = f"spark://127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> None:
        out = (logs / f"{name}.log").open("wb")
        procs.append(subprocess.Popen([str(spark_class), *args], env=env, stdout=out, stderr=subprocess.STDOUT))

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
              "--webui-port", str(web))
        for n in (1, 2):
            start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1", "--cores", "1",
                  "--memory", "1g", "--webui-port", str(free_port()), "--work-dir", str(logs / f"work-{n}"), url)
        deadline = time.monotonic() + 120
        while alive_workers(web) < 2:
            if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                tails = "\n".join(f"{f.name}: {f.read_text()[-1500:]}" for f in sorted(logs.glob("*.log")))
                pytest.fail(f"the standalone cluster did not come up with two workers:\n{tails}")
            time.sleep(1)
        yield url
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


def history_runs(base: Path) -> list[Path]:
    """Three runs with only history.jsonl: two hand-written ones and a larger generated one."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    from checker_speed import generate

    runs = []
    for name in ("lost_write", "mixed"):
        run = base / name
        run.mkdir()
        h = CORPUS[name]()
        h.event("harness", "info", "drain-complete", True)
        (run / "history.jsonl").write_text("".join(json.dumps(e) + "\n" for e in h.events))
        runs.append(run)
    big = base / "generated"
    big.mkdir()
    generate(big / "history.jsonl", 200_000, seed=3)
    runs.append(big)
    return runs


def test_reconcile_on_a_standalone_cluster_gives_the_checkers_answer(standalone: str, tmp_path: Path) -> None:
    runs = history_runs(tmp_path)
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "kafka_chaos.harness.cli", "reconcile", *map(str, runs), "--master", standalone,
         "--out", str(out), "--json"],
        capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    assert result["stats"]["master"] == standalone and result["stats"]["source"] == "history"
    assert (out / "reconcile.json").exists()
    assert not any((run / "sends.parquet").exists() for run in runs), "Spark read the histories themselves"

    expected: dict[str, Any] = {"anomaly_counts": {}, "anomalies": {}}
    checker_violations = set()
    for run in runs:
        mine = check_run(run, write=False).to_json_dict()
        for name, n in mine["anomaly_counts"].items():
            expected["anomaly_counts"][name] = expected["anomaly_counts"].get(name, 0) + n
        for name, instances in mine["anomalies"].items():
            expected["anomalies"].setdefault(name, []).extend(
                {**i, "key": f"{run.name}/{i['key']}"} for i in instances)
        checker_violations |= {(v["name"], f"{run.name}/{v['key']}", v.get("value")) for v in mine["violations"]
                               if v["name"] in FIELDS}
    assert core(result) == core(expected)
    assert result["anomaly_counts"].get("lost-write") and result["runs"]["generated"] == {}
    assert {(v["name"], v["key"], v.get("value")) for v in result["violations"]} == checker_violations
