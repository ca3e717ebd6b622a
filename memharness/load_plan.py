"""What `memharness load` runs under strategies: the strategies, the scenario, the clock.

`run_under_strategies` then runs them (`memharness.load_strategies`).

Everything a user can pass wrong is checked here, before any server or process starts:
an unknown strategy (naming the option, the choices and the nearest name), a grid or
override that does not validate (`memharness run`'s parser: `memharness.sim.plan`), a
time scale that is not > 0, a scenario file that does not load (its file and line).
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from memharness.load_strategies import (
    StrategyLoad,
    fresh_servers,
    run_dir_name,
    run_strategy_loads,
)
from memharness.scenarios import DOMAINS, ScenarioError, load_scenario, write_scenario
from memharness.scenarios.generate import iter_users, user_data
from memharness.scenarios.model import Scenario, User
from memharness.sim.plan import SpecError, StrategySpec, plan_specs
from reference.crypto import generate_key
from reference.policy.loading import list_strategies
from reference.settings import Settings

__all__ = [
    "DEFAULT_SCENARIO_USERS",
    "check_time_scale",
    "plan_strategies",
    "prepare_scenario",
    "run_under_strategies",
    "strategy_loads",
]

#: Generated scenario users when `--strategy` is given without `--scenario`.
DEFAULT_SCENARIO_USERS = 200


def check_time_scale(value: float | None) -> float | None:
    """`--time-scale`: virtual seconds per wall second, > 0 and finite."""
    if value is not None and not (math.isfinite(value) and value > 0):
        raise click.BadParameter(
            f"{value:g}: must be > 0 (virtual seconds per wall second; 4320 makes 10 "
            "minutes 30 virtual days)",
            param_hint="--time-scale",
        )
    return value


def plan_strategies(strategies: Sequence[str], grids: Sequence[str]) -> list[StrategySpec]:
    """The strategy of each `--strategy` and each point of each `--grid`, in order.

    A name that is neither a built-in nor a file is refused naming the option, the
    choices and the nearest built-in; the oracle, which reads the script's future
    probes, has nothing to read under load and is refused too.
    """
    names = [s.name for s in list_strategies()]
    for option, texts in (("--strategy", strategies), ("--grid", grids)):
        for text in texts:
            name = text.strip().split(":", 1)[0].strip()
            if name and name not in names and not _is_file(name):
                near = difflib.get_close_matches(name, names, n=1)
                hint = f"; did you mean {near[0]!r}?" if near else ""
                raise click.BadParameter(
                    f"{text!r}: unknown strategy {name!r}; choose from {', '.join(names)}, "
                    f"or give a strategy YAML file{hint}",
                    param_hint=option,
                )
    try:
        specs = plan_specs(strategies, grids)
    except SpecError as exc:
        raise click.UsageError(str(exc)) from None
    for spec in specs:
        if spec.strategy.oracle:
            raise click.BadParameter(
                f"{spec.label}: the oracle keeps what the script's future probes need; a "
                "load has no script to read ahead (compare it with `memharness run`)",
                param_hint="--strategy",
            )
    return specs


def _is_file(name: str) -> bool:
    return name.endswith((".yaml", ".yml")) or "/" in name or Path(name).is_file()


def prepare_scenario(
    *,
    scenario: Path | None,
    domains: Sequence[str],
    users: int,
    seed: int,
    out_dir: Path,
) -> Path:
    """The scenario file the load plays: `scenario` (checked now: a file that does not
    load is refused with its file and line), or `users` generated users of `domains`
    (all four when none is given, split evenly) written to OUT_DIR/scenario.yaml."""
    if scenario is not None:
        try:
            load_scenario(scenario)
        except ScenarioError as exc:
            raise click.BadParameter(str(exc), param_hint="--scenario") from None
        return scenario.resolve()
    chosen = list(domains) or list(DOMAINS)
    built: list[User] = []
    share, extra = divmod(users, len(chosen))
    for d, domain in enumerate(chosen):
        count = share + (d < extra)
        if count:
            for user_id, steps, _ in iter_users(domain=domain, users=count, seed=seed):
                built.append(User.model_validate(user_data(f"{domain}-{user_id}", steps)))
    name = f"load-{'-'.join(chosen)}-{users}"
    document = Scenario(
        name=name,
        description=f"generated for memharness load: domains={','.join(chosen)} seed={seed}",
        seed=seed,
        users=built,
    )
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / "scenario.yaml"
    with path.open("w", encoding="utf-8") as handle:
        write_scenario(document, handle)
    return path.resolve()


def strategy_loads(
    specs: Sequence[StrategySpec], *, out: Path, run_id: str, prefix: str, tag: str
) -> list[StrategyLoad]:
    """One run directory `<run-id>-<strategy>` and one namespace per strategy, so no
    strategy's run sees another's records. Two labels that make the same directory
    name are refused."""
    loads: list[StrategyLoad] = []
    seen: dict[str, str] = {}
    for i, spec in enumerate(specs):
        name = run_dir_name(run_id, spec.label)
        if name in seen:
            raise click.UsageError(
                f"{spec.label} and {seen[name]} would share the run directory {name}"
            )
        if len(name) > 100:
            raise click.BadParameter(
                f"{run_id!r}: {name!r} is over 100 characters; choose a shorter run id",
                param_hint="--run-id",
            )
        seen[name] = spec.label
        loads.append(
            StrategyLoad(
                spec=spec, run_id=name, run_dir=out / name, prefix=f"{prefix[:30]}_{tag}{i}"
            )
        )
    return loads


def run_under_strategies(
    specs: Sequence[StrategySpec],
    *,
    settings: Settings,
    out: Path,
    run_id: str,
    env: dict[str, str],
    locust_command: Callable[[StrategyLoad], list[str]],
    time_scale: float | None,
    apart: bool = False,
) -> int:
    """The load once per strategy, each beside its maintenance process on real servers
    (`memharness.load_strategies`); returns the first non-zero exit code of a run."""
    from memharness.run_cmd import run_tag

    loads = strategy_loads(
        specs, out=out, run_id=run_id, prefix=settings.prefix, tag=run_tag(run_id)
    )
    if settings.encryption_key is None and any(
        s.strategy.pii is not None and s.strategy.pii.encrypt_ltm for s in specs
    ):
        # The load's users are throwaway: their sealed fields get a throwaway key, which
        # the maintenance process shares (it anonymises what the serving side sealed).
        env["MEMH_ENCRYPTION_KEY"] = generate_key()
    return run_strategy_loads(
        loads,
        summary_dir=out / run_id,
        locust_command=locust_command,
        env=env,
        servers=lambda load: fresh_servers(settings, settings.data_dir / "load" / load.run_id),
        maintenance=settings.backend != "memory",
        time_scale=time_scale,
        echo=lambda line: click.echo(line, err=True),
        apart=apart,
    )
