"""Client-link faults through Toxiproxy: the one adapter over toxiproxy-python (docs/architecture.md §5).

Each broker's client listener is advertised through its own proxy named `broker-<id>`; a toxic on that proxy
degrades what clients see of that broker and nothing else (replication and the quorum do not pass through it).
"""

from __future__ import annotations

from typing import Any

from toxiproxy import Toxiproxy

TOXIC_NAME = "kafka-chaos"


class LinkFaults:
    def __init__(self, api_host: str, api_port: int) -> None:
        self._server = Toxiproxy()
        self._server.update_api_consumer(api_host, api_port)

    def answering(self) -> bool:
        return self._server.version() is not None

    def create_proxy(self, broker_id: int, listen: str, upstream: str) -> None:
        """The proxy in front of one broker's client listener."""
        self._server.create(upstream=upstream, name=f"broker-{broker_id}", listen=listen, enabled=True)

    def _proxy(self, broker_id: int) -> Any:
        proxy = self._server.get_proxy(f"broker-{broker_id}")
        if proxy is None:
            raise LookupError(f"no Toxiproxy proxy for broker {broker_id}")
        return proxy

    def apply(self, action: str, broker_id: int, *, latency_ms: int = 500, jitter_ms: int = 0,
              rate_kbps: int = 64, streams: tuple[str, ...] = ("downstream", "upstream")) -> dict[str, Any]:
        """Degrade a broker's client link: `action` is a Toxiproxy toxic type or `disable` (the proxy a fault
        kind uses is the registry's, faults.registry); returns what was applied (for the history).
        `streams`: downstream is the broker's answers to clients, upstream the clients' requests."""
        proxy = self._proxy(broker_id)
        if action == "disable":
            proxy.disable()
            return {"enabled": False}
        attributes = toxic_attributes(action, latency_ms=latency_ms, jitter_ms=jitter_ms, rate_kbps=rate_kbps)
        for stream in streams:
            proxy.add_toxic(type=action, stream=stream, name=f"{TOXIC_NAME}-{stream}", attributes=attributes)
        return {"toxic": action, **attributes}

    def heal(self, broker_id: int) -> None:
        """Remove the toxics and re-enable the proxy. Toxiproxy removes a toxic from all of a proxy's links at
        once, but returns when the slowest is done, and a link whose client has gone (librdkafka closes a
        connection whose request timed out) holds a buffered chunk it writes with a 5 s timeout and then drops
        (`ToxicLink.RemoveToxic`, link.go). So after a latency toxic a heal can return 5 s per direction after
        it was asked for, live links healed at its start; new connections to the proxy wait meanwhile (the
        toxic collection is locked). The history records both ends of the heal (docs/architecture.md §3)."""
        proxy = self._proxy(broker_id)
        for stream in ("downstream", "upstream"):
            if proxy.get_toxic(f"{TOXIC_NAME}-{stream}") is not None:
                proxy.destroy_toxic(f"{TOXIC_NAME}-{stream}")
        proxy.enable()

    def heal_all(self) -> None:
        self._server.reset()

    def add_toxic(self, broker_id: int, name: str, type_: str, stream: str, attributes: dict[str, Any]) -> None:
        """One toxic of a given type on a broker's client proxy (the request faults' `kafka` toxic)."""
        self._proxy(broker_id).add_toxic(type=type_, stream=stream, name=name, attributes=attributes)

    def remove_toxic(self, broker_id: int, name: str) -> None:
        proxy = self._proxy(broker_id)
        if proxy.get_toxic(name) is not None:
            proxy.destroy_toxic(name)


def toxic_attributes(toxic: str, *, latency_ms: int = 500, jitter_ms: int = 0, rate_kbps: int = 64) -> dict[str, Any]:
    """Toxiproxy's attributes for a toxic type, from the fault's parameters."""
    if toxic == "latency":
        return {"latency": latency_ms, "jitter": jitter_ms}
    if toxic == "bandwidth":
        return {"rate": rate_kbps}
    if toxic in ("timeout", "reset_peer"):
        return {"timeout": 0}  # timeout: a black hole, connections hang until healed; reset_peer: TCP RST at once
    if toxic == "slicer":
        return {"average_size": 64, "size_variation": 32, "delay": 10_000}  # bytes, bytes, µs
    raise ValueError(f"unknown toxic {toxic!r}")
