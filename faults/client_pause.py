"""client-pause/client-resume: the client worker processes of chosen history processes frozen with SIGSTOP and
thawed with SIGCONT (docs/architecture.md §5): a long GC pause or a stopped application, as Jepsen froze the
clients that met KAFKA-17754. Only out-of-process clients (workloads.drivers) have a process of their own to
freeze; the scenario's validation says so before a run. No node is touched."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.workloads import drivers
from kafka_chaos.workloads.drivers.remote import WorkerProcess

WORKER_WAIT_S = 15.0
"""How long the fault waits for a chosen process's worker to be running (its thread starts it when it begins)."""


@dataclass
class ClientPause:
    params: dict[str, Any]
    stop: threading.Event = field(default_factory=threading.Event)
    name: str = "client-pause"
    frozen: list[WorkerProcess] = field(default_factory=list)

    def start(self, nodes: list[int]) -> dict[str, Any]:
        processes = [int(p) for p in self.params.get("clients", [])]
        if not processes:
            raise ValueError("client-pause needs clients = [process ids] (the scenario's validation says which)")
        workers: dict[int, list[WorkerProcess]] = {}
        deadline = time.monotonic() + WORKER_WAIT_S
        for p in processes:
            while not (found := drivers.workers_of(p)) and time.monotonic() < deadline and not self.stop.wait(0.2):
                pass
            if not found:
                raise ValueError(f"client-pause: process {p} has no client worker running (an out-of-process client "
                                 "is needed: [workload] client_version; or the process ended)")
            workers[p] = found
        for found in workers.values():
            for w in found:
                w.freeze()
                self.frozen.append(w)
        first = self.frozen[0]
        return {"nodes": [], "clients": processes, "pids": {str(p): [w.pid for w in ws] for p, ws in workers.items()},
                "client": first.client, "version": first.version}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for w in self.frozen:
            w.thaw()
        value = {"nodes": [], "clients": [int(p) for p in self.params.get("clients", [])],
                 "pids": [w.pid for w in self.frozen]}
        self.frozen = []
        return value
