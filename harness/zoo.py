"""The known-bug zoo (docs/architecture.md §9): Kafka's and its clients' documented correctness bugs as data, each
run on the version that has it and on the version that fixed it.

One TOML file per bug under scenarios/bugs/ says what the bug is (id, title, public links), which versions have it
and which fixed it, the run that should show it (a scenario table, or a scenario file it starts from, with dotted
overrides), the symptom the affected version must show, and how many attempts each side gets. `run_zoo` runs each
side `attempts` times and records, per side, in how many runs the symptom showed and with what; the results go to
`<out>/zoo/zoo.json` (merged with earlier results of other bugs), `<out>/zoo/index.html` and docs/bug-zoo.md.

A symptom is the anomalies that show it (any instance of one of them, whatever its verdict: the verdict says what
the model thinks of it, the zoo asks whether the shape happened). A bug that does not reproduce stays in the table
as *not reproduced*, with its attempts; nothing here forces a symptom.
"""

from __future__ import annotations

import html
import json
import time
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from kafka_chaos.checker.conformance import CONFORMANCE_NAMES
from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT
from kafka_chaos.errors import ScenarioError
from kafka_chaos.harness.scenario import Scenario, load_scenario, parse_scenario
from kafka_chaos.rundir import RunDir

BUGS_DIR = Path("scenarios/bugs")
ZOO_DOC = Path("docs/bug-zoo.md")
Side = Literal["affected", "fixed"]
SIDES: tuple[Side, ...] = ("affected", "fixed")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


CHECKED = frozenset(ANOMALIES_BAD_BY_DEFAULT) | frozenset(CONFORMANCE_NAMES)
"""Every anomaly the checker computes: Jepsen's, and the conformance checks' (results' `conformance`)."""


Observable = Literal["two-raft-leaders", "epoch-checkpoint-unreadable"]
"""What the cluster's own logs show: `two-raft-leaders`, two nodes each leading the KRaft quorum at once for at
least `min_overlap_s` (events.jsonl, checker.cluster_events.overlapping_leaders); `epoch-checkpoint-unreadable`,
a broker finding a partition's leader-epoch-checkpoint unparseable when it loads its logs (events.jsonl), which
takes its log directory offline."""


class Symptom(_Strict):
    anomalies: list[str] = Field(default_factory=list, description="any instance of one of these shows the bug")
    observables: list[Observable] = Field(default_factory=list)
    min_overlap_s: float = Field(0.0, ge=0, description="two-raft-leaders: the shortest overlap that counts")
    description: str = ""

    @model_validator(mode="after")
    def _something(self) -> Symptom:
        if not self.anomalies and not self.observables:
            raise ValueError("a symptom names anomalies, observables, or both")
        return self

    @field_validator("anomalies")
    @classmethod
    def _known(cls, names: list[str]) -> list[str]:
        unknown = sorted(set(names) - CHECKED)
        if unknown:
            raise ValueError(f"the checker computes no anomaly named {unknown}; it computes {sorted(CHECKED)}")
        return names


class BugSide(_Strict):
    kafka_version: str
    overrides: dict[str, Any] = Field(default_factory=dict, description="dotted scenario overrides for this side")
    note: str = ""


class Bug(_Strict):
    id: str
    title: str
    links: list[str] = Field(min_length=1)
    client: str = "librdkafka"
    attempts: int = Field(3, ge=1, le=100)
    affected: BugSide
    fixed: BugSide
    symptom: Symptom
    base: str | None = Field(None, description="a scenario file this bug's run starts from, relative to the bug file")
    scenario: dict[str, Any] = Field(default_factory=dict, description="the run, or overrides of `base`")
    why: str = Field("", description="what the code says, on both sides")

    def side(self, side: Side) -> BugSide:
        return self.affected if side == "affected" else self.fixed


@dataclass(frozen=True)
class BugFile:
    bug: Bug
    path: Path
    base: Scenario

    def scenario(self, side: Side, attempt: int) -> Scenario:
        """The run of one attempt on one side: the bug's scenario at that side's version, seed + attempt."""
        s = self.bug.side(side)
        overrides = {**s.overrides, "cluster.kafka_version": s.kafka_version, "seed": self.base.seed + attempt,
                     "name": f"zoo-{self.bug.id}-{side}-{attempt}"}
        try:
            return self.base.with_overrides(**overrides)
        except ScenarioError as e:
            raise ScenarioError(f"{self.path}: the {side} side's run: {e}") from None


def load_bug(path: Path) -> BugFile:
    """One zoo file, validated: a bad file is a ScenarioError naming the file, the field and what is allowed."""
    try:
        raw = tomllib.loads(path.read_text())
    except FileNotFoundError:
        raise ScenarioError(f"{path}: no such zoo file; the zoo's files are in {BUGS_DIR}/") from None
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    try:
        bug = Bug.model_validate(raw)
    except ValidationError as e:
        first = e.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "the top level"
        raise ScenarioError(f"{path}: {where}: {first['msg']} (a zoo file has the fields "
                            f"{sorted(Bug.model_fields)})") from None
    if bug.base:
        base = load_scenario(path.parent / bug.base)
        base = base.with_overrides(**_dotted(bug.scenario)) if bug.scenario else base
    else:
        base = parse_scenario({"name": bug.id, **bug.scenario}, source=str(path))
    loaded = BugFile(bug, path, base)
    for side in SIDES:
        loaded.scenario(side, 0)  # each side's run must validate before any container starts
    return loaded


def _dotted(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in table.items():
        if isinstance(v, dict) and k != "faults":
            out.update(_dotted(v, f"{prefix}{k}."))
        else:
            out[f"{prefix}{k}"] = v
    return out


def load_zoo(ids: Iterable[str] = (), directory: Path = BUGS_DIR) -> list[BugFile]:
    """The zoo's files (all, or those whose id is in `ids`), every one validated before anything runs."""
    files = sorted(directory.glob("*.toml"))
    if not files:
        raise ScenarioError(f"no zoo files in {directory}/ (run from the project's folder, or pass --bugs DIR)")
    bugs = [load_bug(p) for p in files]
    wanted = list(ids)
    unknown = sorted(set(wanted) - {b.bug.id for b in bugs})
    if unknown:
        raise ScenarioError(f"no zoo file has the id {unknown}; the zoo has {sorted(b.bug.id for b in bugs)}")
    return [b for b in bugs if not wanted or b.bug.id in wanted]


# ------------------------------------------------------------------------------------------------ running


@dataclass
class Attempt:
    run_dir: str
    shown: dict[str, int]
    """The symptom's anomalies with their instance counts (empty: not shown)."""
    verdicts: dict[str, int] = field(default_factory=dict)
    """The model's verdicts on the symptom's instances: violation / known-defect / permitted."""
    violations: int = 0
    complete: bool = True
    wall_s: float = 0.0

    @property
    def reproduced(self) -> bool:
        return bool(self.shown)


def shown(symptom: Symptom, results: dict[str, Any], run_dir: Path | None = None
          ) -> tuple[dict[str, int], dict[str, int]]:
    """Which of the symptom's anomalies and observables a run shows (name → instances or periods), and the model's
    verdicts on the anomalies' instances."""
    found: dict[str, int] = {}
    verdicts: dict[str, int] = {}
    conformance = (results.get("conformance") or {}).get("anomalies") or {}
    for name in symptom.anomalies:
        insts = (results.get("anomalies") or {}).get(name) or conformance.get(name) or []
        if insts:
            found[name] = len(insts)
            for inst in insts:
                v = str(inst.get("verdict"))
                verdicts[v] = verdicts.get(v, 0) + 1
    if "two-raft-leaders" in symptom.observables and run_dir is not None:
        periods = [p for p in _two_leaders(run_dir, results)
                   if p["end_s"] is None or p["end_s"] - p["start_s"] >= symptom.min_overlap_s]
        if periods:
            found["two-raft-leaders"] = len(periods)
    if "epoch-checkpoint-unreadable" in symptom.observables and run_dir is not None:
        from kafka_chaos.report.data import read_cluster_events

        unreadable = [e for e in read_cluster_events(RunDir(run_dir).events)
                      if e.get("kind") == "epoch-checkpoint-unreadable"]
        if unreadable:
            found["epoch-checkpoint-unreadable"] = len(unreadable)
    return found, verdicts


def _two_leaders(run_dir: Path, results: dict[str, Any]) -> list[dict[str, Any]]:
    from kafka_chaos.checker.cluster_events import overlapping_leaders
    from kafka_chaos.faults.registry import taking_down
    from kafka_chaos.report.data import read_cluster_events

    events = read_cluster_events(RunDir(run_dir).events)
    down: dict[int, list[float]] = {}
    for w in (results.get("faults") or {}).get("windows") or []:
        if w.get("f") in taking_down():
            for node in w.get("nodes") or ():
                down.setdefault(int(node), []).append(int(w["start"]) / 1e9)
    return overlapping_leaders(events, down)


Runner = Callable[[Scenario, Path], tuple[Path, dict[str, Any]]]
"""Runs one scenario into a folder, returning the run's folder and its results.json dict."""


def run_zoo(bugs: list[BugFile], *, out: Path, attempts: int | None = None, sides: Iterable[Side] = SIDES,
            runner: Runner, doc: Path | None = None,
            progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run each bug's sides `attempts` times (its own budget when None); return and write the zoo's results."""
    zoo_dir = out / "zoo"
    zoo_dir.mkdir(parents=True, exist_ok=True)
    state_path = zoo_dir / "zoo.json"
    state: dict[str, Any] = json.loads(state_path.read_text()) if state_path.exists() else {"bugs": {}}
    for b in bugs:
        entry = state["bugs"].setdefault(b.bug.id, {})
        entry.update(_describe(b))
        for side in sides:
            k = attempts or b.bug.attempts
            runs: list[Attempt] = []
            for attempt in range(k):
                progress(f"{b.bug.id}: {side} ({b.bug.side(side).kafka_version}) attempt {attempt + 1}/{k}")
                started = time.monotonic()
                run_dir, results = runner(b.scenario(side, attempt), zoo_dir / b.bug.id)
                found, verdicts = shown(b.bug.symptom, results, Path(run_dir))
                runs.append(Attempt(str(run_dir), found, verdicts, len(results.get("violations") or []),
                                    bool(results.get("complete", True)), round(time.monotonic() - started, 1)))
            entry[side] = {"version": b.bug.side(side).kafka_version, "attempts": len(runs),
                           "reproduced": sum(r.reproduced for r in runs),
                           "runs": [{**r.__dict__, "reproduced": r.reproduced} for r in runs]}
        state_path.write_text(json.dumps(state, indent=1))  # after each bug: an interrupted zoo keeps its rows
        write_outputs(state, zoo_dir, doc)
    return state


def _describe(b: BugFile) -> dict[str, Any]:
    return {"title": b.bug.title, "links": b.bug.links, "client": b.bug.client,
            "symptom": [*b.bug.symptom.anomalies, *b.bug.symptom.observables],
            "symptom_description": b.bug.symptom.description,
            "why": b.bug.why, "file": str(b.path)}


# ------------------------------------------------------------------------------------------------ outputs


def side_cell(entry: dict[str, Any], side: Side) -> str:
    """One side of a bug as the table says it: `4.0.1: reproduced 3/3 (lost-write ×12)` / `clean 3/3`."""
    s = entry.get(side)
    if not s:
        return "not run"
    k, r = s["attempts"], s["reproduced"]
    shapes: dict[str, int] = {}
    for run in s["runs"]:
        for name, n in run["shown"].items():
            shapes[name] = shapes.get(name, 0) + n
    what = ", ".join(f"{n} ×{c}" for n, c in sorted(shapes.items()))
    if side == "affected":
        return f"{s['version']}: reproduced {r}/{k}" + (f" ({what})" if what else "") if r else \
            f"{s['version']}: not reproduced in {k} runs"
    return f"{s['version']}: clean {k - r}/{k}" + (f" (shown: {what})" if what else "")


def markdown(state: dict[str, Any]) -> str:
    lines = ["# The known-bug zoo", "",
             "Each bug on the version that has it and on the version that fixed it (`kafka-chaos zoo`; the files "
             "are in `scenarios/bugs/`). *Reproduced r/K*: the symptom showed in r of K runs; *clean K/K*: it "
             "never showed on the fixed version. Written by `kafka-chaos zoo`; do not edit by hand.", "",
             "| bug | symptom | affected version | fixed version | why |", "|---|---|---|---|---|"]
    for bug_id, e in sorted(state["bugs"].items()):
        link = e["links"][0] if e.get("links") else ""
        lines.append(f"| [{bug_id}]({link}) {e['title']} | {', '.join(e['symptom'])} | {side_cell(e, 'affected')} "
                     f"| {side_cell(e, 'fixed')} | {e.get('why', '').replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def index_html(state: dict[str, Any], zoo_dir: Path) -> str:
    rows = []
    for bug_id, e in sorted(state["bugs"].items()):
        links = " ".join(f'<a href="{html.escape(u)}">{html.escape(u)}</a>' for u in e.get("links", []))
        runs = []
        for side in SIDES:
            for r in (e.get(side) or {}).get("runs", []):
                mark = "shown: " + ", ".join(r["shown"]) if r["reproduced"] else "clean"
                runs.append(f'<a href="{html.escape(_relative(Path(r["run_dir"]), zoo_dir))}/report.html">'
                            f"{side} {html.escape(Path(r['run_dir']).name)}</a> ({html.escape(mark)})")
        rows.append(
            f"<tr><td><b>{html.escape(bug_id)}</b><br>{html.escape(e['title'])}<br>{links}</td>"
            f"<td>{html.escape(', '.join(e['symptom']))}</td><td>{html.escape(side_cell(e, 'affected'))}</td>"
            f"<td>{html.escape(side_cell(e, 'fixed'))}</td><td>{html.escape(e.get('why', ''))}</td>"
            f"<td><details><summary>{len(runs)} runs</summary>{'<br>'.join(runs)}</details></td></tr>")
    return ("<!doctype html><html><head><meta charset='utf-8'><title>kafka-chaos: the known-bug zoo</title>"
            "<style>body{font-family:sans-serif}td{vertical-align:top;border-top:1px solid #ccc;padding:4px}</style>"
            "</head><body><h1>The known-bug zoo</h1><table><tr><th>bug</th><th>symptom</th><th>affected</th>"
            f"<th>fixed</th><th>why</th><th>runs</th></tr>{''.join(rows)}</table></body></html>\n")


def _relative(run_dir: Path, zoo_dir: Path) -> str:
    try:
        return str(run_dir.resolve().relative_to(zoo_dir.resolve()))
    except ValueError:
        return run_dir.resolve().as_uri()


def write_outputs(state: dict[str, Any], zoo_dir: Path, doc: Path | None = None) -> None:
    """zoo/index.html, and the markdown table at `doc` (docs/bug-zoo.md) when given."""
    (zoo_dir / "index.html").write_text(index_html(state, zoo_dir))
    if doc is not None:
        doc.write_text(markdown(state))


def zoo_runner(bugs: list[BugFile], sides: Iterable[Side], console: Any) -> Runner:
    """The real runner: each run a cluster of its own (the sides' versions differ); images of versions not built
    yet are built first, before any run starts (a version that cannot be built stops the zoo here)."""
    from kafka_chaos.cluster.engine import docker_client
    from kafka_chaos.cluster.images import build_kafka, image_exists, kafka_image
    from kafka_chaos.harness.run import run_scenario

    client = docker_client()
    needed = sorted({b.bug.side(side).kafka_version for b in bugs for side in sides})
    for version in needed:
        if not image_exists(client, kafka_image(version)):
            with console.status(f"building the Kafka {version} image…") as status:
                build_kafka(client, version, lambda m: status.update(m[:100]))

    def run(scenario: Scenario, out: Path) -> tuple[Path, dict[str, Any]]:
        result = run_scenario(scenario, out=out, console=console)
        return result.run_dir, result.results

    return run
