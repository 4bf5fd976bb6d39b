"""disk-replace / disk-replaced: a node's disk dies and an operator puts in a new one (docs/architecture.md §5).

The start kills the node (a failing disk allows no clean shutdown) and empties its volatile disk: every log
directory and, on a controller or combined node, the metadata log, which share the one data directory here. The
history value says what was on it (files, bytes, per partition directory) and the log directory id (KIP-858) it
had. The heal does what Kafka's operations guide asks of an operator after a disk replacement:

* before formatting a controller, it waits until `kafka-metadata-quorum describe --replication`, as the other
  controllers answer it, shows a majority of the voters without lag (the guide's "Replace KRaft Controller Disk":
  a majority must hold the committed log; a leader just elected has not heard from its followers yet), and
  records that table;
* `kafka-storage format` with the cluster id, in a one-off container of the node's image: on a static quorum
  (`controller.quorum.voters`) as at first, on a dynamic one (KIP-853) with `--no-initial-controllers`, because a
  new disk must not bootstrap a voter set of its own; each format draws a new directory id;
* the node starts with the same node id. On a static quorum a controller is a voter again at once, with an empty
  log: Kafka has no way to tell (the voters are ids only), which is the case KIP-853's motivation calls unsafe (the
  empty voter may elect a candidate that lacks committed records). On a dynamic quorum the voter set names
  (id, directory id): the node with its new directory id is an observer, so the heal removes the old voter
  (`remove-controller --controller-directory-id <old>`) and adds the node back (`add-controller`, run on the node
  with its own configuration), as the guide's "Controller membership changes" describe, and waits until the
  voters name its new directory id.

A broker's heal waits until the node is back in the ISR of each of its partitions (`rejoin = "isr"`), or, with
`rejoin = "unfenced"`, only until the controller has fenced the old incarnation and unfenced the new one (the
metadata lists it again): the moment its new log is empty and it is eligible for the ISR (KIP-841), when a stale
AlterPartition can put it back there before 3.5.0 (KAFKA-14139).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kafka_chaos.errors import ClusterError
from kafka_chaos.faults.operations import _answer
from kafka_chaos.faults.targets import LiveCluster

_VOTER = re.compile(r'"id":\s*(\d+),\s*"directoryId":\s*"([^"]+)"')


def quorum_kind(cluster: LiveCluster) -> str:
    """'dynamic' when the controllers were formatted with KIP-853's voter set, else 'static'."""
    spec = getattr(cluster, "spec", None)
    return "dynamic" if spec is not None and getattr(spec, "dynamic_quorum", False) else "static"


def replication_rows(text: str) -> list[dict[str, str]]:
    """`kafka-metadata-quorum describe --replication`'s table as rows keyed by its header (NodeId, DirectoryId
    from 3.9, LogEndOffset, Lag, LastFetchTimestamp, LastCaughtUpTimestamp, Status)."""
    lines = [ln.split() for ln in text.splitlines() if ln.strip()]
    head = next((i for i, cells in enumerate(lines) if cells and cells[0] == "NodeId"), None)
    if head is None:
        return []
    header = lines[head]
    return [dict(zip(header, cells, strict=False)) for cells in lines[head + 1:] if len(cells) == len(header)
            and cells[0].isdigit()]


def voters(text: str, role: str = "CurrentVoters") -> list[tuple[int, str]]:
    """(id, directory id) of each voter in `describe --status`'s CurrentVoters line (3.9+); `role` =
    "CurrentObservers": of each observer."""
    line = next((ln for ln in text.splitlines() if ln.startswith(f"{role}:")), "")
    return sorted((int(i), d) for i, d in _VOTER.findall(line))


@dataclass
class DiskReplaceFault:
    cluster: LiveCluster
    topic: str | None = None
    """The workload's topic: a broker's heal waits until the node is back in the ISR of each of its partitions."""
    name: str = "disk-replace"
    timeout_s: float = 90.0
    poll_s: float = 1.0
    rejoin: str = "isr"
    """A broker's heal waits until it is back in the ISR ("isr") or only until it is unfenced ("unfenced")."""
    _old_ids: dict[int, str | None] = field(default_factory=dict)

    def start(self, nodes: list[int]) -> dict[str, Any]:
        wiped: dict[str, Any] = {}
        for n in nodes:
            node = self.cluster.nodes[n]
            node.kill()
            wiped[str(n)] = node.replace_disk()
            self._old_ids[n] = wiped[str(n)]["directory_id"]
        return {"nodes": nodes, "quorum": quorum_kind(self.cluster), "wiped": wiped}

    def heal(self, nodes: list[int]) -> dict[str, Any]:
        return {"nodes": nodes, "quorum": quorum_kind(self.cluster),
                "rejoined": {str(n): self._rejoin(n) for n in nodes}}

    def _tool(self, n: int) -> tuple[Any, list[str]]:
        """A running controller other than `n`, and kafka-metadata-quorum's argv start aimed at the others."""
        # run_tool, alias, controller_port: a node kafka-chaos started (cluster.node.KafkaNode)
        nodes: dict[int, Any] = dict(self.cluster.nodes)
        peers = [p for i, p in sorted(nodes.items()) if i != n and getattr(p, "is_controller", False)]
        if not peers:
            raise ClusterError(f"node {n} is the only controller: no quorum to rejoin")
        bootstrap = ",".join(f"{p.alias}:{p.controller_port}" for p in peers)
        return peers[0], ["kafka-metadata-quorum.sh", "--bootstrap-controller", bootstrap]

    def _rejoin(self, n: int) -> dict[str, Any]:
        node = self.cluster.nodes[n]
        dynamic = quorum_kind(self.cluster) == "dynamic"
        controller = bool(getattr(node, "is_controller", False))
        out: dict[str, Any] = {}
        if controller:
            out["replication_before"], out["majority_caught_up"] = self._majority_caught_up(n)
        out["format"] = node.format_disk(" --no-initial-controllers" if dynamic else "")
        unfenced = self.rejoin == "unfenced" and bool(getattr(node, "is_broker", False))
        if unfenced:
            # the controller refuses a second registration of the id while the old one's session lasts
            # (DuplicateBrokerRegistrationException): until it is fenced, a listed id is the old incarnation
            out["old_fenced"] = self._listed_until(n, listed=False)
        node.start()
        if unfenced:
            out["unfenced"] = self._listed_until(n, listed=True)
        if controller and dynamic:
            out.update(self._re_add(n, out["format"]["directory_id"]))
        elif controller:
            out["replication_after"], out["caught_up"] = self._caught_up(n)
        if getattr(node, "is_broker", False) and self.topic is not None and not unfenced:
            out["isr"] = self._back_in_isr(n, self.topic)
        return out

    def _listed_until(self, n: int, listed: bool) -> dict[str, Any]:
        """Wait until the metadata's brokers (KRaft lists unfenced brokers only) include `n`, or no longer do."""
        cluster: Any = self.cluster  # live_broker_ids: a cluster kafka-chaos starts, or an external one
        start = time.monotonic()
        done = False
        while not done and time.monotonic() - start < self.timeout_s:
            try:
                done = (n in cluster.live_broker_ids()) == listed
            except Exception:  # no broker answered the metadata request for a moment: ask again
                done = False
            if not done:
                time.sleep(self.poll_s)
        return {"reached": done, "waited_s": round(time.monotonic() - start, 2)}

    def _back_in_isr(self, n: int, topic: str) -> dict[str, Any]:
        """Wait until `n` is in the ISR of every partition of `topic` it replicates (its leaders add it once its
        log end reached the high watermark), then read how far its new log reaches: from which offset it fetched
        and up to where."""
        start = time.monotonic()
        regained = False
        while not regained and time.monotonic() - start < self.timeout_s:
            try:
                states = self.cluster.partition_states(topic)
            except Exception:  # metadata unreadable for a moment (a leader moving): ask again
                states = []
            mine = [s for s in states if n in s.replicas]
            regained = bool(mine) and all(n in s.isr for s in mine)
            if not regained:
                time.sleep(self.poll_s)
        return {"regained": regained, "waited_s": round(time.monotonic() - start, 2),
                "logs": self.cluster.nodes[n].log_offsets(topic)}

    def _majority_caught_up(self, n: int) -> tuple[list[dict[str, str]], bool]:
        """The operations guide's condition before a controller's new disk is formatted: a majority of the voters
        have no lag (the leader, and followers it has heard from since its election). The table when it held, or
        the last one at the timeout."""
        def majority(rows: list[dict[str, str]]) -> bool:
            voters_ = [r for r in rows if r.get("Status") in ("Leader", "Follower")]
            fresh = [r for r in voters_ if r.get("NodeId") != str(n) and r.get("Lag") == "0"
                     and (r.get("Status") == "Leader" or r.get("LastFetchTimestamp") != "-1")]
            return bool(voters_) and len(fresh) > len(voters_) // 2

        return self._replication_until(n, majority)

    def _caught_up(self, n: int) -> tuple[list[dict[str, str]], bool]:
        """The quorum's replication table once `n` shows as a voter with no lag (or at the timeout)."""
        def caught_up(rows: list[dict[str, str]]) -> bool:
            mine = [r for r in rows if r.get("NodeId") == str(n)]
            return bool(mine) and mine[0].get("Lag") == "0" and mine[0].get("Status") in ("Follower", "Leader")

        return self._replication_until(n, caught_up)

    def _replication_until(self, n: int, holds: Callable[[list[dict[str, str]]], bool]
                           ) -> tuple[list[dict[str, str]], bool]:
        """Ask the other controllers for `describe --replication` until its table `holds`: the table and True, or
        the last table and False at the timeout (recorded, not raised: the heal goes on and the history says)."""
        peer, tool = self._tool(n)
        deadline, rows = time.monotonic() + self.timeout_s, []
        while time.monotonic() < deadline:
            code, text = peer.run_tool(*tool, "describe", "--replication")
            rows = replication_rows(text) if code == 0 else []
            if holds(rows):
                return rows, True
            time.sleep(self.poll_s)
        return rows, False

    def _re_add(self, n: int, new_id: str | None) -> dict[str, Any]:
        """KIP-853 on a new disk: the old (id, directory id) out of the voters, the node with its new one in."""
        node: Any = self.cluster.nodes[n]
        peer, tool = self._tool(n)
        old_id = self._old_ids.get(n)
        steps: list[dict[str, Any]] = []
        deadline = time.monotonic() + self.timeout_s
        observer = False  # what Kafka makes of the node on its new disk, before anyone acts (QuorumState.isVoter)
        while not observer and time.monotonic() < deadline:
            code, text = peer.run_tool(*tool, "describe", "--status")
            observer = code == 0 and (n, new_id) in voters(text, "CurrentObservers")
            if not observer:
                time.sleep(self.poll_s)
        if old_id is not None:
            argv = [*tool, "remove-controller", "--controller-id", str(n), "--controller-directory-id", old_id]
            code, text = peer.run_tool(*argv)
            steps.append({"command": " ".join(argv[3:]), "code": code, "output": _answer(text)[-400:]})
        argv = [*tool, "--command-config", node.config_path, "add-controller"]
        added, attempts, said = False, 0, ""
        while not added and time.monotonic() < deadline:
            # AddRaftVoter is refused until the new voter's log has caught up with the leader's (KIP-853)
            code, text = node.run_tool(*argv)
            added, attempts, said = code == 0, attempts + 1, _answer(text)[-400:]
            if not added:
                time.sleep(self.poll_s)
        steps.append({"command": " ".join(argv[3:]), "code": 0 if added else 1, "attempts": attempts,
                      "output": said})
        now: list[tuple[int, str]] = []
        while time.monotonic() < deadline:
            code, text = peer.run_tool(*tool, "describe", "--status")
            now = voters(text) if code == 0 else now
            if (n, new_id) in now:
                break
            time.sleep(self.poll_s)
        return {"observer_first": observer, "steps": steps, "voters_after": [list(v) for v in now],
                "re_added": (n, new_id) in now, "old_directory_id": old_id}
