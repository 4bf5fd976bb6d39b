"""Model-based tests of the ISR model: random event sequences, invariants checked after every step.

The machine keeps every broker in exactly one bundle — `live`, `dead` or `paused` — so faults are drawn from
brokers they apply to (`consumes()` moves a broker between bundles). Protocol steps (fetch, fence, unfence,
metadata sync, ISR shrink) are drawn from the steps the model says are enabled, so no rule needs `assume`.
Every model event is `note()`d with its `repr()`, which is valid Python: a failure prints a replayable trace.
"""

from __future__ import annotations

from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    consumes,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from kafka_chaos.reference_model.explore import settle
from kafka_chaos.reference_model.model import (
    Cluster,
    Fetch,
    Heal,
    Isolate,
    Kill,
    Pause,
    Produce,
    Restart,
    Resume,
    Stop,
    Timeout,
    TopicConfig,
)

REPLICAS = (1, 2, 3)


class IsrMachine(RuleBasedStateMachine):
    live = Bundle("live")
    dead = Bundle("dead")
    paused = Bundle("paused")
    values = Bundle("values")

    def __init__(self) -> None:
        super().__init__()
        self.c = Cluster(TopicConfig())
        self.next_value = 1
        self.max_epoch = 0
        self.committed_hw = 0
        self.committed_seen: dict[int, int] = {}  # offset -> the value first committed there

    def apply(self, ev):
        note(f"c.apply({ev!r})")
        self.c.apply(ev)

    @initialize(
        target=live,
        min_insync=st.integers(1, 3),
        unclean=st.booleans(),
        elr=st.booleans(),
        eager=st.booleans(),
    )
    def start(self, min_insync: int, unclean: bool, elr: bool, eager: bool):
        cfg = TopicConfig(replicas=REPLICAS, min_insync=min_insync, unclean=unclean, elr=elr)
        note(f"c = Cluster({cfg!r}, eager={eager})")
        self.c = Cluster(cfg, eager=eager)
        return multiple(*REPLICAS)

    # ------------------------------------------------------------------------------------------ client

    def _believers(self) -> list[int]:
        return [b for b in REPLICAS if self.c.brokers[b].believes_leader()]

    @precondition(lambda self: bool(self._believers()))
    @rule(target=values, acks=st.sampled_from(["0", "1", "all"]), data=st.data(), idem=st.booleans())
    def produce(self, acks: str, data: st.DataObject, idem: bool):
        leader = data.draw(st.sampled_from(self._believers()), label="to")
        value = self.next_value
        self.next_value += 1
        self.apply(Produce(value, acks, leader, idempotent=idem))  # type: ignore[arg-type]
        return value

    @precondition(lambda self: bool(self.c.pending))
    @rule(value=values)
    def time_out(self, value: int):
        if value in self.c.pending:
            self.apply(Timeout(value))

    def _retryable(self) -> list[int]:
        return sorted(v for v in self.c.acked() if v not in self.c.pending)

    @precondition(lambda self: bool(self._retryable()) and bool(self._believers()))
    @rule(data=st.data(), idem=st.booleans())
    def retry(self, data: st.DataObject, idem: bool):
        """A client resends an earlier value (a producer retry), idempotently or not."""
        value = data.draw(st.sampled_from(self._retryable()), label="value")
        self.apply(Produce(value, "1", self._believers()[0], idempotent=idem))

    # ---------------------------------------------------------------------------------------- protocol

    @precondition(lambda self: next(self.c.enabled_protocol_events(), None) is not None)
    @rule(data=st.data())
    def protocol_step(self, data: st.DataObject):
        ev = data.draw(st.sampled_from(list(self.c.enabled_protocol_events())), label="event")
        self.apply(ev)
        if isinstance(ev, Fetch):
            fb = self.c.brokers[ev.follower]
            assert fb.view is not None and fb.view.leader is not None
            leader_log = self.c.brokers[fb.view.leader].log
            assert fb.log == leader_log[: fb.leo], "after a fetch the follower's log is a prefix of the leader's"

    # ------------------------------------------------------------------------------------------ faults

    @rule(target=dead, b=consumes(live))
    def kill(self, b: int):
        self.apply(Kill(b))
        return b

    @rule(target=dead, b=consumes(live))
    def stop(self, b: int):
        self.apply(Stop(b))
        return b

    @rule(target=live, b=consumes(dead))
    def restart(self, b: int):
        self.apply(Restart(b))
        return b

    @rule(target=paused, b=consumes(live))
    def pause(self, b: int):
        self.apply(Pause(b))
        return b

    @rule(target=live, b=consumes(paused))
    def resume(self, b: int):
        self.apply(Resume(b))
        return b

    @rule(b=live)
    def isolate(self, b: int):
        if self.c.enabled(Isolate(b)):
            self.apply(Isolate(b))

    @precondition(lambda self: bool(self.c.cuts))
    @rule()
    def heal(self):
        self.apply(Heal())

    # -------------------------------------------------------------------------------------- invariants

    @invariant()
    def protocol_invariants(self):
        """Leader ∈ ISR, ISR/ELR ⊆ replicas, HW <= LEO, epochs increase, log matching, committed data and
        acks=all acknowledgements survive unless an unclean election happened."""
        self.c.check_invariants()

    @invariant()
    def committed_data_survives_with_unclean_off(self):
        """Independent of the model's own bookkeeping: whatever was once committed (below some leader's HW)
        stays at its offset in the controller leader's log while unclean election is off."""
        for offset, value in self.c.committed.items():
            self.committed_seen.setdefault(offset, value)
        if self.c.config.unclean:
            return
        assert not self.c.unclean_elected
        leader = self.c.leader_broker()
        if leader is None:
            return
        for offset, value in self.committed_seen.items():
            assert offset < leader.leo and leader.log[offset][0] == value, (
                f"committed {value}@{offset} missing from leader {leader.id}: {leader.log}"
            )

    @invariant()
    def new_leaders_come_from_isr_elr_or_last_leader(self):
        """With unclean election off, every elected leader was eligible just before: in the ISR, the ELR,
        or the last known leader (checked on the controller's own history of elections)."""
        if self.c.config.unclean:
            return
        for _epoch, leader, kind in self.c.elections:
            assert kind in ("isr", "elr", "last-known-leader", "none", "kept"), (leader, kind)

    @invariant()
    def epochs_and_committed_prefix_never_go_back(self):
        assert self.c.reg.epoch >= self.max_epoch
        self.max_epoch = self.c.reg.epoch
        if not self.c.unclean_elected:
            assert len(self.c.committed) >= self.committed_hw, "the committed prefix (max HW) never shrinks"
            self.committed_hw = len(self.c.committed)

    @invariant()
    def acked_all_writes_survive_healing(self):
        """Heal everything and let the cluster settle: an acks=all write is still there unless an unclean
        election happened (a committed message survives while an in-sync replica that had it survives, and
        the harness's faults never destroy a log)."""
        final = self.c.clone()
        for b in REPLICAS:
            for ev in (Restart(b), Resume(b)):
                if final.enabled(ev):
                    final.apply(ev)
        if final.enabled(Heal()):
            final.apply(Heal())
        settle(final)
        final.check_invariants()
        if final.config.unclean or final.reg.leader is None:
            return
        acked_all = {v for v, o in final.acked().items() if o.acks == "all"}
        assert not acked_all & set(final.lost_acked()), f"acks=all writes lost: {final.lost_acked()}"
        leader = final.leader_broker()
        assert leader is not None and leader.hw == leader.leo, "a settled, healed cluster has replicated all"
        for b in REPLICAS:
            assert final.brokers[b].log == leader.log, "a settled, healed cluster has identical logs"


IsrMachine.TestCase.settings = settings(
    max_examples=150,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestIsrModel = IsrMachine.TestCase
