"""checker.conformance: each named anomaly on small inputs, and the stale-sample cases that must not alarm."""

from __future__ import annotations

import pyarrow as pa

from kafka_chaos.checker.conformance import CONFORMANCE_NAMES, conformance
from kafka_chaos.checker.schema import POLLS_SCHEMA, SENDS_SCHEMA
from kafka_chaos.reference_model.config import RunConfig

S = 1_000_000_000  # one second in ns
KEY = "chaos/0"
ALL2 = RunConfig(acks="all", rf=3, min_insync=2)


def sample(t: float, isr=(1, 2, 3), leader: int | None = 1, epoch: int | None = 1, elr=(), hw=None, **extra):
    return {"time": int(t * S), "key": KEY, "leader": leader, "leader_epoch": epoch, "replicas": [1, 2, 3],
            "isr": None if isr is None else list(isr), "elr": list(elr), "last_known_elr": [], "hw": hw,
            "controller": 4, **extra}


def sends(*rows: tuple[int, float, float]) -> pa.Table:
    """(value, invoke s, complete s) ok sends of KEY at offset = value."""
    return pa.Table.from_pylist(
        [{"value": v, "key": KEY, "offset": v, "process": 0, "op_index": i, "type": "ok",
          "invoke_time": int(a * S), "complete_time": int(b * S)} for i, (v, a, b) in enumerate(rows)],
        schema=SENDS_SCHEMA,
    )


def polls(*rows: tuple[int, int, float]) -> pa.Table:
    """(value, offset, time s) records read by ok polls of KEY, one poll op each."""
    return pa.Table.from_pylist(
        [{"value": v, "key": KEY, "offset": o, "process": 9, "op_index": 100 + i, "type": "ok",
          "time": int(t * S)} for i, (v, o, t) in enumerate(rows)],
        schema=POLLS_SCHEMA,
    )


NO_SENDS, NO_POLLS = sends(), polls()


def check(samples, s=NO_SENDS, p=NO_POLLS, config=ALL2):
    out = conformance(samples, s, p, config)
    assert tuple(out) == CONFORMANCE_NAMES
    for instances in out.values():
        for inst in instances:
            assert inst["key"] == KEY and isinstance(inst["samples"], list)
    return out


def test_healthy_run_conforms():
    samples = [sample(t, hw=int(t)) for t in range(10)]
    out = check(samples, sends((1, 1, 1.1), (2, 2, 2.1)), polls((1, 1, 3), (2, 2, 4)))
    assert all(v == [] for v in out.values())


def test_leader_outside_isr_and_elr():
    samples = [sample(0), sample(1, isr=(1, 2), leader=3, epoch=2), sample(1.25, isr=(1, 2), leader=3, epoch=2),
               sample(2, isr=(2,), leader=3, epoch=2, elr=(3,))]
    (inst,) = check(samples)["leader-outside-isr-elr"]
    assert inst["leader"] == 3 and inst["leader_epoch"] == 2 and len(inst["samples"]) == 2
    assert check(samples, config=RunConfig(rf=3, unclean=True))["leader-outside-isr-elr"] == []
    # no leader, or no ISR read: nothing to say
    assert check([sample(0, leader=None), sample(1, leader=-1), sample(2, isr=None)])["leader-outside-isr-elr"] == []


def test_leader_epoch_regression():
    samples = [sample(0, epoch=1), sample(1, epoch=2, leader=2), sample(5, epoch=1, leader=3)]
    (inst,) = check(samples)["leader-epoch-regression"]
    assert (inst["leader_epoch"], inst["max_epoch"], inst["leader"]) == (1, 2, 3)


def test_stale_metadata_is_not_an_epoch_regression():
    # a lagging broker repeats a state already seen...
    seen_before = [sample(0, epoch=1), sample(1, epoch=2, leader=2), sample(5, epoch=1, leader=1)]
    assert check(seen_before)["leader-epoch-regression"] == []
    # ...or answers just after an election, within the staleness allowance
    just_after = [sample(0, epoch=1), sample(1, epoch=2, leader=2), sample(1.5, epoch=1, leader=3)]
    assert check(just_after)["leader-epoch-regression"] == []


def test_ack_below_min_isr():
    samples = [sample(t / 4, isr=(1,)) for t in range(0, 40)]
    out = check(samples, sends((1, 4, 4.6), (2, 4.5, 5.0)))
    (inst,) = out["ack-below-min-isr"]  # both sends share their evidence: one instance
    assert inst["values"] == [1, 2] and inst["isr_sizes"] == [1] and inst["min_insync"] == 2
    assert inst["ops"] == [0, 1] and inst["samples"]


def test_ack_below_min_isr_needs_evidence_around_the_whole_window():
    below_then_grown = [sample(t / 4, isr=(1,)) for t in range(0, 20)] + [sample(5.5, isr=(1, 2))]
    # a sample within the staleness allowance after completion shows the ISR had grown: a lagging view
    assert check(below_then_grown, sends((1, 4, 4.6)))["ack-below-min-isr"] == []
    # no sample inside the window at all
    sparse = [sample(0, isr=(1,)), sample(10, isr=(1,))]
    assert check(sparse, sends((1, 4, 4.6)))["ack-below-min-isr"] == []


def test_ack_below_min_isr_ignores_visibly_stale_samples():
    samples = [sample(0, isr=(1, 2), epoch=3)] + [sample(t / 4, isr=(1,), epoch=2) for t in range(1, 40)]
    assert check(samples, sends((1, 4, 4.6)))["ack-below-min-isr"] == []


def test_ack_below_min_isr_only_for_known_acks_all():
    samples = [sample(t / 4, isr=(1,)) for t in range(0, 40)]
    s = sends((1, 4, 4.6))
    assert check(samples, s, config=RunConfig(acks="1", rf=3, min_insync=2))["ack-below-min-isr"] == []
    assert check(samples, s, config=None)["ack-below-min-isr"] == []
    scenario = {"topic": {"replication_factor": 3, "min_insync_replicas": 2}, "workload": {"acks": "all"}}
    assert len(check(samples, s, config=scenario)["ack-below-min-isr"]) == 1


def test_vanished_read_overwritten():
    samples = [sample(0), sample(2, leader=2, epoch=2), sample(3, leader=3, epoch=3)]
    (inst,) = check(samples, p=polls((5, 0, 1), (6, 1, 1), (9, 0, 4)))["vanished-read"]
    assert inst["evidence"] == "overwritten" and inst["value"] == 5 and inst["offset"] == 0
    assert inst["later_value"] == 9 and inst["ops"] == [100, 102]
    assert [s["leader_epoch"] for s in inst["samples"]] == [2, 3]


def test_vanished_read_beyond_the_final_high_watermark():
    final = [sample(10, hw=2, epoch=4), sample(10.25, hw=2, epoch=4)]
    (inst,) = check([sample(0, hw=5), *final], p=polls((7, 3, 1), (8, 4, 1), (6, 1, 1)))["vanished-read"]
    assert inst["evidence"] == "beyond-final-hw" and inst["values"] == [7, 8] and inst["final_hw"] == 2
    # one final sample, or two from different epochs (a new leader's HW may lag): not enough
    assert check([sample(0, hw=5), final[0]], p=polls((7, 3, 1)))["vanished-read"] == []
    changing = [sample(10, hw=2, epoch=4), sample(10.25, hw=2, epoch=5)]
    assert check([sample(0, hw=5), *changing], p=polls((7, 3, 1)))["vanished-read"] == []
    # a final state taken right after the read does not count either
    assert check([sample(1.1, hw=2), sample(1.2, hw=2)], p=polls((7, 3, 1)))["vanished-read"] == []


def test_vanished_read_below_the_log_start():
    later = sample(9, log_start_offset=10)
    (inst,) = check([sample(0), later], p=polls((4, 3, 1)))["vanished-read"]
    assert inst["evidence"] == "below-log-start" and inst["values"] == [4]
