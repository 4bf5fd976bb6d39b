"""A small, made-up run directory for the report tests: the files a real run leaves (docs/architecture.md §2), with
sends and polls, a kill + restart of node 2, a partition and a client-link fault, a leader change, and a
`lost-write` the reference model calls a violation."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SEC = 1_000_000_000
MS = 1_000_000

SCENARIO = """\
name = "acks1-leader-kill"
seed = 7
duration_s = 30

[cluster]
nodes = 3
controllers = 3
kafka_version = "4.0.0"
elr = false

[topic]
name = "chaos"
partitions = 3
replication_factor = 3
min_insync_replicas = 2
unclean_leader_election = false

[workload]
acks = "1"
idempotence = false
producers = 3
consumers = 1
"""


@dataclass
class FakeRun:
    run_dir: Path
    lost_writer: int
    """History index of the lost value's send invoke."""
    lost_reader: int
    """History index of the poll completion that read past it."""
    kill_index: int


def make_run(
    run_dir: Path,
    *,
    complete: bool = True,
    cut_last_line: bool = False,
    with_results: bool = True,
    with_state: bool = True,
    key_prefix: str = "chaos",
) -> FakeRun:
    """Write a fake run into `run_dir` (created) and return the indexes the tests look for."""
    run_dir.mkdir(parents=True, exist_ok=True)
    events: list[dict[str, Any]] = []  # without index; sorted by time below

    def ev(time: int, process: Any, type_: str, f: str, value: Any, **extra: Any) -> dict[str, Any]:
        e = {"time": time, "process": process, "type": type_, "f": f, "value": value, **extra}
        events.append(e)
        return e

    ev(0, "harness", "info", "run-start", {"name": "acks1-leader-kill", "seed": 7})
    value = 0
    oks: list[tuple[int, int, int, dict[str, Any], dict[str, Any]]] = []  # (ack time, key, value, inv, ok)
    for proc in range(3):
        t = 100 * MS + proc * 7 * MS
        while t < 29 * SEC:
            value += 1
            key = value % 3
            down = 10 * SEC <= t < 12 * SEC and key == 0
            lat = 1500 * MS if down else (4 + (value % 5)) * MS
            inv = ev(t, proc, "invoke", "send", [["send", f"{key_prefix}/{key}", value]])
            if down and value % 2:
                ev(
                    t + lat,
                    proc,
                    "info",
                    "send",
                    [["send", f"{key_prefix}/{key}", value]],
                    error="RequestTimedOut: timed out",
                )
            else:
                ok = ev(t + lat, proc, "ok", "send", None)
                oks.append((t + lat, key, value, inv, ok))
            t += lat + 40 * MS
    # offsets in ack order per key; the first value acked on chaos/0 after 9 s is the lost one
    offsets = {k: 0 for k in range(3)}
    lost: dict[str, Any] = {}
    acked: list[tuple[int, int, int, int]] = []  # (ack time, key, offset, value)
    for t_ack, key, v, inv, ok in sorted(oks, key=lambda o: o[0]):
        off = offsets[key]
        offsets[key] += 1
        ok["value"] = [["send", f"{key_prefix}/{key}", [off, v]]]
        acked.append((t_ack, key, off, v))
        if not lost and key == 0 and inv["time"] > 9 * SEC:
            lost = {"inv": inv, "key": key, "offset": off, "value": v}
    # one consumer (process 3) polls every 250 ms what was acked before; it never reads the lost value
    t = 200 * MS
    read_upto = 0
    reader: dict[str, Any] = {}
    while t < 29.5 * SEC:
        inv_t = t
        batch: dict[str, list[list[int]]] = {}
        while read_upto < len(acked) and acked[read_upto][0] < inv_t:
            _, k, off, v = acked[read_upto]
            read_upto += 1
            if lost and v == lost["value"]:
                continue
            batch.setdefault(f"{key_prefix}/{k}", []).append([off, v])
        ev(inv_t, 3, "invoke", "poll", [["poll"]])
        done = ev(inv_t + 3 * MS, 3, "ok", "poll", [["poll", batch]])
        if lost and not reader and any(o > lost["offset"] for o, _ in batch.get(f"{key_prefix}/0", [])):
            reader = done
        t += 250 * MS
    kill = ev(10 * SEC, "nemesis", "invoke", "kill", {"nodes": [2]})
    ev(10 * SEC + 40 * MS, "nemesis", "info", "kill", {"nodes": [2]})
    ev(18 * SEC, "nemesis", "invoke", "restart", {"nodes": [2]})
    ev(18 * SEC + 900 * MS, "nemesis", "info", "restart", {"nodes": [2]})
    ev(20 * SEC, "nemesis", "invoke", "partition", {"shape": "isolate", "groups": [[1], [2, 3]]})
    ev(20 * SEC + 30 * MS, "nemesis", "info", "partition", None)
    ev(24 * SEC, "nemesis", "invoke", "heal", None)
    ev(24 * SEC + 20 * MS, "nemesis", "info", "heal", None)
    ev(25 * SEC, "nemesis", "invoke", "latency", {"nodes": [3], "latency_ms": 300})
    ev(25 * SEC + 5 * MS, "nemesis", "info", "latency", {"nodes": [3], "latency_ms": 300})
    ev(27 * SEC, "nemesis", "invoke", "heal-link", {"nodes": [3]})
    ev(27 * SEC + 5 * MS, "nemesis", "info", "heal-link", {"nodes": [3]})
    if complete:
        ev(29_000 * MS, "harness", "info", "drain-start", None)
        ev(29_900 * MS, "harness", "info", "drain-complete", True)

    events.sort(key=lambda e: e["time"])  # stable: an op's invoke stays before its completion
    for i, e in enumerate(events):
        e["index"] = i
    with (run_dir / "history.jsonl").open("w") as fh:
        for e in events:
            fh.write(json.dumps({"index": e["index"], **{k: v for k, v in e.items() if k != "index"}}) + "\n")
        if cut_last_line:
            fh.write('{"index": 99999, "time": 29950000000, "process": 1, "type": "inv')

    (run_dir / "scenario.toml").write_text(SCENARIO)
    logs = run_dir / "logs"
    logs.mkdir(exist_ok=True)
    for n in (1, 2, 3):
        (logs / f"node-{n}.log").write_text(
            f"[2026-01-01 00:00:00,000] INFO Kafka Server started (node {n})\n"
        )

    if with_state:
        with (run_dir / "state.jsonl").open("w") as fh:
            for i in range(60):
                t = i * 500 * MS
                for p in range(3):
                    leader: int | None = p + 1
                    epoch, isr = 0, [1, 2, 3]
                    if p == 1 and t >= 10_500 * MS:  # node 2 led chaos/1 until it was killed
                        leader, epoch = 1, 1
                    if t >= 10_500 * MS and t < 19 * SEC:
                        isr = [1, 3]
                    if p == 1 and 10 * SEC <= t < 10_500 * MS:
                        leader = None
                    fh.write(
                        json.dumps(
                            {
                                "time": t,
                                "key": f"{key_prefix}/{p}",
                                "leader": leader,
                                "leader_epoch": epoch,
                                "replicas": [1, 2, 3],
                                "isr": isr,
                                "elr": [],
                                "last_known_elr": [],
                                "hw": i * 10,
                                "controller": 1,
                            }
                        )
                        + "\n"
                    )

    if with_results:
        lw = {
            "key": f"{key_prefix}/0",
            "value": lost["value"],
            "offset": lost["offset"],
            "index": lost["offset"],
            "max_read_index": lost["offset"] + 3,
            "process": lost["inv"]["process"],
            "ops": [lost["inv"]["index"], reader["index"]],
            "times": [lost["inv"]["time"], reader["time"]],
            "bad": True,
            "verdict": "violation",
            "reason": "acks=1 loss needs a leader crash before replication; none was seen at that time",
        }
        unseen_vals = [v for _, k, _, v in acked if k == 0][-4:]
        results = {
            "valid": False,
            "complete": complete,
            "anomaly_counts": {"lost-write": 1, "unseen": 1},
            "anomalies": {
                "lost-write": [lw],
                "unseen": [
                    {
                        "key": f"{key_prefix}/0",
                        "count": len(unseen_vals),
                        "values": unseen_vals,
                        "ops": [],
                        "times": [],
                        "bad": True,
                        "verdict": "permitted",
                        "reason": "acks=1 after a leader crash: Kafka permits this loss",
                    }
                ],
            },
            "violations": [{"name": "lost-write", **lw}],
            "stats": {
                "duration_ns": 30 * SEC,
                "unseen_series": {
                    "bucket_ns": SEC,
                    "total": [0] * 10 + [3, 9, 4, 2] + [1] * 17,
                    "by_key": {f"{key_prefix}/0": [0] * 10 + [3, 9, 4, 2] + [1] * 17},
                },
            },
        }
        (run_dir / "results.json").write_text(json.dumps(results))
    return FakeRun(
        run_dir=run_dir,
        lost_writer=lost["inv"]["index"],
        lost_reader=reader["index"],
        kill_index=kill["index"],
    )
