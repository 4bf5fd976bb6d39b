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
TRANSACTION_WAIT_S = 30.0
"""`during = "transaction"`: how long the fault waits for a chosen worker to hold a transaction open with a send
acknowledged."""


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
        during = str(self.params.get("during", "now"))
        if during == "transaction":
            self._await_transaction([w for ws in workers.values() for w in ws], processes)
        for found in workers.values():
            for w in found:
                w.freeze()
                self.frozen.append(w)
        first = self.frozen[0]
        return {"nodes": [], "clients": processes, "pids": {str(p): [w.pid for w in ws] for p, ws in workers.items()},
                "client": first.client, "version": first.version,
                **({"during": during, "in_transaction": [w.pid for w in self.frozen if w.transaction_written.is_set()]}
                   if during != "now" else {})}

    def _await_transaction(self, workers: list[WorkerProcess], processes: list[int]) -> None:
        """Until one of `workers` holds a transaction open with a send acknowledged: frozen then, the transaction
        stays open at its coordinator until transaction.timeout.ms aborts it. The workload holds it open for
        seconds (txn_commit_delay_ms), so the freeze lands well before its commit is asked for."""
        deadline = time.monotonic() + TRANSACTION_WAIT_S
        while not any(w.transaction_written.is_set() for w in workers):
            if time.monotonic() >= deadline or self.stop.is_set():
                raise ValueError(f"client-pause: process {processes} held no transaction open with a send "
                                 f"acknowledged within {TRANSACTION_WAIT_S:.0f}s (during = \"transaction\" needs "
                                 "[workload] txn_commit_delay_ms, which holds each transaction open before its commit)")
            workers[0].transaction_written.wait(0.02)

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        for w in self.frozen:
            w.thaw()
        value = {"nodes": [], "clients": [int(p) for p in self.params.get("clients", [])],
                 "pids": [w.pid for w in self.frozen]}
        self.frozen = []
        return value
