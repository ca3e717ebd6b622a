"""The background TTL sweeper of `reference.langgraph_store`: a thread that sweeps every
interval of the store's clock.

A wall clock is waited on for the interval itself; a virtual clock moves only when told
to, so the thread looks at it every `VIRTUAL_POLL_S` wall seconds and sweeps once the
interval has passed on it: TTL tests advance the clock instead of sleeping.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable

from reference.clock import Clock

#: How often (wall seconds) the sweeper looks at a virtual clock.
VIRTUAL_POLL_S = 0.01


class TtlSweeper:
    """Calls `sweep` every `interval_s` seconds of `clock` in a daemon thread, until
    `stop`. One sweep at a time: the thread runs them one after another."""

    def __init__(self, sweep: Callable[[], object], clock: Clock, interval_s: float) -> None:
        if not interval_s > 0:
            raise ValueError(f"sweep_interval_minutes: must be > 0, got {interval_s / 60}")
        self._sweep = sweep
        self._clock = clock
        self._interval_s = interval_s
        self._stop = threading.Event()
        self.future: concurrent.futures.Future[None] = concurrent.futures.Future()
        self.sweeps = 0
        self._thread = threading.Thread(target=self._loop, name="reference-store-ttl", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        poll = self._interval_s if self._clock.is_wall_clock else VIRTUAL_POLL_S
        next_at = self._clock.now() + self._interval_s
        try:
            while not self._stop.wait(poll):
                if self._clock.now() >= next_at:
                    self._sweep()
                    self.sweeps += 1
                    next_at = self._clock.now() + self._interval_s
        finally:
            self.future.set_result(None)

    def stop(self, timeout: float | None = None) -> bool:
        """Ask the thread to stop; whether it stopped within `timeout` seconds."""
        self._stop.set()
        self._thread.join(timeout)
        return not self._thread.is_alive()
