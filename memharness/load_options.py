"""Options of `memharness load` by group: what the load offers (rate steps, an overload
run, its SLAs) and what it plays (strategies, scenarios, a faster clock). Declared here so
the command module holds the command; each group is one decorator."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from memharness.cli_settings import DURATION
from memharness.load_plan import DEFAULT_SCENARIO_USERS, check_time_scale
from memharness.scenarios import DOMAINS

__all__ = ["rate_options", "strategy_options"]

F = TypeVar("F", bound=Callable[..., Any])


def _group(*options: Callable[[F], F]) -> Callable[[F], F]:
    """One decorator for `options`, listed in `--help` in the order given."""

    def apply(command: F) -> F:
        for option in reversed(options):
            command = option(command)
        return command

    return apply


#: --rates, --repeats, --step-duration, --sla, --overload and its options.
rate_options = _group(
    click.option(
        "--rates",
        default=None,
        help="Rate steps for capacity planning: open-loop arrivals at R1,R2,... turns/s, each "
        "for --step-duration, per-step HDR histograms and per-process CPU/RSS in steps.json. "
        "'auto': 8 steps from 10% to 120% of X_max = cores / D, D the CPU seconds a few "
        "turns played first cost every process of the system under test (about 3.5 min in "
        "all with the default 20 s steps, model loading and the backlog's drain included).",
    ),
    click.option(
        "--repeats",
        type=click.IntRange(1, 20),
        default=1,
        show_default=True,
        help="With --rates: play every rate this many times, in rounds of alternating direction "
        "(light to heavy, heavy to light): an interval per rate for `memharness capacity` "
        "(3 for a plan to trust).",
    ),
    click.option(
        "--step-duration",
        "step_s",
        type=DURATION,
        default="20s",
        show_default=True,
        help="With --rates: how long each rate is offered.",
    ),
    click.option(
        "--sla",
        default=None,
        help="SLAs as op=ms[@pNN],... [default: session=5,stm=50,ltm=200,turn=300].",
    ),
    click.option(
        "--overload",
        is_flag=True,
        help="Overload run: find the highest rate that holds the SLAs (a --rates auto run, "
        "--step-duration each step), then offer --overload-factor times it open loop for "
        "--duration (default 2m); writes overload.json (stayed up, memory bounded, SLA broken "
        "with the queueing time, servers consistent). Exit 0: survived; 5: not.",
    ),
    click.option(
        "--overload-factor",
        type=click.FloatRange(min=0, min_open=True),
        default=2.0,
        show_default=True,
        help="With --overload: the multiple of the sustainable rate offered.",
    ),
    click.option(
        "--sustainable-rate",
        type=click.FloatRange(min=0, min_open=True),
        default=None,
        help="With --overload: the highest rate known to hold the SLAs (skips the search).",
    ),
    click.option(
        "--sustainable-from",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="With --overload: a steps.json of an earlier --rates run to take it from.",
    ),
)

#: --strategy, --grid, --scenario, --domain, --scenario-users, --seed, --time-scale, --apart.
strategy_options = _group(
    click.option(
        "--strategy",
        "strategy_specs",
        multiple=True,
        help="Run the load under this strategy, beside its maintenance process: NAME, FILE.yaml, "
        "or either with :key=value,... overrides, as for `memharness run` (repeatable: one run "
        "each, same load and seed; OUT/RUN_ID-NAME/ each, OUT/RUN_ID/load_strategies.json). "
        "Without --strategy or --grid: the stores' defaults, no maintenance process.",
    ),
    click.option(
        "--grid",
        "grid_specs",
        multiple=True,
        help="A parameter sweep as for `memharness run`: NAME:key=v1,v2,... (';' for more keys); "
        "each point is a strategy of its own (repeatable, combines with --strategy).",
    ),
    click.option(
        "--scenario",
        "scenario_file",
        type=click.Path(exists=True, dir_okay=False, path_type=Path),
        default=None,
        help="Play this scenario's users' timelines (say, probe, event, forget) instead of the "
        "built-in conversations [default with --strategy: --scenario-users generated users].",
    ),
    click.option(
        "--domain",
        "domains",
        multiple=True,
        type=click.Choice(list(DOMAINS)),
        help="Play generated users of this domain (repeatable) [default with --strategy: all].",
    ),
    click.option(
        "--scenario-users",
        type=click.IntRange(min=1),
        default=None,
        help=f"Generated scenario users, replayed round robin [default: {DEFAULT_SCENARIO_USERS}].",
    ),
    click.option(
        "--seed",
        type=int,
        default=None,
        help="Seed of the generated users, the conversations and the arrivals [default: 0].",
    ),
    click.option(
        "--time-scale",
        type=float,
        default=None,
        callback=lambda ctx, param, value: check_time_scale(value),
        help="Run the memory (and the maintenance) on a clock N times the wall clock, so TTLs, "
        "windows, decay and archival fire during the load: 4320 makes 10 minutes 30 virtual "
        "days. Adds p95 and record counts per virtual day.",
    ),
    click.option(
        "--apart",
        is_flag=True,
        help="With --strategy: run the memory as `memharness serve` (its maintenance beside it) "
        "in a process of its own and drive it over HTTP, so the load generator neither shares "
        "its CPU nor counts in D; each step records the generator's CPU and send lag, and a "
        "step where it lagged is set apart by `memharness capacity`.",
    ),
)
