"""The known-bug zoo (docs/architecture.md §9): Kafka's and its clients' documented correctness bugs as data, each
run on the version that has it and on the version that fixed it.

One TOML file per bug under scenarios/bugs/ says what the bug is (id, title, public links), which versions have it
and which fixed it, the run that should show it (a scenario table, or a scenario file it starts from, with dotted
overrides), the symptom the affected version must show, and how many attempts each side gets. `run_zoo` runs each
side `attempts` times and records, per side, in how many runs the symptom showed and with what; the results go to
`<out>/zoo/zoo.json` (merged with earlier results of other bugs; each run with its wall time), `<out>/zoo/index.html`
and docs/bug-zoo.md, whose table keeps every bug's last known result (docs/bug-zoo.json, see `write_doc`).

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


Observable = Literal["two-raft-leaders", "epoch-checkpoint-unreadable", "truncated-below-hw"]
"""What the cluster's own logs show: `two-raft-leaders`, two nodes each leading the KRaft quorum at once for at
least `min_overlap_s` (events.jsonl, checker.cluster_events.overlapping_leaders); `epoch-checkpoint-unreadable`,
a broker finding a partition's leader-epoch-checkpoint unparseable when it loads its logs (events.jsonl), which
takes its log directory offline; `truncated-below-hw`, a replica truncating records its high watermark had counted
as committed (events.jsonl)."""

EVENT_OBSERVABLES = ("epoch-checkpoint-unreadable", "truncated-below-hw")
"""Observables that are one events.jsonl event kind each, counted as they are."""


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
    client: str | None = Field(None, description="this side's client, when the sides differ by it (default: the "
                               "bug's `client`)")
    client_version: str | None = Field(None, description="this side's client release (a client bug's sides differ "
                                       "by it; unset: the installed confluent-kafka, in process)")
    overrides: dict[str, Any] = Field(default_factory=dict, description="dotted scenario overrides for this side")
    note: str = ""

    def label(self, bug_client: str) -> str:
        """The side's version as the table says it: Kafka's, or the client's release and the Kafka it ran on, and
        the transaction.version the cluster was formatted with when the side sets it (a bug whose sides differ by
        the transaction protocol alone)."""
        if self.client_version is None and self.client is None:
            label = self.kafka_version
        else:
            label = f"{self.client or bug_client} {self.client_version or '(installed)'} on Kafka {self.kafka_version}"
        tv = self.overrides.get("cluster.transaction_version")
        return label if tv is None else f"{label}, transaction.version={tv}"


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
        if s.client is not None or s.client_version is not None:
            overrides |= {"workload.client": s.client or self.bug.client, "workload.client_version": s.client_version}
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
    counted = [o for o in EVENT_OBSERVABLES if o in symptom.observables]
    if counted and run_dir is not None:
        from kafka_chaos.report.data import read_cluster_events

        events = read_cluster_events(RunDir(run_dir).events)
        for kind in counted:
            if n := sum(e.get("kind") == kind for e in events):
                found[kind] = n
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
            runner: Runner, doc: Path | None = None, catalogue: list[BugFile] | None = None,
            progress: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """Run each bug's sides `attempts` times (its own budget when None); return and write the zoo's results.

    The table at `doc` lists every bug of `catalogue` (default: `bugs`), not only those run now: see `write_doc`."""
    zoo_dir = out / "zoo"
    state = load_state(zoo_dir)
    for b in bugs:
        ran: dict[str, dict[str, Any]] = {}
        for side in sides:
            k = attempts or b.bug.attempts
            runs: list[Attempt] = []
            for attempt in range(k):
                progress(f"{b.bug.id}: {side} ({b.bug.side(side).label(b.bug.client)}) attempt {attempt + 1}/{k}")
                runs.append(run_attempt(b, side, attempt, zoo_dir, runner))
            ran[side] = record(state, b, side, runs)
        save_state(state, zoo_dir)  # after each bug: an interrupted zoo keeps its rows
        if doc is not None:
            write_doc(doc, catalogue or bugs, {b.bug.id: ran})
    return state


def run_attempt(b: BugFile, side: Side, attempt: int, zoo_dir: Path, runner: Runner) -> Attempt:
    """One run of one side of a bug, judged: what of its symptom showed, and its wall time from before the
    cluster starts until the run is checked."""
    started = time.monotonic()
    run_dir, results = runner(b.scenario(side, attempt), zoo_dir / b.bug.id)
    found, verdicts = shown(b.bug.symptom, results, Path(run_dir))
    return Attempt(str(run_dir), found, verdicts, len(results.get("violations") or []),
                   bool(results.get("complete", True)), round(time.monotonic() - started, 1))


def record(state: dict[str, Any], b: BugFile, side: Side, runs: list[Attempt]) -> dict[str, Any]:
    """Put one side's runs into the zoo's state (replacing that side's earlier ones) and return its record: its
    version, how many of its runs showed the symptom, and each run in the order it ran (with its `wall_s`)."""
    entry = state["bugs"].setdefault(b.bug.id, {})
    entry.update(_describe(b))
    entry[side] = {"version": b.bug.side(side).label(b.bug.client), "attempts": len(runs),
                   "reproduced": sum(r.reproduced for r in runs),
                   "runs": [{**r.__dict__, "reproduced": r.reproduced} for r in runs]}
    return dict(entry[side])


def load_state(zoo_dir: Path) -> dict[str, Any]:
    """`<zoo_dir>/zoo.json` (an empty zoo when there is none yet)."""
    path = zoo_dir / "zoo.json"
    state: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {"bugs": {}}
    return state


def save_state(state: dict[str, Any], zoo_dir: Path) -> None:
    """zoo.json and index.html under `zoo_dir`."""
    zoo_dir.mkdir(parents=True, exist_ok=True)
    (zoo_dir / "zoo.json").write_text(json.dumps(state, indent=1))
    (zoo_dir / "index.html").write_text(index_html(state, zoo_dir))


def _describe(b: BugFile) -> dict[str, Any]:
    return {"title": b.bug.title, "links": b.bug.links, "client": b.bug.client,
            "symptom": [*b.bug.symptom.anomalies, *b.bug.symptom.observables],
            "symptom_description": b.bug.symptom.description,
            "why": b.bug.why, "file": str(b.path)}


# ------------------------------------------------------------------------------------------------ outputs


def side_summary(s: dict[str, Any]) -> dict[str, Any]:
    """One side as the docs' sidecar keeps it: version, attempts, reproduced, and the symptom's instances summed
    over the runs (a zoo.json side, with its runs, or a summary already)."""
    if "runs" not in s:
        return s
    totals: dict[str, int] = {}
    for run in s["runs"]:
        for name, n in run["shown"].items():
            totals[name] = totals.get(name, 0) + n
    return {"version": s["version"], "attempts": s["attempts"], "reproduced": s["reproduced"], "shown": totals}


def side_cell(entry: dict[str, Any], side: Side) -> str:
    """One side of a bug as the table says it: `4.0.1: reproduced 3/3 (lost-write ×12)` / `clean 3/3`."""
    if not entry.get(side):
        return "not run"
    s = side_summary(entry[side])
    k, r = s["attempts"], s["reproduced"]
    what = ", ".join(f"{n} ×{c}" for n, c in sorted(s["shown"].items()))
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


def write_doc(doc: Path, catalogue: list[BugFile], ran: dict[str, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """Rewrite the markdown table at `doc` with a row for every bug of `catalogue`, and return what it shows.

    Each side's cell is this run's result when the side ran now (`ran`: bug id → side → its zoo.json record),
    otherwise the last one known, from the machine-readable sidecar next to the table (docs/bug-zoo.json, which
    only the zoo writes: the markdown is never parsed back); a bug never run says *not run*."""
    sidecar = doc.with_suffix(".json")
    known: dict[str, Any] = json.loads(sidecar.read_text()).get("bugs", {}) if sidecar.exists() else {}
    for bug_id, sides in ran.items():
        known.setdefault(bug_id, {}).update({side: side_summary(s) for side, s in sides.items()})
    sidecar.write_text(json.dumps({"written_by": "kafka-chaos zoo: the last result of each bug's sides, the "
                                   f"source of {doc.name}", "bugs": dict(sorted(known.items()))}, indent=1) + "\n")
    table = {"bugs": {b.bug.id: {**_describe(b), **known.get(b.bug.id, {})} for b in catalogue}}
    doc.write_text(markdown(table))
    return table


# ------------------------------------------------------------------------------------------ time to reproduce

GOAL_S = 600.0
"""The zoo's goal: every bug it reproduces shows on its affected version within ten minutes of runs."""


@dataclass(frozen=True)
class Trial:
    runs: int
    wall_s: float | None
    """The runs' wall times summed, cluster starts included (None when a run has none recorded)."""
    reproduced: bool


def trials(runs: list[dict[str, Any]], max_runs: int | None = None) -> list[Trial]:
    """One side's runs, in the order they ran, cut into trials: each ends at the first run that showed the symptom,
    or after `max_runs` runs without it; runs left at the end without a reproduction are a trial that did not
    reproduce (yet)."""
    out: list[Trial] = []
    n, wall = 0, 0.0
    known = True
    for r in runs:
        n += 1
        known = known and r.get("wall_s") is not None
        wall += float(r.get("wall_s") or 0)
        if r["reproduced"] or n == max_runs:
            out.append(Trial(n, wall if known else None, bool(r["reproduced"])))
            n, wall, known = 0, 0.0, True
    if n:
        out.append(Trial(n, wall if known else None, False))
    return out


@dataclass(frozen=True)
class Reproduction:
    bug: str
    version: str
    trials: list[Trial]

    @property
    def reproduced(self) -> list[Trial]:
        return [t for t in self.trials if t.reproduced]

    @property
    def mean_runs(self) -> float | None:
        done = self.reproduced
        return sum(t.runs for t in done) / len(done) if done else None

    @property
    def mean_wall_s(self) -> float | None:
        walls = [t.wall_s for t in self.reproduced]
        return None if not walls or None in walls else sum(w or 0 for w in walls) / len(walls)

    @property
    def under_goal(self) -> bool:
        """Every trial reproduced, in under GOAL_S on average."""
        mean = self.mean_wall_s
        return bool(self.trials) and len(self.reproduced) == len(self.trials) and mean is not None and mean < GOAL_S


def reproductions(state: dict[str, Any], ids: Iterable[str] = (), max_runs: int | None = None
                  ) -> list[Reproduction]:
    """Each bug's time to first reproduction on its affected version, from the runs a zoo state holds (all its
    bugs, or `ids`; a bug whose affected side never ran has no trials)."""
    wanted = list(ids) or sorted(state["bugs"])
    out = []
    for bug_id in wanted:
        side = (state["bugs"].get(bug_id) or {}).get("affected") or {}
        out.append(Reproduction(bug_id, side.get("version", "?"), trials(side.get("runs") or [], max_runs)))
    return out


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
