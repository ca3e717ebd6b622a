"""`memharness load`: a headless Locust run of loadtests/locustfile.py with sane defaults.

Locust runs as a subprocess (its gevent monkey-patching must own the process from the
start), in this interpreter; the locustfile imports the installed `loadtests` package.
Its CSV and HTML reports and the HDR report go to OUT/RUN_ID/; the command exits with
Locust's exit code: 0 when every SLA holds, 3 when one is broken (named in the output;
with `--rates`: when no step held them, as steps past the knee break them by design), 1
when turns failed, 4 when the servers' consistency check after the run found a problem.
Locust logs at INFO (its own lines, its statistics table) only under `memharness -v`.

`--overload` runs a rate-step search for the highest rate that holds the SLAs (or takes
it from `--sustainable-rate` / `--sustainable-from steps.json`), then offers twice that
(`--overload-factor`) open loop for 2 minutes, and writes `overload.json`: whether the
process stayed up, its memory stayed bounded, the SLA was reported broken with the
queueing time, and the servers were consistent afterwards (`memharness/overload_verdict.py`).
It exits 0 when the memory survived, 5 when it did not.

`--strategy S` (repeatable) and `--grid` run the load once per strategy, on the same
offered load and seed, each beside its maintenance process (`memharness.load_strategies`),
playing scenario users' timelines (`--scenario`, `--domain`); `--time-scale N` runs the
memory and the maintenance on a clock N times the wall clock. Each strategy writes
OUT/RUN_ID-STRATEGY/, and OUT/RUN_ID/load_strategies.json lists them.

`--target URL` drives a memory service over HTTP instead (`memharness.load_target`,
`loadtests/target_locustfile.py`): the service must answer its health check with the
key before the run starts.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import click

from memharness.cli_settings import (
    DURATION,
    backend_option,
    embedder_option,
    settings_from_options,
)
from memharness.load_locust import (
    default_locustfile,
    locust_environment,
)
from memharness.load_options import rate_options, strategy_options
from memharness.load_overload import run_overload
from memharness.load_plan import (
    DEFAULT_SCENARIO_USERS,
    plan_strategies,
    prepare_scenario,
)
from memharness.load_run import LoadRun, run_load
from memharness.load_target import (
    api_key_option,
    check_target_options,
    refuse_stray_key,
    target_option,
)

__all__ = ["load"]

_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")  # a directory name
_RATES_RE = re.compile(r"auto|\d+(?:\.\d+)?(?:,\d+(?:\.\d+)?)*")
_OVERLOAD_USERS = 16
#: Fewest distinct rates a capacity plan can stand on (USL practice: 6 levels).
MIN_PLAN_RATES = 6


@click.command(context_settings={"ignore_unknown_options": True})
@click.option(
    "--users",
    "-u",
    type=click.IntRange(min=1),
    default=None,
    help="Simulated users [default: 10; with --rates: 16, the concurrency serving the rates].",
)
@click.option(
    "--rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Turns per second over all users. With --open-loop: the arrival rate. Without: "
    "users pace themselves to it. Unset: closed loop with 1-3 s of think time per user.",
)
@click.option(
    "--duration",
    "-d",
    "duration_s",
    type=DURATION,
    default=None,
    help="Run time, whole seconds: 90, 90s, 5m, 1h30m [default: 60s; with --overload: 2m].",
)
@click.option(
    "--spawn-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="Users started per second [default: all of them within a second].",
)
@click.option("--open-loop", is_flag=True, help="Fixed arrival timeline at --rate.")
@click.option(
    "--arrivals",
    type=click.Choice(["constant", "poisson"]),
    default="constant",
    show_default=True,
    help="Open loop: evenly spaced or Poisson arrivals.",
)
@click.option("--serial", is_flag=True, help="One turn at a time; the wait is 'queue'.")
@click.option("--steps", default=None, help="Step-load shape, e.g. 10x30s,50x30s (replaces -u/-d).")
@rate_options
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="Reports go to OUT/RUN_ID/.",
)
@click.option("--run-id", default=None, help="[default: load-YYYYmmdd-HHMMSS]")
@backend_option
@embedder_option
@click.option(
    "--locustfile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="[default: loadtests/locustfile.py of this checkout]",
)
@strategy_options
@target_option
@api_key_option
@click.argument("locust_args", nargs=-1, type=click.UNPROCESSED)
def load(
    users: int | None,
    rate: float | None,
    duration_s: float | None,
    spawn_rate: float | None,
    open_loop: bool,
    arrivals: str,
    serial: bool,
    steps: str | None,
    rates: str | None,
    repeats: int,
    step_s: float,
    sla: str | None,
    overload: bool,
    overload_factor: float,
    sustainable_rate: float | None,
    sustainable_from: Path | None,
    out: Path,
    run_id: str | None,
    backend: str | None,
    embedder: str | None,
    locustfile: Path | None,
    strategy_specs: tuple[str, ...],
    grid_specs: tuple[str, ...],
    scenario_file: Path | None,
    domains: tuple[str, ...],
    scenario_users: int | None,
    seed: int | None,
    time_scale: float | None,
    apart: bool,
    target: str | None,
    api_key: str | None,
    locust_args: tuple[str, ...],
) -> None:
    """Load-test the memory with Locust: conversations in-process, per-layer HDR latency.

    Extra arguments after `--` go to Locust unchanged. Exits with Locust's exit code
    (3: an SLA is broken, with --rates: no step held them; 4: the servers are
    inconsistent after the run).
    """
    if (sustainable_rate is not None or sustainable_from is not None) and not overload:
        raise click.UsageError("--sustainable-rate and --sustainable-from go with --overload")
    if overload:
        if rates is not None or steps is not None or open_loop or rate is not None:
            raise click.UsageError("--overload replaces --rates, --steps, --open-loop and --rate")
        if sustainable_rate is not None and sustainable_from is not None:
            raise click.UsageError("--sustainable-rate or --sustainable-from, not both")
    duration_s = duration_s or (120.0 if overload else 60.0)
    if not duration_s.is_integer():
        raise click.BadParameter(
            f"{duration_s:g} s: whole seconds (Locust's run time)", param_hint="'--duration'"
        )
    duration = f"{int(duration_s)}s"
    if rates is not None:
        if steps is not None or open_loop or rate is not None:
            raise click.UsageError("--rates replaces --steps, --open-loop and --rate")
        rates = rates.replace(" ", "")
        if not _RATES_RE.fullmatch(rates) or "0" in (
            r.lstrip("0.") or "0" for r in rates.split(",")
        ):
            raise click.UsageError(f"--rates {rates!r}: expected 'auto' or R1,R2,... turns/s > 0")
        numbers = [float(r) for r in rates.split(",")] if rates != "auto" else [1.0]
        if rates != "auto" and len(set(numbers)) < MIN_PLAN_RATES:
            click.echo(
                f"note: {len(set(numbers))} distinct rate(s): a capacity plan needs at least "
                f"{MIN_PLAN_RATES}, from light load to past saturation. `--rates auto` chooses "
                "them from the measured CPU demand; `memharness capacity` names the rates to "
                "add to this run",
                err=True,
            )
        open_loop, rate = True, max(numbers)
    users = users or (_OVERLOAD_USERS if rates is not None or overload else 10)
    if open_loop and rate is None:
        raise click.UsageError("--open-loop needs --rate (turns per second)")
    run_id = run_id or time.strftime("load-%Y%m%d-%H%M%S")
    if not _RUN_ID_RE.fullmatch(run_id):
        raise click.UsageError(f"--run-id {run_id[:60]!r}: 1-100 letters, digits, '.', '_', '-'")
    if apart and (not (strategy_specs or grid_specs) or target is not None or overload):
        raise click.UsageError(
            "--apart goes with --strategy or --grid (it starts `memharness serve` under each "
            "strategy), not with --target or --overload"
        )
    if apart and time_scale is not None:
        raise click.UsageError("--apart runs the service on the wall clock: not --time-scale")
    locustfile = locustfile or default_locustfile(target=target is not None or apart)
    if not locustfile.is_file():
        raise click.UsageError(f"{locustfile} not found: run from a checkout or --locustfile")
    _check_shape_options(steps=steps, sla=sla)
    under_strategies = bool(strategy_specs or grid_specs)
    scenario_given = scenario_file is not None or bool(domains) or scenario_users is not None
    if overload and (under_strategies or scenario_given or time_scale is not None):
        raise click.UsageError(
            "--overload runs the built-in conversations on the wall clock, without "
            "--strategy, --grid, --scenario, --domain, --scenario-users or --time-scale"
        )
    if scenario_file is not None and domains:
        raise click.UsageError("--scenario or --domain, not both")
    if scenario_users is not None and scenario_file is not None:
        raise click.UsageError("--scenario-users goes with generated users, not --scenario")
    key = None
    if target is None and api_key is not None:
        refuse_stray_key()
    if target is not None:
        target, key = check_target_options(
            target,
            api_key,
            refused={
                "--strategy": bool(strategy_specs),
                "--grid": bool(grid_specs),
                "--time-scale": time_scale is not None,
                "--backend": backend is not None,
                "--embedder": embedder is not None,
                "--overload": overload,
            },
        )
        locust_args = ("--host", target, *locust_args)
    specs = plan_strategies(strategy_specs, grid_specs) if under_strategies else []
    if seed is not None:
        locust_args = (*locust_args, "--seed", str(seed))
    if overload:
        code = run_overload(
            locustfile=locustfile,
            out=out,
            run_id=run_id,
            users=users,
            duration=duration,
            step_s=step_s,
            factor=overload_factor,
            sustainable_rate=sustainable_rate,
            sustainable_from=sustainable_from,
            arrivals=arrivals,
            sla=sla,
            extra=locust_args,
            env=locust_environment(backend=backend, embedder=embedder, steps=None),
        )
        sys.exit(code)
    scenario_path = None
    if under_strategies or scenario_given:
        scenario_path = prepare_scenario(
            scenario=scenario_file,
            domains=domains,
            users=scenario_users or DEFAULT_SCENARIO_USERS,
            seed=seed or 0,
            out_dir=out / run_id,
        )
    (out / run_id).mkdir(parents=True, exist_ok=True)
    run = LoadRun(
        locustfile=locustfile,
        out=out,
        run_id=run_id,
        users=users,
        duration=duration,
        rate=rate,
        open_loop=open_loop,
        spawn_rate=spawn_rate,
        arrivals=arrivals,
        serial=serial,
        steps=steps,
        sla=sla,
        rates=rates,
        repeats=repeats,
        step_s=step_s,
        locust_args=locust_args,
        backend=backend,
        embedder=embedder,
        api_key=key,
        scenario=scenario_path,
        time_scale=time_scale,
    )
    settings = settings_from_options(backend=backend, embedder=embedder) if specs else None
    sys.exit(run_load(run, strategies=specs, settings=settings, apart=apart))


def _check_shape_options(*, steps: str | None, sla: str | None) -> None:
    """--steps and --sla parsed as the Locust process will parse them, so a bad value is
    a usage error naming the option before anything starts (not a traceback inside it)."""
    from loadtests.shape import parse_steps
    from memharness.verdict.limits import parse_slas

    for option, text, parse in (("--steps", steps, parse_steps), ("--sla", sla, parse_slas)):
        if text is not None:
            try:
                parse(text)
            except ValueError as exc:
                raise click.UsageError(f"{option} {text!r}: {exc}") from None
