"""`SessionDeadlines`: when each session expires, as its store wrote it, so that a store
on a server can tell without a query that a sweep has nothing to remove.

Only for a store that is its namespace's only writer (a simulator's shard: the factory's
`sole_writer`): another writer's sessions would be unknown here. The store notes every
operation's outcome (`SessionStore._apply_noted`): a session created, read with its TTL slid,
or appended to expires at the time the server confirms. Deleted sessions stay listed
until a sweep passes their expiry (too early is only a query more); a sweep that
removes fewer sessions than its page holds has removed every expired one (Redis's sweep
script removes the expired sessions of its expiry index, which every script updates in
the same atomic step as the session), so the entries at or before its time go. An
operation that fails other than by refusing (a lost connection: it may or may not have
landed) leaves the store blind: `earliest` is -inf from then on, and every sweep looks.
"""

from __future__ import annotations

from typing import Any

from reference.dueindex import DueIndex
from reference.errors import changed_nothing
from reference.session.primitives import (
    AppendMessage,
    CreateSession,
    ReadSession,
    SessionOp,
    SetTaskState,
)


class SessionDeadlines:
    """The expiry of every session the store wrote (module docstring). Not thread-safe:
    a sole writer's sweeps and turns run on one thread."""

    __slots__ = ("_expiry", "blind")

    def __init__(self) -> None:
        self._expiry = DueIndex()  # "user_id\x00session_id" -> expires_at
        self.blind = False

    def earliest(self) -> float:
        """A moment before which no session has expired (inf: none; -inf: blind)."""
        return float("-inf") if self.blind else self._expiry.first()

    def applied(self, op: SessionOp, result: Any) -> None:
        """`op` ran and returned `result`: note the expiry it set."""
        if isinstance(op, CreateSession):
            if result:
                self._expiry.set(_key(op.state.user_id, op.state.session_id), op.state.expires_at)
        elif isinstance(op, ReadSession | SetTaskState):
            if result is not None:  # the session as stored, its TTL slid or not
                self._expiry.set(_key(op.user_id, op.session_id), result.expires_at)
        elif isinstance(op, AppendMessage) and result is not None:
            self._expiry.set(_key(op.user_id, op.session_id), op.refresh_until)

    def failed(self, exc: BaseException) -> None:
        """`op` raised `exc`: unless it was refused, whether it landed is unknown."""
        if not changed_nothing(exc):
            self.blind = True

    def swept(self, now: float, removed: int, batch_size: int) -> None:
        """A sweep at `now` removed `removed` sessions of at most `batch_size`."""
        if removed < batch_size:
            for key in self._expiry.due(now):
                self._expiry.discard(key)


def _key(user_id: str, session_id: str) -> str:
    return f"{user_id}\x00{session_id}"


__all__ = ["SessionDeadlines"]
