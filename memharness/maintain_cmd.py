"""`memharness maintain`: run a strategy's background work as a process (one replica).

Server settings come from `MEMH_*` (`MEMH_PREFIX`, `MEMH_REDIS_URL`, `MEMH_PG_URL`,
`MEMH_CHROMA_URL`, `MEMH_BACKEND`); see `reference.maintenance` for what it does.
"""

from __future__ import annotations

import difflib
import logging
import math
import sys
from pathlib import Path

import click

from memharness.cli_settings import DURATION, settings_from_options
from memharness.verbosity import verbose as memharness_verbose
from reference.clock import Clock, ScaledClock, SystemClock
from reference.errors import MemoryStoreError
from reference.maintenance.lease import MIN_LEASE_S
from reference.policy.loading import BUILTINS, load_strategy
from reference.policy.strategy import Strategy, StrategyError


def resolve_strategy_option(text: str) -> Strategy:
    """The strategy `--strategy` names (built-in or YAML file); an unknown name lists the
    known ones and suggests the nearest; the oracle is refused."""
    looks_like_file = text.endswith((".yaml", ".yml")) or "/" in text
    if not looks_like_file and text not in BUILTINS:
        near = difflib.get_close_matches(text, list(BUILTINS), n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise click.BadParameter(
            f"no strategy named {text!r}.{hint} Known: {', '.join(BUILTINS)} "
            "(or a strategy YAML file)",
            param_hint="--strategy",
        )
    try:
        strategy = load_strategy(text)
    except StrategyError as exc:
        raise click.BadParameter(str(exc), param_hint="--strategy") from None
    if strategy.oracle:
        raise click.BadParameter(
            f"{strategy.name!r} keeps what the scenario's future probes need: it reads the "
            "script, so it cannot run in production",
            param_hint="--strategy",
        )
    return strategy


def make_clock(
    time_scale: float | None, clock_origin: float | None, wall_origin: float | None
) -> Clock:
    """The process clock: the wall clock, or a `ScaledClock` with --time-scale."""
    if time_scale is None:
        if clock_origin is not None or wall_origin is not None:
            raise click.BadParameter(
                "needs --time-scale", param_hint="--clock-origin/--wall-origin"
            )
        return SystemClock()
    if not math.isfinite(time_scale) or time_scale <= 0:
        raise click.BadParameter(
            f"must be a number > 0, got {time_scale:g}", param_hint="--time-scale"
        )
    return ScaledClock(time_scale, origin=clock_origin, wall_origin=wall_origin)


@click.command()
@click.option(
    "--strategy",
    "strategy_text",
    required=True,
    help="a built-in strategy name (see 'memharness strategies') or a YAML file",
)
@click.option(
    "--time-scale",
    type=float,
    default=None,
    help="run on a scaled clock: a wall second is N clock seconds (default: wall clock)",
)
@click.option(
    "--clock-origin",
    type=float,
    default=None,
    help="the scaled clock's time at --wall-origin (epoch s; default: now)",
)
@click.option(
    "--wall-origin",
    type=float,
    default=None,
    help="the wall time the scaled clock starts from (epoch s; default: now)",
)
@click.option("--replica", default=None, help="this replica's name (default: <host>-<pid>)")
@click.option(
    "--figures",
    "figures_path",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="write the figures JSON here (atomically), on exit and periodically",
)
@click.option(
    "--figures-every",
    "every_s",
    type=DURATION,
    default="10",
    show_default=True,
    help="how often to write --figures (wall time: 10, 30s, 1m)",
)
@click.option(
    "--duration",
    "duration_s",
    type=DURATION,
    default=None,
    help="stop by itself after this wall time (90, 2m, 1h)",
)
@click.option(
    "--lease-s",
    type=float,
    default=10.0,
    show_default=True,
    help="the sweeper lease's length in wall seconds (>= 1)",
)
@click.option(
    "--claim-idle-s",
    type=float,
    default=None,
    help="claim events another replica left pending this long (default: 2 leases)",
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65535),
    default=None,
    help="serve Prometheus text on 127.0.0.1:PORT/metrics (0: a free port)",
)
@click.option("--fault", default=None, hidden=True, help="tests: kill@N or block@N (batch N)")
@click.option("-v", "--verbose", is_flag=True, help="log lease changes and errors to stderr")
def maintain(
    strategy_text: str,
    time_scale: float | None,
    clock_origin: float | None,
    wall_origin: float | None,
    replica: str | None,
    figures_path: Path | None,
    every_s: float,
    duration_s: float | None,
    lease_s: float,
    claim_idle_s: float | None,
    metrics_port: int | None,
    fault: str | None,
    verbose: bool,
) -> None:  # fmt: skip
    """Run STRATEGY's background work beside the serving processes: its sweeps (one
    replica at a time holds the lease), consolidation of ended sessions, and the business
    events of the Redis Stream (every replica, consumer group `forgetting`).

    Run N replicas for safety: one sweeps, all consume events, a replica that dies is
    replaced within two lease periods. SIGTERM finishes the batch in hand, releases the
    lease and writes the figures.
    """
    from reference.maintenance.process import BatchFault
    from reference.maintenance.runner import build_maintenance, run_maintenance

    strategy = resolve_strategy_option(strategy_text)
    clock = make_clock(time_scale, clock_origin, wall_origin)
    if not math.isfinite(lease_s) or lease_s < MIN_LEASE_S:
        raise click.BadParameter(
            f"must be at least {MIN_LEASE_S:g} s, got {lease_s:g}", param_hint="--lease-s"
        )
    if claim_idle_s is not None and not claim_idle_s >= 0:
        raise click.BadParameter("must be >= 0", param_hint="--claim-idle-s")
    try:
        batch_fault = None if fault is None else BatchFault.parse(fault)
    except MemoryStoreError as exc:
        raise click.BadParameter(str(exc), param_hint="--fault") from None
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, stream=sys.stderr)
    if not memharness_verbose():  # `memharness -v`: pgserver's start/stop commands too
        logging.getLogger("pgserver").setLevel(logging.WARNING)
    settings = settings_from_options()
    try:
        process = build_maintenance(
            settings,
            strategy,
            clock=clock,
            replica=replica,
            lease_s=lease_s,
            figures_path=figures_path,
            figures_every_s=every_s,
            claim_idle_s=claim_idle_s,
            fault=batch_fault,
        )
    except MemoryStoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    click.echo(
        f"maintain: replica {process.replica}, strategy {strategy.name} "
        f"(sweep every {strategy.sweep_interval_s:g} clock s, batches of "
        f"{strategy.sweep_batch_size}), lease {lease_s:g} s, "
        f"time scale {clock.native_ttl_scale:g}",
        err=True,
    )
    run_maintenance(
        process,
        duration_s=duration_s,
        metrics_port=metrics_port,
        on_metrics=lambda port: click.echo(
            f"maintain: metrics on http://127.0.0.1:{port}/metrics", err=True
        ),
    )
    fig = process.figures.to_json()
    click.echo(
        f"maintain: stopped; {fig['cycles']} sweeps, {fig['changed']} changed, "
        f"{fig['events_applied']} events (lag p95 {fig['event_lag_ms']['p95']:.1f} ms), "
        f"{fig['errors']} errors",
        err=True,
    )
