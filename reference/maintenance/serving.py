"""`ServingBackground`: what a serving process hands to the maintenance process.

A serving process's engine buffers three things in process that a sweep elsewhere needs:
the users' activity (`ForgettingEngine.flush_activity`, for archival), the STM access
statistics (`ShortTermStore.flush_access`, for sliding windows and importance), and the
sessions its turns touched (`ForgettingEngine.sessions`, for consolidation).
`ServingBackground` runs a thread that writes them to the shared stores every
`interval_s` wall seconds: activity to the LTM store's activity table, accesses to the
STM store, sessions to `SharedSessions` in Redis. `stop()` (or leaving the context)
writes once more, so a clean shutdown loses nothing; a killed process loses at most one
interval of each (the effects are bounded: a user looks idle that much longer, a record
lives by its last flushed access, a session's records wait for their own STM TTL).

The serving process builds its system with `build_memory_system(settings, strategy=S,
clock=clock)` and never sweeps; the maintenance process (`reference.maintenance.process`)
does.
"""

from __future__ import annotations

import logging
import threading
from types import TracebackType

from reference.errors import ConfigurationError, InvalidInput
from reference.maintenance.process import SERVER_ERRORS
from reference.maintenance.shared import SharedSessions
from reference.system import MemorySystem

log = logging.getLogger(__name__)


class ServingBackground:
    """A thread of the serving process that flushes its engine's buffers (see module)."""

    def __init__(
        self,
        system: MemorySystem,
        *,
        interval_s: float = 1.0,
        shared: SharedSessions | None = None,
    ) -> None:
        """`shared` defaults to the open-session set beside the system's Redis session
        store (a system on the in-memory backends must pass one, or has none to share)."""
        if not isinstance(interval_s, int | float) or not interval_s > 0:
            raise InvalidInput("interval_s", f"must be > 0, got {interval_s!r}")
        if system.engine is None:
            raise ConfigurationError("ServingBackground needs a system with a forgetting engine")
        if shared is None:
            client = getattr(system.session, "client", None)
            if client is None:
                raise ConfigurationError(
                    "ServingBackground: the session store is not on Redis; pass `shared`"
                )
            shared = SharedSessions(client, system.session.namespace)
        self.system = system
        self.engine = system.engine
        self.interval_s = float(interval_s)
        self.shared = shared
        self.flushes = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def flush(self) -> None:
        """Write the buffered activity, accesses and sessions now."""
        self.engine.flush_activity()
        self.system.stm.flush_access()
        sessions = self.engine.sessions.drain()
        try:
            self.shared.publish(sessions)
        except BaseException:
            for user_id, session_id, ends_at in sessions:  # keep them for the next attempt
                self.engine.sessions.note(user_id, session_id, ends_at)
            raise
        self.flushes += 1

    def start(self) -> ServingBackground:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(
                target=self._run, name="serving-background", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread and flush once more."""
        thread, self._thread = self._thread, None
        if thread is not None:
            self._stop.set()
            thread.join()
        self.flush()

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                self.flush()
            except SERVER_ERRORS:  # a server hiccup: count it, try again next interval
                self.errors += 1
                log.exception("serving background flush failed")

    def __enter__(self) -> ServingBackground:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
