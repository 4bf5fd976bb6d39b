"""Where client libraries' own log lines go during chaos (not the terminal)."""

from __future__ import annotations

import logging


def client_logger() -> logging.Logger:
    """librdkafka's own log lines (connection refused while a broker is down, …) are expected during chaos;
    they go to this logger instead of the terminal. Attach a handler to see them."""
    logger = logging.getLogger("kafka_chaos.librdkafka")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
        logger.propagate = False
    return logger
