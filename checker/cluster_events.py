"""The cluster's own account of a run: events extracted from the nodes' logs (results/<run>/logs/node-N.log).

`extract(text, node, t0_unix_ns)` reads one node's log (log4j lines `[yyyy-mm-dd hh:mm:ss,mmm] LEVEL …`, UTC,
the containers' clock) and returns events `{"time_s", "node", "kind", "text"}` with times in seconds since the
run started (the history's clock; `t0_unix_ns` is its wall-clock origin, recorded in the run-start event):

- `raft-state`: a KRaft voter's state transition (Unattached, Prospective, Candidate, Leader, Follower,
  Resigned), with its epoch (`org.apache.kafka.raft.QuorumState`, KIP-595/KIP-996);
- `controller-active` / `controller-inactive`: the QuorumController becoming active at an epoch, or seeing
  another (or no) leader in a new epoch, or renouncing;
- `broker-fenced` / `broker-unfenced`: the active controller fencing a broker whose session timed out, or
  granting an unfence (`BrokerHeartbeatManager`, KIP-631); `broker-state`: a broker's own lifecycle;
- `isr-shrink` / `isr-expand` / `isr-update`: a partition leader's ISR changes (`kafka.cluster.Partition`);
- `truncation`: a follower truncating a partition (internal topics left out);
- `become-leader`: a broker taking partition leaderships;
- `not-controller-storm`: a burst of `NotControllerException` answers from one node (requests sent to a
  node that is the Raft leader but whose controller is not active yet), one event per burst;
- `server-started`: `Kafka Server started`;
- `epoch-checkpoint-unreadable`: a partition's leader-epoch-checkpoint that does not parse (a torn or half-written
  file: `Error while reading checkpoint file`), which takes the log directory offline (KAFKA-16541);
- `truncated-below-hw`: a replica truncating a partition below its own high watermark: the truncation's own
  `Non-monotonic update of high watermark from (offset=H …) to (offset=X …)`, X the offset the fetcher just truncated
  to and a position in the log (not a leader's bare offset). Records below a replica's high watermark are ones it
  serves as committed (to followers' readers, KIP-392), and a clean truncation only removes uncommitted records
  (KIP-101/KIP-279): this one removed records its high watermark had counted as committed (KAFKA-14704: before
  3.4.1 a former leader took the new leader's high watermark from the very fetch that told it to truncate). A new
  leader's high watermark lagging a follower's also lowers the follower's, by a bare offset, and is not this.

`registration_events(samples)` gives `broker-fenced` / `broker-unfenced` events from the observer's sampled
registrations (state.jsonl `brokers`, DescribeCluster) for runs whose logs say nothing of fencing (an external
cluster, logs not collected). `derive(events)` adds `controller-activation` events: how long each Raft
leader's controller took to become active (or that it never did). `causes_for(window, events)` picks the
events that explain an availability window, as short sentences.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from kafka_chaos.rundir import EVENTS_FILE

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\] (\w+) (.*)$")
_RAFT = re.compile(r"Completed transition to (\w+?)(?:State)?\((?:.*?)\bepoch=(\d+)(?:.*?\bleader(?:Id)?=(\d+))?")
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("controller-active", re.compile(r"Becoming the active controller at epoch (\d+)")),
    ("controller-inactive", re.compile(r"In the new epoch (\d+), the leader is (\S+?)\.?$")),
    ("controller-inactive", re.compile(r"[Rr]enouncing the leadership.*")),
    ("broker-fenced", re.compile(r"Fencing broker (\d+) at epoch \d+ because (.*?)\.?$")),
    ("broker-unfenced", re.compile(r"The request from broker (\d+) to unfence has been granted")),
    ("broker-state", re.compile(r"BrokerLifecycleManager id=\d+\] (.*?Transitioning from \w+ to \w+)")),
    ("isr-shrink", re.compile(r"\[Partition (\S+) broker=\d+\] Shrinking ISR from (\S+) to ([\d,]+)")),
    ("isr-expand", re.compile(r"\[Partition (\S+) broker=\d+\] Expanding ISR from (\S+) to ([\d,]+)")),
    ("isr-update", re.compile(r"\[Partition (\S+) broker=\d+\] ISR updated to ([\d,]+)")),
    ("truncation", re.compile(r"Truncating partition (\S+) with TruncationState\(offset=(\d+)")),
    ("become-leader", re.compile(r"Transitioning (\d+) partition\(s\) to local leaders")),
    ("server-started", re.compile(r"Kafka Server started")),
    ("epoch-checkpoint-unreadable",
     re.compile(r"Error while reading checkpoint file \S*/([^/\s]+)/leader-epoch-checkpoint")),
)
# 3.4 prints LogOffsetMetadata as `(offset=5 segment=[0:400])`, later versions with a comma after the offset
_HW_REGRESSED = re.compile(r"\[UnifiedLog partition=(\S+), dir=[^\]]*\] Non-monotonic update of high watermark from "
                           r"\(offset=(\d+),? segment=\[-?\d+:-?\d+\]\) to \(offset=(\d+),? segment=\[(-?\d+):")
_NOT_CONTROLLER = re.compile(r"NotControllerException")
_APPEARS = re.compile(r"The active controller appears to be (node \d+|\w+)")
STORM_GAP_S = 1.0
STORM_MIN = 5


def _time_s(stamp: str, millis: str, t0_unix_ns: int) -> float:
    dt = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
    return round((int(dt.timestamp()) * 1000 + int(millis)) / 1000 - t0_unix_ns / 1e9, 3)


def _text(kind: str, m: re.Match[str]) -> str | None:
    g = m.groups()
    if kind == "controller-active":
        return f"controller became active at epoch {g[0]}"
    if kind == "controller-inactive":
        return f"controller sees epoch {g[0]} with leader {g[1]}" if g else m.group(0)
    if kind == "broker-fenced":
        return f"fenced broker {g[0]}: {g[1]}"
    if kind == "broker-unfenced":
        return f"unfenced broker {g[0]}"
    if kind == "broker-state":
        return g[0]
    if kind in ("isr-shrink", "isr-expand"):
        return f"{g[0]}: ISR {g[1]} → {g[2]}"
    if kind == "isr-update":
        return f"{g[0]}: ISR updated to {g[1]}"
    if kind == "truncation":
        return None if g[0].startswith("__") else f"{g[0]}: truncated to offset {g[1]}"
    if kind == "become-leader":
        return f"became leader of {g[0]} partition(s)"
    if kind == "epoch-checkpoint-unreadable":
        return f"{g[0]}: leader-epoch-checkpoint unreadable"
    return m.group(0)


def extract(text: str, node: int | None, t0_unix_ns: int) -> list[dict[str, Any]]:
    """The events of one node's log (see the module docstring), in log order."""
    out: list[dict[str, Any]] = []
    storm: list[float] = []
    storm_text = ""
    truncated_to: dict[str, int] = {}  # partition → the offset this node's fetcher last truncated it to

    def flush() -> None:
        if len(storm) >= STORM_MIN:
            out.append({"time_s": storm[0], "node": node, "kind": "not-controller-storm",
                        "text": f"{len(storm)} NotControllerException in {storm[-1] - storm[0]:.1f}s"
                                + (f" ({storm_text})" if storm_text else ""),
                        "end_s": storm[-1], "count": len(storm)})
        storm.clear()

    for line in text.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        stamp, millis, _level, rest = m.groups()
        if _NOT_CONTROLLER.search(rest):
            t = _time_s(stamp, millis, t0_unix_ns)
            if storm and t - storm[-1] > STORM_GAP_S:
                flush()
            storm.append(t)
            appears = _APPEARS.search(rest)
            if appears:
                storm_text = f"the active controller appears to be {appears.group(1)}"
            continue
        if "Non-monotonic update of high watermark" in rest:
            hw = _HW_REGRESSED.search(rest)
            if hw and (below := _below_hw(hw, truncated_to, node)):
                out.append({"time_s": _time_s(stamp, millis, t0_unix_ns), **below})
            continue
        if "Completed transition to" in rest:
            r = _RAFT.search(rest)
            if r:
                state, epoch, leader = r.groups()
                extra = f", leader {leader}" if leader and state == "Follower" else ""
                out.append({"time_s": _time_s(stamp, millis, t0_unix_ns), "node": node, "kind": "raft-state",
                            "text": f"Raft {state} at epoch {epoch}{extra}", "state": state, "epoch": int(epoch)})
            continue
        for kind, pattern in _PATTERNS:
            p = pattern.search(rest)
            if p is None:
                continue
            described = _text(kind, p)
            if described is not None:
                ev: dict[str, Any] = {"time_s": _time_s(stamp, millis, t0_unix_ns), "node": node, "kind": kind,
                                      "text": described}
                if kind == "controller-active":
                    ev["epoch"] = int(p.group(1))
                if kind in ("isr-shrink", "isr-expand", "isr-update", "truncation", "epoch-checkpoint-unreadable"):
                    ev["partition"] = p.group(1)
                out.append(ev)
            if kind == "truncation":
                truncated_to[p.group(1)] = int(p.group(2))
            break
    flush()
    return out


def _below_hw(m: re.Match[str], truncated_to: Mapping[str, int], node: int | None) -> dict[str, Any] | None:
    """A `truncated-below-hw` event when a non-monotonic high watermark update is the truncation's own: down to the
    offset the fetcher just truncated the partition to, at a position in the log (a leader's propagated high
    watermark is a bare offset, segment -1), from above it."""
    partition, high, low, segment = m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4))
    if partition.startswith("__") or truncated_to.get(partition) != low or high <= low or segment < 0:
        return None
    return {"node": node, "kind": "truncated-below-hw", "partition": partition, "high_watermark": high,
            "offset": low, "text": f"{partition}: truncated to offset {low}, below its high watermark {high} "
                                   f"({high - low} records its high watermark had counted as committed)"}


def derive(events: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """`controller-activation` events: each Raft Leader transition and when (if ever) that node's controller
    became active at the same epoch — the gap is time with a quorum leader but no active controller, when
    every controller request is answered with NotControllerException."""
    out = []
    for e in events:
        if e.get("kind") != "raft-state" or e.get("state") != "Leader":
            continue
        active = [a for a in events if a.get("kind") == "controller-active" and a.get("node") == e["node"]
                  and a.get("epoch") == e.get("epoch") and a["time_s"] >= e["time_s"] - 0.5]
        if active:
            delay = active[0]["time_s"] - e["time_s"]
            text = (f"node {e['node']} won epoch {e['epoch']}; its controller became active {delay:.1f}s later")
        else:
            delay = None
            text = f"node {e['node']} won epoch {e['epoch']}; its controller never became active in the logs"
        out.append({"time_s": e["time_s"], "node": e["node"], "kind": "controller-activation", "text": text,
                    "epoch": e["epoch"], "delay_s": delay})
    return out


def overlapping_leaders(events: Sequence[Mapping[str, Any]],
                        down: Mapping[int, Sequence[float]] | None = None) -> list[dict[str, Any]]:
    """Periods in which two nodes each held the KRaft leadership (each its own epoch): a split brain, the shape of
    KAFKA-15489 (a leader cut off from the other voters, not from the brokers, acting on). A node leads from its
    `raft-state` Leader event until its next `raft-state` event, or until it went down (`down`: node → times in
    seconds its process stopped, from the history's faults, since a killed node logs nothing more). Each period:
    `start_s`, `end_s` (None: still both at the end of the logs), `nodes`, `epochs`."""
    spans: list[tuple[float, float | None, int, Any]] = []
    for node in sorted({e["node"] for e in events if e.get("kind") == "raft-state" and e.get("node") is not None}):
        mine = sorted((e for e in events if e.get("kind") == "raft-state" and e.get("node") == node),
                      key=lambda e: e["time_s"])
        stops = sorted((down or {}).get(node, ()))
        for i, e in enumerate(mine):
            if e.get("state") != "Leader":
                continue
            ends = [mine[i + 1]["time_s"]] if i + 1 < len(mine) else []
            ends += [t for t in stops if t >= e["time_s"]][:1]
            spans.append((e["time_s"], min(ends) if ends else None, node, e.get("epoch")))
    out = []
    for a, b in ((a, b) for i, a in enumerate(spans) for b in spans[i + 1:] if a[2] != b[2]):
        start = max(a[0], b[0])
        ends = [t for t in (a[1], b[1]) if t is not None]
        end = min(ends) if ends else None
        if end is None or end > start:
            out.append({"start_s": start, "end_s": end, "nodes": sorted((a[2], b[2])),
                        "epochs": [a[3], b[3]] if a[2] < b[2] else [b[3], a[3]]})
    return sorted(out, key=lambda o: o["start_s"])


def registration_events(samples: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A `broker-fenced` / `broker-unfenced` event (source `observer`) each time the sampled registrations
    (`brokers`: `{"unfenced", "fenced", "time"}`) show a broker change sides; the first read sets the baseline."""
    out: list[dict[str, Any]] = []
    last_time, fenced_before, unfenced_before = None, None, None
    for sample in samples:
        brokers = sample.get("brokers")
        if not isinstance(brokers, Mapping) or brokers.get("time") == last_time:
            continue  # a sample repeats the newest registrations read until the next one finishes
        last_time = brokers.get("time")
        fenced, unfenced = set(brokers.get("fenced") or ()), set(brokers.get("unfenced") or ())
        if fenced_before is not None and unfenced_before is not None and isinstance(last_time, int):
            for kind, now, before, what in (("broker-fenced", fenced, fenced_before, "fenced"),
                                             ("broker-unfenced", unfenced, unfenced_before, "unfenced")):
                for broker in sorted(now - before):
                    out.append({"time_s": last_time / 1e9, "node": broker, "kind": kind, "source": "observer",
                                "text": f"broker {broker} {what} (DescribeCluster, sampled by the observer)"})
        fenced_before, unfenced_before = fenced, unfenced
    return out


def read_events(run_dir: Path, t0_unix_ns: int) -> list[dict[str, Any]]:
    """Every node's events from `run_dir/logs/node-N.log`, with the derived ones, sorted by time."""
    events: list[dict[str, Any]] = []
    for path in sorted((Path(run_dir) / "logs").glob("node-*.log")):
        try:
            node: int | None = int(path.stem.split("-", 1)[1])
        except ValueError:
            node = None
        events += extract(path.read_text(errors="replace"), node, t0_unix_ns)
    events += derive(events)
    events.sort(key=lambda e: (e["time_s"], e["node"] or 0))
    return events


def write_events(run_dir: Path, events: Iterable[Mapping[str, Any]]) -> Path:
    path = Path(run_dir) / EVENTS_FILE
    path.write_bytes(b"".join(orjson.dumps(dict(e)) + b"\n" for e in events))
    return path


_CAUSE_KINDS = frozenset({"raft-state", "controller-active", "controller-inactive", "broker-fenced",
                          "broker-unfenced", "isr-shrink", "isr-expand", "truncation", "not-controller-storm",
                          "controller-activation", "server-started"})
MAX_CAUSES = 12


def causes_for(window: Mapping[str, Any], events: Sequence[Mapping[str, Any]], lead_s: float = 2.0) -> list[str]:
    """The cluster events that explain a window, as `"12.3s node 1: …"`: from `lead_s` before it starts to its
    end, of the kinds that move leaders or block writes; for a key, only its own partition's ISR and
    truncation events. Slow controller activations come first."""
    start, end = float(window["start_s"]) - lead_s, float(window["end_s"])
    key = window.get("key")
    partition = key.replace("/", "-") if isinstance(key, str) else None
    picked: list[tuple[int, Mapping[str, Any]]] = []
    for e in events:
        t = float(e["time_s"])
        if not start <= t <= end or e.get("kind") not in _CAUSE_KINDS:
            continue
        if "partition" in e and (str(e["partition"]).startswith("__")
                                 or (partition is not None and e["partition"] != partition)):
            continue
        if e["kind"] == "raft-state" and e.get("state") not in ("Leader", "Candidate", "Resigned"):
            continue
        slow = e["kind"] == "controller-activation" and (e.get("delay_s") is None or float(e["delay_s"]) > 1.0)
        rank = 0 if slow or e["kind"] == "not-controller-storm" else 1
        picked.append((rank, e))
    picked.sort(key=lambda p: (p[0], float(p[1]["time_s"])))
    return [f"{float(e['time_s']):.1f}s node {e['node']}: {e['text']}" for _, e in picked[:MAX_CAUSES]]
