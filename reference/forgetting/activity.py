"""`ActivityLog`: users' activity for archival, buffered in process between sweeps.

Every turn notes the user's time here (`note`); a sweep (and `ForgettingEngine.flush_activity`)
writes the buffer to the LTM store's per-user activity table, so a turn pays no extra
write. A process that dies loses at most the activity since its last sweep, which can
only make a user look idle for that long: archival is 90 days out by default.

`inactive_through` is the archival mark: users whose last activity is at or before it
were archived by an earlier sweep (the archival pass visits the users after it).
Thread-safe: turns note while a background thread flushes.
"""

from __future__ import annotations

import threading
from collections.abc import Collection

from reference.ltm.base import LongTermStore


class ActivityLog:
    """The buffered activity of one engine and its archival mark (module docstring)."""

    def __init__(self) -> None:
        self._pending: dict[str, float] = {}
        self._lock = threading.Lock()
        self.inactive_through = float("-inf")

    def note(self, user_id: str, at: float) -> None:
        """The user was active at `at` (a turn)."""
        with self._lock:
            if at > self._pending.get(user_id, float("-inf")):
                self._pending[user_id] = at

    def flush(self, ltm: LongTermStore) -> int:
        """Write the buffer to `ltm`; returns how many users. On failure it is kept."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if pending:
            try:
                ltm.mark_active(activity=pending)
            except BaseException:
                with self._lock:  # keep it for the next attempt
                    for user, at in pending.items():
                        self._pending[user] = max(at, self._pending.get(user, at))
                raise
        return len(pending)

    def last_active(self, ltm: LongTermStore, user_ids: Collection[str]) -> dict[str, float]:
        """Stored activity, overlaid with what is buffered and not yet written."""
        seen = ltm.last_active(user_ids=user_ids)
        with self._lock:
            for user in user_ids:
                if user in self._pending:
                    seen[user] = max(self._pending[user], seen.get(user, float("-inf")))
        return seen

    def pending(self) -> dict[str, float]:
        """A copy of the buffered activity."""
        with self._lock:
            return dict(self._pending)

    def pending_after(self, after: float) -> list[float]:
        """The buffered moments after `after`."""
        with self._lock:
            return [at for at in self._pending.values() if at > after]

    def drop(self, user_id: str) -> None:
        """Forget the user's buffered activity."""
        with self._lock:
            self._pending.pop(user_id, None)
