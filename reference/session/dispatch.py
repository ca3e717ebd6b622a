"""A method per operation: how the built-in session backends execute the typed
operations (`reference.session.primitives`). The mixin routes `_apply` to one method
each; a backend may as well write `_apply` itself (the minimal backend of the
conformance suite does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

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
    SetTaskState,
)

if TYPE_CHECKING:
    from reference.models import SessionState


class MethodPerOperation:
    """`_apply` of a session backend, each operation routed to the method below that
    executes it, with the operation's fields as arguments."""

    def _apply(self, op: SessionOp) -> Any:
        # The operations of every turn first.
        if isinstance(op, ReadSession):
            return self._get(*op)
        if isinstance(op, AppendMessage):
            return self._append(*op)
        if isinstance(op, SetTaskState):
            return self._set_task_state(*op)
        if isinstance(op, ReadContext):
            return self._context(*op)
        if isinstance(op, CreateSession):
            return self._create(op.state)
        if isinstance(op, CloseSession):
            return self._close(*op)
        if isinstance(op, ResetSession):
            return self._reset(*op)
        if isinstance(op, DeleteSession):
            return self._delete(*op)
        if isinstance(op, ListSessions):
            return self._list_user(*op)
        if isinstance(op, DeleteUserSessions):
            return self._delete_user(*op)
        raise TypeError(f"not a session operation: {op!r}")

    if TYPE_CHECKING:

        def _get(
            self, user_id: str, session_id: str, now: float, refresh_until: float | None
        ) -> SessionState | None: ...

        def _append(
            self, user_id: str, session_id: str, message_id: str, now: float, refresh_until: float
        ) -> list[str] | None: ...

        def _set_task_state(
            self,
            user_id: str,
            session_id: str,
            task_state: dict[str, Any],
            now: float,
            refresh_until: float,
        ) -> SessionState | None: ...

        def _context(self, user_id: str, session_id: str, now: float) -> list[str] | None: ...

        def _create(self, state: SessionState) -> bool: ...

        def _close(self, user_id: str, session_id: str, now: float) -> bool: ...

        def _reset(self, user_id: str, session_id: str, now: float) -> bool: ...

        def _delete(self, user_id: str, session_id: str, now: float) -> bool: ...

        def _list_user(self, user_id: str, now: float) -> list[SessionState]: ...

        def _delete_user(self, user_id: str, now: float) -> int: ...
