"""`memharness load` once its options are checked: the Locust process of the run (or,
under strategies, one per strategy beside its maintenance), its command line and
environment, and its exit code.

`LoadRun` is plain data and `run_load` a plain call, so a test or a notebook runs a load
without the command line; what they report goes to stderr.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from memharness.load_contract import API_KEY_ENV, RATES_ENV, REPEATS_ENV, STEP_S_ENV
from memharness.load_locust import RUN_ENV, build_locust_command, locust_environment
from memharness.load_plan import run_under_strategies
from memharness.sim.plan import StrategySpec
from reference.settings import Settings

__all__ = ["LoadRun", "run_load"]


@dataclass(frozen=True)
class LoadRun:
    """One load run, its options checked (`memharness load --help` says what each means)."""

    locustfile: Path
    out: Path
    run_id: str
    users: int
    #: Locust's run time, whole seconds: "60s".
    duration: str
    rate: float | None = None
    open_loop: bool = False
    spawn_rate: float | None = None
    arrivals: str = "constant"
    serial: bool = False
    steps: str | None = None
    sla: str | None = None
    #: Rate steps: "2,4,8" or "auto", each offered `step_s` seconds, `repeats` rounds.
    rates: str | None = None
    repeats: int = 1
    step_s: float = 20.0
    #: Arguments passed to Locust unchanged.
    locust_args: tuple[str, ...] = ()
    backend: str | None = None
    embedder: str | None = None
    #: A target service's key (`--target`), passed in the environment.
    api_key: str | None = None
    #: The scenario file whose users' timelines the load plays.
    scenario: Path | None = None
    time_scale: float | None = None

    @property
    def run_dir(self) -> Path:
        return self.out / self.run_id

    def command(self, run_dir: Path, run_id: str) -> list[str]:
        """The Locust command line of a run writing to `run_dir`."""
        return build_locust_command(
            locustfile=self.locustfile,
            run_dir=run_dir,
            run_id=run_id,
            users=self.users,
            spawn_rate=self.spawn_rate or float(self.users),
            duration=self.duration,
            rate=self.rate,
            open_loop=self.open_loop,
            arrivals=self.arrivals,
            serial=self.serial,
            steps=self.steps,
            sla=self.sla,
            extra=self.locust_args,
            rate_steps=self.rates is not None,
        )

    def environment(self) -> dict[str, str]:
        """The Locust process's environment: this one with the run's settings, and none of
        a previous run's (a stray variable would change the run unseen)."""
        env = locust_environment(backend=self.backend, embedder=self.embedder, steps=self.steps)
        for name in (RATES_ENV, STEP_S_ENV, *RUN_ENV):
            env.pop(name, None)
        if self.rates is not None:
            env[RATES_ENV], env[STEP_S_ENV] = self.rates, f"{self.step_s:g}"
            env[REPEATS_ENV] = str(self.repeats)
        if self.scenario is not None:
            env["MEMH_LOAD_SCENARIO"] = str(self.scenario)
        if self.api_key is not None:
            env[API_KEY_ENV] = self.api_key
        return env


def run_load(
    run: LoadRun,
    *,
    strategies: Sequence[StrategySpec] = (),
    settings: Settings | None = None,
    apart: bool = False,
) -> int:
    """Run the load; the exit code of Locust (under `strategies`, on `settings`' servers:
    the first non-zero one of a strategy's run)."""
    env = run.environment()
    if strategies:
        assert settings is not None, "a load under strategies needs the servers' settings"
        return run_under_strategies(
            strategies,
            settings=settings,
            out=run.out,
            run_id=run.run_id,
            env=env,
            locust_command=lambda one: run.command(one.run_dir, one.run_id),
            time_scale=run.time_scale,
            apart=apart,
        )
    if run.time_scale is not None:
        env["MEMH_LOAD_TIME_SCALE"] = repr(run.time_scale)
    command = run.command(run.run_dir, run.run_id)
    print(f"memharness load: {run.run_dir}/ ({' '.join(command[2:])})", file=sys.stderr, flush=True)
    code = subprocess.run(command, env=env, check=False).returncode
    print(
        f"memharness load: exit code {code}; reports in {run.run_dir}/", file=sys.stderr, flush=True
    )
    return code
