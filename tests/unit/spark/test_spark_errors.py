"""Clear one-paragraph errors, never a Java stack trace: no Java, bad master URL, missing or malformed
tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from spark_helpers import History, write_run

from kafka_chaos.errors import SparkReconcileError
from kafka_chaos.spark.job import main, reconcile
from kafka_chaos.spark.session import check_master, find_java


def assert_clean(message: str) -> None:
    assert "\n" not in message
    for java in ("at org.apache", "java.lang.", "Py4JJavaError", "Traceback"):
        assert java not in message


@pytest.mark.parametrize("master", ["local", "local[2]", "local[*]", "local[2,3]", "yarn", "k8s://https://h:443"])
def test_valid_master_urls(master: str) -> None:
    check_master(master)


@pytest.mark.parametrize("master", ["localhost", "local[0]", "spark:/x", "mesos://h:5050", ""])
def test_bad_master_url(master: str) -> None:
    with pytest.raises(SparkReconcileError, match="is not a Spark master URL") as err:
        check_master(master)
    assert "--master 'local[*]'" in str(err.value)
    assert_clean(str(err.value))


def test_unreachable_standalone_master() -> None:
    with pytest.raises(SparkReconcileError, match=r"No Spark master answers at spark://127\.0\.0\.1:1") as e:
        check_master("spark://127.0.0.1:1")
    assert "start-master.sh" in str(e.value)


def test_no_java(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkReconcileError, match="no `java` on PATH") as err:
        find_java()
    assert "openjdk-17-jre-headless" in str(err.value) and "--engine pandas" in str(err.value)


def test_bad_java_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))
    with pytest.raises(SparkReconcileError, match="JAVA_HOME is set to"):
        find_java()


def test_missing_run_dir(spark_session: Any, tmp_path: Path) -> None:
    with pytest.raises(SparkReconcileError, match="does not exist") as err:
        reconcile([str(tmp_path / "nope")], spark=spark_session, progress=False).to_json_dict()
    assert_clean(str(err.value))


def test_missing_table(spark_session: Any, tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir()
    pq.write_table(pa.table({"x": [1]}), run / "sends.parquet")
    with pytest.raises(SparkReconcileError, match=r"holds no history\.jsonl") as err:
        reconcile([str(run)], spark=spark_session, progress=False).to_json_dict()
    assert "sends.parquet and polls.parquet" in str(err.value)
    assert_clean(str(err.value))


def test_empty_history_is_an_empty_incomplete_run(spark_session: Any, tmp_path: Path) -> None:
    """An empty history.jsonl (a run that stopped before its first event): nothing to reconcile, and the run
    is not complete — as the checker reads it."""
    run = tmp_path / "run"
    run.mkdir()
    (run / "history.jsonl").write_text("")
    result = reconcile([str(run)], spark=spark_session, progress=False).to_json_dict()
    assert result["anomaly_counts"] == {} and result["stats"]["sends"] == 0
    assert result["complete"] is False and result["histories"]["run"]["drain_complete"] is None


def test_malformed_parquet(spark_session: Any, tmp_path: Path) -> None:
    sends, polls = _tables()
    run = write_run(tmp_path / "run", sends, polls)
    (run / "polls.parquet").write_bytes(b"this is not parquet at all")
    with pytest.raises(SparkReconcileError, match="is not a readable Parquet table") as err:
        reconcile([str(run)], spark=spark_session, progress=False).to_json_dict()
    assert_clean(str(err.value))


def test_table_with_wrong_columns(spark_session: Any, tmp_path: Path) -> None:
    sends, polls = _tables()
    run = write_run(tmp_path / "run", sends.drop_columns(["offset"]), polls)
    with pytest.raises(SparkReconcileError, match="is not a sends table: no column 'offset'") as err:
        reconcile([str(run)], spark=spark_session, progress=False).to_json_dict()
    assert_clean(str(err.value))


def test_cli_prints_message_and_exits_2(spark_session: Any, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([str(tmp_path / "missing"), "--no-progress"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "does not exist" in err and "Traceback" not in err


def _tables() -> tuple[pa.Table, pa.Table]:
    h = History()
    h.send(0, [("chaos/0", 1, 0)])
    h.poll(1, {"chaos/0": [(0, 1)]})
    return h.tables()
