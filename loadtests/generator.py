"""The load generator's own figures per rate step: how late it sent, and whether to trust it.

An open-loop generator fixes each turn's intended send time in advance; a free user
sleeps until then and sends. When the generator is short of CPU (its event loop blocked
by work in its own process, or the machine's cores taken), the send comes late although a
user was free: such a step measures the generator, not the server. Latency stays timed
from the intended send time either way (wrk2, YCSB's intended interval); this module says
whether the step's schedule was kept.

Two kinds of lateness are told apart:

- **schedule lag**: actual send − intended send, over every turn of the step (p50, p99,
  max), as wrk2 reports it;
- **the generator's own lag**: the same, over the turns a user claimed before their
  intended time (a user was free, so any lateness is the generator's). More than
  `LATE_LIMIT` of them sent over `LATE_MS` late, or more than `DROP_LIMIT` of the intended
  turns never sent (`dropped_share`, k6's dropped iterations), and the step is invalid:
  never used for a fit, the reason printed in the plan.

Turns claimed after their intended time (every user busy waiting on the server) are the
server's queueing, not the generator's lag: they are counted as `queued_share`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["DROP_LIMIT", "LATE_LIMIT", "LATE_MS", "SendLag", "generator_problem"]

#: A send more than this late (a user free in time) is the generator's lateness.
LATE_MS = 10.0
#: A step where more than this share of its free-user sends were late is invalid.
LATE_LIMIT = 0.01
#: A step whose generator never sent more than this share of its intended turns is invalid.
DROP_LIMIT = 0.01


def _quantiles(values: Sequence[float]) -> dict[str, float | None]:
    if not values:
        return {"p50": None, "p99": None, "max": None}
    array = np.asarray(values, dtype=float)
    return {
        "p50": round(float(np.percentile(array, 50)), 3),
        "p99": round(float(np.percentile(array, 99)), 3),
        "max": round(float(array.max()), 3),
    }


@dataclass
class SendLag:
    """One step's sends: each turn's lag behind its intended send time (ms)."""

    lags_ms: list[float] = field(default_factory=list)
    #: Lags of the turns whose user was free before the intended time.
    own_ms: list[float] = field(default_factory=list)

    def record(self, *, intended: float, claimed: float, sent: float) -> None:
        """A turn intended at `intended`, claimed by a user at `claimed`, sent at `sent`
        (clock seconds)."""
        lag = max(0.0, sent - intended) * 1000.0
        self.lags_ms.append(lag)
        if claimed <= intended:
            self.own_ms.append(lag)

    def as_dict(self) -> dict[str, Any]:
        sent = len(self.lags_ms)
        late = sum(1 for lag in self.own_ms if lag > LATE_MS)
        return {
            "sent": sent,
            "lag_ms": _quantiles(self.lags_ms),
            "own_lag_ms": _quantiles(self.own_ms),
            "late_share": round(late / len(self.own_ms), 4) if self.own_ms else 0.0,
            "queued_share": round(1 - len(self.own_ms) / sent, 4) if sent else 0.0,
        }


def _number(value: Any) -> float:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return 0.0
    return out if math.isfinite(out) else 0.0


def generator_problem(generator: Mapping[str, Any] | None, dropped_share: Any) -> str | None:
    """Why a step measured its generator rather than the server (None: it kept its
    schedule). `generator` is a step's `generator` entry of steps.json."""
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
