"""Mean time to first reproduction of each zoo bug on its affected version: the affected side run attempt after
attempt until its symptom shows (at most --max-runs runs), --trials times, in runs and in wall seconds (each run's
cluster start included; images are built before the clock starts). The zoo's goal: under 10 minutes.

    .venv/bin/python bench/zoo_reproduction.py [ID ...] [--trials 1] [--max-runs 5] [--out results/bench-zoo]
    .venv/bin/python bench/zoo_reproduction.py [ID ...] --from-results DIR [--max-runs N]

The runs go to OUT/zoo/zoo.json as `kafka-chaos zoo` writes it (the affected side only), so the table can be made
again from it. --from-results reads a zoo.json (a zoo's --out, its zoo/ folder or the file) and runs nothing: the
affected runs, in the order they ran, cut into trials at each reproduction (and every --max-runs runs when given).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from kafka_chaos.harness.zoo import (
    GOAL_S,
    Attempt,
    BugFile,
    Reproduction,
    load_state,
    load_zoo,
    record,
    reproductions,
    run_attempt,
    save_state,
    zoo_runner,
)


def run(bugs: list[BugFile], trials: int, max_runs: int, out: Path, console: Console) -> dict[str, Any]:
    runner = zoo_runner(bugs, ("affected",), console)
    zoo_dir = out / "zoo"
    state = load_state(zoo_dir)
    for b in bugs:
        runs: list[Attempt] = []
        for trial in range(trials):
            for i in range(max_runs):
                console.print(f"{b.bug.id} ({b.bug.affected.kafka_version}): trial {trial + 1}/{trials}, "
                              f"run {i + 1}/{max_runs}", highlight=False)
                runs.append(run_attempt(b, "affected", len(runs), zoo_dir, runner))  # a seed per run
                if runs[-1].reproduced:
                    break
        record(state, b, "affected", runs)
        save_state(state, zoo_dir)  # after each bug: an interrupted bench keeps what it measured
    return state


def table(rows: list[Reproduction], title: str) -> Table:
    t = Table(title=title)
    for col in ("bug", "affected", "trials reproduced", "runs to 1st repro (mean)", "wall s to 1st repro (mean)",
                f"under {GOAL_S / 60:.0f} min"):
        t.add_column(col)
    for r in rows:
        runs, wall = r.mean_runs, r.mean_wall_s
        tried = sum(t.runs for t in r.trials)
        t.add_row(r.bug, r.version, f"{len(r.reproduced)}/{len(r.trials)}" if r.trials else "not run",
                  f"{runs:.1f}" if runs is not None else f"— ({tried} runs, none showed it)" if tried else "—",
                  f"{wall:.0f}" if wall is not None else "—", "yes" if r.under_goal else "no")
    return t


def zoo_json(path: Path) -> Path:
    for p in (path, path / "zoo.json", path / "zoo" / "zoo.json"):
        if p.is_file():
            return p
    raise SystemExit(f"{path}: no zoo.json there (give a zoo's --out folder, its zoo/ folder or the file)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("ids", nargs="*", help="bug ids (default: every file in scenarios/bugs/)")
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--max-runs", type=int, default=None, help="runs per trial at most (default 5; with "
                        "--from-results: no cap)")
    parser.add_argument("--out", type=Path, default=Path("results/bench-zoo"))
    parser.add_argument("--bugs", type=Path, default=Path("scenarios/bugs"))
    parser.add_argument("--from-results", type=Path, default=None, metavar="DIR")
    args = parser.parse_args()
    console = Console()
    if args.from_results is not None:
        source = zoo_json(args.from_results)
        state = load_state(source.parent)
        title = f"time to first reproduction, from {source}"
    else:
        bugs = load_zoo(args.ids, args.bugs)
        args.max_runs = args.max_runs or 5
        state = run(bugs, args.trials, args.max_runs, args.out, console)
        args.ids = [b.bug.id for b in bugs]  # not the bugs of earlier benches into the same folder
        title = (f"time to first reproduction ({args.trials} trials of at most {args.max_runs} runs; "
                 f"runs in {args.out / 'zoo'})")
    console.print(table(reproductions(state, args.ids, args.max_runs), title))


if __name__ == "__main__":
    main()
