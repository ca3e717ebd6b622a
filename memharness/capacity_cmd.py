"""`memharness capacity` (a plan from measured runs and a target) and `memharness compare`."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

__all__ = ["capacity", "compare"]


@click.command()
@click.option(
    "--target",
    "target_path",
    type=click.Path(dir_okay=False, path_type=Path),
    required=True,
    help="Target YAML: users, turns/day, peak, retention, SLOs, ceiling, strategy, nodes "
    "(see capacity/example-target.yaml).",
)
@click.option(
    "--load",
    "load_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Step-load run (memharness load --rates) [default: newest under --reports].",
)
@click.option(
    "--bench",
    "bench_dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Bench run (memharness bench) [default: newest, if any].",
)
@click.option(
    "--sim",
    "sim_dirs",
    type=click.Path(path_type=Path),
    multiple=True,
    help="Simulator run (memharness run); twice: a small and a large population, "
    "the small one to validate the footprint's extrapolation [default: the newest, "
    "and the newest with fewer users].",
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
    load_dir: Path | None,
    bench_dir: Path | None,
    sim_dirs: tuple[Path, ...],
    reports: Path,
    out: Path | None,
) -> None:
    """Plan capacity for a target from measured runs: per layer, cores, memory, disk,
    instances (the binding constraint named) and cost, with held-out validation.

    Writes capacity.html (self-contained, plots inline), capacity.json and capacity.md.
    """
    from memharness.capacity.inputs import (
        RunError,
        find_runs,
        read_bench,
        read_load,
        read_sim,
        resolve_run,
    )
    from memharness.capacity.render import write_plan
    from memharness.capacity.report import RunRef, build_plan
    from memharness.capacity.target import TargetError, load_target

    started = time.perf_counter()
    try:
        target = load_target(target_path)
    except TargetError as exc:
        raise click.ClickException(f"bad target:\n{exc}") from None
    runs: list[RunRef] = []
    try:
        load_path = resolve_run(load_dir, reports, "load")
        if load_path is None:
            raise click.ClickException(
                f"no step-load run under {reports}/ (run: memharness load --rates auto)"
            )
        runs.append(RunRef("load", load_path, "given" if load_dir else f"newest under {reports}/"))
        bench_path = resolve_run(bench_dir, reports, "bench")
        if bench_path is not None:
            runs.append(
                RunRef("bench", bench_path, "given" if bench_dir else f"newest under {reports}/")
            )
        sims = [resolve_run(p, reports, "sim") for p in sim_dirs] or [
            resolve_run(None, reports, "sim")
        ]
        sim_runs = [read_sim(p) for p in sims if p is not None]
        chosen = "given" if sim_dirs else f"newest under {reports}/"
        if len(sim_runs) == 1 and not sim_dirs:  # find a smaller population to validate on
            smaller = [p for p in find_runs(reports, "sim") if p != sim_runs[0].path]
            for path in smaller:
                candidate = read_sim(path)
                if candidate.users < sim_runs[0].users:
                    sim_runs.append(candidate)
                    break
        sim_runs.sort(key=lambda s: s.users)
        sim = sim_runs[-1] if sim_runs else None
        sim_small = sim_runs[0] if len(sim_runs) > 1 else None
        for s in sim_runs:
            role = "plan" if s is sim else "small population, validation"
            runs.append(RunRef(f"sim ({role}, {s.users} users)", s.path, chosen))
        load = read_load(load_path)
        bench = read_bench(bench_path) if bench_path else None
        plan = build_plan(
            target,
            target_path=target_path,
            load=load,
            bench=bench,
            sim=sim,
            sim_small=sim_small,
            runs=runs,
        )
    except (RunError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    out = out or reports / time.strftime("capacity-%Y%m%d-%H%M%S")
    paths = write_plan(plan, out)
    for ref in runs:
        click.echo(f"using {ref.kind}: {ref.path} ({ref.chosen})")
    for warning in plan.document["warnings"]:
        click.echo(f"WARNING: {warning}")
    from memharness.capacity.render import markdown_table
    from memharness.capacity.report import SIZING_COLUMNS

    click.echo(markdown_table(plan.sizing[SIZING_COLUMNS]))
    held = plan.document["validation"]["holdout"]
    p_key = f"p{target.slo_ms.percentile:g}"
    click.echo(
        f"held-out step {held['held_out_step']} ({held['offered']:g}/s): throughput "
        f"{held['throughput']['predicted']:.2f} predicted vs {held['throughput']['measured']:.2f} "
        f"measured ({_pct(held['throughput']['error'])}); "
        f"{p_key} {held[p_key]['predicted_ms']:.0f} ms "
        f"vs {held[p_key]['measured_ms']:.0f} ms ({_pct(held[p_key]['error'])})"
    )
    if plan.footprint_validation is not None:
        errors = plan.footprint_validation["mean_error"].abs()
        click.echo(
            f"footprint extrapolation: max |error| {errors.max():.1%} over strategies × layers"
        )
    click.echo(
        f"report: {paths['html']} (+ capacity.json, capacity.md) "
        f"in {time.perf_counter() - started:.1f} s"
    )


def _pct(value: float | None) -> str:
    return "–" if value is None else f"{value:+.1%}"


@click.command()
@click.argument("run_a", type=click.Path(exists=True, path_type=Path))
@click.argument("run_b", type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write the differences [default: RUN_B/compare-<RUN_A>.md].",
)
def compare(run_a: Path, run_b: Path, out: Path | None) -> None:
    """Differences between two runs of one kind: strategy metrics (memharness run), latency
    percentiles (load, step-load, bench), plan sizes (capacity). Prints them and writes a
    Markdown file (and a CSV beside it)."""
    from memharness.capacity.compare import CompareError, compare_runs

    try:
        kind, table = compare_runs(run_a, run_b)
    except CompareError as exc:
        raise click.ClickException(str(exc)) from None
    from memharness.capacity.render import markdown_table

    text = f"# {kind}: {run_a} → {run_b}\n\n{markdown_table(table)}\n"
    click.echo(text)
    target = (
        out or (run_b if run_b.is_dir() else run_b.parent) / f"compare-{run_a.resolve().name}.md"
    )
    target.write_text(text, encoding="utf-8")
    table.to_csv(target.with_suffix(".csv"), index=False)
    click.echo(f"written: {target} and {target.with_suffix('.csv')}", err=True)
    sys.exit(0)
