"""Readiness as wait objects whose timeouts carry the node logs (testcontainers' shape)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from kafka_chaos.errors import ClusterError

T = TypeVar("T")


class Wait:
    """Poll `probe` until it returns a truthy value; on timeout raise ClusterError with the node logs attached."""

    def __init__(self, what: str, timeout_s: float, interval_s: float = 0.25) -> None:
        self.what, self.timeout_s, self.interval_s = what, timeout_s, interval_s

    def until(self, probe: Callable[[], T | None], logs: Callable[[], str] | None = None) -> T:
        deadline = time.monotonic() + self.timeout_s
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            try:
                result = probe()
                if result:
                    return result
            except Exception as err:  # probes talk to brokers that may be down; keep the last reason
                last_error = err
            time.sleep(self.interval_s)
        timeout = ClusterError(
            f"Timed out after {self.timeout_s:.0f}s waiting for {self.what}"
            + (f" (last error: {last_error})" if last_error else "")
        )
        if logs is not None:
            timeout.add_note(logs())
        raise timeout
