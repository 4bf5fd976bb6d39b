"""`kafka-chaos`: a thin shell over the library. Every command calls one library function; `main()` is the one
place that turns errors into messages and exit codes (0 ok, 1 the checker found violations, 2 bad input or a
broken environment, 130 interrupted by SIGINT, 143 by SIGTERM)."""

from __future__ import annotations

import json
import os
import sys
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from kafka_chaos.errors import KafkaChaosError
from kafka_chaos.rundir import RunDir

if TYPE_CHECKING:
    from kafka_chaos.checker.results import RunResults


class _Commands(TyperGroup):
    """`campaign FILE` takes a file where a group would take a subcommand, so `campaign merge DIR…` is routed
    here to its own command instead."""

    def resolve_command(self, ctx: Any, args: list[str]) -> tuple[str | None, Any, list[str]]:
        if args[:2] == ["campaign", "merge"]:
            _, cmd, rest = super().resolve_command(ctx, ["campaign-merge", *args[2:]])
            return "campaign merge", cmd, rest  # the name its usage and errors show
        return super().resolve_command(ctx, args)


app = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Jepsen-style chaos testing for real Kafka clusters.",
    cls=_Commands,
)
image_app = typer.Typer(no_args_is_help=True, help="Build or pull the Kafka and Toxiproxy images.")
cluster_app = typer.Typer(no_args_is_help=True, help="Start, inspect and remove clusters by hand.")
app.add_typer(image_app, name="image")
app.add_typer(cluster_app, name="cluster")

console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


# -- environment ----------------------------------------------------------------------------------------------


@app.command()
def doctor(kafka_version: Annotated[str | None, typer.Option(help="Kafka image version to check")] = None) -> None:
    """Check engine, images, JRE and ports; print the command that fixes each missing piece."""
    from kafka_chaos.cluster.images import DEFAULT_KAFKA_VERSION
    from kafka_chaos.harness.doctor import run_checks

    checks = run_checks(kafka_version or DEFAULT_KAFKA_VERSION)
    table = Table(title="kafka-chaos doctor")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col)
    for c in checks:
        table.add_row(c.name, "[green]ok[/]" if c.ok else "[red]missing[/]", c.detail, c.fix)
    console.print(table)
    if not all(c.ok for c in checks):
        raise typer.Exit(2)


@image_app.command("build")
def image_build(
    kafka_version: Annotated[str | None, typer.Option(help="Kafka version (default: newest 4.x that resolves)")] = None,
    pull: Annotated[bool, typer.Option(help="Pull apache/kafka:V instead of building (needs a registry)")] = False,
    force: Annotated[bool, typer.Option(help="Rebuild even if the image exists")] = False,
    toxiproxy: Annotated[bool, typer.Option(help="Also build the Toxiproxy image")] = True,
) -> None:
    """Build the offline Kafka image (debootstrap + Maven jars) and the Toxiproxy image, once per version."""
    from kafka_chaos.cluster.images import DEFAULT_KAFKA_VERSION, build_all

    start = time.monotonic()
    with console.status("building images…") as status:
        built = build_all(kafka_version or DEFAULT_KAFKA_VERSION, lambda m: status.update(m[:100]),
                          pull=pull, toxiproxy=toxiproxy, force=force)
    console.print(f"[green]ready[/] {built.kafka}" + (f", {built.toxiproxy}" if built.toxiproxy else "")
                  + f" ({time.monotonic() - start:.0f}s)")


@app.command()
def clean() -> None:
    """Remove every container, network and volume labelled by kafka-chaos (leftovers of killed runs)."""
    from kafka_chaos.cluster import host_names, remove_labelled
    from kafka_chaos.cluster.engine import docker_client
    from kafka_chaos.cluster.sized_disk import remove_sized_disks
    from kafka_chaos.cluster.volatile_disk import remove_disks

    removed = remove_labelled(docker_client())
    disks = remove_disks()
    sized = remove_sized_disks()
    names = host_names.remove_blocks() if not host_names.problem() else []
    console.print(
        f"removed {len(removed['containers'])} containers, {len(removed['networks'])} networks, "
        f"{len(removed['volumes'])} volumes, {len(disks)} volatile disks, {len(sized)} sized disks, "
        f"{len(names)} host-name blocks"
    )


# -- clusters -------------------------------------------------------------------------------------------------


@cluster_app.command("up")
def cluster_up(
    nodes: Annotated[int, typer.Option(help="Combined nodes, or brokers when --controllers > 0")] = 3,
    controllers: Annotated[int, typer.Option(help="Dedicated controllers (0: combined nodes)")] = 0,
    kafka_version: Annotated[str | None, typer.Option()] = None,
    toxiproxy: Annotated[bool, typer.Option(help="Put a Toxiproxy proxy in front of each broker")] = False,
    detach: Annotated[bool, typer.Option(help="Leave it running and return; remove it with `cluster down`")] = False,
) -> None:
    """Start a cluster and keep it until Ctrl-C (or, with --detach, until `kafka-chaos cluster down`)."""
    from pydantic import ValidationError

    from kafka_chaos.cluster import ClusterSpec, KafkaCluster
    from kafka_chaos.cluster.images import DEFAULT_KAFKA_VERSION

    try:
        spec = ClusterSpec(nodes=nodes, controllers=controllers,
                           kafka_version=kafka_version or DEFAULT_KAFKA_VERSION, toxiproxy=toxiproxy)
    except ValidationError as err:  # e.g. a version no image can be built of: its paragraph, not a traceback
        raise typer.BadParameter("; ".join(e["msg"].removeprefix("Value error, ") for e in err.errors())) from None
    cluster = KafkaCluster(spec)
    with console.status(f"starting {nodes}-node cluster {cluster.run_id}…"):
        cluster.start()
    console.print(f"[green]ready[/] run id {cluster.run_id}\nbootstrap servers: {cluster.bootstrap_servers()}")
    if detach:
        return
    try:
        console.print("Ctrl-C removes it.")
        while True:
            time.sleep(1)
    finally:
        with console.status("removing cluster…"):
            cluster.stop()


@cluster_app.command("status")
def cluster_status(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Clusters kafka-chaos has running on this engine, with their nodes."""
    from kafka_chaos.cluster.engine import docker_client
    from kafka_chaos.cluster.labels import NODE_LABEL, PORT_LABEL, ROLE_LABEL, RUN_LABEL

    rows: list[dict[str, Any]] = []
    for c in docker_client().containers.list(all=True, filters={"label": RUN_LABEL}):
        rows.append({"run": c.labels[RUN_LABEL], "name": c.name, "role": c.labels.get(ROLE_LABEL),
                     "node": c.labels.get(NODE_LABEL), "status": c.status, "port": c.labels.get(PORT_LABEL)})
    if as_json:
        print(json.dumps(rows, indent=2))
        return
    if not rows:
        console.print("no kafka-chaos clusters on this engine")
        return
    table = Table()
    for col in ("run", "name", "role", "node", "status", "client port"):
        table.add_column(col)
    for r in sorted(rows, key=lambda r: (r["run"], r["name"])):
        table.add_row(r["run"], r["name"], r["role"] or "", r["node"] or "", r["status"], r["port"] or "")
    console.print(table)


@cluster_app.command("down")
def cluster_down(run_id: Annotated[str | None, typer.Argument(help="Run id (default: every cluster)")] = None) -> None:
    """Remove a cluster started with `cluster up --detach` (or all of them)."""
    from kafka_chaos.cluster import remove_labelled
    from kafka_chaos.cluster.engine import docker_client

    removed = remove_labelled(docker_client(), run_id)
    console.print(f"removed {len(removed['containers'])} containers")


# -- runs -----------------------------------------------------------------------------------------------------


@app.command()
def run(
    scenario: Annotated[Path, typer.Argument(help="Scenario TOML file")],
    seed: Annotated[int | None, typer.Option(help="Override the scenario's seed")] = None,
    out: Annotated[Path, typer.Option(help="Results folder")] = Path("results"),
    replay_nodes: Annotated[bool, typer.Option(
        "--replay-nodes", help="With a run's scenario.resolved.toml: aim each fault at the node ids it hit "
        "(default: by its rule, e.g. whoever leads at that moment)")] = False,
) -> None:
    """Run a scenario on a fresh cluster, check it, and print the verdict (exit 1 on violations).
    A run folder's scenario.resolved.toml replays that run."""
    from kafka_chaos.harness.run import run_scenario, run_scenario_file

    if replay_nodes:  # -- replay --
        from kafka_chaos.harness.replay import load_resolved, pin_nodes

        result = run_scenario(pin_nodes(load_resolved(scenario)), seed=seed, out=out, console=console)
    else:
        result = run_scenario_file(scenario, seed=seed, out=out, console=console)
    _print_verdict(result.checked, result.run_dir)
    if result.checked.violations:
        raise typer.Exit(1)


@app.command()
def check(
    run_dir: Annotated[Path, typer.Argument(help="A run's results folder (with --from jepsen: a Jepsen store "
                                            "folder holding history.edn)")],
    as_json: Annotated[bool, typer.Option("--json", help="Print results.json")] = False,
    source: Annotated[str, typer.Option("--from", help="kafka-chaos (history.jsonl) or jepsen (history.edn)")]
    = "kafka-chaos",
    out: Annotated[Path | None, typer.Option(help="With --from jepsen: the run folder to write (default: "
                                             "<DIR>/kafka-chaos)")] = None,
    config: Annotated[Path | None, typer.Option(help="With --from jepsen: a scenario TOML saying the cluster's "
                                                "configuration, for the model's verdicts")] = None,
    force: Annotated[bool, typer.Option("--force", help="Check even a history too large for this machine's "
                                        "memory (by default refused, naming the Spark command instead)")] = False,
) -> None:
    """Check a stored history (also one cut short); writes results.json. Exit 1 on violations."""
    from kafka_chaos.checker.check import refuse_if_too_large
    from kafka_chaos.harness.outputs import check_run_dir

    if source not in ("kafka-chaos", "jepsen"):
        raise typer.BadParameter(f"--from must be kafka-chaos or jepsen, not {source!r}")
    if source == "jepsen":
        from kafka_chaos.checker.jepsen_store import import_jepsen
        from kafka_chaos.harness.scenario import load_scenario

        known = load_scenario(config).model_dump(exclude_none=True) if config is not None else None
        run_dir = import_jepsen(run_dir, out or run_dir / "kafka-chaos", config=known)
    elif out is not None or config is not None:
        raise typer.BadParameter("--out and --config go with --from jepsen; a kafka-chaos run folder is "
                                 "checked in place, with the configuration its history records")
    if not force:
        refuse_if_too_large(run_dir)
    results = check_run_dir(run_dir)
    if as_json:
        print(json.dumps(results.to_json_dict(), indent=2))
    else:
        _print_verdict(results, run_dir)
    if results.violations:
        raise typer.Exit(1)


@app.command()
def report(run_dir: Annotated[Path, typer.Argument(help="A run's results folder")]) -> None:
    """Rebuild report.html of a stored run (checks it first when results.json is missing)."""
    from kafka_chaos.harness.outputs import check_run_dir
    from kafka_chaos.report import write_report

    if not RunDir(run_dir).results.exists():
        check_run_dir(run_dir)
    console.print(f"report: {write_report(run_dir)}")


@app.command()
def reconcile(
    run_dirs: Annotated[list[str], typer.Argument(help="Run folders (or any Spark-readable URIs of them)")],
    engine: Annotated[str, typer.Option(help="pandas (single process) or spark")] = "spark",
    master: Annotated[str, typer.Option(help="Spark master URL")] = "local[*]",
    out: Annotated[Path | None, typer.Option(help="Write reconcile.json here")] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    skip_malformed: Annotated[bool, typer.Option(help="Leave malformed history lines out (counted) instead "
                                                 "of stopping at the first")] = False,
) -> None:
    """Reconcile produced vs consumed records of one or many runs, from their history.jsonl (or the tables
    `check` wrote); same output shape as `check --json`. Exit 1 on violations."""
    from kafka_chaos.harness.reconcile import reconcile as reconcile_with_verdicts

    if engine not in ("pandas", "spark"):
        raise typer.BadParameter(f"--engine must be pandas or spark, not {engine!r}")
    results = reconcile_with_verdicts(run_dirs, engine=engine, master=master, out=out,
                                      skip_malformed=skip_malformed)
    malformed = results.stats.get("malformed_lines")
    if as_json:
        print(json.dumps(results.to_json_dict(), indent=2))
    else:
        if malformed:
            console.print(f"[yellow]warning:[/] {malformed} malformed history line(s) left out "
                          "(--skip-malformed)")
        for name, n in sorted(results.anomaly_counts.items()):
            console.print(f"{name}: {n}")
        skipped: dict[str, list[str]] = {}
        for name, why in (results.not_checked or {}).items():
            skipped.setdefault(why, []).append(name)
        for why, names in skipped.items():  # a name not counted above is not a zero when it was not checked
            console.print(f"not checked: {', '.join(names)} ({why})", highlight=False)
        _print_empty(results)
        console.print(f"valid={results.valid}, violations={len(results.violations)}")
    if results.violations:
        raise typer.Exit(1)


@app.command()
def matrix(model: Annotated[bool, typer.Option("--model", help="Compute it from the reference model")] = True,
           elr: Annotated[bool, typer.Option(help="ELR (KIP-966) on")] = False,
           power_loss: Annotated[bool, typer.Option(help="Add the power-loss fault sets (unsynced writes lost)")]
           = True) -> None:
    """Kafka's durability matrix (acks × min.insync × unclean × fault set) from the reference model."""
    from kafka_chaos.reference_model.explore import MATRIX_FAULT_SETS
    from kafka_chaos.reference_model.matrix import POWER_LOSS_FAULT_SETS, durability_matrix, render_matrix

    fault_sets = MATRIX_FAULT_SETS + (POWER_LOSS_FAULT_SETS if power_loss else ())
    console.print(render_matrix(durability_matrix(elr=elr, fault_sets=fault_sets)))


@app.command()
def campaign(
    campaign_file: Annotated[Path, typer.Argument(help="Campaign TOML (e.g. scenarios/campaigns/durability.toml)")],
    out: Annotated[Path, typer.Option(help="Results folder")] = Path("results"),
    fresh: Annotated[bool, typer.Option(help="Start over instead of resuming")] = False,
    shrink: Annotated[bool, typer.Option(help="Shrink each run with violations (kafka-chaos shrink); the index "
                                         "links each shrink")] = False,
    shard: Annotated[str | None, typer.Option(metavar="I/N", help="Run only every N-th planned run, starting "
                                              "at the I-th (one of N machines); `kafka-chaos campaign merge` "
                                              "joins the shards' folders")] = None,
) -> None:
    """Run a matrix of scenarios one after another (resumable); writes index.html, summary.json, junit.xml.
    `kafka-chaos campaign merge DIR…` builds one index from the folders of its shards (--shard I/N)."""
    from kafka_chaos.harness.campaign import run_campaign
    from kafka_chaos.harness.shard import parse_shard

    try:
        picked = parse_shard(shard) if shard is not None else None
    except KafkaChaosError as err:
        raise typer.BadParameter(str(err), param_hint="--shard") from None
    summary = run_campaign(campaign_file, out=out, fresh=fresh, console=console, shrink=shrink, shard=picked)
    cdir = out / "campaigns" / summary["campaign_id"] / (picked.dirname if picked else "")
    console.print(
        f"{summary['done']}/{summary['total']} runs" + (f" of shard {picked}" if picked else "")
        + f", {summary['failed']} failed; index: {cdir / 'index.html'}"
    )
    if summary["failed"]:
        raise typer.Exit(1)


@app.command()
def zoo(
    ids: Annotated[list[str] | None, typer.Argument(help="Bug ids (default: every file in scenarios/bugs/)")] = None,
    attempts: Annotated[int | None, typer.Option(min=1, help="Runs per side (default: each file's own)")] = None,
    versions: Annotated[str, typer.Option(help="Which sides: affected, fixed or both")] = "both",
    out: Annotated[Path, typer.Option(help="Results folder (the zoo's index: OUT/zoo/index.html)")] = Path("results"),
    bugs: Annotated[Path, typer.Option(help="Folder of zoo files")] = Path("scenarios/bugs"),
    doc: Annotated[Path | None, typer.Option(help="Markdown table to (re)write")] = Path("docs/bug-zoo.md"),
) -> None:
    """Run known Kafka bugs on the version that has each and on the version that fixed it; writes the zoo's
    index.html and the docs/bug-zoo.md table. Known defects do not fail it; a symptom on a fixed version does."""
    from kafka_chaos.harness.zoo import SIDES, load_zoo, run_zoo, zoo_runner

    if versions not in ("affected", "fixed", "both"):
        raise typer.BadParameter("one of affected, fixed, both", param_hint="--versions")
    every = load_zoo((), bugs)  # every file validated before any container starts; the table lists them all
    picked = load_zoo(ids or (), bugs)
    sides = tuple(side for side in SIDES if versions in (side, "both"))
    runner = zoo_runner(picked, sides, console)
    with console.status("zoo…") as status:
        state = run_zoo(picked, out=out, attempts=attempts, sides=sides, runner=runner, doc=doc,
                        catalogue=every, progress=lambda m: status.update(m))
    regressions = []
    for b in picked:
        e = state["bugs"][b.bug.id]
        console.print(f"[bold]{b.bug.id}[/]: " + " · ".join(
            f"{side} {e[side]['version']}: {e[side]['reproduced']}/{e[side]['attempts']} shown"
            for side in sides), highlight=False)
        if "fixed" in sides and e["fixed"]["reproduced"]:
            regressions.append(b.bug.id)
    console.print(f"index: {out / 'zoo' / 'index.html'}" + (f"; table: {doc}" if doc else ""))
    if regressions:
        console.print(f"[red]the symptom showed on a fixed version[/] (a regression, or a zoo file to correct): "
                      f"{', '.join(regressions)}")
        raise typer.Exit(1)


@app.command("campaign-merge", hidden=True)  # spelled `campaign merge` (see _Commands)
def campaign_merge(
    shard_dirs: Annotated[list[Path], typer.Argument(metavar="DIR...", help="Each shard's folder "
                                                     "(results/campaigns/<id>/shard-I-of-N) or a results "
                                                     "folder holding one, e.g. a CI job's artifact")],
    out: Annotated[Path, typer.Option(help="Results folder; the index goes to <out>/campaigns/<id>/")]
    = Path("results"),
) -> None:
    """Merge the shards of one campaign into one index (exit 1 on failed runs, 2 when shards are missing)."""
    from kafka_chaos.harness.shard import merge_shards

    merged = merge_shards(shard_dirs, out=out)
    s = merged.summary
    console.print(f"{s['done']}/{s['total']} runs from {len(s['shards']['merged'])} of {s['shards']['count']} "
                  f"shards, {s['failed']} failed; index: {merged.cdir / 'index.html'}")
    if merged.missing:
        err_console.print(f"[yellow]incomplete[/]: shard {', '.join(str(m) for m in merged.missing)} missing "
                          "(their runs are marked pending)", highlight=False)
    elif merged.incomplete:
        err_console.print(f"[yellow]incomplete[/]: {s['total'] - s['done']} runs not done (a shard was cut "
                          "short; run it again to resume)", highlight=False)
    if s["failed"]:
        raise typer.Exit(1)
    if merged.incomplete:
        raise typer.Exit(2)


# -- shrink ----------------------------------------------------------------------------------------


@app.command()
def shrink(
    run_dir: Annotated[Path, typer.Argument(help="A failing run's results folder (holds scenario.resolved.toml)")],
    until: Annotated[str | None, typer.Option(help="Anomaly to keep (e.g. lost-write), or `violation` "
                                              "(default: any violation)")] = None,
    budget_runs: Annotated[int, typer.Option(help="At most this many runs, confirmation included")] = 30,
    attempts: Annotated[int, typer.Option(help="Tries per candidate; it fails if any try fails")] = 2,
    confirm: Annotated[int, typer.Option(help="Re-runs of the minimal scenario, for its reproduction rate")] = 3,
    fresh: Annotated[bool, typer.Option(help="Start over instead of resuming RUN_DIR/shrink/journal.json")] = False,
    steps: Annotated[str | None, typer.Option(help="Comma-separated subset of ddmin,durations,gaps,producers,"
                                              "keys,rate,run (default: all, in that order)")] = None,
) -> None:
    """Shrink a failing run to the smallest scenario that still shows the anomaly (ddmin over its faults, then
    shorter faults and run, fewer producers and keys, lower rate); resumable; writes RUN_DIR/shrink/."""
    from kafka_chaos.harness.shrink import STEPS, shrink_run, size_text

    chosen = tuple(x.strip() for x in steps.split(",") if x.strip()) if steps is not None else STEPS
    r = shrink_run(run_dir, until=until, budget_runs=budget_runs, attempts=attempts, confirm=confirm, fresh=fresh,
                   console=console, steps=chosen)
    console.print(
        f"[bold]minimal[/]: {r.minimal} — {size_text(r.size_after)} (was {size_text(r.size_before)}); "
        f"reproduced {r.reproduced} of {r.confirm_runs}; {r.runs_used} of {r.budget_runs} runs, {r.wall_s:g} s"
        + (" [yellow](budget spent)[/]" if r.budget_exhausted else "") + f"; steps: {r.index}", highlight=False)


def verdict_rows(results: RunResults) -> list[tuple[str, int, int, int, int]]:
    """(anomaly, instances, violations, known defects, permitted) per anomaly of results.json, conformance ones
    marked."""
    rows = []
    conformance = (results.conformance or {}).get("anomalies") or {}
    anomalies = {name: [i.verdict for i in insts] for name, insts in results.anomalies.items()}
    for label, found in ((None, anomalies), ("conformance", conformance)):
        for name, instances in sorted(found.items()):
            verdicts = [i.get("verdict") if isinstance(i, dict) else i for i in instances]
            rows.append((f"{name} ({label})" if label else name, len(instances), verdicts.count("violation"),
                         verdicts.count("known-defect"), verdicts.count("permitted")))
    return rows


def _print_verdict(results: RunResults, run_dir: Path) -> None:
    rows = verdict_rows(results)
    table = Table(title=f"anomalies — {run_dir}")
    for col in ("anomaly", "count", "violations", "known defects", "permitted"):
        table.add_column(col, justify="left" if col == "anomaly" else "right")
    for name, n, bad, known, ok in rows:
        table.add_row(name, str(n), f"[red]{bad}[/]" if bad else "0", f"[yellow]{known}[/]" if known else "0", str(ok))
    if rows:
        console.print(table)
    _print_availability(results.availability)
    _print_empty(results)
    verdict = "[red]FAIL[/]" if results.violations else "[green]PASS[/]"
    if results.known_defects:
        by_defect = Counter(str(i.defect) for i in results.known_defects)
        console.print("[yellow]known defects[/] (the version in use has these bugs; they do not fail the run): "
                      + ", ".join(f"{d} ×{n}" for d, n in sorted(by_defect.items())), highlight=False)
    complete = "complete" if results.complete else "[yellow]incomplete[/] (the run was cut short)"
    console.print(
        f"{verdict}: {len(results.violations)} violations, valid={results.valid}, {complete}; "
        f"report: {run_dir / 'report.html'}"
    )


def _print_empty(results: RunResults) -> None:
    """Why a history with no client op fails: its violation is no anomaly, so no table row says it."""
    from kafka_chaos.checker.results import EMPTY_HISTORY

    for v in results.violations:
        if v.name == EMPTY_HISTORY:
            console.print(f"[red]{f'{v.key}: ' if v.key else ''}{v.reason}[/]", highlight=False)


def _print_availability(avail: dict[str, Any] | None) -> None:
    """Availability share and the send windows of the whole run (results["availability"])."""
    if not avail:
        return
    windows = [w for w in avail.get("windows", []) if w["kind"] == "send" and w["key"] is None]
    title = (f"availability {avail.get('share', 1.0):.1%} of key-time "
             f"({avail.get('profile', 'fast')} timeouts) — windows with no successful send on any key")
    if not windows:
        console.print(f"{title}: none")
        return
    table = Table(title=title)
    for col in ("from", "to", "lasted", "predicted ≤", "faults", "finding / expected"):
        table.add_column(col, justify="right" if col in ("from", "to", "lasted", "predicted ≤") else "left")
    for w in windows:
        predicted = "—" if w["predicted_s"] is None else f"{w['predicted_s']:.1f}s"
        verdict = f"[yellow]{w['finding']}[/]" if w["finding"] else ", ".join(w.get("expected", [])) or "ok"
        table.add_row(f"{w['start_s']:.1f}s", f"{w['end_s']:.1f}s", f"{w['duration_s']:.1f}s", predicted,
                      "; ".join(w["faults"]) or "—", verdict)
    console.print(table)
    findings = [w for w in avail.get("windows", []) if w["finding"]]
    if findings:
        console.print(f"[yellow]{len(findings)} windows longer than the reference model predicts[/] "
                      "(availability findings, not violations); causes in results.json and events.jsonl")


# -- entry point ----------------------------------------------------------------------------------------------


def main() -> None:
    from kafka_chaos import interrupts

    with interrupts.handling():  # SIGTERM (a CI cancel) takes the same path as Ctrl-C
        try:
            # Not standalone: typer then returns exit codes (130 for Ctrl-C) instead of exiting, and our own
            # errors reach the handler below.
            code = app(standalone_mode=False)
        except KeyboardInterrupt:
            code = 130
        except typer.Exit as e:
            code = e.exit_code
        except Exception as err:
            if isinstance(err, KafkaChaosError):
                err_console.print(f"[red]error:[/] {err}", highlight=False)
                sys.exit(getattr(err, "exit_code", 2))
            if hasattr(err, "show") and isinstance(getattr(err, "exit_code", None), int):
                err.show()  # a usage error: click (vendored by typer) prints it the usual way
                sys.exit(getattr(err, "exit_code", 2))
            raise
        if code == 130 or interrupts.received() is not None:
            _exit_interrupted()
    sys.exit(code if isinstance(code, int) else 0)


def _exit_interrupted() -> NoReturn:
    """Remove what is left of the clusters this process started, check that nothing is, say so (or what is
    left), and exit at once: 130 after SIGINT, 143 after SIGTERM. At once, because a client thread abandoned in
    a librdkafka call would otherwise hold the interpreter's exit."""
    from kafka_chaos import interrupts
    from kafka_chaos.cluster.kafka import sweep_after_interrupt

    interrupts.STOPPING.set()
    err_console.print(f"[yellow]{sweep_after_interrupt()}[/]", highlight=False)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(interrupts.exit_code())


if __name__ == "__main__":
    main()
