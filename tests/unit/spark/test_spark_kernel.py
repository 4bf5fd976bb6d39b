"""The numpy kernel agrees with checker.analyse on hand-written histories — no JVM needed."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from spark_corpus import CORPUS
from spark_helpers import checker_result, core, kernel_rows

from kafka_chaos.checker import analyse
from kafka_chaos.spark import kernel
from kafka_chaos.spark.job import _assemble


def kernel_result(sends: pa.Table, polls: pa.Table) -> dict:
    rows = kernel.analyse_table(kernel.input_rows(sends, polls), cap=10**6, max_values=10**6)
    return _assemble(rows.to_pylist(), 10**6)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_kernel_agrees_with_checker(name: str) -> None:
    sends, polls = CORPUS[name]().tables()
    assert core(kernel_result(sends, polls)) == core(analyse(sends, polls).to_dict())


def test_kernel_instances_carry_jepsen_fields() -> None:
    sends, polls = CORPUS["duplicate_stretches_bound"]().tables()
    result = kernel_result(sends, polls)
    assert result["anomalies"]["lost-write"] == [
        {"key": "chaos/0", "value": 2, "offset": 1, "index": 1, "max_read_index": 2, "ops": [2]}
    ]
    assert result["anomalies"]["duplicate"][0]["offsets"] == [2, 4]
    assert result["keys"]["chaos/0"]["poll_records"] == 3


def test_caps_keep_exact_counts() -> None:
    h = CORPUS["mixed"]()
    sends, polls = h.tables()
    rows = kernel.analyse_table(kernel.input_rows(sends, polls), cap=1, max_values=1)
    result = _assemble(rows.to_pylist(), 1)
    full = analyse(sends, polls).to_dict()
    assert result["anomaly_counts"]["lost-write"] == full["anomaly_counts"]["lost-write"] == 5
    assert len(result["anomalies"]["lost-write"]) == 1
    unseen = result["anomalies"]["unseen"][0]
    assert len(unseen["values"]) == 1 and unseen["count"] == full["anomalies"]["unseen"][0]["count"]


def test_uncertain_info_ops_are_reported_when_split_by_key() -> None:
    """In a partition holding only chaos/0, the info op's read of chaos/1 is invisible: the kernel says so
    and, told the op committed, finds the lost write."""
    sends, polls = CORPUS["info_committed_elsewhere"]().tables()
    rows = kernel.input_rows(sends, polls)
    only_k = rows.filter(pa.compute.equal(rows.column("key"), "chaos/0"))
    found = kernel.analyse_table(only_k).to_pylist()
    uncertain = [r for r in found if r["kind"] == kernel.KIND_UNCERTAIN]
    assert [(r["key"], r["ops"]) for r in uncertain] == [("chaos/0", [0])]
    assert not [r for r in found if r["kind"] == "lost-write"]
    settled = kernel.analyse_table(only_k, committed_info_ops=pa.array([0]).to_numpy()).to_pylist()
    assert [r["value"] for r in settled if r["kind"] == "lost-write"] == [5]


def test_pandas_engine_merges_runs_with_prefixed_keys(tmp_path) -> None:
    from spark_helpers import write_run

    from kafka_chaos.spark.job import reconcile_runs

    runs = []
    expected: dict[str, int] = {}
    for name in ("lost_write", "aborted_read"):
        sends, polls = CORPUS[name]().tables()
        runs.append(str(write_run(tmp_path / name, sends, polls)))
        for kind, n in analyse(sends, polls).anomaly_counts.items():
            expected[kind] = expected.get(kind, 0) + n
    result = reconcile_runs(runs, engine="pandas", out=tmp_path / "out").to_json_dict()
    assert result["anomaly_counts"] == expected
    assert {i["key"] for i in result["anomalies"]["G1a"]} == {"aborted_read/chaos/0"}
    assert (tmp_path / "out" / "reconcile.json").exists()


def test_partition_analysed_in_key_groups_gives_the_same_answer() -> None:
    """A partition larger than chunk_rows is analysed whole keys at a time: same findings."""
    from spark_corpus import K1, K
    from spark_helpers import History

    h = History()
    for i in range(40):
        key = (K, K1, "chaos/2", "chaos/3")[i % 4]
        h.send(0, [(key, i, i // 4)])
    h.send(0, [(K, 99, None)], type_="fail")
    h.poll(1, {K: [(0, 0), (2, 8), (5, 99)], K1: [(0, 1), (3, 13), (3, 14)], "chaos/2": [(9, 38)]})
    sends, polls = h.tables()
    rows = kernel.input_rows(sends, polls)
    whole = list(kernel.analyse_batches(rows.to_batches(), cap=10**6, max_values=10**6))
    grouped = list(kernel.analyse_batches(rows.to_batches(max_chunksize=7), cap=10**6, max_values=10**6,
                                          chunk_rows=12))
    assert len(grouped) > 1
    as_rows = [r for b in grouped for r in b.to_pylist()]
    assert _assemble(as_rows, 10**6) == _assemble([r for b in whole for r in b.to_pylist()], 10**6)
    assert core(_assemble(as_rows, 10**6)) == core(analyse(sends, polls).to_dict())


def test_precommitted_read_is_one_per_op_across_partitions() -> None:
    """A txn that read its own sends to two keys: each key's partition sees its half and emits a candidate;
    the job keeps the one of the key the op sent to first (chaos/1), as the checker does."""
    sends, polls = CORPUS["txn_own_read"]().tables()
    rows = kernel.input_rows(sends, polls)
    found = []
    for key in ("chaos/0", "chaos/1"):
        part = rows.filter(pa.compute.equal(rows.column("key"), key))
        found += [r for r in kernel.analyse_table(part).to_pylist() if r["kind"] == kernel.KIND_PRECOMMITTED]
    assert sorted((r["key"], r["ops"][1]) for r in found) == [("chaos/0", 1), ("chaos/0", 3), ("chaos/1", 1)]
    result = _assemble(found, 10**6)
    assert result["anomaly_counts"] == {"precommitted-read": 2}
    assert core(result) == core(analyse(sends, polls).to_dict())
    assert [(i["key"], i["value"], i["ops"]) for i in result["anomalies"]["precommitted-read"]] == [
        ("chaos/0", 12, [2, 3]), ("chaos/1", 10, [0, 1])]


def test_every_anomaly_is_computed_or_not_checked() -> None:
    """Each of Jepsen's names is either computed by the job (and compared with the checker by the agreement
    tests) or listed in the result's `not_checked` with why — never a silent zero."""
    from spark_helpers import FIELDS

    from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT
    from kafka_chaos.spark.job import COMPUTED, NOT_CHECKED

    # garbage-read: computed by both engines; compared wherever the checker computes it (spark_helpers).
    assert set(ANOMALIES_BAD_BY_DEFAULT) | {"garbage-read"} == set(COMPUTED) | set(NOT_CHECKED)
    assert not set(COMPUTED) & set(NOT_CHECKED)
    assert set(FIELDS) | {"garbage-read"} == set(COMPUTED)
    assert set(NOT_CHECKED) == {"G0", "G1c"}
    result = _assemble([], 10)
    assert result["not_checked"] == NOT_CHECKED
    for name in ("G0", "G1c"):
        assert result["not_checked"][name] == (
            "cycles (G0, G1c) are checked by the single-process checker: `kafka-chaos check RUN_DIR`")
    assert all("kafka-chaos check RUN_DIR" in why for why in NOT_CHECKED.values())


def test_kernel_agrees_with_checker_on_general_histories() -> None:
    """The kernel on the three tables (extra reads included) against the checker with them, on 300 of the
    checker's general histories (no JVM: the Spark job's own agreement test runs fewer); a history the checker
    refuses for a value nobody sent gives the kernel's `#no-writer` row instead."""
    import random

    from test_spark_history import general_history

    from kafka_chaos.checker.tables import parse_history
    from kafka_chaos.errors import HistoryError

    refused = found = 0
    for seed in range(300):
        t = parse_history(general_history(random.Random(seed)).encode())
        rows = kernel_rows(t)
        orphans = [r for r in rows if r["kind"] == kernel.KIND_NO_WRITER]
        try:
            expected = checker_result(t)
        except HistoryError:
            refused += 1
            assert orphans, seed
            continue
        assert not orphans, seed
        assert core(_assemble(rows, 10**6)) == core(expected), seed
        found += bool(core(expected)["anomaly_counts"])
    assert refused and found > 100  # the histories reach the refusal and the anomalies


def test_the_findings_ddl_spark_reads_names_every_column_the_kernel_writes() -> None:
    """mapInArrow's output schema is given to Spark as DDL text: a column the kernel writes that the DDL lacks
    never reaches the driver."""
    from kafka_chaos.spark.kernel import FINDINGS_DDL, FINDINGS_SCHEMA

    ddl_names = [part.strip().split(" ", 1)[0] for part in FINDINGS_DDL.replace("array<bigint>", "array").split(",")]
    assert ddl_names == FINDINGS_SCHEMA.names


def test_order_anomalies_are_the_checkers_instance_for_instance() -> None:
    """The order anomalies with the resets, rebalance log, empty read and subscribe-mode consumer the history
    holds: the kernel's counts are the checker's, and so is every field of every instance (the verdict's
    aside, which `reconcile` gives)."""
    from spark_corpus import ORDER_EXPECTED

    from kafka_chaos.checker.tables import parse_history
    from kafka_chaos.spark.kernel import ORDER_KINDS

    h = CORPUS["order"]()
    h.event("harness", "info", "drain-complete", True)
    t = parse_history("".join(json.dumps(e) + "\n" for e in h.events).encode())
    expected = checker_result(t)
    assert {k: v for k, v in expected["anomaly_counts"].items() if k in ORDER_KINDS} == ORDER_EXPECTED
    result = _assemble(kernel_rows(t), 10**6)
    verdict = ("bad", "verdict", "reason")
    for kind in ORDER_KINDS:
        assert result["anomaly_counts"][kind] == ORDER_EXPECTED[kind]
        assert result["anomalies"][kind] == [
            {f: v for f, v in i.items() if f not in verdict} for i in expected["anomalies"][kind]], kind
    assert [i["subscribe"] for i in result["anomalies"]["nonmonotonic-poll"]] == [True]


def test_without_resets_the_kernel_compares_across_them() -> None:
    """The resets decide: without them (and without the empty read and the rebalance log), the kernel finds
    the comparisons they end — so the agreement above is not an agreement on nothing."""
    from kafka_chaos.checker.tables import parse_history

    h = CORPUS["order"]()
    t = parse_history("".join(json.dumps(e) + "\n" for e in h.events).encode())
    bare = _assemble(kernel.analyse_table(kernel.input_rows(t.sends, t.polls), cap=10**6).to_pylist(), 10**6)
    assert bare["anomaly_counts"]["nonmonotonic-poll"] == 2  # after the assign not naming chaos/0
    assert bare["anomaly_counts"]["int-nonmonotonic-poll"] == 2  # chaos/0 in the rebalanced poll too
    assert bare["anomaly_counts"]["poll-skip"] == 3  # across the empty read


def test_garbage_reads_are_records_of_values_no_send_carried() -> None:
    """A value no send carried, read by an ok poll and by a failed one (above what the ok polls reached, so
    nothing is refused): one garbage-read per record, with the poll's op, process, offset and time; a value
    only a failed send carried is not garbage (it is a G1a)."""
    from spark_helpers import History

    from kafka_chaos.checker.tables import parse_history

    h = History()
    h.send(0, [("chaos/0", 1, 0)])
    h.send(0, [("chaos/0", 2, None)], type_="fail")
    ok = h.poll(1, {"chaos/0": [(0, 1), (1, 77), (2, 2)]})
    h.event(2, "invoke", "poll", [["poll"]])
    failed = h.event(2, "fail", "poll", [["poll", {"chaos/0": [[5, 88]]}]])
    t = parse_history("".join(json.dumps(e) + "\n" for e in h.events).encode())
    result = _assemble(kernel_rows(t), 10**6)
    assert result["anomaly_counts"]["garbage-read"] == 2
    assert result["anomalies"]["garbage-read"] == [
        {"key": "chaos/0", "value": 77, "offset": 1, "process": 1, "ops": [ok], "times": [(ok + 1) * 1000]},
        {"key": "chaos/0", "value": 88, "offset": 5, "process": 2, "ops": [failed],
         "times": [(failed + 1) * 1000]},
    ]
    assert [i["value"] for i in result["anomalies"]["G1a"]] == [2]
