"""The in-memory session backend: same semantics as Redis, in a dict behind a lock.

It is a first-class backend (fast strategy sweeps, the oracle of differential tests),
never a mock: it stores what Redis would store (task state as JSON, the context window
trimmed to `window`), keys sessions per user (two users may hold the same session id
and never see each other's), expires lazily on read and sweeps in batches in the order
the Redis sorted set would (by expires_at, then the member `user_id:session_id`).
"""

from __future__ import annotations

import heapq
import json
import threading
from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from reference.errors import SessionClosed
from reference.footprint import Usage, session_bytes
from reference.keys import Namespace
from reference.models import SessionState, SessionStatus
from reference.session.base import SessionStore
from reference.session.dispatch import MethodPerOperation
from reference.validation import dump_json

#: A session's identity: (user_id, session_id).
_Key = tuple[str, str]


@dataclass(slots=True)
class _Entry:
    user_id: str
    channel: str
    started_at: float
    last_active_at: float
    expires_at: float
    status: SessionStatus
    task_state_json: str  # stored encoded, as Redis stores it: no aliasing with callers
    window: deque[str] = field(default_factory=deque)


class InMemorySessionStore(MethodPerOperation, SessionStore):
    """Sessions in process memory; thread-safe; nothing survives the process."""

    supports_native_ttl: ClassVar[bool] = False

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._lock = threading.RLock()
        self._sessions: dict[_Key, _Entry] = {}
        self._by_user: dict[str, set[str]] = {}
        # Min-heap of (expires_at, member, key), the member (`user_id:session_id`) ordering
        # ties as Redis orders its sorted set; entries go stale when a session is refreshed
        # or deleted and are skipped (and compacted) rather than updated in place.
        self._expiry_heap: list[tuple[float, str, _Key]] = []

    # ------------------------------------------------------------------ helpers
    def _state(self, session_id: str, entry: _Entry) -> SessionState:
        return SessionState(
            session_id=session_id,
            user_id=entry.user_id,
            channel=entry.channel,
            started_at=entry.started_at,
            last_active_at=entry.last_active_at,
            expires_at=entry.expires_at,
            status=entry.status,
            task_state=json.loads(entry.task_state_json),
        )

    def _purge(self, key: _Key) -> None:
        entry = self._sessions.pop(key, None)
        if entry is None:
            return
        user_id, session_id = key
        ids = self._by_user.get(user_id)
        if ids is not None:
            ids.discard(session_id)
            if not ids:
                del self._by_user[user_id]

    def _owned(self, user_id: str, session_id: str, now: float) -> _Entry | None:
        """The user's session if it has not expired; an expired one is purged."""
        key = (user_id, session_id)
        entry = self._sessions.get(key)
        if entry is None:
            return None
        if now >= entry.expires_at:
            self._purge(key)
            return None
        return entry

    def _set_expiry(self, key: _Key, entry: _Entry, expires_at: float) -> None:
        entry.expires_at = expires_at
        heapq.heappush(self._expiry_heap, (expires_at, Namespace.session_member(*key), key))
        # Every refresh leaves a stale heap entry behind; rebuild before it dominates.
        if len(self._expiry_heap) > 4 * len(self._sessions) + 64:
            self._expiry_heap = [
                (e.expires_at, Namespace.session_member(*k), k) for k, e in self._sessions.items()
            ]
            heapq.heapify(self._expiry_heap)

    def _refresh(self, key: _Key, entry: _Entry, now: float, until: float) -> None:
        entry.last_active_at = now
        self._set_expiry(key, entry, until)

    # ------------------------------------------------------------------ primitives
    def _create(self, state: SessionState) -> bool:
        encoded = dump_json(state.task_state)
        with self._lock:
            sid = state.session_id
            key = (state.user_id, sid)
            if self._owned(state.user_id, sid, state.started_at) is not None:
                return False
            entry = _Entry(
                user_id=state.user_id,
                channel=state.channel,
                started_at=state.started_at,
                last_active_at=state.last_active_at,
                expires_at=state.expires_at,
                status=state.status,
                task_state_json=encoded,
                window=deque(maxlen=self.window),
            )
            self._sessions[key] = entry
            self._by_user.setdefault(state.user_id, set()).add(sid)
            self._set_expiry(key, entry, state.expires_at)
            return True

    def _get(
        self, user_id: str, session_id: str, now: float, refresh_until: float | None
    ) -> SessionState | None:
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            if entry is None:
                return None
            if refresh_until is not None and entry.status is SessionStatus.ACTIVE:
                self._refresh((user_id, session_id), entry, now, refresh_until)
            return self._state(session_id, entry)

    def _append(
        self, user_id: str, session_id: str, message_id: str, now: float, refresh_until: float
    ) -> list[str] | None:
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            if entry is None:
                return None
            if entry.status is SessionStatus.CLOSED:
                raise SessionClosed(f"session_id: session {session_id!r} is closed")
            entry.window.appendleft(message_id)  # maxlen drops the oldest: LPUSH + LTRIM
            self._refresh((user_id, session_id), entry, now, refresh_until)
            return list(entry.window)

    def _context(self, user_id: str, session_id: str, now: float) -> list[str] | None:
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            return None if entry is None else list(entry.window)

    def _set_task_state(
        self,
        user_id: str,
        session_id: str,
        task_state: dict[str, Any],
        now: float,
        refresh_until: float,
    ) -> SessionState | None:
        encoded = dump_json(task_state)
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            if entry is None:
                return None
            if entry.status is SessionStatus.CLOSED:
                raise SessionClosed(f"session_id: session {session_id!r} is closed")
            entry.task_state_json = encoded
            self._refresh((user_id, session_id), entry, now, refresh_until)
            return self._state(session_id, entry)

    def _close(self, user_id: str, session_id: str, now: float) -> bool:
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            if entry is None:
                return False
            entry.status = SessionStatus.CLOSED
            return True

    def _reset(self, user_id: str, session_id: str, now: float) -> bool:
        with self._lock:
            entry = self._owned(user_id, session_id, now)
            if entry is None:
                return False
            entry.window.clear()
            entry.task_state_json = "{}"
            return True

    def _delete(self, user_id: str, session_id: str, now: float) -> bool:
        with self._lock:
            if self._owned(user_id, session_id, now) is None:
                return False
            self._purge((user_id, session_id))
            return True

    def _list_user(self, user_id: str, now: float) -> list[SessionState]:
        with self._lock:
            states = []
            for sid in sorted(self._by_user.get(user_id, ())):
                entry = self._owned(user_id, sid, now)
                if entry is not None:
                    states.append(self._state(sid, entry))
        states.sort(key=lambda s: (s.started_at, s.session_id))
        return states

    def _usage(self, now: float) -> Usage:
        with self._lock:
            states = [
                self._state(sid, entry)
                for (_, sid), entry in self._sessions.items()
                if now < entry.expires_at
            ]
        return Usage(len(states), sum(session_bytes(s) for s in states))

    def _delete_user(self, user_id: str, now: float) -> int:
        with self._lock:
            ids = list(self._by_user.get(user_id, ()))
            live = 0
            for sid in ids:
                entry = self._sessions.get((user_id, sid))
                if entry is not None and now < entry.expires_at:
                    live += 1
                self._purge((user_id, sid))
            return live

    def _sweep(self, now: float, batch_size: int) -> int:
        removed = 0
        with self._lock:
            heap = self._expiry_heap
            while heap and removed < batch_size and heap[0][0] <= now:
                expires_at, _, key = heapq.heappop(heap)
                entry = self._sessions.get(key)
                if entry is None or entry.expires_at != expires_at:
                    continue  # stale: deleted, or refreshed (a newer heap entry exists)
                self._purge(key)
                removed += 1
        return removed

    def earliest_expiry(self) -> float:
        with self._lock:  # a stale entry is earlier than its session's expiry: a bound
            return self._expiry_heap[0][0] if self._expiry_heap else float("inf")

    def _count(self, now: float) -> int:
        with self._lock:
            return sum(1 for e in self._sessions.values() if now < e.expires_at)

    # ------------------------------------------------------------------ inspection
    def raw_values(self) -> list[str]:
        """Every string this store holds, as stored (tests prove no raw PII is among them)."""
        with self._lock:
            out: list[str] = []
            for (_, sid), e in self._sessions.items():
                out += [sid, e.user_id, e.channel, e.status.value, e.task_state_json, *e.window]
            return out
