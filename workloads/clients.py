"""Which history process owns which Kafka client: every client a workload makes sets `client.id` to
`kafka-chaos-<role>-p<process>`, so a request's header names its process (request faults select by it:
`clients = [process ids]`, docs/architecture.md §5).

A workload numbers the processes it starts with before any of its threads runs, in a fixed order, so a scenario
can name them: the queue workload its consumers first (one process each), then each producer thread's
`in_flight` processes; the txn workload its producer threads first (one process each), then one consumer per
isolation level. A queue producer thread's one client carries the sends of all its processes and is named by the
first of them. Processes begun later (a retired process's successor) are numbered as they come, so no scenario
can know them in advance; their clients are named the same way.
"""

from __future__ import annotations

import re

from kafka_chaos.workloads.config import WorkloadConfig

_PROCESS = re.compile(r"^kafka-chaos-[a-z_-]+-p(\d+)$")


def client_id(role: str, process: int) -> str:
    """The client.id of `process`'s client in a role (producer, consumer, txn, …)."""
    return f"kafka-chaos-{role}-p{process}"


def process_of(client: str | None) -> int | None:
    """The process a client.id names (None: not a workload's client, e.g. the harness's own observer)."""
    m = _PROCESS.match(client or "")
    return int(m.group(1)) if m else None


def starting_clients(config: WorkloadConfig) -> dict[int, list[str]]:
    """The processes a scenario's workload starts with that own clients, with their clients' ids, numbered as
    the workloads number them (workloads.queue, workloads.txn)."""
    out: dict[int, list[str]] = {}
    if config.kind == "txn":
        for process in range(config.producers):
            out[process] = [client_id("txn", process)]
            if config.txn_mixed_share > 0:
                out[process].append(client_id("txn-consumer", process))
        if config.consumers > 0:
            for i, isolation in enumerate(config.txn_isolation):
                out[config.producers + i] = [client_id(f"consumer-{isolation}", config.producers + i)]
        return out
    for process in range(config.consumers):
        out[process] = [client_id("consumer", process)]
    for thread in range(config.producers):
        first = config.consumers + thread * config.in_flight
        out[first] = [client_id("producer", first)]
    return out
