"""Injected time: every expiry in the reference is computed from a `Clock`.

Timestamps are float seconds since the Unix epoch (UTC). Nothing else in `reference/`
or `memharness/` reads the wall clock; that is what lets ninety simulated days replay in
seconds and lets tests move time instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from abc import ABC, abstractmethod
from datetime import UTC, datetime


class Clock(ABC):
    """A source of the current time, in epoch seconds."""

    #: True when the clock follows the wall clock, so backends may add native TTLs
    #: (Redis EXPIRE) as a safety net. A virtual clock must not: its "now" can be weeks
    #: ahead of the server's.
    is_wall_clock: bool = False

    #: How many of this clock's seconds pass per wall second, when that is fixed: the
    #: Redis session store gives its keys native safety-net TTLs of `ttl /
    #: native_ttl_scale` wall seconds. None (a virtual clock): no native TTLs, since its
    #: "now" has no fixed relation to the server's time.
    native_ttl_scale: float | None = None

    @abstractmethod
    def now(self) -> float:
        """The current time in epoch seconds."""


class SystemClock(Clock):
    """The wall clock, for real runs."""

    is_wall_clock = True
    native_ttl_scale = 1.0

    def now(self) -> float:
        return time.time()


class ScaledClock(Clock):
    """Wall time sped up `scale` times: `now() = origin + (wall - wall_origin) * scale`.

    A load of minutes lives through weeks of expiry: at `scale=4320` ten wall minutes are
    thirty days. `origin` and `wall_origin` default to the wall time at construction; two
    processes given the same `origin`, `wall_origin` and `scale` agree on "now" (to their
    hosts' clock skew times `scale`). Native TTLs follow the scale (`native_ttl_scale`).
    """

    def __init__(
        self, scale: float, *, origin: float | None = None, wall_origin: float | None = None
    ) -> None:
        if not isinstance(scale, int | float) or isinstance(scale, bool) or not scale > 0:
            raise ValueError(f"scale: must be a number > 0, got {scale!r}")
        if scale == float("inf"):
            raise ValueError("scale: must be finite")
        wall = time.time()
        self.scale = float(scale)
        self.native_ttl_scale = self.scale
        self.wall_origin = wall if wall_origin is None else float(wall_origin)
        self.origin = wall if origin is None else float(origin)

    def now(self) -> float:
        return self.origin + (time.time() - self.wall_origin) * self.scale

    def __repr__(self) -> str:
        return (
            f"ScaledClock({self.scale!r}, origin={self.origin!r}, wall_origin={self.wall_origin!r})"
        )


class VirtualClock(Clock):
    """A clock that only moves when told to; for simulations and tests.

    Time never goes backwards: `set` to an earlier instant raises, because every layer's
    expiry bookkeeping assumes a monotonic clock.
    """

    def __init__(self, start: float | datetime = 1_700_000_000.0) -> None:
        self._now = to_epoch(start)
        self._lock = threading.Lock()

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        """Move forward by `seconds` (>= 0) and return the new time."""
        if seconds < 0:
            raise ValueError(f"seconds: cannot advance a clock backwards ({seconds})")
        with self._lock:
            self._now += seconds
            return self._now

    def set(self, at: float | datetime) -> float:
        """Move forward to `at` and return it."""
        target = to_epoch(at)
        with self._lock:
            if target < self._now:
                raise ValueError(
                    f"at: {format_ts(target)} is before the clock's now {format_ts(self._now)}"
                )
            self._now = target
            return self._now


def to_epoch(at: float | datetime) -> float:
    """Epoch seconds from a float or an aware/naive-UTC datetime."""
    if isinstance(at, datetime):
        if at.tzinfo is None:
            at = at.replace(tzinfo=UTC)
        return at.timestamp()
    return float(at)


def format_ts(ts: float) -> str:
    """An ISO-8601 UTC rendering of an epoch timestamp, for messages and reports."""
    return datetime.fromtimestamp(ts, tz=UTC).isoformat(timespec="seconds")
