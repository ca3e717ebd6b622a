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
import subprocess
import sys
import time
from pathlib import Path

import click

from memharness.cli_settings import DURATION, backend_option, embedder_option
from memharness.load_locust import (
    RUN_ENV,
    build_locust_command,
    default_locustfile,
    locust_environment,
)
from memharness.load_overload import run_overload
from memharness.load_plan import (
    DEFAULT_SCENARIO_USERS,
    check_time_scale,
    plan_strategies,
    prepare_scenario,
    run_under_strategies,
)
from memharness.load_target import (
    api_key_option,
    check_target_options,
    refuse_stray_key,
    target_environment,
    target_option,
)
from memharness.scenarios import DOMAINS

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
@click.option(
    "--rates",
    default=None,
    help="Rate steps for capacity planning: open-loop arrivals at R1,R2,... turns/s, each "
    "for --step-duration, per-step HDR histograms and per-process CPU/RSS in steps.json. "
    "'auto': 8 steps from 10% to 120% of X_max = cores / D, D the CPU seconds a few "
    "turns played first cost every process of the system under test (about 3.5 min in "
    "all with the default 20 s steps, model loading and the backlog's drain included).",
)
@click.option(
    "--repeats",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="With --rates: play every rate this many times, in rounds of alternating direction "
    "(light to heavy, heavy to light): an interval per rate for `memharness capacity` "
    "(3 for a plan to trust).",
)
@click.option(
    "--step-duration",
    "step_s",
    type=DURATION,
    default="20s",
    show_default=True,
    help="With --rates: how long each rate is offered.",
)
@click.option(
    "--sla",
    default=None,
    help="SLAs as op=ms[@pNN],... [default: session=5,stm=50,ltm=200,turn=300].",
)
@click.option(
    "--overload",
    is_flag=True,
    help="Overload run: find the highest rate that holds the SLAs (a --rates auto run, "
    "--step-duration each step), then offer --overload-factor times it open loop for "
    "--duration (default 2m); writes overload.json (stayed up, memory bounded, SLA broken "
    "with the queueing time, servers consistent). Exit 0: survived; 5: not.",
)
@click.option(
    "--overload-factor",
    type=click.FloatRange(min=0, min_open=True),
    default=2.0,
    show_default=True,
    help="With --overload: the multiple of the sustainable rate offered.",
)
@click.option(
    "--sustainable-rate",
    type=click.FloatRange(min=0, min_open=True),
    default=None,
    help="With --overload: the highest rate known to hold the SLAs (skips the search).",
)
@click.option(
    "--sustainable-from",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="With --overload: a steps.json of an earlier --rates run to take it from.",
)
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
@click.option(
    "--strategy",
    "strategy_specs",
    multiple=True,
    help="Run the load under this strategy, beside its maintenance process: NAME, FILE.yaml, "
    "or either with :key=value,... overrides, as for `memharness run` (repeatable: one run "
    "each, same load and seed; OUT/RUN_ID-NAME/ each, OUT/RUN_ID/load_strategies.json). "
    "Without --strategy or --grid: the stores' defaults, no maintenance process.",
)
@click.option(
    "--grid",
    "grid_specs",
    multiple=True,
    help="A parameter sweep as for `memharness run`: NAME:key=v1,v2,... (';' for more keys); "
    "each point is a strategy of its own (repeatable, combines with --strategy).",
)
@click.option(
    "--scenario",
    "scenario_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="Play this scenario's users' timelines (say, probe, event, forget) instead of the "
    "built-in conversations [default with --strategy: --scenario-users generated users].",
)
@click.option(
    "--domain",
    "domains",
    multiple=True,
    type=click.Choice(list(DOMAINS)),
    help="Play generated users of this domain (repeatable) [default with --strategy: all].",
)
@click.option(
    "--scenario-users",
    type=click.IntRange(min=1),
    default=None,
    help=f"Generated scenario users, replayed round robin [default: {DEFAULT_SCENARIO_USERS}].",
)
@click.option(
    "--seed",
    type=int,
    default=None,
    help="Seed of the generated users, the conversations and the arrivals [default: 0].",
)
@click.option(
    "--time-scale",
    type=float,
    default=None,
    callback=lambda ctx, param, value: check_time_scale(value),
    help="Run the memory (and the maintenance) on a clock N times the wall clock, so TTLs, "
    "windows, decay and archival fire during the load: 4320 makes 10 minutes 30 virtual "
    "days. Adds p95 and record counts per virtual day.",
)
@click.option(
    "--apart",
    is_flag=True,
    help="With --strategy: run the memory as `memharness serve` (its maintenance beside it) "
    "in a process of its own and drive it over HTTP, so the load generator neither shares "
    "its CPU nor counts in D; each step records the generator's CPU and send lag, and a "
    "step where it lagged is set apart by `memharness capacity`.",
)
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
    run_dir = out / run_id
    scenario_path = None
    if under_strategies or scenario_given:
        scenario_path = prepare_scenario(
            scenario=scenario_file,
            domains=domains,
            users=scenario_users or DEFAULT_SCENARIO_USERS,
            seed=seed or 0,
            out_dir=run_dir,
        )
    run_dir.mkdir(parents=True, exist_ok=True)

    def command_for(directory: Path, name: str) -> list[str]:
        return build_locust_command(
            locustfile=locustfile,
            run_dir=directory,
            run_id=name,
            users=users,
            spawn_rate=spawn_rate or float(users),
            duration=duration,
            rate=rate,
            open_loop=open_loop,
            arrivals=arrivals,
            serial=serial,
            steps=steps,
            sla=sla,
            extra=locust_args,
            rate_steps=rates is not None,
        )

    from memharness.load_contract import RATES_ENV, REPEATS_ENV, STEP_S_ENV

    env = locust_environment(backend=backend, embedder=embedder, steps=steps)
    for name in (RATES_ENV, STEP_S_ENV, *RUN_ENV):
        env.pop(name, None)  # a stray variable would change the run unseen
    if rates is not None:
        env[RATES_ENV], env[STEP_S_ENV] = rates, f"{step_s:g}"
        env[REPEATS_ENV] = str(repeats)
    if scenario_path is not None:
        env["MEMH_LOAD_SCENARIO"] = str(scenario_path)
    if key is not None:
        env = target_environment(env, key)
    if under_strategies:
        from memharness.cli_settings import settings_from_options

        code = run_under_strategies(
            specs,
            settings=settings_from_options(backend=backend, embedder=embedder),
            out=out,
            run_id=run_id,
            env=env,
            locust_command=lambda one: command_for(one.run_dir, one.run_id),
            time_scale=time_scale,
            apart=apart,
        )
        sys.exit(code)
    if time_scale is not None:
        env["MEMH_LOAD_TIME_SCALE"] = repr(time_scale)
    command = command_for(run_dir, run_id)
    click.echo(f"memharness load: {run_dir}/ ({' '.join(command[2:])})", err=True)
    code = subprocess.run(command, env=env, check=False).returncode
    click.echo(f"memharness load: exit code {code}; reports in {run_dir}/", err=True)
    sys.exit(code)


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
