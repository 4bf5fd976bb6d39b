"""When must writes be available again? Kafka's liveness bounds for each fault kind, from the cluster's settings.

The safety model (`reference_model.model`) says what may be lost; this module says how long a window with no
successful send may last before it is more than Kafka's own timeouts explain. Every bound is a sum of the
timeouts on Kafka's recovery path, read from the run's configuration (`RunConfig.timeouts`), plus a slack
for the host (`Timeouts.slack_s`: containers on a small machine are slower than the protocol):

- **Detection.** A broker that stops heartbeating is fenced by the active controller once
  `broker.session.timeout.ms` has passed since its last heartbeat (KIP-631; `BrokerHeartbeatManager`
  `.findOneStaleBroker` in `metadata/src/main/java/org/apache/kafka/controller/BrokerHeartbeatManager.java`),
  and fencing removes it from every ISR and moves its leaderships to another ISR member
  (`ReplicationControlManager.handleBrokerFenced`; KIP-841: fenced replicas leave the ISR). A follower that
  stops fetching leaves the ISR after `replica.lag.time.max.ms` (`Partition.maybeShrinkIsr` →
  AlterPartition, KIP-497). With acks=all a leader answers only once the ISR has the record, so either path
  ends a write stall caused by a dead follower.
- **Controller failover.** When the fault hits the quorum leader, a follower notices after
  `controller.quorum.fetch.timeout.ms`, elects after `controller.quorum.election.timeout.ms` plus a random
  back-off up to `controller.quorum.election.backoff.max.ms` (KIP-595, `KafkaRaftClient`; KIP-996's
  Prospective state adds a pre-vote round of the same timeouts). The new controller activates once it has
  replayed the log, and only the active controller tracks heartbeats: "Standby controllers will create a
  heartbeat manager as part of the process of activating … after a controller failover, we may take some
  extra time to fence brokers, since the new active controller does not know when the last heartbeats were
  received" (`BrokerHeartbeatManager`'s class comment) — so a dead broker is fenced a full session timeout
  after the failover.
- **Clients.** A request already sent to a dead, frozen or isolated leader waits `request.timeout.ms`; the
  producer then refreshes metadata (librdkafka: `retry.backoff.max.ms`, and the harness's
  `topic.metadata.refresh.interval.ms`) and retries. An isolated leader still answers clients with its own
  stale metadata (it cannot hear the controller), so a client can follow the zombie one more round before a
  NOT_LEADER_OR_FOLLOWER response, or metadata from another broker, points it to the new leader (KIP-951 puts
  the new leader in that response).

**The zombie leader.** An isolated partition leader stays reachable by clients (a partition cuts it off
from its peers, not from them) and still believes it leads. With acks=all it cannot acknowledge anything:
it may try to shrink the ISR, but until the controller accepts the AlterPartition the shrink is pending, and
`PendingShrinkIsr.maximalIsr()` is the last *committed* ISR — the set "used for advancing the high watermark
as well as determining which replicas are required for acks=all produce requests" (`PartitionState`
javadoc). So its acks=all requests wait out `request.timeout.ms`: a window, not a loss. With acks=1 it acks
writes that the new leader's epoch later truncates (the safety model's business, not this one).

Where writes **need not** be available until a heal (the window is then expected, not a finding):
acks=all with fewer live replicas than `min.insync.replicas` (NOT_ENOUGH_REPLICAS, `Partition
.appendRecordsToLeader`); no live ISR member (the partition stays leaderless without unclean election,
`PartitionChangeBuilder`); no controller quorum (no leader can be moved, no ISR changed: KIP-595 needs a
majority of voters); and client-link faults and broker names clients cannot resolve (dns-fail) (the broker
keeps its leaderships: the cluster cannot see a fault between a client and a broker). After such a heal,
writes must come back within the restart and failover path: a restarted node's JVM start
(`Timeouts.startup_s`), an election, a session and the client's
reconnect back-off (librdkafka `reconnect.backoff.max.ms`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kafka_chaos.faults.registry import kinds_of, taking_down, with_effect
from kafka_chaos.reference_model.config import RunConfig, Timeouts

ExpectedReason = Literal["no-controller-quorum", "below-min-insync", "no-live-isr-member", "client-link-fault",
                         "node-link-fault"]
PROCESS_DOWN = taking_down()
STOPS = with_effect("stop")
RESTARTS = kinds_of("process", restarts=True)  # pause is resumed: the same JVM, nothing to recover
PARTITIONS = kinds_of("network")
# a broker's name clients cannot resolve (dns-fail) cuts them off from it as a blocked client link does, and the
# cluster cannot see it either (reference_model.dns_faults)
LINK_BLOCKING = kinds_of("client-link", blocks=True) | kinds_of("client-name")
LINK_SLOWING = kinds_of("client-link", blocks=False)
# Links between nodes (faults.node_links): cutting ones stop the connections, slowing ones only delay them.
NODE_LINK_CUTTING = kinds_of("node-link", blocks=True)
NODE_LINK_SLOWING = kinds_of("node-link", blocks=False)


def node_link_blocked(kind: str, nodes: Collection[int], value: Any = None) -> set[int]:
    """Brokers whose partitions need not take writes while a link fault is on: the leader whose replication
    links are cut (its followers cannot fetch, its ISR shrinks to itself: below min.insync, and the controller,
    which still hears it, has no reason to move its leaderships), or either end of cut `[from, to]` links. A
    cut between a broker and the controllers is not here: the controller fences it and moves its leaderships,
    as for an isolated node (`impaired_by`); a cut quorum leaves every leader serving (no ISR change needed)."""
    if kind not in NODE_LINK_CUTTING:
        return set()
    selector = value.get("selector") if isinstance(value, Mapping) else None
    return set() if selector in ("controller", "quorum") else set(nodes)


@dataclass(frozen=True)
class TimedFault:
    """A fault as the model needs it: its kind, the nodes it cut off, and when (seconds since run start)."""

    kind: str
    nodes: tuple[int, ...]
    start_s: float
    end_s: float | None
    """None: not healed within the run."""
    selector: str | None = None
    """Link faults between nodes: replication, controller, quorum or pairs (faults.node_links)."""


@dataclass(frozen=True)
class AvailabilityPrediction:
    """By when writes must be available again, for one fault: `deadline_s` (None: not within the run)."""

    fault: TimedFault
    after: Literal["start", "heal"]
    within_s: float
    deadline_s: float | None
    expected: tuple[ExpectedReason, ...]
    note: str


def impaired_by(kind: str, nodes: Collection[int], value: Any = None, everyone: Collection[int] = ()) -> set[int]:
    """Nodes the rest of the cluster cannot use while a fault is on. A partition impairs the nodes cut off from
    a majority of the others (the grudge of `faults.partitions`); a client-link fault impairs nobody inside the
    cluster."""
    if kind in PROCESS_DOWN:
        return set(nodes)
    if kind in NODE_LINK_CUTTING:
        selector = value.get("selector") if isinstance(value, Mapping) else None
        return set(nodes) if selector == "controller" else set()  # cut from the controller: fenced, like isolated
    if kind in PARTITIONS:
        grudge = value.get("grudge") if isinstance(value, Mapping) else None
        if isinstance(grudge, Mapping) and everyone:
            majority = len(everyone) // 2 + 1
            return {int(n) for n, dropped in grudge.items()
                    if int(n) in everyone and len(set(everyone) - {int(d) for d in dropped}) < majority}
        return set(nodes)
    return set()


def expected_unavailability(
    impaired: Collection[int], topo: RunConfig, replicas: Collection[int], link_nodes: Collection[int] = (),
    leader: int | None = None, node_link_nodes: Collection[int] = (),
) -> tuple[ExpectedReason, ...]:
    """Why writes to a partition with these replicas need not be available while `impaired` nodes are cut off
    (see the module docstring). `link_nodes`: brokers whose client link is faulty; `leader`: the partition's
    leader when known (a link fault elsewhere does not block it)."""
    down = set(impaired)
    reasons: list[ExpectedReason] = []
    if quorum_lost(down, topo.controllers):
        reasons.append("no-controller-quorum")
    live = [r for r in replicas if r not in down]
    if not live:
        reasons.append("no-live-isr-member")
    elif topo.acks == "all" and len(live) < topo.min_insync:
        reasons.append("below-min-insync")
    if link_nodes and (leader is None or leader in set(link_nodes)):
        reasons.append("client-link-fault")
    if node_link_nodes and (leader is None or leader in set(node_link_nodes)):
        reasons.append("node-link-fault")
    return tuple(reasons)


def quorum_lost(down: Collection[int], controllers: Collection[int]) -> bool:
    """Whether fewer than a majority of the voters are left."""
    alive = len(set(controllers) - set(down))
    return alive < len(controllers) // 2 + 1


def predict(fault: TimedFault, t: Timeouts, *, hit_leader: bool | None = None, hit_quorum_leader: bool | None = None,
            expected: tuple[ExpectedReason, ...] = ()) -> AvailabilityPrediction:
    """The deadline for writes after one fault. `hit_leader` / `hit_quorum_leader`: whether the fault cut off
    the partition's leader / the quorum leader (None: unknown, assumed so, the longer path). `expected`: the
    reasons writes need not be available while it lasts (`expected_unavailability`): the deadline then runs
    from the heal."""
    kind = fault.kind
    leader = hit_leader is not False
    controller = hit_quorum_leader is not False
    failover = t.failover_s + t.session_s if controller else 0.0
    if expected or kind in LINK_BLOCKING:
        startup = t.startup_s if kind in RESTARTS else 0.0
        reconnect = t.reconnect_backoff_s if kind in LINK_BLOCKING else 0.0
        within = startup + t.failover_s + t.session_s + reconnect + t.client_s + t.slack_s
        deadline = None if fault.end_s is None else fault.end_s + within
        why = ", ".join(expected) or "client link cut: Kafka keeps the broker's leaderships"
        return AvailabilityPrediction(fault, "heal", within, deadline, expected or ("client-link-fault",),
                          f"writes need not be available until the heal ({why}); then within {within:.1f}s")
    if kind in STOPS:
        # controlled shutdown moves leaderships first (KIP-631 BrokerHeartbeatRequest wantShutDown); the
        # quorum leader resigns with EndQuorumEpoch (KIP-595), no fetch timeout
        detect = t.heartbeat_s + (t.election_timeout_s + t.election_backoff_s if controller else 0.0)
        within = detect + t.client_s + t.slack_s
        note = "controlled shutdown: leaderships move before the broker stops"
    elif kind in LINK_SLOWING:
        within = t.client_s + t.slack_s
        note = "latency below request.timeout.ms slows sends; it does not stop them"
    elif kind in NODE_LINK_SLOWING:
        # a follower that cannot keep up leaves the ISR after replica.lag.time.max.ms; until then acks=all waits
        within = t.replica_lag_s + t.client_s + t.slack_s
        note = "a slowed link between nodes: a follower that falls behind leaves the ISR after replica.lag.time.max.ms"
    elif kind in NODE_LINK_CUTTING and fault.selector == "controller":
        within = t.session_s + (t.failover_s if controller else 0.0) + t.client_s + t.request_timeout_s + t.slack_s
        note = ("cut from the controller: fenced after broker.session.timeout.ms; clients may follow its stale "
                "metadata one more request")
    elif kind in NODE_LINK_CUTTING and fault.selector == "quorum":
        # Leaders keep serving while the voters cannot reach each other. But the active controller goes on
        # fencing the brokers whose heartbeats stop reaching it (broker.session.timeout.ms) into its log before
        # it resigns (no fetch from a majority: KAFKA-15489); re-elected after the heal, it commits them, and the
        # fenced brokers lose their leaderships until they unfence (measured: ISR down to one member for 0.3 s).
        within = t.failover_s + t.heartbeat_s + t.client_s + t.slack_s
        deadline = None if fault.end_s is None else fault.end_s + within
        return AvailabilityPrediction(fault, "heal", within, deadline, (),
                          "a quorum cut keeps leaders serving; after the heal the controller may commit fencing it "
                          f"decided during the cut, until the brokers unfence: within {within:.1f}s of the heal")
    elif kind in NODE_LINK_CUTTING:
        # a follower that cannot fetch holds acks=all writes until the leader drops it from the ISR:
        # replica.lag.time.max.ms, checked every half of it (Partition.maybeShrinkIsr)
        within = 1.5 * t.replica_lag_s + t.client_s + t.slack_s
        note = "a follower cut from its leader: acks=all waits until it leaves the ISR (1.5 × replica.lag.time.max.ms)"
    elif kind in PROCESS_DOWN or kind in PARTITIONS:
        detect = t.session_s if leader else min(t.session_s, t.replica_lag_s)
        if hit_leader is None:
            detect = max(t.session_s, min(t.session_s, t.replica_lag_s))
        zombie = t.request_timeout_s if kind in PARTITIONS and leader else 0.0
        within = max(detect, failover) + t.client_s + zombie + t.slack_s
        note = (f"{'leader' if leader else 'follower'} cut off: fenced after broker.session.timeout.ms"
                + (", after a controller failover" if controller else "")
                + ("; clients may follow the isolated leader's stale metadata one more request" if zombie else ""))
    else:
        within = t.client_s + t.slack_s
        note = f"{kind}: only the client's own retry path"
    return AvailabilityPrediction(fault, "start", within, fault.start_s + within, (), note)


def baseline_s(t: Timeouts) -> float:
    """A window with no fault near it: nothing in Kafka needs to recover, only a client retry."""
    return t.client_s + t.slack_s
