"""Shrink a failing run to a minimal reproducer: `kafka-chaos shrink RUN_DIR`.

It starts from the run's `scenario.resolved.toml` (every fault explicit) and re-runs variations of it on fresh
real clusters, keeping each variation that still shows the anomaly:

1. delta debugging (ddmin, Zeller & Hildebrandt 2002) over the fault list;
2. then, greedily, shorter fault durations, shorter gaps before and between faults, fewer producers, fewer keys
   (partitions), a lower rate, a shorter run.

A chaos run is not deterministic, so a candidate is tried up to `attempts` times and counts as failing as soon as
one try fails (a pass is only "did not fail in K tries"). The smallest failing candidate is re-run `confirm`
times and its reproduction rate reported. Every try is recorded in RUN_DIR/shrink/journal.json as it ends: the
search is deterministic given the answers, so a resumed shrink replays the journal's answers without running
anything and continues at the first candidate it has no answer for. `budget_runs` caps the runs, confirmation
included; when it runs out, the smallest failing candidate so far is the result.

Outputs: shrink/minimal.toml (a scenario anyone can run), shrink/index.html (every candidate, its size, its
result, links to its runs' reports), shrink/runs/ (the candidate runs).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from rich.console import Console
from rich.errors import LiveError

from kafka_chaos.checker.results import RunResults
from kafka_chaos.errors import ResultsError, ShrinkError
from kafka_chaos.faults.schedule import FaultsConfig, PlannedFault, plan
from kafka_chaos.harness.replay import RESOLVED_NAME, load_resolved, scenario_data, write_scenario
from kafka_chaos.harness.scenario import Scenario
from kafka_chaos.report.shrink import render_shrink_index

VIOLATION = "violation"
JOURNAL_VERSION = 1
T = TypeVar("T")


@dataclass(frozen=True)
class TryResult:
    """One run of a candidate: did it show the anomaly, where it is, what it counted."""

    failed: bool
    run_dir: str | None = None
    counts: dict[str, int] = field(default_factory=dict)


Runner = Callable[[Scenario], TryResult]


class BudgetExhausted(Exception):
    """The run budget is spent; the search stops with the smallest failing candidate so far."""


# -- ddmin ------------------------------------------------------------------------------------------------------


def ddmin(items: Sequence[T], fails: Callable[[list[T]], bool]) -> list[T]:
    """A 1-minimal failing subsequence of `items` (which must fail as a whole), by Zeller's ddmin.

    Each distinct subset is asked about at most once (answers are cached), so `fails` is called at most
    n² + 3n times for n items (the ddmin worst case), and O(log n) times when one item alone fails."""
    cache: dict[tuple[int, ...], bool] = {}

    def test(idx: list[int]) -> bool:
        key = tuple(idx)
        if key not in cache:
            cache[key] = fails([items[i] for i in idx])
        return cache[key]

    current = list(range(len(items)))
    n = 2
    while len(current) >= 2:
        chunks = _split(current, n)
        for chunk in chunks:  # reduce to a subset
            if test(chunk):
                current, n = chunk, 2
                break
        else:
            for i in range(len(chunks)):  # reduce to a complement
                complement = [x for j, c in enumerate(chunks) if j != i for x in c]
                if len(chunks) > 2 and test(complement):
                    current, n = complement, max(n - 1, 2)
                    break
            else:
                if n >= len(current):
                    break
                n = min(len(current), 2 * n)  # increase granularity
    return [items[i] for i in current]


def _split(xs: list[int], n: int) -> list[list[int]]:
    k, r = divmod(len(xs), n)
    out, start = [], 0
    for i in range(n):
        end = start + k + (1 if i < r else 0)
        out.append(xs[start:end])
        start = end
    return [c for c in out if c]


# -- sizes and candidate transforms -----------------------------------------------------------------------------


def faults_of(s: Scenario) -> list[PlannedFault]:
    return plan(s.faults, s.duration_s, s.seed)


def with_faults(s: Scenario, planned: list[PlannedFault]) -> Scenario:
    return s.model_copy(update={"faults": FaultsConfig.from_plan(planned)})


def size_of(s: Scenario) -> dict[str, float]:
    planned = faults_of(s)
    return {"faults": len(planned), "fault_s": round(sum(p.duration_s for p in planned), 1),
            "first_at_s": planned[0].at_s if planned else 0.0, "duration_s": s.duration_s,
            "producers": s.workload.producers, "keys": s.topic.partitions,
            "rate": s.workload.rate}


def size_text(size: dict[str, Any]) -> str:
    return (f"{size['faults']:g} faults ({size['fault_s']:g} s, first at {size.get('first_at_s', 0):g} s), "
            f"run {size['duration_s']:g} s, "
            f"{size['producers']:g} producers, {size['keys']:g} keys, rate {size['rate']:g}/s")


def _shorter_faults(s: Scenario) -> Scenario | None:
    planned = faults_of(s)
    shorter = [replace(p, duration_s=max(1.0, round(p.duration_s / 2, 1))) for p in planned]
    return None if shorter == planned else with_faults(s, shorter)


def _shorter_gaps(s: Scenario, lead_min_s: float = 2.0, step_min_s: float = 1.0) -> Scenario | None:
    """Faults earlier: the lead before the first fault and every gap between starts halved (order kept); the
    lead stays at least `lead_min_s` so clients are writing when the first fault lands. A move of less than
    `step_min_s` in all is not worth a run."""
    planned = faults_of(s)
    if not planned:
        return None
    first = planned[0].at_s
    lead = max(min(first, lead_min_s), round(first / 2, 1))
    moved = [replace(p, at_s=round(lead + (p.at_s - first) / 2, 1)) for p in planned]
    if sum(abs(a.at_s - b.at_s) for a, b in zip(moved, planned, strict=True)) < step_min_s:
        return None
    return with_faults(s, moved)


def _fewer_producers(s: Scenario) -> Scenario | None:
    w = s.workload
    return s.with_overrides(**{"workload.producers": w.producers // 2}) if w.producers > 1 else None


def _fewer_keys(s: Scenario) -> Scenario | None:
    t = s.topic
    return s.with_overrides(**{"topic.partitions": t.partitions // 2}) if t.partitions > 1 else None


def _lower_rate(s: Scenario, floor: float = 25.0) -> Scenario | None:
    rate = s.workload.rate
    return s.with_overrides(**{"workload.rate": round(rate / 2, 1)}) if rate / 2 >= floor else None


def _shorter_run(s: Scenario, tail_min_s: float = 3.0) -> Scenario | None:
    """Less time after the last heal (at least `tail_min_s`); a run without faults is halved."""
    planned = faults_of(s)
    end = max((p.heal_at_s for p in planned), default=0.0)
    tail = s.duration_s - end
    if planned and tail / 2 < tail_min_s:
        return None
    duration = round(end + tail / 2, 1) if planned else round(s.duration_s / 2, 1)
    return s.with_overrides(duration_s=duration) if 0 < duration < s.duration_s else None


PHASES: list[tuple[str, Callable[[Scenario], Scenario | None]]] = [
    ("durations", _shorter_faults),
    ("gaps", _shorter_gaps),
    ("producers", _fewer_producers),
    ("keys", _fewer_keys),
    ("rate", _lower_rate),
    ("run", _shorter_run),
]


STEPS: tuple[str, ...] = ("ddmin", *(name for name, _ in PHASES))


def candidate_key(s: Scenario) -> str:
    """What makes two candidates the same experiment (not their names or the run's record fields)."""
    data = scenario_data(s)
    for k in ("name", "description", "run_id", "image_id", "kafka_settings"):
        data.pop(k, None)
    for f in data.get("faults", {}).get("schedule", []):
        f.pop("nodes", None)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]


# -- the oracle: does a run show the anomaly? -------------------------------------------------------------------


def anomaly_names() -> tuple[str, ...]:
    from kafka_chaos.checker.schema import ANOMALIES_BAD_BY_DEFAULT

    return tuple(ANOMALIES_BAD_BY_DEFAULT)


def shows(results: RunResults, until: str) -> bool:
    if until == VIOLATION:
        return bool(results.violations)
    return results.count(until) > 0


def cluster_runner(out: Path, until: str) -> Runner:
    """Each try is a full run on a fresh real cluster, stored under `out`."""
    from kafka_chaos.harness.run import run_scenario

    def run(s: Scenario) -> TryResult:
        r = run_scenario(s, out=out, console=Console(quiet=True))
        return TryResult(shows(r.checked, until), str(r.run_dir.resolve()), dict(r.checked.anomaly_counts))

    return run


# -- the shrinker -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ShrinkResult:
    shrink_dir: Path
    minimal: Path
    index: Path
    size_before: dict[str, float]
    size_after: dict[str, float]
    runs_used: int
    budget_runs: int
    budget_exhausted: bool
    reproduced: int
    confirm_runs: int
    wall_s: float


def check_input(run_dir: Path, until: str | None) -> tuple[Scenario, str, RunResults]:
    """The run's resolved scenario, the anomaly to keep, and its results; ShrinkError (exit 2) for bad input."""
    names = anomaly_names()
    if until is not None and until != VIOLATION and until not in names:
        raise ShrinkError(f"--until {until!r} is not an anomaly kafka-chaos knows. Use `violation` (any anomaly "
                          f"the configuration does not permit) or one of: {', '.join(names)}.")
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ShrinkError(f"{run_dir} is not a folder; pass a run's results folder, e.g. results/<run id>/.")
    if not (run_dir / RESOLVED_NAME).exists():
        raise ShrinkError(f"{run_dir} holds no {RESOLVED_NAME}, so there is no fault list to shrink: it is not a "
                          "run folder, or the run was made before runs recorded their resolved scenario. Re-run "
                          "its scenario with `kafka-chaos run` and shrink that run.")
    try:
        results = RunResults.load(run_dir)
    except ResultsError as err:
        raise ShrinkError(f"{err} Then shrink it.") from None
    until = until or VIOLATION
    if not shows(results, until):
        what = "no violation (it passed)" if until == VIOLATION else f"no {until}"
        found = ", ".join(f"{k}: {v}" for k, v in sorted(results.anomaly_counts.items())) or "none"
        raise ShrinkError(f"{run_dir} shows {what}, so there is nothing to shrink (anomalies it does show: "
                          f"{found}). Shrink a failing run, or name an anomaly it shows with --until.")
    try:
        scenario = load_resolved(run_dir)
    except Exception as err:
        raise ShrinkError(f"{run_dir / RESOLVED_NAME} cannot be read: {err}") from None
    return scenario, until, results


class Shrinker:
    def __init__(self, run_dir: Path, *, until: str | None = None, budget_runs: int = 30, attempts: int = 2,
                 confirm: int = 3, runner: Runner | None = None, console: Console | None = None,
                 fresh: bool = False, steps: Sequence[str] = STEPS) -> None:
        if attempts < 1 or confirm < 0 or budget_runs < 1:
            raise ShrinkError(f"--attempts ({attempts}) and --budget-runs ({budget_runs}) must be at least 1, "
                              f"--confirm ({confirm}) at least 0.")
        unknown = [step for step in steps if step not in STEPS]
        if unknown or not steps:
            raise ShrinkError(f"--steps {','.join(steps)!r} names no step or unknown ones ({', '.join(unknown)}); "
                              f"the steps are {','.join(STEPS)}.")
        self.steps = tuple(steps)
        self.run_dir = Path(run_dir)
        self.original, self.until, self.results = check_input(self.run_dir, until)
        self.attempts, self.budget, self.confirm = attempts, budget_runs, confirm
        self.dir = self.run_dir / "shrink"
        self.console = console or Console(quiet=True)
        self.runner = runner or cluster_runner(self.dir / "runs", self.until)
        self.journal_path = self.dir / "journal.json"
        self.journal = self._load_journal(fresh)
        self.by_key = {c["key"]: c for c in self.journal["candidates"]}

    # -- journal ---------------------------------------------------------------------------------------------

    def _load_journal(self, fresh: bool) -> dict[str, Any]:
        if self.journal_path.exists() and not fresh:
            journal: dict[str, Any] = json.loads(self.journal_path.read_text())
            if journal.get("until") != self.until or journal.get("attempts") != self.attempts:
                raise ShrinkError(
                    f"{self.journal_path} is a shrink with --until {journal.get('until')} --attempts "
                    f"{journal.get('attempts')}; resume it with those, or pass --fresh to start over."
                )
            journal["budget_runs"] = self.budget  # a resumed shrink may be given more (or fewer) runs
            return journal
        self.dir.mkdir(parents=True, exist_ok=True)
        return {"version": JOURNAL_VERSION, "source": str(self.run_dir.resolve()), "until": self.until,
                "attempts": self.attempts, "budget_runs": self.budget, "candidates": [], "minimal": None,
                "confirm": [], "done": False, "budget_exhausted": False, "wall_s": 0.0}

    def _save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.journal_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.journal, indent=1))
        tmp.replace(self.journal_path)

    @property
    def runs_used(self) -> int:
        return (sum(len(c["tries"]) for c in self.journal["candidates"]) + len(self.journal["confirm"])
                + len(self.journal.get("confirm_superseded", [])))

    # -- the oracle with K attempts, the budget and the journal ---------------------------------------------

    def fails(self, s: Scenario, step: str) -> bool:
        key = candidate_key(s)
        c = self.by_key.get(key)
        if c is None:
            c = {"key": key, "n": len(self.journal["candidates"]), "step": step, "size": size_of(s),
                 "scenario": scenario_data(s), "tries": [], "result": None}
            self.journal["candidates"].append(c)
            self.by_key[key] = c
        if c["result"] in ("fail", "pass"):
            return bool(c["result"] == "fail")
        tries: list[dict[str, Any]] = c["tries"]
        while len(tries) < self.attempts and not any(t["failed"] for t in tries):
            if self.runs_used >= self.budget - self.confirm:
                c["result"] = "budget spent"  # not an answer: a resume with a larger budget runs it
                self._save()
                self._write_index()
                raise BudgetExhausted
            t0 = time.monotonic()
            with _status(self.console, f"#{c['n']} {step}: try {len(tries) + 1}/{self.attempts} running…"):
                result = self.runner(s)
            tries.append({**asdict(result), "wall_s": round(time.monotonic() - t0, 1)})
            self._save()
            self._progress(c, len(tries), result)
        c["result"] = "fail" if any(t["failed"] for t in tries) else "pass"
        self._save()
        self._write_index()
        return bool(c["result"] == "fail")

    def _progress(self, c: dict[str, Any], attempt: int, result: TryResult) -> None:
        verdict = f"[red]FAIL[/] ({self.until})" if result.failed else "[green]pass[/]"
        self.console.print(f"[bold]#{c['n']}[/] {c['step']:<9} {size_text(c['size'])} · try {attempt}/"
                           f"{self.attempts}: {verdict} · runs {self.runs_used}/{self.budget}", highlight=False)

    # -- the search --------------------------------------------------------------------------------------------

    def run(self) -> ShrinkResult:
        started = time.monotonic()
        original = self.original
        origin = self.by_key.get(candidate_key(original))
        if origin is None:  # the recorded run is the first failing candidate; it costs no run of ours
            origin = {"key": candidate_key(original), "n": 0, "step": "original", "size": size_of(original),
                      "scenario": scenario_data(original), "tries": [], "result": "fail",
                      "source_run": str(self.run_dir.resolve())}
            self.journal["candidates"].insert(0, origin)
            self.by_key[origin["key"]] = origin
            self._save()
        self.console.print(f"shrinking {self.run_dir} until {self.until}: {size_text(origin['size'])}; "
                           f"{self.attempts} tries per candidate, budget {self.budget} runs "
                           f"({self.confirm} kept to confirm)", highlight=False)
        best = original
        exhausted = False
        try:
            if "ddmin" in self.steps:
                best = self._ddmin(best)
            for step, transform in PHASES:
                if step not in self.steps:
                    continue
                while (candidate := transform(best)) is not None and self.fails(candidate, step):
                    best = candidate
        except BudgetExhausted:
            exhausted = True
            self.console.print(f"[yellow]budget of {self.budget} runs spent[/]: keeping the smallest failing "
                               "candidate so far", highlight=False)
        self.journal["minimal"] = candidate_key(best)
        self.journal["budget_exhausted"] = exhausted
        minimal = write_scenario(self.dir / "minimal.toml", self._minimal_data(best))
        self._save()
        self._confirm(best)
        self.journal["done"] = True
        self.journal["wall_s"] = round(self.journal["wall_s"] + time.monotonic() - started, 1)
        self._save()
        index = self._write_index()
        reproduced = sum(bool(t["failed"]) for t in self.journal["confirm"])
        return ShrinkResult(self.dir, minimal, index, origin["size"], size_of(best), self.runs_used, self.budget,
                            exhausted, reproduced, len(self.journal["confirm"]), self.journal["wall_s"])

    def _ddmin(self, best: Scenario) -> Scenario:
        planned = faults_of(best)
        if len(planned) < 2:
            return best
        kept = ddmin(planned, lambda subset: self.fails(with_faults(best, subset), "ddmin"))
        return with_faults(best, kept)

    def _confirm(self, best: Scenario) -> None:
        key = candidate_key(best)
        if self.journal.get("confirm_key") not in (None, key):
            # a resume with a larger budget found a smaller candidate: the old confirmations were of another one
            self.journal.setdefault("confirm_superseded", []).extend(self.journal["confirm"])
            self.journal["confirm"] = []
        self.journal["confirm_key"] = key
        confirm: list[dict[str, Any]] = self.journal["confirm"]
        while len(confirm) < self.confirm and self.runs_used < self.budget:
            t0 = time.monotonic()
            with _status(self.console, f"confirming the minimal scenario: run {len(confirm) + 1}/{self.confirm}…"):
                result = self.runner(best)
            confirm.append({**asdict(result), "wall_s": round(time.monotonic() - t0, 1)})
            self._save()
            verdict = f"[red]reproduced[/] ({self.until})" if result.failed else "[green]did not reproduce[/]"
            self.console.print(f"confirm {len(confirm)}/{self.confirm}: {verdict} · runs {self.runs_used}/"
                               f"{self.budget}", highlight=False)

    def _minimal_data(self, best: Scenario) -> dict[str, Any]:
        data = scenario_data(best)
        data["name"] = f"{self.original.name}-minimal"
        data["description"] = (f"shrunk by kafka-chaos shrink from {self.run_dir.name} until {self.until}: "
                               f"{size_text(size_of(best))}")
        for k in ("run_id", "kafka_settings"):
            data.pop(k, None)
        return data

    # -- index.html ------------------------------------------------------------------------------------------------

    def _write_index(self) -> Path:
        path = self.dir / "index.html"
        path.write_text(render_index(self.journal, self.dir))
        return path


@contextlib.contextmanager
def _status(console: Console, text: str) -> Iterator[None]:
    """A spinner while a run is underway, unless another live display (a campaign's progress) owns the terminal."""
    status = console.status(text)
    try:
        status.start()
    except LiveError:
        yield
        return
    try:
        yield
    finally:
        status.stop()


def render_index(journal: dict[str, Any], shrink_dir: Path) -> str:
    """The shrink's steps as one self-contained page (report.shrink's template)."""
    return render_shrink_index(journal, shrink_dir, size_text)


def shrink_run(run_dir: Path, *, until: str | None = None, budget_runs: int = 30, attempts: int = 2,
               confirm: int = 3, fresh: bool = False, console: Console | None = None,
               runner: Runner | None = None, steps: Sequence[str] = STEPS) -> ShrinkResult:
    """Shrink RUN_DIR's scenario to the smallest that still shows `until` (default: any violation), by the
    given steps in their fixed order (all by default)."""
    return Shrinker(run_dir, until=until, budget_runs=budget_runs, attempts=attempts, confirm=confirm,
                    runner=runner, console=console, fresh=fresh, steps=steps).run()
