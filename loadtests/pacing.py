"""Open-loop pacing: arrivals on a fixed timeline, latency from the intended start.

A closed-loop user waits for its turn to finish before it starts the next one, so when
the memory stalls, the load stalls with it and the stall is counted once instead of for
every request that should have been sent meanwhile: coordinated omission. Open loop
fixes the timeline first. `ArrivalSchedule` hands out intended start times at a target
rate (evenly spaced, or Poisson with a seeded RNG); a free user claims the next one,
sleeps until it and runs the turn. When every user is busy, claimed start times fall
behind the clock, and the wait is part of the response time measured from the intended
start, as a real caller arriving at that moment would see it. Service time (from the
actual start) is recorded beside it.

All time here is on one monotonic clock (`time.perf_counter` by default), injectable so
the accounting is tested without sleeping.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, TypeVar

__all__ = ["ArrivalSchedule", "Arrivals", "Paced", "run_paced"]

Arrivals = Literal["constant", "poisson"]
T = TypeVar("T")


class ArrivalSchedule:
    """Intended start times at `rate` per second, on a timeline fixed in advance.

    The timeline starts at the first claim. It never waits for the work: claims come back
    in order, whether they are in the future (sleep until then) or already past (start
    now, and the lag is part of the response time).
    """

    def __init__(self, rate: float, *, arrivals: Arrivals = "constant", seed: int = 0) -> None:
        if not rate > 0:
            raise ValueError(f"rate: must be > 0 arrivals per second, got {rate}")
        if arrivals not in ("constant", "poisson"):
            raise ValueError(f"arrivals: 'constant' or 'poisson', got {arrivals!r}")
        self.rate = rate
        self.arrivals: Arrivals = arrivals
        self._rng = random.Random(seed)
        self._next: float | None = None
        self.claimed = 0

    def claim(self, now: float) -> float:
        """The intended start of the next arrival (the first one is `now`)."""
        if self._next is None:
            self._next = now
        intended = self._next
        self._next += self._gap()
        self.claimed += 1
        return intended

    def _gap(self) -> float:
        if self.arrivals == "poisson":
            return self._rng.expovariate(self.rate)
        return 1.0 / self.rate


@dataclass(frozen=True, slots=True)
class Paced:
    """When one paced operation was meant to start, started, and finished (clock seconds)."""

    intended: float
    started: float
    finished: float

    @property
    def lag_ms(self) -> float:
        """How late the operation started: time spent queued behind busy users."""
        return max(0.0, self.started - self.intended) * 1000.0

    @property
    def service_ms(self) -> float:
        """From the actual start to the end: what a closed-loop measurement sees."""
        return (self.finished - self.started) * 1000.0

    @property
    def response_ms(self) -> float:
        """From the intended start to the end: what a caller arriving on time sees."""
        return (self.finished - self.intended) * 1000.0


def run_paced(
    schedule: ArrivalSchedule,
    operation: Callable[[], T],
    *,
    clock: Callable[[], float] = time.perf_counter,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[T, Paced]:
    """Claim the next arrival, sleep until it if it is ahead, run `operation`, time it.

    Under Locust, `time.sleep` is gevent's (Locust monkey-patches it), so the sleep
    yields to the other users. An exception from `operation` propagates, untimed.
    """
    intended = schedule.claim(clock())
    ahead = intended - clock()
    if ahead > 0:
        sleep(ahead)
    started = clock()
    result = operation()
    return result, Paced(intended=intended, started=started, finished=clock())
