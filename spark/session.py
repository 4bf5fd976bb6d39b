"""Starting Spark with small-machine defaults, and turning start-up failures into one-paragraph messages.

Defaults: `local[*]`, 2 GiB driver heap (in local mode the executors live in the driver JVM), shuffle
partitions 2 × cores (the job's one big shuffle sizes itself adaptively), UI off, console progress bar off
(rich draws ours), and the JVM's log4j quiet (level `fatal`). The JVM's stderr goes to
`$TMPDIR/kafka-chaos-spark-<pid>.log`, so no Java banner or stack trace reaches the user;
`KAFKA_CHAOS_SPARK_LOG=warn|info|debug` shows Spark's log on the terminal instead.
"""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from kafka_chaos.errors import SparkReconcileError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

APP_NAME = "kafka-chaos-reconcile"
DEFAULT_MASTER = "local[*]"
DEFAULT_DRIVER_MEMORY = "2g"

_MASTER_FORMS = (
    "local, local[N], local[*], local[N,F], local-cluster[N,C,M], spark://HOST:PORT[,HOST:PORT…], "
    "yarn, k8s://https://HOST:PORT"
)
_LOCAL = re.compile(r"^local(\[(\*|[1-9]\d*)(,\s*[1-9]\d*)?\])?$")
_LOCAL_CLUSTER = re.compile(r"^local-cluster\[\d+,\s*\d+,\s*\d+\]$")
_STANDALONE = re.compile(r"^spark://([^,/:]+:\d+)(,[^,/:]+:\d+)*$")
_K8S = re.compile(r"^k8s://.+$")

_SILENCE = (
    "PySpark does not yet fully support pandas",
    "Failed to load native-hadoop",
)


def check_master(master: str) -> None:
    """Raise SparkReconcileError if `master` is not a master URL Spark understands, or a standalone master
    does not answer (Spark itself would retry for minutes before giving up)."""
    if _LOCAL.match(master) or _LOCAL_CLUSTER.match(master) or master == "yarn" or _K8S.match(master):
        return
    if _STANDALONE.match(master):
        hosts = master.removeprefix("spark://").split(",")
        for hostport in hosts:
            host, _, port = hostport.rpartition(":")
            try:
                with socket.create_connection((host, int(port)), timeout=5):
                    return
            except OSError:
                continue
        raise SparkReconcileError(
            f"No Spark master answers at {master} (nothing accepts connections at {', '.join(hosts)}). "
            "Start the master (`$SPARK_HOME/sbin/start-master.sh`) or correct the host and port (the "
            "default port is 7077), or run locally with --master 'local[*]'."
        )
    raise SparkReconcileError(
        f"'{master}' is not a Spark master URL. Use one of: {_MASTER_FORMS} — for example "
        "--master 'local[*]' to use every core of this machine, or --master spark://HOST:7077 for a "
        "standalone cluster."
    )


def find_java() -> str:
    """Path of the `java` Spark will launch (JAVA_HOME first, as spark-class does), checked to be ≥ 17."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = str(Path(java_home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise SparkReconcileError(
                f"JAVA_HOME is set to {java_home}, but {java} is not an executable Java runtime. Point "
                "JAVA_HOME at a Java 17 or newer installation (e.g. /usr/lib/jvm/java-17-openjdk-amd64) or "
                "unset it to use the `java` on PATH."
            )
    else:
        found = shutil.which("java")
        if found is None:
            raise SparkReconcileError(
                "Spark needs a Java runtime (17 or newer), and there is no `java` on PATH and no JAVA_HOME. "
                "Install one (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`) or set JAVA_HOME to "
                "an existing Java installation; or reconcile with `--engine pandas`, which needs no Java."
            )
        java = found
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SparkReconcileError(
            f"Could not run {java} -version ({exc}). Install a working Java 17+ runtime or set JAVA_HOME."
        ) from None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if match:
        major = int(match.group(1))
        if major == 1 and match.group(2):  # "1.8.0" style
            major = int(match.group(2))
        if major < 17:
            raise SparkReconcileError(
                f"{java} is Java {major}; this Spark needs Java 17 or newer. Install "
                "openjdk-17-jre-headless (or newer) and put it first on PATH or in JAVA_HOME."
            )
    return java


def _log4j_config() -> str:
    level = os.environ.get("KAFKA_CHAOS_SPARK_LOG", "fatal").lower()
    path = Path(tempfile.gettempdir()) / f"kafka-chaos-spark-log4j2-v2-{level}.properties"
    if not path.exists():
        path.write_text(
            "\n".join(
                [
                    f"rootLogger.level = {level}",
                    # Same level for the shell logger, or Spark prints "Setting default log level" on start.
                    "logger.repl.name = org.apache.spark.repl.Main",
                    f"logger.repl.level = {level}",
                    "rootLogger.appenderRef.stderr.ref = console",
                    "appender.console.type = Console",
                    "appender.console.name = console",
                    "appender.console.target = SYSTEM_ERR",
                    "appender.console.layout.type = PatternLayout",
                    "appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n",
                    "",
                ]
            )
        )
    return f"file:{path}"


def quiet_python_warnings() -> None:
    for message in _SILENCE:
        warnings.filterwarnings("ignore", message=f".*{message}.*")


def under_spark_submit() -> bool:
    """True when this process was started by spark-submit (the JVM is already there, configured)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def start_session(
    master: str | None = DEFAULT_MASTER,
    *,
    driver_memory: str = DEFAULT_DRIVER_MEMORY,
    shuffle_partitions: int | None = None,
    extra_conf: dict[str, str] | None = None,
) -> SparkSession:
    """A SparkSession with kafka-chaos defaults, or SparkReconcileError saying what to do.

    Under spark-submit the master and driver memory given to spark-submit win; `master=None` means the same.
    """
    quiet_python_warnings()
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkReconcileError(
            "PySpark is not installed. Install the Spark extra (`pip install 'kafka-chaos[spark]'`) or "
            "reconcile with `--engine pandas`."
        ) from None

    submitted = under_spark_submit()
    if not submitted:
        find_java()
        if master is not None:
            check_master(master)
        # Workers must run this interpreter (numpy, pyarrow, same versions as the driver).
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("PYTHONWARNINGS", "ignore::FutureWarning")

    log_conf = _log4j_config()
    builder = SparkSession.builder.appName(APP_NAME)
    conf: dict[str, str] = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.execution.arrow.maxRecordsPerBatch": "131072",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.adaptive.enabled": "true",
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile={log_conf}",
        "spark.executor.extraJavaOptions": f"-Dlog4j2.configurationFile={log_conf}",
    }
    if not submitted:
        conf["spark.driver.memory"] = driver_memory
        if master is not None:
            builder = builder.master(master)
    if shuffle_partitions is not None:
        conf["spark.sql.shuffle.partitions"] = str(shuffle_partitions)
    conf.update(extra_conf or {})
    for key, value in conf.items():
        builder = builder.config(key, value)
    try:
        with _jvm_stderr_to_log() as log:
            session = builder.getOrCreate()
    except Exception as exc:  # the JVM failed to start or rejected the configuration
        raise SparkReconcileError(
            f"Spark did not start ({first_line(exc)}). Check the master URL "
            f"({master or 'from spark-submit'}), "
            f"that the driver memory '{driver_memory}' fits this machine, and that Java 17+ works "
            f"(`java -version`); Spark's own output is in {log or 'the terminal'}."
        ) from None
    level = os.environ.get("KAFKA_CHAOS_SPARK_LOG", "fatal").upper()
    known = {"ALL", "DEBUG", "ERROR", "INFO", "WARN"}
    session.sparkContext.setLogLevel(level if level in known else "FATAL")
    if shuffle_partitions is None and not submitted:
        cores = session.sparkContext.defaultParallelism
        session.conf.set("spark.sql.shuffle.partitions", str(max(2, 2 * cores)))
    return session


@contextmanager
def _jvm_stderr_to_log() -> Iterator[str | None]:
    """While a new JVM starts, point file descriptor 2 at a log file, so the JVM (and the Python workers it
    forks) write their stderr there for good — start-up banners, warnings, Java stack traces — while this
    process's own stderr (errors, rich progress) goes back to the terminal. Not done under spark-submit, with
    a JVM already running, or when KAFKA_CHAOS_SPARK_LOG asks to see Spark's log."""
    from pyspark import SparkContext

    if SparkContext._gateway is not None or os.environ.get("KAFKA_CHAOS_SPARK_LOG"):
        yield None
        return
    path = Path(tempfile.gettempdir()) / f"kafka-chaos-spark-{os.getpid()}.log"
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield str(path)
            finally:
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def first_line(exc: BaseException) -> str:
    """The useful first line of an exception from the JVM, without the Java stack trace."""
    text = str(exc).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("at ", "JVM stacktrace", "Traceback", "py4j")):
            return line[:400]
    return type(exc).__name__
