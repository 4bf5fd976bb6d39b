"""Campaign shards: `--shard I/N` parsing, the split (disjoint, covering), the campaign run cut to one shard
(with a fake run in place of a cluster), `campaign merge` from shard folders written by the campaign's own
writer, and the CLI's messages for bad input."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from typer.testing import CliRunner

from kafka_chaos.checker.results import RunResults
from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness import campaign as campaign_mod
from kafka_chaos.harness.campaign import Campaign, PlannedRun, _write_outputs, load_campaign, run_campaign, shard_of
from kafka_chaos.harness.cli import app, main
from kafka_chaos.harness.run import RunResult
from kafka_chaos.harness.shard import Shard, merge_shards, parse_shard, select

CAMPAIGN = """name = "sharded"
duration_s = 10
seeds = [1, 2]
[matrix]
"workload.acks" = ["1", "all"]
[fault_sets.none]
[fault_sets.leader-kill]
schedule = [{ kind = "kill", target = "leader", at_s = 3, duration_s = 5 }]
"""  # 2 acks × 2 fault sets × 2 seeds = 8 runs: not a multiple of 3, so the shards differ in size


# -- parsing --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "shard"), [("1/3", Shard(1, 3)), ("3/3", Shard(3, 3)), ("1/1", Shard(1, 1)),
                                             (" 2 / 5 ", Shard(2, 5))])
def test_a_shard_is_i_of_n(text: str, shard: Shard) -> None:
    assert parse_shard(text) == shard
    assert str(shard) == f"{shard.index}/{shard.count}"


@pytest.mark.parametrize(("text", "message"), [
    ("0/3", "numbered 1 to 3"), ("4/3", "numbered 1 to 3"), ("1/0", "at least 1"), ("x", "expected I/N"),
    ("3", "expected I/N"), ("-1/3", "expected I/N"), ("1/3/4", "expected I/N"), ("", "expected I/N"),
    ("1.5/3", "expected I/N"),
])
def test_a_bad_shard_is_a_message(text: str, message: str) -> None:
    with pytest.raises(ScenarioError, match=message):
        parse_shard(text)


# -- selection ------------------------------------------------------------------------------------------------


@given(n=st.integers(0, 60), count=st.integers(1, 12))
def test_shards_are_disjoint_and_cover_the_plan(n: int, count: int) -> None:
    items = list(range(n))
    parts = [select(items, Shard(i, count)) for i in range(1, count + 1)]
    assert sorted(x for part in parts for x in part) == items  # every run once: disjoint and covering
    assert all(part == sorted(part) for part in parts)  # plan order kept
    assert max(map(len, parts)) - min(map(len, parts)) <= 1  # no machine gets much more than another
    assert parts[0] == items[::count]  # every N-th, from the first


def test_no_shard_is_the_whole_plan() -> None:
    assert select([3, 1, 2], None) == [3, 1, 2]


def _campaign(tmp_path: Path, text: str = CAMPAIGN, name: str = "sharded.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_shard_of_a_campaign_keeps_every_nth_run_and_knows_the_plan(tmp_path: Path) -> None:
    whole = load_campaign(_campaign(tmp_path))
    assert len(whole.runs) == 8
    part = shard_of(whole, Shard(2, 3))
    assert [r.index for r in part.runs] == [1, 4, 7]
    assert part.campaign_id == whole.campaign_id
    assert part.shard is not None
    assert part.shard["plan_total"] == 8 and [p["label"] for p in part.shard["plan"]] == [r.label for r in whole.runs]
    assert shard_of(whole, None) is whole


# -- the campaign run, cut to a shard (a fake run instead of a cluster) ---------------------------------------


class FakePool:
    def heal_or_drop(self) -> None:
        pass

    def release(self) -> None:
        pass


def _fake_runs(monkeypatch: pytest.MonkeyPatch, failing: set[str]) -> list[str]:
    ran: list[str] = []

    def fake_run(scenario: Any, *, out: Path, pool: Any) -> RunResult:
        ran.append(scenario.name)
        run_dir = out / f"run-{scenario.name}"
        run_dir.mkdir(parents=True)
        violations = [{"name": "lost-write", "key": "k", "reason": "gone"}] if scenario.name in failing else []
        return RunResult(f"run-{scenario.name}", run_dir, scenario,
                         RunResults.model_validate({"valid": not violations, "complete": True,
                                                    "violations": violations,
                                                    "anomaly_counts": {"lost-write": len(violations)}}))

    monkeypatch.setattr(campaign_mod, "run_scenario", fake_run)
    return ran


def _run_shards(tmp_path: Path, path: Path, count: int, which: list[int]) -> list[Path]:
    outs = []
    for i in which:
        out = tmp_path / f"machine-{i}"
        run_campaign(path, out=out, pool=FakePool(), shard=Shard(i, count))  # type: ignore[arg-type]
        outs.append(out)
    return outs


def test_a_sharded_campaign_runs_only_its_runs_into_its_own_folder(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _fake_runs(monkeypatch, failing=set())
    path = _campaign(tmp_path)
    summary = run_campaign(path, out=tmp_path / "out", pool=FakePool(), shard=Shard(3, 3))  # type: ignore[arg-type]
    assert sorted(ran) == ["sharded-002", "sharded-005"]
    cdir = tmp_path / "out" / "campaigns" / summary["campaign_id"] / "shard-3-of-3"
    stored = json.loads((cdir / "summary.json").read_text())
    assert [r["index"] for r in stored["runs"]] == [2, 5]
    assert stored["total"] == 2 and stored["done"] == 2
    assert stored["shard"]["index"] == 3 and stored["shard"]["count"] == 3
    assert "Shard 3 of 3" in (cdir / "index.html").read_text()


def test_merged_shards_are_the_whole_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _fake_runs(monkeypatch, failing={"sharded-004"})
    path = _campaign(tmp_path)
    outs = _run_shards(tmp_path, path, 3, [1, 2, 3])
    assert sorted(ran) == [f"sharded-{k:03d}" for k in range(8)]  # each run on exactly one machine
    merged = merge_shards(outs, out=tmp_path / "merged")
    s = merged.summary
    assert [r["index"] for r in s["runs"]] == list(range(8))
    assert [r["label"] for r in s["runs"]] == [r.label for r in load_campaign(path).runs]
    assert (s["total"], s["done"], s["failed"]) == (8, 8, 1)
    assert not merged.incomplete and merged.missing == []
    assert merged.cdir == tmp_path / "merged" / "campaigns" / s["campaign_id"]
    assert json.loads((merged.cdir / "summary.json").read_text())["shards"]["merged"] == [1, 2, 3]
    page = (merged.cdir / "index.html").read_text()
    assert "8 of 8 runs done, 1 failed" in page and "Merged from shards 1, 2, 3 of 3." in page
    assert (merged.cdir / "junit.xml").read_text().count("<testcase") == 8


def test_a_missing_shard_makes_the_merge_incomplete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, failing=set())
    path = _campaign(tmp_path)
    outs = _run_shards(tmp_path, path, 3, [1, 3])
    merged = merge_shards(outs, out=tmp_path / "merged")
    assert merged.incomplete and merged.missing == [Shard(2, 3)]
    pending = [r for r in merged.summary["runs"] if r["status"] == "pending"]
    assert [r["index"] for r in pending] == [1, 4, 7] and {r["shard"] for r in pending} == {"2/3"}
    assert all(r["fault_set"] in ("none", "leader-kill") for r in pending)  # the matrix can place them
    assert (merged.summary["total"], merged.summary["done"]) == (8, 5)
    assert "incomplete</b>: shard 2 missing" in (merged.cdir / "index.html").read_text()
    assert (merged.cdir / "junit.xml").read_text().count("shard 2/3 missing") == 3


def test_a_shard_cut_short_makes_the_merge_incomplete(tmp_path: Path) -> None:
    whole = load_campaign(_campaign(tmp_path))
    outs = []
    for i in (1, 2):
        cdir = tmp_path / f"m{i}" / "campaigns" / whole.campaign_id / Shard(i, 2).dirname
        _write_outputs(shard_of(whole, Shard(i, 2)), cdir, {})  # as a shard interrupted before its first run
        outs.append(cdir)
    merged = merge_shards(outs, out=tmp_path / "merged")
    assert merged.missing == [] and merged.incomplete and merged.summary["done"] == 0


def test_shards_run_into_one_results_folder_merge_from_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, failing=set())
    path = _campaign(tmp_path)
    for i in (1, 2):
        run_campaign(path, out=tmp_path / "results", pool=FakePool(), shard=Shard(i, 2))  # type: ignore[arg-type]
    for d in (tmp_path / "results", tmp_path / "results" / "campaigns" / load_campaign(path).campaign_id):
        merged = merge_shards([d], out=tmp_path / "results")  # the second time beside its own merged index
        assert merged.summary["shards"]["merged"] == [1, 2] and merged.summary["done"] == 8


def test_a_moved_shard_folder_still_links_its_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, failing=set())
    path = _campaign(tmp_path)
    [out] = _run_shards(tmp_path, path, 1, [1])
    moved = tmp_path / "artifact"
    shutil.move(out, moved)  # a CI job's results, downloaded elsewhere by the merge job
    merged = merge_shards([moved], out=tmp_path / "merged")
    run_dirs = [Path(r["run_dir"]) for r in merged.summary["runs"]]
    assert run_dirs and all(d.parent == moved.resolve() and d.is_dir() for d in run_dirs)
    bare = tmp_path / "bare"  # the shard's folder alone: its runs' paths are kept as recorded
    shutil.copytree(next(moved.glob("campaigns/*/shard-1-of-1")), bare)
    merged = merge_shards([bare], out=tmp_path / "merged-bare")
    assert [r["run_dir"] for r in merged.summary["runs"]] == [
        r["run_dir"] for r in json.loads((bare / "summary.json").read_text())["runs"]]


# -- merge: shards that do not belong together ----------------------------------------------------------------


def _shard_dir(tmp_path: Path, campaign: Campaign, shard: Shard, machine: str) -> Path:
    cdir = tmp_path / machine / "campaigns" / campaign.campaign_id / shard.dirname
    _write_outputs(shard_of(campaign, shard), cdir, {})
    return cdir


@pytest.mark.parametrize(("other_seeds", "first", "second", "message"), [
    ("seeds = [1, 3]", Shard(1, 2), Shard(2, 2), "same campaign file"),  # another file: another campaign id
    (None, Shard(1, 2), Shard(2, 3), "same N"),
    (None, Shard(1, 2), Shard(1, 2), "given twice"),
])
def test_shards_that_do_not_belong_together_do_not_merge(tmp_path: Path, other_seeds: str | None, first: Shard,
                                                          second: Shard, message: str) -> None:
    a = load_campaign(_campaign(tmp_path))
    b = a if other_seeds is None else load_campaign(
        _campaign(tmp_path, CAMPAIGN.replace("seeds = [1, 2]", other_seeds), "other.toml"))
    dirs = [_shard_dir(tmp_path, a, first, "m1"), _shard_dir(tmp_path, b, second, "m2")]
    with pytest.raises(ScenarioError, match=message):
        merge_shards(dirs, out=tmp_path / "merged")


def test_shards_planned_from_different_bases_do_not_merge(tmp_path: Path) -> None:
    text = 'base = "base.toml"\n' + CAMPAIGN
    (tmp_path / "m1").mkdir()
    (tmp_path / "m2").mkdir()
    (tmp_path / "m1" / "base.toml").write_text('name = "b"\n[cluster]\nnodes = 3\n')
    (tmp_path / "m2" / "base.toml").write_text('name = "b"\n[cluster]\nnodes = 5\n')
    a, b = (load_campaign(_campaign(tmp_path / m, text)) for m in ("m1", "m2"))
    assert a.campaign_id == b.campaign_id  # the same campaign file, byte for byte
    dirs = [_shard_dir(tmp_path, a, Shard(1, 2), "m1"), _shard_dir(tmp_path, b, Shard(2, 2), "m2")]
    with pytest.raises(ScenarioError, match="planned different runs"):
        merge_shards(dirs, out=tmp_path / "merged")


def test_only_shard_folders_merge(tmp_path: Path) -> None:
    c = load_campaign(_campaign(tmp_path))
    unsharded = tmp_path / "whole"
    _write_outputs(c, unsharded, {})
    with pytest.raises(ScenarioError, match="not a shard's summary"):
        merge_shards([unsharded], out=tmp_path / "merged")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ScenarioError, match=r"no shard's summary\.json"):
        merge_shards([tmp_path / "empty"], out=tmp_path / "merged")
    with pytest.raises(ScenarioError, match="no such folder"):
        merge_shards([tmp_path / "nowhere"], out=tmp_path / "merged")


# -- the CLI --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("shard", "message"), [("0/3", "numbered 1 to 3"), ("4/3", "numbered 1 to 3"),
                                                ("x", "expected I/N")])
def test_a_bad_shard_on_the_command_line_is_a_usage_error(tmp_path: Path, shard: str, message: str) -> None:
    result = CliRunner().invoke(app, ["campaign", str(_campaign(tmp_path)), "--shard", shard,
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    assert message in result.output and "--shard" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)  # a message, not a traceback
    assert not (tmp_path / "out").exists()  # refused before anything ran


def test_campaign_merge_on_the_command_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, failing=set())
    outs = _run_shards(tmp_path, _campaign(tmp_path), 2, [1, 2])
    args = ["campaign", "merge", *map(str, outs), "--out", str(tmp_path / "merged")]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "8/8 runs from 2 of 2 shards, 0 failed" in result.output
    result = CliRunner().invoke(app, args[:3] + args[4:])  # shard 2 left out
    assert result.exit_code == 2
    assert "incomplete" in result.output and "shard 2/2 missing" in result.output


def test_campaign_merge_exits_1_on_a_failed_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_runs(monkeypatch, failing={"sharded-000"})
    outs = _run_shards(tmp_path, _campaign(tmp_path), 2, [1, 2])
    result = CliRunner().invoke(app, ["campaign", "merge", *map(str, outs), "--out", str(tmp_path / "merged")])
    assert result.exit_code == 1 and "1 failed" in result.output


def test_a_merge_of_mismatched_shards_is_a_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    c = load_campaign(_campaign(tmp_path))
    dirs = [_shard_dir(tmp_path, c, Shard(1, 2), "m1"), _shard_dir(tmp_path, c, Shard(2, 3), "m2")]
    monkeypatch.setattr(sys, "argv", ["kafka-chaos", "campaign", "merge", *map(str, dirs),
                                      "--out", str(tmp_path / "merged")])
    with pytest.raises(SystemExit) as exit_:
        main()
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "error:" in err and "same N" in err and "Traceback" not in err


def test_a_campaign_without_a_shard_writes_where_it_always_did(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    ran = _fake_runs(monkeypatch, failing=set())
    summary = run_campaign(_campaign(tmp_path), out=tmp_path / "out", pool=FakePool())  # type: ignore[arg-type]
    assert len(ran) == 8 and "shard" not in summary
    assert (tmp_path / "out" / "campaigns" / summary["campaign_id"] / "summary.json").exists()


def test_planned_runs_are_what_a_shard_selects(tmp_path: Path) -> None:
    runs: list[PlannedRun] = load_campaign(_campaign(tmp_path)).runs
    assert select(runs, Shard(1, 4)) == [runs[0], runs[4]]
