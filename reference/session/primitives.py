"""What a session backend writes: four primitives (`SessionPrimitives`) and the typed
operations `_apply` executes.

Each operation is a checked request built by `SessionStore`'s public API, with its times
already read from the clock: a backend never validates input or reads the clock. Every
operation names its user, and touches only that user's sessions; each is atomic (one
round trip to a server).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, NamedTuple

from reference.footprint import Usage
from reference.models import SessionState


class CreateSession(NamedTuple):
    """Store `state` unless its user has a live session of its id (an expired one is
    replaced). Returns whether it was stored."""

    state: SessionState


class ReadSession(NamedTuple):
    """The live session (None if missing or expired; an expired one is purged). With
    `refresh_until` and an open session: last_active_at=now, expires_at=refresh_until in
    the same operation."""

    user_id: str
    session_id: str
    now: float
    refresh_until: float | None


class AppendMessage(NamedTuple):
    """Push the message id onto the context window (newest first, trimmed to the store's
    `window`) and refresh. Returns the window; None without a live session; raises
    `SessionClosed` if closed."""

    user_id: str
    session_id: str
    message_id: str
    now: float
    refresh_until: float


class ReadContext(NamedTuple):
    """The context window, newest first; None without a live session."""

    user_id: str
    session_id: str
    now: float


class SetTaskState(NamedTuple):
    """Replace the task state and refresh. Returns the session; None without a live
    session; raises `SessionClosed` if closed."""

    user_id: str
    session_id: str
    task_state: dict[str, Any]
    now: float
    refresh_until: float


class CloseSession(NamedTuple):
    """Mark the live session closed. Returns False without one."""

    user_id: str
    session_id: str
    now: float


class ResetSession(NamedTuple):
    """Empty the context window and set the task state to {} (TTL unchanged). Returns
    False without a live session."""

    user_id: str
    session_id: str
    now: float


class DeleteSession(NamedTuple):
    """Remove the live session and its context window. Returns False without one."""

    user_id: str
    session_id: str
    now: float


class ListSessions(NamedTuple):
    """The user's live sessions, open and closed, by (started_at, session_id); nothing
    refreshed."""

    user_id: str
    now: float


class DeleteUserSessions(NamedTuple):
    """Remove every session of the user. Returns how many were live."""

    user_id: str
    now: float


SessionOp = (
    ReadSession
    | AppendMessage
    | SetTaskState
    | ReadContext
    | CreateSession
    | CloseSession
    | ResetSession
    | DeleteSession
    | ListSessions
    | DeleteUserSessions
)


class SessionPrimitives(ABC):
    """The primitives of a session backend; `SessionStore` builds its public API on
    them. Optional override: `earliest_expiry` (default: cannot tell)."""

    @abstractmethod
    def _apply(self, op: SessionOp) -> Any:
        """Execute one operation (above); return what its docstring says."""

    @abstractmethod
    def _sweep(self, now: float, batch_size: int) -> int:
        """Remove up to `batch_size` sessions expired at `now` (expires_at <= now), whoever
        owns them; returns how many."""

    @abstractmethod
    def _count(self, now: float) -> int:
        """Live sessions (now < expires_at) of the whole namespace."""

    @abstractmethod
    def _usage(self, now: float) -> Usage:
        """Live sessions of the whole namespace and their payload bytes
        (`reference.footprint.session_bytes`)."""
