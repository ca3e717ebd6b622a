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
  never used for a fit, the reason printed in the plan (`memharness.load_contract`).

Turns claimed after their intended time (every user busy waiting on the server) are the
server's queueing, not the generator's lag: they are counted as `queued_share`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memharness.load_contract import LATE_MS

__all__ = ["SendLag"]


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
