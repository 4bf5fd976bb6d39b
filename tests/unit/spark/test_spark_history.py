"""Spark from the raw history (spark/history.py): the job parses history.jsonl itself and must give the
checker's answer — on the hand-written corpus, on random general histories (Hypothesis), on compressed and
split histories — and must refuse a damaged one naming the file and line."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from spark_corpus import CORPUS, TXN_EXPECTED
from spark_helpers import FIELDS, History, checker_result, core
from test_spark_job import merge, prefixed, run_spark

from kafka_chaos.checker.results import RunResults
from kafka_chaos.checker.tables import parse_history
from kafka_chaos.errors import SparkReconcileError
from kafka_chaos.harness.reconcile import judge_reconciled

K, K1 = "chaos/0", "chaos/1"


def history_text(h: History, *, drain: bool = True) -> str:
    events = list(h.events)
    if drain:
        events.append({"index": len(events), "time": (len(events) + 1) * 1000, "process": "harness",
                       "type": "info", "f": "drain-complete", "value": True})
    return "".join(json.dumps(e) + "\n" for e in events)


def write_history(run_dir: Path, text: str, name: str = "history.jsonl") -> Path:
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / name).write_text(text)
    return run_dir


def checked(text: str) -> dict[str, Any]:
    """The checker's own answer on the same history text (its parser, its analysis with what else the polls
    returned, as `kafka-chaos check` runs it)."""
    return checker_result(parse_history(text.encode()))


def test_corpus_from_jsonl_agrees_with_checker(spark_session: Any, tmp_path: Path) -> None:
    """Every hand-written history, as history.jsonl only (no tables), in one multi-run job: the checker's
    counts and instances."""
    runs, expected = [], []
    for name, build in sorted(CORPUS.items()):
        text = history_text(build())
        runs.append(write_history(tmp_path / name, text))
        expected.append(prefixed(checked(text), name))
    result = run_spark(spark_session, runs)
    assert result["stats"]["source"] == "history"
    assert not list(tmp_path.glob("*/sends.parquet")), "Spark must not need the tables"
    assert core(result) == core(merge(*expected))
    assert result["complete"] is True


def test_transactions_agree_from_jsonl_and_parquet(spark_session: Any, tmp_path: Path) -> None:
    """The transactional histories (an aborted txn read, txns reading their own sends, committed txns read
    at read_committed), each as history.jsonl and as the checker's Parquet tables, in one multi-run job:
    the checker's G1a and precommitted-read, counts and instances; the cycles are named as not checked."""
    from spark_helpers import write_run

    runs, expected = [], []
    for name in sorted(TXN_EXPECTED):
        text = history_text(CORPUS[name]())
        result = checked(text)
        assert result["anomaly_counts"] == TXN_EXPECTED[name], name
        runs.append(write_history(tmp_path / f"{name}-jsonl", text))
        tables = parse_history(text.encode())
        runs.append(write_run(tmp_path / f"{name}-parquet", tables.sends, tables.polls))
        expected += [prefixed(result, f"{name}-jsonl"), prefixed(result, f"{name}-parquet")]
    result = run_spark(spark_session, runs)
    assert result["stats"]["source"] == "history and Parquet"
    assert core(result) == core(merge(*expected))
    assert result["runs"]["txn_own_read-parquet"] == {"precommitted-read": 2}
    assert result["not_checked"]["G1c"].startswith("cycles (G0, G1c) are checked by the single-process checker")


def test_pairing_unfinished_and_value_from_invoke(spark_session: Any, tmp_path: Path) -> None:
    """A completion without values takes its invoke's; an invoke that never completed is an info send (its
    op is the invoke's index); a cut last line is dropped and makes the run incomplete."""
    h = History()
    h.send(0, [(K, 1, 0)])
    h.event(1, "invoke", "send", [["send", K, 2]])
    h.event(1, "info", "send", None)  # no value on the completion: the invoke's
    h.event(2, "invoke", "send", [["send", K, 3], ["send", K1, 4]])  # never completes
    h.poll(3, {K: [(0, 1), (2, 2)]})
    text = history_text(h, drain=False) + '{"index": 99, "time": 1, "proc'
    result = run_spark(spark_session, [write_history(tmp_path / "r", text)])
    expected = checked(text)
    assert core(result) == core(expected)
    assert result["stats"]["sends"] == 4 and result["stats"]["sends_info"] == 3
    assert result["complete"] is False and result["histories"]["r"]["truncated"] is True
    assert result["stats"]["values_read"] == 2


def test_damaged_line_is_named_or_skipped(spark_session: Any, tmp_path: Path) -> None:
    h = CORPUS["lost_write"]()
    lines = history_text(h).splitlines(keepends=True)
    lines.insert(3, "{not json\n")
    run = write_history(tmp_path / "damaged", "".join(lines))
    with pytest.raises(SparkReconcileError) as err:
        run_spark(spark_session, [run])
    message = str(err.value)
    assert "history.jsonl, line 4" in message and "--skip-malformed" in message

    skipped = run_spark(spark_session, [run], skip_malformed=True)
    assert skipped["stats"]["malformed_lines"] == 1
    assert core(skipped) == core(checked(history_text(h)))
    assert skipped["complete"] is False, "a history with lines left out is not a complete record"

    shape = history_text(h).replace('"chaos/0": [[0, 1]]', '"chaos/0": [7]')
    assert shape != history_text(h)
    with pytest.raises(SparkReconcileError, match="not a valid history event"):
        run_spark(spark_session, [write_history(tmp_path / "shape", shape)])


def test_compressed_and_split_histories_read_the_same(spark_session: Any, tmp_path: Path) -> None:
    text = history_text(CORPUS["mixed"]())
    plain = run_spark(spark_session, [write_history(tmp_path / "plain", text)])
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "history.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    parts = tmp_path / "parts" / "history"
    parts.mkdir(parents=True)
    lines = text.splitlines(keepends=True)
    for n, a in enumerate(range(0, len(lines), 5)):
        (parts / f"part-{n:03d}.jsonl").write_text("".join(lines[a : a + 5]))
    assert core(run_spark(spark_session, [zipped])) == core(plain)
    assert core(run_spark(spark_session, [tmp_path / "parts"])) == core(plain)
    assert core(plain) == core(checked(text))


def test_tables_used_only_when_newer_than_the_history(spark_session: Any, tmp_path: Path) -> None:
    from spark_helpers import write_run

    text = history_text(CORPUS["lost_write"]())
    run = write_history(tmp_path / "r", text)
    sends, polls = CORPUS["clean"]().tables()
    write_run(run, sends, polls)  # deliberately another history's tables: which one was read shows
    old = os.stat(run / "history.jsonl").st_mtime - 60
    os.utime(run / "history.jsonl", (old, old))
    assert run_spark(spark_session, [run])["stats"]["source"] == "Parquet"
    new = os.stat(run / "sends.parquet").st_mtime + 60
    os.utime(run / "history.jsonl", (new, new))
    from_history = run_spark(spark_session, [run])
    assert from_history["stats"]["source"] == "history"
    assert from_history["anomaly_counts"].get("lost-write") == 1


def test_verdicts_from_the_history_alone(spark_session: Any, tmp_path: Path) -> None:
    """No results.json: the run-start configuration and the nemesis's fault windows come from Spark's pass
    over the history, so the verdicts are the checker's."""
    from kafka_chaos.checker.check import check_run

    h = History()
    h.event("harness", "info", "run-start", {"producer": {"acks": "1"}, "topic": {"replication_factor": 3}})
    h.event("nemesis", "invoke", "kill", {"nodes": [1]})
    h.event("nemesis", "info", "kill", {"nodes": [1]})
    for v, o in ((1, 0), (2, 1), (3, 2)):
        h.send(0, [(K, v, o)])
    h.poll(1, {K: [(0, 1), (2, 3)]})
    h.event("nemesis", "invoke", "restart", {"nodes": [1]})
    h.event("nemesis", "info", "restart", {"nodes": [1]})
    run = write_history(tmp_path / "acks1", history_text(h))
    result = run_spark(spark_session, [run])
    assert result["histories"]["acks1"]["faults"]["windows"], "the kill's window"
    result = judge_reconciled(RunResults.model_validate(result), [str(run)]).to_json_dict()
    expected = check_run(run, write=False).to_json_dict()
    ours = [(i["value"], i["verdict"], i["reason"]) for i in result["anomalies"]["lost-write"]]
    theirs = [(i["value"], i["verdict"], i["reason"]) for i in expected["anomalies"]["lost-write"]]
    assert ours == theirs and ours


def test_aborted_read_verdicts_follow_the_readers_isolation_as_the_checkers(spark_session: Any,
                                                                           tmp_path: Path) -> None:
    """An aborted txn's records read at read_uncommitted (permitted: KIP-98 promises nothing there) and at
    read_committed (a violation), from the history and from the tables beside it: Spark's G1a instances get
    the reader's isolation and the writer's txn the checker gives them, so the verdicts are the checker's."""
    from spark_helpers import write_run

    from kafka_chaos.checker.check import check_run

    runs, expected = [], {}
    for level in ("read_uncommitted", "read_committed"):
        h = History()
        h.txn(0, [["send", K, 1], ["send", K1, 2]], [["send", K, 1], ["send", K1, 2]], type_="fail")
        h.assign(2, {"keys": [K, K1], "isolation": level})
        h.poll(2, {K: [(0, 1)], K1: [(0, 2)]})
        text = history_text(h)
        jsonl = write_history(tmp_path / f"{level}-jsonl", text)
        expected[level] = sorted((i["value"], i["verdict"], i["reason"])
                                 for i in check_run(jsonl, write=False).to_json_dict()["anomalies"]["G1a"])
        both = write_history(tmp_path / f"{level}-tables", text)
        tables = parse_history(text.encode())
        os.utime(both / "history.jsonl", (1, 1))  # older than the tables: Spark reads the tables
        write_run(both, tables.sends, tables.polls, tables.extras.reads)
        runs += [jsonl, both]
    result = run_spark(spark_session, runs)
    assert result["stats"]["source"] == "history and Parquet"
    result = judge_reconciled(RunResults.model_validate(result), [str(r) for r in runs]).to_json_dict()
    assert expected["read_uncommitted"] and {v for _, v, _ in expected["read_uncommitted"]} == {"permitted"}
    assert {v for _, v, _ in expected["read_committed"]} == {"violation"}
    separately = {}
    for run in runs[:2]:  # read_uncommitted: every G1a permitted and not bad, so valid as check says
        alone = run_spark(spark_session, [run])
        separately[run.name] = judge_reconciled(RunResults.model_validate(alone), [str(run)]).valid
    assert separately == {"read_uncommitted-jsonl": True, "read_uncommitted-tables": True}
    assert result["valid"] is False  # the read_committed runs' aborted reads are bad
    for run in runs:
        level = run.name.rsplit("-", 1)[0]
        ours = sorted((i["value"], i["verdict"], i["reason"]) for i in result["anomalies"]["G1a"]
                      if i["key"].startswith(f"{run.name}/"))
        assert ours == expected[level], run.name


# ---- random general histories ----------------------------------------------------------------------------

KEYS = (K, K1, "other/0")


@st.composite
def histories(draw: st.DrawFn) -> str:
    """A random history: producers sending one or two records per op (ok with or without offsets, info,
    fail, never completed), consumers polling records that were sent or never were, repeats, gaps, offsets
    reused by other values."""
    h = History()
    next_value = iter(range(1, 10_000))
    sent: list[tuple[str, int, int]] = []
    offsets = {k: 0 for k in KEYS}
    unfinished: set[int] = set()
    for _ in range(draw(st.integers(1, 30))):
        p = draw(st.integers(0, 5))
        if p in unfinished:
            continue
        if p < 3:
            records = []
            for _ in range(draw(st.integers(1, 2))):
                k = draw(st.sampled_from(KEYS))
                offsets[k] += draw(st.integers(0, 2))  # 0: the same offset again (inconsistent), 2: a gap
                v = next(next_value)
                records.append((k, v, offsets[k]))
                sent.append((k, v, offsets[k]))
            outcome = draw(st.sampled_from(("ok", "ok", "info", "info-offsets", "fail", "never")))
            if outcome == "never":
                h.event(p, "invoke", "send", [["send", k, v] for k, v, _ in records])
                unfinished.add(p)
            elif outcome == "info-offsets":
                h.send(p, records, "info", offsets_on_info=True)
            else:
                h.send(p, records, outcome)
        else:
            read: dict[str, list[tuple[int, int]]] = {}
            for _ in range(draw(st.integers(0, 3))):
                pick_sent: bool = draw(st.booleans())
                if sent and pick_sent:
                    k, v, o = draw(st.sampled_from(sent))
                    o = o if draw(st.integers(0, 4)) else o + 1  # sometimes at another offset
                else:
                    k, v, o = draw(st.sampled_from(KEYS)), 50_000 + draw(st.integers(0, 3)), draw(
                        st.integers(0, 6))
                read.setdefault(k, []).append((o, v))
            h.poll(p, read)
    return history_text(h, drain=draw(st.booleans()))


@settings(max_examples=3, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                 HealthCheck.data_too_large])
@given(batch=st.lists(histories(), min_size=10, max_size=10))
def test_random_histories_agree_with_checker(spark_session: Any, tmp_path_factory: pytest.TempPathFactory,
                                             batch: list[str]) -> None:
    """Ten random histories per example, as one multi-run job (a Spark job per history would take
    minutes), three examples: Spark from JSONL equals the checker on each. Not shrunk (each try is a Spark
    job): a failure prints the ten histories."""
    base = tmp_path_factory.mktemp("random")
    runs, expected = [], []
    for n, text in enumerate(batch):
        runs.append(write_history(base / f"h{n}", text))
        expected.append(prefixed(checked(text), f"h{n}"))
    assert core(run_spark(spark_session, runs)) == core(merge(*expected))


# ---- Jepsen's rules on general histories (the checker's, checker/tables.py `PollExtras`) -----------------


def _general_history() -> Any:
    """The checker's generator of general histories (tests/unit/checker/test_against_reference.py): fail /
    info polls returning records, unknown offsets, values sent twice or by nobody, txns reading their own."""
    import importlib
    import sys

    checker_tests = str(Path(__file__).resolve().parents[1] / "checker")
    if checker_tests not in sys.path:
        sys.path.append(checker_tests)
    return importlib.import_module("test_against_reference").general_history


general_history = _general_history()


@settings(max_examples=2, deadline=None, phases=[Phase.explicit, Phase.reuse, Phase.generate],
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(seeds=st.lists(st.integers(0, 2**32), min_size=8, max_size=8))
def test_general_histories_agree_with_checker(spark_session: Any, tmp_path_factory: pytest.TempPathFactory,
                                              seeds: list[int]) -> None:
    """Eight general histories per example, each as history.jsonl and as the checker's stored tables, in one
    multi-run job (two examples: a job of 16 runs takes ~25 s here; the kernel alone is checked on 300 in
    test_spark_kernel): Spark equals the checker (with the extra reads) on each. Histories the checker refuses (a
    value nobody sent, `:no-writer-of`) are left to test_a_value_nobody_sent_stops_spark_as_the_checker."""
    import random

    from kafka_chaos.checker.stored_tables import write_stored_tables
    from kafka_chaos.errors import HistoryError

    base = tmp_path_factory.mktemp("general")
    runs, expected = [], []
    for n, seed in enumerate(seeds):
        text = general_history(random.Random(seed))
        try:
            result = checked(text)
        except HistoryError:
            continue
        runs.append(write_history(base / f"g{n}", text))
        (base / f"t{n}").mkdir()
        write_stored_tables(parse_history(text.encode()), base / f"t{n}")  # what `kafka-chaos check` writes
        runs.append(base / f"t{n}")
        expected += [prefixed(result, f"g{n}"), prefixed(result, f"t{n}")]
    assert core(run_spark(spark_session, runs)) == core(merge(*expected))


def test_general_history_rules(spark_session: Any, tmp_path: Path) -> None:
    """One history per rule, from history.jsonl and from the tables with extra_reads.parquet, in one job: an
    info poll's record makes an inconsistent offset and a duplicate; an ok record at an unknown offset is read
    (not unseen, not lost) and a G1a without offset; a value sent by a failed op and again by an ok one is a
    G1a; the writer is the op that completed last (here the failed one: nothing lost); a failed txn that read
    its own send is a precommitted read; the ok send of 5 is unseen."""
    from kafka_chaos.checker.tables import write_tables

    h = History()
    h.send(0, [(K, 1, 0)])
    h.send(0, [(K, 2, 1)])
    h.send(0, [(K, 9, None)], type_="fail")
    h.event(1, "invoke", "poll", [["poll"]])
    h.event(1, "info", "poll", [["poll", {K: [[0, 9], [3, 2]]}]])  # 9 at 0: inconsistent; 2 at 3: duplicate
    h.send(0, [(K1, 3, None)])  # ok, offset unknown
    h.send(2, [(K1, 4, None)], type_="fail")
    h.event(3, "invoke", "send", [["send", K1, 5]])
    h.event(4, "invoke", "send", [["send", K1, 5]])
    h.event(4, "ok", "send", [["send", K1, [1, 5]]])
    h.event(3, "fail", "send", [["send", K1, 5]])  # 5: completed last by a failed op, so not lost
    h.send(0, [(K1, 6, 2)])
    h.poll(5, {K: [(0, 1), (1, 2)], K1: [(None, 3), (None, 4), (2, 6)]})
    h.event(6, "invoke", "txn", [["poll"], ["send", K, 8]])
    h.event(6, "fail", "txn", [["poll", {K: [[4, 8]]}], ["send", K, 8]])
    text = history_text(h)
    expected = checked(text)
    assert {k: v for k, v in expected["anomaly_counts"].items() if k in FIELDS} == {
        "inconsistent-offsets": 1, "duplicate": 1, "G1a": 1, "precommitted-read": 1, "unseen": 1,
        "int-poll-skip": 1}  # the ok poll read 1 then 2, whose last position (offset 3, the info poll) is 2 on
    assert [i["offset"] for i in expected["anomalies"]["G1a"]] == [None]
    (tmp_path / "tables").mkdir()
    write_tables(parse_history(text.encode()), tmp_path / "tables")
    result = run_spark(spark_session, [write_history(tmp_path / "jsonl", text), tmp_path / "tables"])
    assert core(result) == core(merge(prefixed(expected, "jsonl"), prefixed(expected, "tables")))


def test_a_value_nobody_sent_stops_spark_as_the_checker(spark_session: Any, tmp_path: Path) -> None:
    """A must-read value that no op sent (an info poll put it in the log below what ok polls reached): the
    checker refuses the history (Jepsen's `:no-writer-of`), and so does Spark, from either input (exit 2)."""
    from kafka_chaos.checker.tables import write_tables
    from kafka_chaos.errors import HistoryError

    h = History()
    h.send(0, [(K, 1, 0)])
    h.send(0, [(K, 2, 2)])
    h.event(1, "invoke", "poll", [["poll"]])
    h.event(1, "info", "poll", [["poll", {K: [[1, 99]]}]])
    h.poll(2, {K: [(0, 1), (2, 2)]})
    text = history_text(h)
    with pytest.raises(HistoryError, match=r"value 99 .* no op sent it"):
        checked(text)
    (tmp_path / "tables").mkdir()
    write_tables(parse_history(text.encode()), tmp_path / "tables")
    for run in (write_history(tmp_path / "jsonl", text), tmp_path / "tables"):
        with pytest.raises(SparkReconcileError, match=r"key chaos/0: value 99 .* no op sent it") as err:
            run_spark(spark_session, [run])
        assert err.value.exit_code == 2


def test_order_anomalies_from_jsonl_and_from_the_stored_tables(spark_session: Any, tmp_path: Path) -> None:
    """The order anomalies need what the history says besides the records (assign / subscribe resets, an
    empty read, a rebalance log, subscribe-mode consumers): Spark reads them from history.jsonl, and from the
    `tables.json` `kafka-chaos check` stores beside the tables; both give the checker's instances."""
    from spark_corpus import ORDER_EXPECTED

    from kafka_chaos.checker.stored_tables import write_stored_tables
    from kafka_chaos.spark.kernel import ORDER_KINDS

    text = history_text(CORPUS["order"]())
    expected = checked(text)
    assert {k: v for k, v in expected["anomaly_counts"].items() if k in ORDER_KINDS} == ORDER_EXPECTED
    jsonl = write_history(tmp_path / "jsonl", text)
    stored = write_history(tmp_path / "stored", text)
    write_stored_tables(parse_history(text.encode()), stored)
    alone = run_spark(spark_session, [jsonl])
    assert core(alone) == core(expected)
    assert alone["not_checked"] == {"G0": alone["not_checked"]["G0"], "G1c": alone["not_checked"]["G1c"]}
    result = run_spark(spark_session, [jsonl, stored])
    assert result["stats"]["source"] == "history and Parquet"
    assert core(result) == core(merge(prefixed(expected, "jsonl"), prefixed(expected, "stored")))
    assert [(i["key"], i["subscribe"], i["times"]) for i in result["anomalies"]["nonmonotonic-poll"]] == [
        (f"{run}/chaos/0", True, i["times"]) for run in ("jsonl", "stored")
        for i in expected["anomalies"]["nonmonotonic-poll"]]


def test_resets_are_read_alike_from_a_local_file_and_by_spark(spark_session: Any, tmp_path: Path) -> None:
    """The resets and subscribe-mode consumers the kernel is given: a local plain history is searched without
    Spark, a compressed one (or a URI) by a Spark job; both find the checker's."""
    from kafka_chaos.spark.history import HistoryFrames, _membership_lines

    h = CORPUS["order"]()
    h.event(7, "invoke", "assign", {"keys": [K1], "isolation": "read_committed"})
    h.event(7, "info", "assign", None)  # indefinite: a reset naming what the invoke named
    h.event(8, "invoke", "subscribe", ["chaos"])
    h.event(8, "fail", "subscribe", ["chaos"])  # failed: no reset
    text = history_text(h) + '{"process": 9, "f": "assign", "type": "ok"\n'  # a cut line: left out
    plain = write_history(tmp_path / "plain", text)
    zipped = tmp_path / "zipped"
    zipped.mkdir()
    (zipped / "history.jsonl.gz").write_bytes(gzip.compress(text.encode()))
    tables = parse_history(history_text(h).encode())
    expected = ([(r.process, r.index, r.names) for r in tables.extras.resets], set(tables.meta.subscribe_processes))
    assert len(expected[0]) == 4 and expected[1] == {3}
    local = HistoryFrames(spark_session, [str(plain / "history.jsonl")])
    assert local._local_file() is not None
    assert local.memberships() == expected
    whole = _membership_lines(plain / "history.jsonl")
    assert _membership_lines(plain / "history.jsonl", block_size=50) == whole  # lines cut across blocks
    assert len(whole) == 10  # five ops, invoke and completion (the failed subscribe too; the cut line not)
    by_spark = HistoryFrames(spark_session, [f"file://{zipped}/history.jsonl.gz"])
    assert by_spark._local_file() is None
    assert by_spark.memberships() == expected
