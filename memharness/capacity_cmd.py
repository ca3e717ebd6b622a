"""`memharness capacity` (a plan from measured runs and a target) and `memharness compare`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

__all__ = ["capacity", "compare"]


@click.command()
@click.option(
    "--target",
    "target_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Target YAML: users, turns/day, peak, retention, SLOs, ceiling, strategy, currency, "
    "nodes (see capacity/example-target.yaml).",
)
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    help="Plan for this strategy instead of the target's (repeatable: side by side); "
    "'all': every strategy both a load run and a simulator run have.",
)
@click.option(
    "--load",
    "load_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Step-load run (memharness load --rates), or a multi-strategy load's directory "
    "(load_strategies.json); repeatable [default: per strategy, the newest under --reports "
    "with that strategy].",
)
@click.option(
    "--bench",
    "bench_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Bench run (memharness bench), repeatable [default: per strategy, the newest with "
    "that strategy, if any; never one slowed on purpose].",
)
@click.option(
    "--sim",
    "sim_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Simulator run (memharness run); twice: a small and a large population, "
    "the small one to validate the footprint's extrapolation [default: the newest with the "
    "strategy, and the newest with it and fewer users].",
)
@click.option(
    "--reports",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Where runs are found.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Report directory [default: REPORTS/capacity-YYYYmmdd-HHMMSS].",
)
def capacity(
    target_path: Path,
    strategies: tuple[str, ...],
    load_dirs: tuple[Path, ...],
    bench_dirs: tuple[Path, ...],
    sim_dirs: tuple[Path, ...],
    reports: Path,
    out: Path | None,
) -> None:
    """Plan capacity for a target from measured runs of one strategy (demand and footprint
    from the same strategy): per layer and for the maintenance process, cores, memory,
    disk, instances (the binding constraint named) and cost, with held-out validation.
    Several strategies are planned side by side.

    Writes capacity.html (self-contained, plots inline), capacity.json and capacity.md.
    """
    from memharness.capacity.inputs import RunError, read_bench, read_load, read_sim
    from memharness.capacity.render import markdown_table, readable, write_plan
    from memharness.capacity.report import RunRef, build_plan, combine
    from memharness.capacity.runs import choose_runs
    from memharness.capacity.target import TargetError, load_target

    started = time.perf_counter()
    try:
        target = load_target(target_path)
    except TargetError as exc:
        raise click.ClickException(f"bad target:\n{exc}") from None
    asked = list(dict.fromkeys(strategies)) or [target.strategy]
    source = (
        f"--strategy {' --strategy '.join(asked)}"
        if strategies
        else f"the target ({target_path}: strategy)"
    )
    plans = []
    try:
        choices = choose_runs(
            asked,
            source=source,
            reports=reports,
            load_given=load_dirs,
            bench_given=bench_dirs,
            sim_given=sim_dirs,
        )
        for choice in choices:
            runs = [RunRef("load", choice.load.path, choice.load_chosen)]
            if choice.bench is not None:
                runs.append(RunRef("bench", choice.bench.path, choice.bench_chosen))
            sim_runs = sorted((read_sim(p) for p in choice.sims), key=lambda s: s.users)
            sim = sim_runs[-1] if sim_runs else None
            sim_small = sim_runs[0] if len(sim_runs) > 1 else None
            for s in sim_runs:
                role = "plan" if s is sim else "small population, validation"
                runs.append(RunRef(f"sim ({role}, {s.users} users)", s.path, choice.sim_chosen))
            plans.append(
                build_plan(
                    target.for_strategy(choice.strategy),
                    target_path=target_path,
                    load=read_load(choice.load.path),
                    bench=read_bench(choice.bench.path) if choice.bench else None,
                    sim=sim,
                    sim_small=sim_small,
                    runs=runs,
                    notes=choice.notes,
                    warnings=choice.warnings,
                )
            )
    except (RunError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    combined = combine(plans, target, target_path=target_path)
    out = out or reports / time.strftime("capacity-%Y%m%d-%H%M%S")
    paths = write_plan(combined, out)
    for line in combined.document["headline"]:
        click.echo(line)
    for plan in plans:
        for ref in plan.document["runs"]:
            click.echo(f"{plan.strategy}: using {ref['kind']}: {ref['path']} ({ref['chosen']})")
        for note in plan.document["notes"]:
            click.echo(f"{plan.strategy}: note: {note}")
    for warning in combined.document["warnings"]:
        click.echo(f"WARNING: {warning}")
    p_key = f"p{target.slo_ms.percentile:g}"
    click.echo(markdown_table(readable(combined.answer, target.currency, p_key)))
    for plan in plans:
        for held in plan.document["validation"]["holdout"]:
            x, p = held["throughput"], held[p_key]
            predicted = (
                f"{p['predicted_ms']:.0f} ms" if p["predicted_ms"] is not None else "saturated"
            )
            click.echo(
                f"{plan.strategy}: held-out step {held['held_out_step']} ({held['offered']:g}/s, "
                f"{held['position']}): throughput {x['predicted']:.2f} vs {x['measured']:.2f} "
                f"measured ({_judgement(x)}); {p_key} {predicted} vs {p['measured_ms']:.0f} ms "
                f"measured ({_judgement(p)})"
            )
        if plan.footprint_validation is not None:
            mine = plan.footprint_validation
            errors = mine[mine["strategy"] == plan.strategy]["mean_error"].abs()
            click.echo(
                f"{plan.strategy}: footprint extrapolation max |error| {errors.max():.1%} "
                "over layers"
            )
    click.echo(
        f"report: {paths['html']} (+ capacity.json, capacity.md) "
        f"in {time.perf_counter() - started:.1f} s"
    )


def _judgement(judged: dict[str, Any]) -> str:
    if judged["holds"] is None:
        return "not judged: above the safe rate"
    error = "–" if judged["error"] is None else f"{judged['error']:+.1%}"
    verdict = "holds" if judged["holds"] else "OFF"
    return f"{error}, {verdict} (limit ±{judged['limit']:.0%})"


@click.command()
@click.argument("run_a", type=click.Path(exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--only-changed",
    is_flag=True,
    help="Leave out the rows equal in both runs and those empty in both.",
)
@click.option(
    "--figure",
    "figures",
    multiple=True,
    help="Only the figures (or, for load and bench runs, operations) whose name contains "
    "this, e.g. recall, over-forget, p95, turn (repeatable).",
)
@click.option(
    "--strategy",
    "strategies",
    multiple=True,
    help="Only this strategy (a label, or a name with its --grid points), repeatable.",
)
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Also write the rows shown to this Markdown file, with a CSV beside it "
    "[default: nothing is written].",
)
def compare(
    run_a: Path,
    run_b: Path,
    only_changed: bool,
    figures: tuple[str, ...],
    strategies: tuple[str, ...],
    out: Path | None,
) -> None:
    """Differences between two runs of one kind: strategy metrics (memharness run), latency
    percentiles (load, step-load, bench), plan sizes (capacity). Prints them, with the
    change in percent (B / A - 1); for simulator runs the quality figures come first. A
    notice on stderr says when the runs' scenarios differ. Writes a file only with --out."""
    from memharness.capacity.compare import (
        CompareError,
        diff_runs,
        select,
        terminal_tables,
        unchanged,
    )

    if out is not None and out.suffix == ".csv":
        message = "names the Markdown file; the CSV goes beside it"
        raise click.BadParameter(message, param_hint="--out")
    try:
        found = diff_runs(run_a, run_b)
        table = select(found, figures=figures, strategies=strategies, only_changed=only_changed)
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None
    for notice in found.notices:
        click.echo(f"notice: {notice}", err=True)
    click.echo(f"{found.kind}: A {run_a} -> B {run_b}; change: B / A - 1\n")
    if table.empty:
        click.echo("no row to show" + (": no figure changed" if only_changed else ""))
    else:
        click.echo(terminal_tables(found, table), nl=False)
    same = int(unchanged(table).sum())
    if same and not only_changed:
        hint = f"\n({same} of {len(table)} rows equal or empty in both: --only-changed "
        click.echo(hint + "leaves them out)")
    if out is not None:
        from memharness.capacity.render import markdown_table

        beside = out.with_suffix(".csv")
        out.parent.mkdir(parents=True, exist_ok=True)
        text = f"# {found.kind}: {run_a} → {run_b}\n\n{markdown_table(table)}\n"
        out.write_text(text, encoding="utf-8")
        table.to_csv(beside, index=False)
        click.echo(f"written: {out} and {beside}", err=True)
