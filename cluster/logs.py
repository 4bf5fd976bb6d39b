"""Where client libraries' own log lines go during chaos (not the terminal; a run's logs/clients.log)."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator
from pathlib import Path


def client_logger() -> logging.Logger:
    """librdkafka's own log lines (connection refused while a broker is down, …) are expected during chaos;
    they go to this logger instead of the terminal. Attach a handler to see them."""
    logger = logging.getLogger("kafka_chaos.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger


@contextlib.contextmanager
def client_log_file(path: Path) -> Iterator[None]:
    """The clients' log lines at info and above written to `path` while the block runs: in-process librdkafka's
    (at their syslog levels; no debug contexts are set, so they stay few) and the out-of-process workers' stderr.
    The handler is removed and the level restored however the block ends, so runs in one process (a test
    session, a campaign) each keep only their own lines."""
    logger = client_logger()
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setLevel(logging.INFO)
    formatter = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(message)s", "%Y-%m-%dT%H:%M:%S")
    formatter.converter = time.gmtime  # UTC, as the nodes' logs are stamped
    handler.setFormatter(formatter)
    level = logger.level
    logger.addHandler(handler)
    if not logger.isEnabledFor(logging.INFO):
        logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        handler.close()
        logger.setLevel(level)
