"""`memharness run`: the main job. Replay scenarios under strategies; write the report.

With no arguments it replays the hand-written suite (`scenarios/*.yaml`) and a generated
set of users (a quarter from each domain) on the embedded stack under every built-in
strategy, prints the strategies side by side for each scenario (`run_tables.py`), ends with
each strategy across all the scenarios and a recommendation (`run_verdict.py`), and writes
`reports/<run-id>/`.
`--grid` adds parameter sweeps (a strategy per point); `--resume RUN_DIR` continues an
earlier run, replaying only what has no complete result file yet.
"""

from __future__ import annotations

import re
import secrets
import shlex
import sys
import textwrap
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click
from pydantic import SecretStr

from memharness.cli_settings import backend_option, embedder_option, settings_from_options
from memharness.diagnostics import probe_records
from memharness.objective import (
    Objective,
    ObjectiveError,
    default_objective,
    load_objective,
    with_constraints,
)
from memharness.pii_detector_table import detector_terminal
from memharness.progress import Progress
from memharness.run_inputs import file_scenario, generated_users, suite_files
from memharness.scenarios import ScenarioError
from memharness.sim.plan import (
    COHORT_USERS,
    IDLE_SWEEP_S,
    SAMPLE_EVERY_S,
    Fault,
    ScenarioInput,
    SpecError,
    StrategySpec,
    parse_fault,
    plan_specs,
)
from memharness.tables import WIDTH, wrapped
from memharness.vacuous import LISTED, forbidden_count, vacuous_checks, vacuous_line
from memharness.verbosity import verbose as verbose_env
from reference.crypto import generate_key
from reference.errors import MemoryStoreError
from reference.policy.loading import list_strategies
from reference.policy.reach import unreachable
from reference.settings import Settings

_DEFAULT = click.core.ParameterSource.DEFAULT
DEFAULT_GENERATED_USERS = 200


def run_tag(run_id: str) -> str:
    """The run's part of its namespaces' prefix: the last 4 letters or digits of its id
    (a random suffix by default), lower case, for a prefix must match [a-z][a-z0-9_]*;
    random when the id has none."""
    kept = re.sub(r"[^a-z0-9]", "", run_id.lower())[-4:]
    return kept or secrets.token_hex(2)


@click.command()
@click.option(
    "--scenario",
    "scenario_files",
    multiple=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="a scenario file (repeatable)  [default: the hand-written suite plus generated users]",
)
@click.option(
    "--strategy",
    "strategy_specs",
    multiple=True,
    help="NAME, FILE.yaml, or either with :key=value,... overrides, e.g. "
    "'fixed_ttl:ttl.default_s=86400' (repeatable)  [default: every built-in, without --grid]",
)
@click.option(
    "--grid",
    "grid_specs",
    multiple=True,
    help="a parameter sweep: NAME:key=v1,v2,... with more keys after ';' (their product), "
    "e.g. 'fixed_ttl:ttl.default_s=3600,86400' or 'NAME:a.b=1,2;c.d=x,y'; each point runs "
    "as a strategy labelled NAME[key=v,...] (repeatable, combines with --strategy)  "
    "[default: none]",
)
@click.option(
    "--users",
    type=click.IntRange(min=1),
    default=None,
    help="generated users without --scenario; with --scenario, only the first N users of "
    f"each  [default: {DEFAULT_GENERATED_USERS} generated; every user of a file]",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="Ray workers replaying users in parallel (each a shard of every scenario)",
)
@click.option(
    "--cohort-users",
    type=click.IntRange(min=1),
    default=COHORT_USERS,
    show_default=True,
    help="users a worker replays at once; a bigger shard goes in cohorts (same figures, "
    "memory bounded by the cohort)",
)
@backend_option
@embedder_option
@click.option("--seed", type=int, default=7, show_default=True, help="seed of generated users")
@click.option(
    "--k",
    type=click.IntRange(min=1, max=100),
    default=5,
    show_default=True,
    help="memories each layer returns per probe (a probe's own k overrides it)",
)
@click.option(
    "--idle-sweep-s",
    type=click.FloatRange(min=1.0),
    default=IDLE_SWEEP_S,
    show_default=True,
    help="virtual seconds between sweeps when no one is active (PII residency resolution)",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
    help="directory under which the run's directory (named by --run-id) is written",
)
@click.option(
    "--run-id",
    default=None,
    callback=lambda ctx, param, value: _check_run_id(value),
    help="letters, digits, '.', '_', '-'  [default: the UTC time and a random suffix]",
)
@click.option(
    "--resume",
    "resume_dir",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    default=None,
    help="continue the run in this directory (instead of --out/--run-id): results whose "
    "file is complete are kept, the others (missing, failed, interrupted) run; the "
    "settings that shape the figures must be the run's  [default: a new run]",
)
@click.option(
    "--fault",
    default=None,
    help="inject a fault to watch what a run does: 'worker:kill@30%' kills worker 0's "
    "process (SIGKILL) at 30% of its first replay; 'pg:kill@30%' (or redis:, and stop | "
    "restart) kills, pauses or restarts that worker's embedded server instead "
    "(docs/resilience.md); that strategy is recorded as failed with the "
    "error, the others run, --resume runs it again  [default: none]",
)
@click.option(
    "--system",
    "system_names",
    default="reference",
    show_default=True,
    help="the memory system(s) under test, a comma list: reference, langgraph-memory, "
    "langgraph-postgres, mem0 (docs/systems.md); each runs every strategy",
)
@click.option(
    "--objective",
    "objective_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="the YAML file of the objective the recommendation follows: constraints, then "
    "aims (docs/running-and-scenarios.md)  [default: memharness/default_objective.yaml]",
)
@click.option(
    "--require",
    "requirements",
    multiple=True,
    help="a constraint in place of the objective's on the same metric, e.g. 'stale <= 10%' "
    "(repeatable)  [default: none]",
)
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="print each scenario's tables too (strategies side by side, recall per layer, PII "
    "detector, monitoring)  [default: a line per scenario; the tables in details.txt]",
)
@click.option(
    "--progress/--no-progress",
    default=True,
    show_default=True,
    help="progress on stderr: a line as each phase (workers' start, embedding ahead, each "
    "replay, the report) starts and ends; a live bar on a terminal",
)
def run(
    scenario_files: tuple[Path, ...],
    strategy_specs: tuple[str, ...],
    grid_specs: tuple[str, ...],
    users: int | None,
    workers: int,
    cohort_users: int,
    backend: str | None,
    embedder: str | None,
    seed: int,
    k: int,
    idle_sweep_s: float,
    out: Path,
    run_id: str | None,
    resume_dir: Path | None,
    fault: str | None,
    system_names: str,
    objective_file: Path | None,
    requirements: tuple[str, ...],
    verbose: bool,
    progress: bool,
) -> None:
    """Replay scenarios under strategies on Ray; print the strategies side by side per
    scenario, then each across all the scenarios (recall/footprint frontier, worst
    scenario) with the one a stated rule recommends; write the report (summary.md)."""
    # Ray and matplotlib load here, not when the CLI starts: other commands need neither.
    from memharness.monitoring_tables import monitoring_terminal
    from memharness.report import write_report
    from memharness.run_tables import layer_terminal, summary_terminal
    from memharness.run_verdict import verdict_terminal
    from memharness.sim.results import ResultWriter, ResumeError
    from memharness.sim.runner import RunOptions, StrategyOutcome
    from memharness.sim.simulator import Simulator
    from memharness.systems_table import systems_markdown

    settings = settings_from_options(backend=backend, embedder=embedder)
    objective = objective_from_options(objective_file, requirements)
    if resume_dir is not None:
        source = click.get_current_context().get_parameter_source
        given = [f"--{n.replace('_', '-')}" for n in ("out", "run_id") if source(n) != _DEFAULT]
        if given:
            raise click.UsageError(f"--resume names the run's directory: drop {given[0]}")
    try:
        parsed = parse_fault(fault) if fault is not None else None
        kill_worker_at = parsed.share if parsed is not None and parsed.target == "worker" else None
        server_fault = parsed if parsed is not None and parsed.target != "worker" else None
        if server_fault is not None:
            _check_server_fault(server_fault, settings)
        builtin_names = [s.name for s in list_strategies()]
        specs = plan_specs(strategy_specs, grid_specs, builtin_names)
        systems = parse_systems(system_names)
        if fault is not None and systems != ["reference"]:
            raise SpecError(f"--fault {fault}: faults act on the reference's workers only")
        for spec in specs:
            if spec.name in builtin_names:
                continue  # `memharness strategies check NAME` lists theirs (docs/strategies.md)
            for line in unreachable(spec.strategy):
                told = f"warning: strategy {spec.label}: {line}"
                click.echo(textwrap.fill(told, WIDTH, subsequent_indent="  "), err=True)
        specs = [spec.on(system) for system in systems for spec in specs]
        read_began = time.perf_counter()
        if scenario_files:
            inputs = [file_scenario(path, users) for path in scenario_files]
        else:
            inputs = [file_scenario(path, None) for path in suite_files()]
            inputs.append(generated_users(users or DEFAULT_GENERATED_USERS, seed))
        read_s = time.perf_counter() - read_began
    except (SpecError, ScenarioError) as exc:
        raise click.UsageError(str(exc)) from None
    if settings.encryption_key is None and any(
        s.strategy.pii is not None and s.strategy.pii.encrypt_ltm for s in specs
    ):
        # Simulated users' data is throwaway: seal it with a throwaway key.
        settings = settings.model_copy(update={"encryption_key": SecretStr(generate_key())})

    started = datetime.now(UTC)  # wall-clock ok: it names the run and dates its results
    if resume_dir is not None:
        run_id = resume_dir.name
    run_id = run_id or f"{started:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"
    header = {
        "run_id": run_id,
        "created_at": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "backend": settings.backend,
        "embedder": settings.embedder,
        "workers": workers,
        "k": k,
        "seed": seed,
        "idle_sweep_s": idle_sweep_s,
        "sample_every_s": SAMPLE_EVERY_S,
        "systems": systems,
        "objective": objective.as_dict(),
    }
    try:
        if resume_dir is not None:
            writer = ResultWriter.resume(resume_dir, header)
            run_id = str(writer.document.get("run_id") or run_id)
        else:
            writer = ResultWriter(out / run_id, header)
    except (FileExistsError, ResumeError) as exc:
        raise click.UsageError(str(exc)) from None
    click.echo(
        f"memharness run {run_id}: {len(inputs)} scenario(s) x {len(specs)} strategies, "
        f"backend={settings.backend} embedder={settings.embedder} workers={workers} k={k}"
    )
    if resume_dir is not None:
        kept = sum(writer.complete_entry(i, s) is not None for i in inputs for s in specs)
        click.echo(
            f"resuming {resume_dir}: {kept} result(s) complete and kept, "
            f"{len(inputs) * len(specs) - kept} to run"
        )
    shown = Progress(enabled=progress)
    tables = verbose or verbose_env()  # the per-scenario tables on the terminal too
    details: list[str] = []  # everything per scenario, for details.txt

    def detail(text: str) -> None:
        details.append(text)
        if tables:
            click.echo(text, nl=False)

    status = "complete"
    ceiling_told = False  # the dense ceiling is explained under the first table showing it
    sim: Simulator | None = None  # started when first needed: a resume may not
    try:
        with ExitStack() as stack:
            for position, scenario in enumerate(inputs):
                section = writer.start_scenario(scenario)
                detail(f"\n== {scenario.name} ({len(scenario.users)} users, {scenario.source})\n")
                pending: list[StrategySpec] = []
                for spec in specs:
                    entry = writer.reuse(scenario, spec) if resume_dir is not None else None
                    if entry is None:
                        pending.append(spec)
                    else:
                        detail(f"{_one_line(entry)}  (kept)\n")

                def on_result(outcome: StrategyOutcome, scenario: ScenarioInput = scenario) -> None:
                    entry = writer.add(scenario, outcome)
                    if tables:
                        shown.echo(_one_line(entry))
                    details.append(_one_line(entry) + "\n")

                if pending:
                    if sim is None:
                        # Fresh on resume: no namespace an earlier attempt left is reused.
                        tag = secrets.token_hex(2) if resume_dir is not None else run_tag(run_id)
                        options = RunOptions(
                            workers=workers,
                            k=k,
                            idle_sweep_s=idle_sweep_s,
                            cohort_users=cohort_users,
                            kill_worker_at=kill_worker_at,
                            server_fault=server_fault,
                        )
                        sim = stack.enter_context(
                            Simulator(settings, options, run_tag=tag, progress=shown)
                        )
                    sim.run_scenario(position, scenario, pending, on_result=on_result)
                detail("\n" + summary_terminal(section))
                warning = _vacuous(writer, scenario, section)
                if warning:
                    detail(wrapped(warning))
                if not tables:
                    click.echo(wrapped(_brief(scenario, section), indent="", width=118), nl=False)
                # The ceiling, recall per layer, and what became of the facts not retrieved.
                explain = not ceiling_told and "recall_at_k" in (section.get("ceiling") or {})
                layers = layer_terminal(section, explain_ceiling=explain)
                if layers:
                    detail("\n" + layers)
                detector = detector_terminal(section)
                if detector:
                    detail("\n" + detector)
                monitoring = monitoring_terminal(section)
                if monitoring:
                    detail("\n" + monitoring)
                ceiling_told = ceiling_told or explain
    except KeyboardInterrupt:
        status = "interrupted"
        click.echo(
            "\ninterrupted: the finished strategies are kept; to complete the run:\n  "
            + resume_command(click.get_current_context(), writer.run_dir),
            err=True,
        )
    except MemoryStoreError as exc:
        status = "failed"
        click.echo(f"error: {exc}", err=True)
    finally:
        setup = {"scenarios": read_s, **(sim.setup_s if sim is not None else {})}
        writer.document["setup_s"] = {name: round(value, 3) for name, value in setup.items()}
        writer.finish(status)
        click.echo(verdict_terminal(writer.document), nl=False)
        systems = systems_markdown(writer.document)
        if systems:
            click.echo("\n" + "\n".join(systems), nl=False)
        with shown.start(f"writing the report in {writer.run_dir}"):
            began = time.perf_counter()
            # Interrupted: no plots (seconds of drawing); the resumed run draws them.
            summary = write_report(writer.run_dir, plots=status != "interrupted")
        writer.document["setup_s"]["report"] = round(time.perf_counter() - began, 3)
        writer.flush()
        (writer.run_dir / "details.txt").write_text("".join(details), encoding="utf-8")
        click.echo(f"\nreport: {summary}")
        click.echo(setup_line(writer.document["setup_s"]))
        if not tables:
            click.echo("each scenario's tables: details.txt beside it (or run -v)")
    if status != "complete":
        sys.exit(130 if status == "interrupted" else 1)


def _vacuous(writer: Any, scenario: ScenarioInput, section: dict[str, Any]) -> str | None:
    """Record in the scenario's section the probes whose forbidden fact no strategy
    returned (`vacuous.py`); the warning to print, or None when there are none."""
    entries = [e for e in section.get("strategies") or [] if e.get("status") == "ok"]
    records = {str(e["label"]): probe_records(writer.run_dir, e) or [] for e in entries}
    checks = forbidden_count(scenario.users)
    if not entries or not checks:
        return None
    found = vacuous_checks(scenario.users, records)
    section["vacuous"] = {"checks": checks, "count": len(found), "probes": found[:LISTED]}
    writer.flush()
    if not found:
        return None
    return vacuous_line(len(found), checks, records, str(writer.run_dir))


def _brief(scenario: ScenarioInput, section: dict[str, Any]) -> str:
    """A scenario in one line: the range of recall and stale over its strategies, leakage,
    failures and the checks that could not fail."""
    entries = [
        e for e in section.get("strategies") or [] if not (e.get("config") or {}).get("oracle")
    ]
    metrics = [e["metrics"] for e in entries if e.get("status") == "ok" and e.get("metrics")]

    def spread(key: str) -> str:
        values = [m[key] for m in metrics if m.get(key) is not None]
        if not values:
            return "-"
        low, high = min(values), max(values)
        return f"{low:.1%}" if low == high else f"{low:.1%}-{high:.1%}"

    parts = [
        f"recall {spread('recall_at_k')}",
        f"stale {spread('stale_at_k')}",
        f"leakage {sum(int(m.get('leakage') or 0) for m in metrics)}",
    ]
    not_ok = [e for e in entries if e.get("status") != "ok"]
    if not_ok:
        parts.append(f"{len(not_ok)} not ok ({', '.join(str(e['label']) for e in not_ok)})")
    vacuous = section.get("vacuous") or {}
    if vacuous.get("count"):
        parts.append(
            f"{vacuous['count']} of {vacuous['checks']} stale/forbidden checks could not fail"
        )
    return f"== {scenario.name} ({len(scenario.users):,} users): " + ", ".join(parts)


def objective_from_options(path: Path | None, requirements: tuple[str, ...]) -> Objective:
    """The objective of `--objective` (the default without) with `--require`'s constraints."""
    try:
        objective = load_objective(path) if path is not None else default_objective()
        return with_constraints(objective, requirements)
    except ObjectiveError as exc:
        raise click.UsageError(str(exc)) from None


def parse_systems(text: str) -> list[str]:
    """The systems `--system` names (a comma list), each known and importable: an
    unknown name or a missing optional extra is a `SpecError` saying which."""
    from memharness.systems import SYSTEMS, MissingExtra, UnknownSystem, adapter_class

    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise SpecError(f"--system: no system named; known: {', '.join(SYSTEMS)}")
    if len(set(names)) != len(names):
        raise SpecError(f"--system {text!r}: a system is named twice")
    for name in names:
        if name == "reference":
            continue
        try:
            adapter_class(name)
        except (UnknownSystem, MissingExtra) as exc:
            raise SpecError(str(exc)) from None
        except ModuleNotFoundError:  # registered, its adapter not in this version yet
            raise SpecError(f"--system {name}: its adapter is not in this version") from None
    return names


#: Options a resumed run takes from its directory, or that do not shape its figures.
_NOT_RESUMED = frozenset({"out", "run_id", "resume_dir", "fault", "progress"})


def resume_command(ctx: click.Context, run_dir: Path) -> str:
    """The `memharness run --resume RUN_DIR ...` that completes this run: the options
    given on the command line that shape the figures, repeated as given."""
    words = ["memharness", "run", "--resume", str(run_dir)]
    for param in ctx.command.params:
        name = param.name or ""
        if not isinstance(param, click.Option) or name in _NOT_RESUMED:
            continue
        if ctx.get_parameter_source(name) is not click.core.ParameterSource.COMMANDLINE:
            continue
        value: Any = ctx.params.get(name)
        for item in value if param.multiple else [value]:
            words += [param.opts[0], str(item)]
    return shlex.join(words)


_RUN_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}")


def _check_server_fault(fault: Fault, settings: Settings) -> None:
    """A server fault needs the worker's own embedded server to act on."""
    if settings.backend == "memory":
        raise SpecError(
            f"--fault {fault}: the memory backend has no server (use --backend embedded)"
        )
    url = settings.pg_url if fault.target == "pg" else settings.redis_url
    if url is not None:
        name = "MEMH_PG_URL" if fault.target == "pg" else "MEMH_REDIS_URL"
        raise SpecError(
            f"--fault {fault}: {name} names a server of yours, which memharness does not kill "
            "or restart; unset it to fault the workers' embedded servers"
        )


def _check_run_id(value: str | None) -> str | None:
    """A run id names a directory under --out: no '/', no '..', nothing a shell mangles."""
    if value is not None and not _RUN_ID_RE.fullmatch(value):
        message = (
            f"{value[:60]!r}: 1-100 letters, digits, '.', '_', '-', starting with a letter or digit"
        )
        raise click.BadParameter(message, param_hint="--run-id")
    return value


def setup_line(setup_s: dict[str, float]) -> str:
    """The run's fixed costs in wall seconds, apart from the replays' turns/s."""
    names = {
        "scenarios": "reading",
        "workers": "Ray start",
        "load": "embedding ahead",
        "report": "report",
    }
    parts = [f"{names[k]} {v:.1f}s" for k, v in setup_s.items() if k in names]
    return "setup, outside turns/s: " + ", ".join(parts)


def _one_line(entry: dict[str, Any]) -> str:
    m = entry.get("metrics")
    if entry["status"] != "ok" or not m:
        first = (entry.get("error") or "").strip().splitlines()[:1] or [""]
        return f"  {entry['label']:<28} {entry['status'].upper()}: {first[0]}"

    def pct(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    return (
        f"  {entry['label']:<28} recall {pct(m['recall_at_k']):>5}  stale {pct(m['stale_at_k']):>5}"
        f"  over-forget {pct(m['over_forget_rate']):>5}  leakage {m['leakage']}"
        f"  {m['turns_per_s'] or 0:,.0f} turns/s"
    )
