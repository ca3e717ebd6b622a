"""Step load: hold N1 users for T1, then N2 for T2, ..., then stop.

The steps are pure data here (no Locust import, so tests can use them without gevent's
monkey-patching); the locustfile's `StepShape` turns them into a Locust
`LoadTestShape`. Locust uses any non-abstract shape class it finds in the locustfile, and
a shape overrides --users and --run-time, so that class is active only when the
environment variable `MEMH_LOAD_STEPS` asks for steps (a shape is chosen when the
locustfile is imported, before custom command-line options exist).
`memharness load --steps` sets it.

Step syntax: comma-separated `USERSxDURATION`, durations as everywhere
(`reference.durations`: plain seconds, or units d, h, m, s as in 30s, 1m, 1h30m), e.g.
`10x30s,50x30s,100x1m`. An optional `/RATE` sets the spawn rate of a step
(users per second, default: `MEMH_LOAD_STEP_SPAWN_RATE`, else the step's user count, so a
step is reached within about a second).
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass

from reference.durations import DurationError, parse_positive_duration

__all__ = [
    "SPAWN_RATE_ENV",
    "STEPS_ENV",
    "Step",
    "parse_duration",
    "parse_steps",
    "step_at",
    "steps_from_env",
    "steps_requested",
]

STEPS_ENV = "MEMH_LOAD_STEPS"
SPAWN_RATE_ENV = "MEMH_LOAD_STEP_SPAWN_RATE"
_STEP_RE = re.compile(r"(?P<users>\d+)x(?P<duration>[^/]+)(?:/(?P<rate>[\d.]+))?")


@dataclass(frozen=True, slots=True)
class Step:
    """Hold `users` users for `duration_s` seconds, spawning `spawn_rate` per second."""

    users: int
    duration_s: float
    spawn_rate: float


def parse_duration(text: str) -> float:
    """Seconds > 0 of a step's duration ("90", "90s", "1.5m", "2h", `reference.durations`)."""
    try:
        return parse_positive_duration(text)
    except DurationError as exc:
        raise ValueError(f"duration {text.strip()!r}: {exc}") from None


def parse_steps(text: str, *, default_spawn_rate: float | None = None) -> tuple[Step, ...]:
    """Steps from "10x30s,50x30s/5,100x1m"; raises ValueError naming the bad step."""
    steps = []
    for part in filter(None, (p.strip() for p in text.split(","))):
        match = _STEP_RE.fullmatch(part)
        if match is None:
            raise ValueError(f"step {part!r}: expected USERSxDURATION[/SPAWN_RATE], e.g. 10x30s")
        users = int(match["users"])
        rate = float(match["rate"]) if match["rate"] else default_spawn_rate or max(users, 1)
        if not rate > 0:
            raise ValueError(f"step {part!r}: the spawn rate must be > 0")
        try:
            duration_s = parse_duration(match["duration"])
        except ValueError as exc:
            raise ValueError(f"step {part!r}: {exc}") from None
        steps.append(Step(users, duration_s, rate))
    if not steps:
        raise ValueError("steps: at least one USERSxDURATION step is needed")
    return tuple(steps)


def step_at(steps: Sequence[Step], elapsed_s: float) -> Step | None:
    """The step in force `elapsed_s` seconds into the run; None once the last one ended."""
    end = 0.0
    for step in steps:
        end += step.duration_s
        if elapsed_s < end:
            return step
    return None


def steps_from_env() -> tuple[Step, ...]:
    """The steps `MEMH_LOAD_STEPS` (and `MEMH_LOAD_STEP_SPAWN_RATE`) ask for."""
    rate = os.environ.get(SPAWN_RATE_ENV)
    return parse_steps(
        os.environ.get(STEPS_ENV, ""), default_spawn_rate=float(rate) if rate else None
    )


def steps_requested() -> bool:
    """True when `MEMH_LOAD_STEPS` asks for a step shape."""
    return bool(os.environ.get(STEPS_ENV, "").strip())
