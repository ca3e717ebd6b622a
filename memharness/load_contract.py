"""What `memharness load` and the Locust process it starts agree on.

The command (memharness) configures the process (loadtests) through environment
variables, and both read a rate-step run by the same terms: the rates of `--rates auto`,
the roles whose process serves on one core, and when a step measured its generator
rather than the server. They live here, in the harness core, so the drivers
(loadtests) and the plans (memharness/capacity) import them from below.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = [
    "API_KEY_ENV",
    "AUTO_SHARES",
    "DROP_LIMIT",
    "LATE_LIMIT",
    "LATE_MS",
    "MAINTENANCE_PID_ENV",
    "RATES_ENV",
    "REPEATS_ENV",
    "SERVICE_PID_ENV",
    "SINGLE_CORE",
    "STEP_S_ENV",
    "auto_rates",
    "generator_problem",
]

#: `--rates`: the offered rates of the steps ("2,4,8" or "auto").
RATES_ENV = "MEMH_LOAD_RATES"
#: `--step-duration`: seconds per rate step.
STEP_S_ENV = "MEMH_LOAD_STEP_S"
#: `--repeats`: rounds through the rates.
REPEATS_ENV = "MEMH_LOAD_REPEATS"
#: The maintenance process's pid, set by `memharness load --strategy` for the Locust process.
MAINTENANCE_PID_ENV = "MEMH_LOAD_MAINTENANCE_PID"
#: `memharness load --apart`: the pid of the `memharness serve` it started (the service
#: and its maintenance child), for the Locust process, which is then the generator only.
SERVICE_PID_ENV = "MEMH_LOAD_SERVICE_PID"
#: The tenant's key of a target service: in the environment, never on a command line.
API_KEY_ENV = "MEMH_API_KEY"

#: Roles whose process serves on one core, each a bound of its own: X <= 1 / its CPU per turn.
SINGLE_CORE = {
    "load": "the load process (one Python process: the GIL)",
    "redis": "Redis (one command thread)",
    "maintenance": "the maintenance process (one Python process)",
}

#: Offered load of each auto step, as a share of the calibrated X_max (cores / D): five
#: below the safe utilisation (0.8 of X_max) for the demand and the queueing model, three
#: at and past X_max to see where it stops.
AUTO_SHARES = (0.1, 0.25, 0.4, 0.55, 0.7, 0.85, 1.0, 1.2)

#: A send more than this late (a user free in time) is the generator's lateness.
LATE_MS = 10.0
#: A step where more than this share of its free-user sends were late is invalid.
LATE_LIMIT = 0.01
#: A step whose generator never sent more than this share of its intended turns is invalid.
DROP_LIMIT = 0.01


def auto_rates(x_max: float, shares: Sequence[float] = AUTO_SHARES) -> tuple[float, ...]:
    """Rates for `auto`: `shares` of `x_max` (turns/s), to 2 significant figures."""
    if not (math.isfinite(x_max) and x_max > 0):
        raise ValueError(f"X_max must be a positive number of turns/s (got {x_max})")
    return tuple(max(0.05, float(f"{x_max * share:.2g}")) for share in shares)


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0.0
    return out if math.isfinite(out) else 0.0


def generator_problem(generator: Mapping[str, Any] | None, dropped_share: Any) -> str | None:
    """Why a step measured its generator rather than the server (None: it kept its
    schedule). `generator` is a step's `generator` entry of steps.json
    (`loadtests.generator.SendLag`)."""
    dropped = _number(dropped_share)
    if dropped > DROP_LIMIT:
        return (
            f"the generator dropped {dropped:.1%} of its intended turns (limit "
            f"{DROP_LIMIT:.0%}): it measured the generator, not the server"
        )
    if not generator:
        return None
    late = _number(generator.get("late_share"))
    if late > LATE_LIMIT:
        own = generator.get("own_lag_ms") or {}
        return (
            f"the generator lagged: {late:.1%} of its sends over {LATE_MS:g} ms late with a "
            f"user free (limit {LATE_LIMIT:.0%}; p99 {_number(own.get('p99')):.1f} ms, max "
            f"{_number(own.get('max')):.1f} ms): it measured the generator, not the server"
        )
    return None
