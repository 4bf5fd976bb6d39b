"""The `kafka` toxic compiled into kafka-chaos's Toxiproxy (images/toxiproxy/kafkatoxic): the toxics a request fault
adds to one proxy, and the toxic's log lines read back as the fault's firings (docs/architecture.md §3, §5).

A request fault is one toxic on the proxy's upstream (the clients' requests). A response fault is two: an upstream
toxic that only notes the correlation ids of the chosen APIs' requests (`track`), and the downstream toxic that
acts on the responses carrying them; a response names no API, only its request's correlation id.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any, Literal

from testcontainers.core.container import DockerContainer

TOXIC_TYPE = "kafka"
Stream = Literal["upstream", "downstream"]
Toxic = tuple[Stream, str, dict[str, Any]]
"""(stream, toxic name, attributes)."""


def toxics(kind: str, frames: str, action: str, api_keys: list[int], proxy: str, token: str, *, latency_ms: int = 0,
           hold_ms: int = 0, count: int = 0, release_on_connect: bool = False,
           release_after: list[int] | None = None, release_after_count: int = 1,
           client_ids: list[str] | None = None) -> list[Toxic]:
    """The toxics for one proxy, in the order to add them; removing them in the same order
    keeps the tracking toxic's ids flowing to the response toxic until it goes. `release_after`: API keys whose
    frames on the proxy's other connections release a held frame, ahead of the `release_after_count`-th.
    `client_ids`: only requests whose header names one of these clients (and their responses); None: any."""
    base = {"kind": kind, "fault": token, "proxy": proxy, "api_keys": api_keys, "client_ids": client_ids or []}
    acting = {**base, "frames": frames, "action": action, "count": count,
              "delay_ms": latency_ms if action == "delay" else hold_ms, "release_on_connect": release_on_connect,
              "release_after_api_keys": release_after or [], "release_after_count": release_after_count}
    if frames == "request":
        return [("upstream", f"kafka-chaos-{token}-requests", acting)]
    return [("upstream", f"kafka-chaos-{token}-track", {**base, "frames": "request", "action": "track"}),
            ("downstream", f"kafka-chaos-{token}-responses", acting)]


def firings(logs: str, token: str) -> list[dict[str, Any]]:
    """The firings of the fault with this token, from a Toxiproxy container's log (beside Toxiproxy's own lines),
    as history values: which API (its key: faults.kafka_apis names it), which correlation id, which client (the
    request header's client_id; a response's: its request's), held from and to (ms since the epoch)."""
    out = []
    for line in logs.splitlines():
        if '"kafka_toxic"' not in line:
            continue
        try:
            fired = json.loads(line[line.index("{"):])
        except ValueError:
            continue
        if not isinstance(fired, dict) or fired.get("kafka_toxic") != "fired" or fired.get("fault") != token:
            continue
        out.append({"kind": fired.get("kind"), "proxy": fired.get("proxy"), "frames": fired.get("frames"),
                    "api_key": fired.get("api_key"),
                    "api_version": fired.get("api_version"), "correlation_id": fired.get("correlation_id"),
                    "client_id": fired.get("client_id"),
                    "held_from_ms": fired.get("held_from"), "held_to_ms": fired.get("held_to"),
                    "released": fired.get("released")})
    return sorted(out, key=lambda f: (f["held_from_ms"] or 0, f["proxy"] or ""))


def container_logs(container: DockerContainer | None, since_s: float | None = None) -> str:
    """A proxy container's stdout from `since_s` (seconds since the epoch; whole seconds, so a little earlier) on;
    empty when it is gone."""
    if container is None:
        return ""
    with contextlib.suppress(Exception):
        kwargs: dict[str, Any] = {"stdout": True, "stderr": False}
        if since_s is not None:
            kwargs["since"] = int(since_s) - 1
        raw = container.get_wrapped_container().logs(**kwargs)
        return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
    return ""
