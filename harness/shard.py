"""Splitting a campaign over machines, and putting the pieces back together.

`--shard I/N` keeps every N-th planned run, starting at the I-th (1-based): run k of the plan belongs to shard
k mod N + 1, so the N shards are disjoint and together cover the plan whatever its length, and every machine
computes the same split from the same campaign file without talking to the others. Each shard writes its own
folder, results/campaigns/<id>/shard-I-of-N/, whose summary.json records the whole plan and a digest of it;
 `merge_shards` checks the shards were cut from one plan and writes the campaign's index where an
unsharded campaign would have written it, naming the shards that are missing.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kafka_chaos.errors import ScenarioError

T = TypeVar("T")

_SHARD = re.compile(r"\s*(\d+)\s*/\s*(\d+)\s*")


@dataclass(frozen=True)
class Shard:
    index: int  # 1-based, as written on the command line
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @property
    def dirname(self) -> str:
        return f"shard-{self.index}-of-{self.count}"

    def owns(self, position: int) -> bool:
        """Whether the run at this 0-based position of the plan is this shard's."""
        return position % self.count == self.index - 1


def parse_shard(text: str) -> Shard:
    """"I/N" → Shard(I, N); anything else is a ScenarioError saying what a shard looks like."""
    m = _SHARD.fullmatch(text)
    if not m:
        raise ScenarioError(f"{text!r}: expected I/N, e.g. 2/3 for the second of three shards")
    index, count = int(m[1]), int(m[2])
    if count < 1:
        raise ScenarioError(f"{text!r}: the number of shards must be at least 1")
    if not 1 <= index <= count:
        raise ScenarioError(f"{text!r}: shards are numbered 1 to {count}, so the first number must be "
                            f"between 1 and {count}")
    return Shard(index, count)


def select(items: Sequence[T], shard: Shard | None) -> list[T]:
    """The items this shard runs, in plan order (all of them without a shard)."""
    return list(items) if shard is None else [x for k, x in enumerate(items) if shard.owns(k)]


def plan_digest(lines: Sequence[str]) -> str:
    """A digest of a plan's runs as one line each (label and configuration): shards whose digests differ were
    planned from different files, bases or defaults, and their runs must not be merged into one index."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def shard_record(shard: Shard, plan_lines: Sequence[str], plan: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """What a shard's summary.json says about where it belongs (read back by `merge_shards`): the whole plan,
    each run as the campaign index's pending entry, so a merge can list the runs of a shard that never came."""
    return {"index": shard.index, "count": shard.count, "plan_total": len(plan),
            "plan_digest": plan_digest(plan_lines), "plan": list(plan)}


@dataclass
class Merged:
    summary: dict[str, Any]
    cdir: Path
    missing: list[Shard]

    @property
    def incomplete(self) -> bool:
        return bool(self.missing) or self.summary["done"] < self.summary["total"]


def find_summaries(d: Path) -> list[Path]:
    """The shard summaries in a folder: the shard's own folder, the campaign's folder or a results folder holding
    them (as a CI job's downloaded artifact does)."""
    found = [p for pattern in ("shard-*-of-*/summary.json", "*/shard-*-of-*/summary.json",
                               "campaigns/*/shard-*-of-*/summary.json") for p in sorted(d.glob(pattern))]
    # a folder that is itself a summary's (a shard's, or one that is not and will be refused by name)
    return found or ([d / "summary.json"] if (d / "summary.json").exists() else [])


def merge_shards(dirs: Sequence[Path], *, out: Path = Path("results")) -> Merged:
    """One campaign index from the shards' folders, written to <out>/campaigns/<id>/."""
    from kafka_chaos.harness.campaign import write_summary

    shards: dict[int, tuple[Path, dict[str, Any]]] = {}
    first: tuple[Path, dict[str, Any]] | None = None
    for d in dirs:
        if not d.is_dir():
            raise ScenarioError(f"{d}: no such folder")
        found = find_summaries(d)
        if not found:
            raise ScenarioError(f"{d}: no shard's summary.json in it (a shard writes "
                                "results/campaigns/<id>/shard-I-of-N/summary.json)")
        for path in found:
            summary = _load(path)
            if first is None:
                first = (path, summary)
            _same_plan(first, (path, summary))
            index = summary["shard"]["index"]
            if index in shards:
                raise ScenarioError(f"shard {index}/{summary['shard']['count']} given twice: "
                                    f"{shards[index][0].parent} and {path.parent}")
            shards[index] = (path, summary)
    if first is None:
        raise ScenarioError("no shard folders given")
    head = first[1]
    count, plan = head["shard"]["count"], head["shard"]["plan"]
    runs: list[dict[str, Any]] = []
    for path, summary in shards.values():
        # <out>/campaigns/<id>/shard-I-of-N/summary.json: the runs' folders are in <out> (a bare copy of the
        # shard's folder has none beside it)
        up = path.resolve().parents
        out_dir = up[3] if len(up) > 3 and up[2].name == "campaigns" else None
        runs += [_relocate(r, out_dir) if out_dir else r for r in summary["runs"]]
    missing = [Shard(i, count) for i in range(1, count + 1) if i not in shards]
    for s in missing:
        runs += [{**run, "status": "pending", "shard": str(s)} for k, run in enumerate(plan) if s.owns(k)]
    runs.sort(key=lambda r: int(r["index"]))
    merged = {"campaign": head["campaign"], "campaign_id": head["campaign_id"], "source": head["source"],
              "total": len(plan), "done": sum(r["status"] == "done" for r in runs),
              "failed": sum(r["status"] == "done" and not r["passed"] for r in runs), "runs": runs,
              "shards": {"count": count, "merged": sorted(shards), "missing": [s.index for s in missing],
                         "plan_digest": head["shard"]["plan_digest"]}}
    cdir = out / "campaigns" / head["campaign_id"]
    write_summary(cdir, merged)
    return Merged(merged, cdir, missing)


def _load(path: Path) -> dict[str, Any]:
    try:
        summary: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise ScenarioError(f"{path}: not readable as a campaign summary: {err}") from None
    if not isinstance(summary, dict) or not isinstance(summary.get("shard"), dict):
        raise ScenarioError(f"{path}: not a shard's summary (run the campaign with --shard I/N to make one)")
    return summary


def _same_plan(a: tuple[Path, dict[str, Any]], b: tuple[Path, dict[str, Any]]) -> None:
    (pa, sa), (pb, sb) = a, b
    if sa["campaign_id"] != sb["campaign_id"]:
        raise ScenarioError(f"{pb.parent} is a shard of campaign {sb['campaign_id']}, {pa.parent} of "
                            f"{sa['campaign_id']}: shards merge only with shards of the same campaign file")
    if sa["shard"]["count"] != sb["shard"]["count"]:
        raise ScenarioError(f"{pb.parent} is one of {sb['shard']['count']} shards, {pa.parent} one of "
                            f"{sa['shard']['count']}: every shard must be cut with the same N")
    if sa["shard"]["plan_digest"] != sb["shard"]["plan_digest"]:
        raise ScenarioError(f"{pb.parent} and {pa.parent} planned different runs from the same campaign file "
                            "(its base scenario or kafka-chaos's defaults differ between the machines)")


def _relocate(run: dict[str, Any], shard_out: Path) -> dict[str, Any]:
    """Paths a shard recorded on its own machine, moved to where its results folder is now (a CI artifact is
    downloaded somewhere else) when they no longer exist as recorded."""
    if "run_dir" not in run or Path(run["run_dir"]).exists():
        return run
    old = str(Path(run["run_dir"]).parent)
    new = str(shard_out.resolve())
    return {k: new + v[len(old):] if isinstance(v, str) and v.startswith(old + "/") else v for k, v in run.items()}
