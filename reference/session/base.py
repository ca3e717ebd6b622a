"""The session layer: who is talking, the task state and the context window.

Lifecycle of a `SessionStore`: built once per process (or per Ray actor) by
`reference.factory`, given the run's `Clock` and `Namespace`; never shared across
processes (connections are not picklable); `dispose()` releases connections. Every public
method is one timed operation of the session SLA and one round trip to the server.

The public methods here validate input, mask PII and compute times from the clock, then
call the backend's primitives (`reference.session.primitives`: one typed operation per
call), so every backend has the same semantics; the conformance suite in `tests/`
proves it.
"""

from __future__ import annotations

from typing import Any, ClassVar

from reference.clock import Clock
from reference.errors import InvalidInput, NotFound
from reference.footprint import Usage
from reference.keys import Namespace
from reference.models import SessionState, SessionStatus
from reference.session.deadlines import SessionDeadlines
from reference.session.primitives import (
    AppendMessage,
    CloseSession,
    CreateSession,
    DeleteSession,
    DeleteUserSessions,
    ListSessions,
    ReadContext,
    ReadSession,
    ResetSession,
    SessionOp,
    SessionPrimitives,
    SetTaskState,
)
from reference.text_interfaces import PiiMasker
from reference.validation import check_id, check_json_object

DEFAULT_SESSION_TTL_S = 1800.0
DEFAULT_WINDOW = 5


class SessionStore(SessionPrimitives):
    """Sessions with a sliding TTL and a context window of the last N message ids.

    Sessions are keyed per user: every call names the user, two users may hold sessions
    of the same id, and nothing one user does reads, changes or reveals another's.
    Expired sessions are never returned (lazy expiry on read) and are removed in batches
    by `sweep_expired`.
    """

    #: The backend also sets server-side TTLs under a wall clock (a safety net).
    supports_native_ttl: ClassVar[bool] = False
    #: The expiry of every session written, when the store is its namespace's only
    #: writer (`reference.session.deadlines`; set by the factory's `sole_writer`).
    deadlines: SessionDeadlines | None = None

    def __init__(
        self,
        *,
        clock: Clock,
        namespace: Namespace,
        pii: PiiMasker,
        ttl_s: float = DEFAULT_SESSION_TTL_S,
        window: int = DEFAULT_WINDOW,
    ) -> None:
        if ttl_s <= 0:
            raise InvalidInput("ttl_s", f"must be positive, got {ttl_s}")
        if window < 1:
            raise InvalidInput("window", f"must be at least 1, got {window}")
        self.clock = clock
        self.namespace = namespace
        self.pii = pii
        self.ttl_s = float(ttl_s)
        self.window = int(window)

    # ------------------------------------------------------------------ public API
    def create(
        self,
        *,
        user_id: str,
        session_id: str,
        channel: str = "web",
        task_state: dict[str, Any] | None = None,
    ) -> SessionState:
        """Open a session. Raises `InvalidInput` if this user has a live session of this id
        (another user's session of the same id is no obstacle, and is not revealed)."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_id("channel", channel)
        now = self.clock.now()
        state = SessionState(
            session_id=session_id,
            user_id=user_id,
            channel=channel,
            started_at=now,
            last_active_at=now,
            expires_at=now + self.ttl_s,
            status=SessionStatus.ACTIVE,
            task_state=self._clean_task_state(task_state or {}),
        )
        if not self._apply_noted(CreateSession(state)):
            raise InvalidInput(
                "session_id", f"{session_id!r} is already a live session of this user"
            )
        return state

    def get(self, *, user_id: str, session_id: str) -> SessionState | None:
        """The live session, its TTL slid forward; None if missing, expired or not this user's.

        A closed session is returned as it is, without sliding its TTL.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        now = self.clock.now()
        state: SessionState | None = self._apply_noted(
            ReadSession(user_id, session_id, now, now + self.ttl_s)
        )
        return state

    def peek(self, *, user_id: str, session_id: str) -> SessionState | None:
        """Like `get`, without refreshing anything (for inspection and metrics)."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        state: SessionState | None = self._apply_noted(
            ReadSession(user_id, session_id, self.clock.now(), None)
        )
        return state

    def append_message(self, *, user_id: str, session_id: str, message_id: str) -> list[str]:
        """Push a message id onto the context window (newest first, at most `window`).

        Slides the TTL. Raises `NotFound` without a live session, `SessionClosed` if closed.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_id("message_id", message_id)
        now = self.clock.now()
        window: list[str] | None = self._apply_noted(
            AppendMessage(user_id, session_id, message_id, now, now + self.ttl_s)
        )
        if window is None:
            raise NotFound(f"session_id: no live session {session_id!r} for this user")
        return window

    def context(self, *, user_id: str, session_id: str) -> list[str]:
        """The context window, newest first; empty without a live session."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        window: list[str] | None = self._apply_noted(
            ReadContext(user_id, session_id, self.clock.now())
        )
        return window or []

    def update_task_state(
        self, *, user_id: str, session_id: str, task_state: dict[str, Any]
    ) -> SessionState:
        """Replace the task state (PII masked in every string). Slides the TTL."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        clean = self._clean_task_state(task_state)
        now = self.clock.now()
        state: SessionState | None = self._apply_noted(
            SetTaskState(user_id, session_id, clean, now, now + self.ttl_s)
        )
        if state is None:
            raise NotFound(f"session_id: no live session {session_id!r} for this user")
        return state

    def close(self, *, user_id: str, session_id: str) -> bool:
        """Mark the session closed (it stays readable until it expires). False if absent."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        return bool(self._apply_noted(CloseSession(user_id, session_id, self.clock.now())))

    def delete(self, *, user_id: str, session_id: str) -> bool:
        """Remove the session and its context window now. False if absent."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        return bool(self._apply_noted(DeleteSession(user_id, session_id, self.clock.now())))

    def reset(self, *, user_id: str, session_id: str) -> bool:
        """Empty the context window and the task state of a live session, which stays
        open with its TTL unchanged ("reset this conversation"). False if absent."""
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        return bool(self._apply_noted(ResetSession(user_id, session_id, self.clock.now())))

    def list_user_sessions(self, *, user_id: str) -> list[SessionState]:
        """The user's live sessions (open and closed), oldest first, without refreshing."""
        check_id("user_id", user_id)
        states: list[SessionState] = self._apply_noted(ListSessions(user_id, self.clock.now()))
        return states

    def usage(self) -> Usage:
        """Live sessions of the whole namespace and their payload bytes
        (`reference.footprint`): the layer's footprint. A read: nothing is refreshed."""
        return self._usage(self.clock.now())

    def delete_user(self, *, user_id: str) -> int:
        """Remove every session of the user; returns how many there were."""
        check_id("user_id", user_id)
        return int(self._apply_noted(DeleteUserSessions(user_id, self.clock.now())))

    def sweep_expired(self, *, batch_size: int = 1000) -> int:
        """Remove up to `batch_size` expired sessions; returns how many were removed.
        Nothing is asked of the backend before `earliest_expiry`."""
        if batch_size < 1:
            raise InvalidInput("batch_size", f"must be at least 1, got {batch_size}")
        now = self.clock.now()
        if now < self.earliest_expiry():
            return 0
        if self.deadlines is None:
            return self._sweep(now, batch_size)
        try:
            removed = self._sweep(now, batch_size)
        except BaseException as exc:
            self.deadlines.failed(exc)
            raise
        self.deadlines.swept(now, removed, batch_size)
        return removed

    def earliest_expiry(self) -> float:
        """A moment before which `sweep_expired` finds nothing to remove (inf: no session
        at all), or -inf when this store cannot tell without a query (a sweep then looks):
        a backend's index, or the `deadlines` of a store that is its namespace's only
        writer. A read: it changes nothing."""
        return float("-inf") if self.deadlines is None else self.deadlines.earliest()

    def count(self) -> int:
        """Live sessions in this namespace (footprint)."""
        return self._count(self.clock.now())

    def dispose(self) -> None:
        """Release connections. The store is unusable afterwards."""

    def drop(self) -> None:
        """Remove everything this namespace has in the layer (its keys), then release
        connections: for throwaway namespaces (simulation shards). Unusable afterwards."""
        self.dispose()

    # ------------------------------------------------------------------ helpers
    def _apply_noted(self, op: SessionOp) -> Any:
        """`_apply(op)`, its outcome noted in `deadlines` when the store keeps them."""
        if self.deadlines is None:
            return self._apply(op)
        try:
            result = self._apply(op)
        except BaseException as exc:
            self.deadlines.failed(exc)
            raise
        self.deadlines.applied(op, result)
        return result

    def _clean_task_state(self, task_state: dict[str, Any]) -> dict[str, Any]:
        if type(task_state) is dict and not task_state:
            return {}  # what a session starts with: nothing to check or mask
        check_json_object("task_state", task_state)
        return _mask_strings(task_state, self.pii)


def _mask_strings(value: Any, pii: PiiMasker) -> Any:
    """A copy of a JSON value with every string (keys included) PII-masked."""
    if isinstance(value, str):
        return pii.mask(value)
    if isinstance(value, dict):
        return {pii.mask(str(k)): _mask_strings(v, pii) for k, v in value.items()}
    if isinstance(value, list | tuple):  # json.dumps stores tuples as lists
        return [_mask_strings(v, pii) for v in value]
    return value
