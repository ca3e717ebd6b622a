"""A method per operation: how the built-in long-term backends execute the typed
operations (`reference.ltm.primitives`). The mixin routes `_apply`, `_lookup` and `_scan`
to one method each; a backend may as well write the three primitives itself (the
minimal backend of the conformance suite does)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from reference.ltm.primitives import (
    ApplyChanges,
    ArchiveFacts,
    AuditLog,
    DeleteFacts,
    DueScan,
    EraseFacts,
    ForgetActivity,
    LtmLookup,
    LtmWrite,
    MarkActive,
    RecordAccess,
    UpsertFact,
)
from reference.models import Fact

if TYPE_CHECKING:
    from reference.ltm.filters import FactChangeCounts, FactChanges, LtmFilter
    from reference.models import AuditEntry, RetentionUpdate
    from reference.policy.sweep import DueRule


class MethodPerOperation:
    """`_apply`, `_lookup` and `_scan` of a long-term backend, each operation routed to
    the method below that executes it (the operations of a turn first)."""

    def _apply(self, op: LtmWrite) -> Any:
        if isinstance(op, UpsertFact):
            return self._upsert(op)
        if isinstance(op, RecordAccess):
            return self._update_retention(op.user_id, op.updates, op.now)
        if isinstance(op, ApplyChanges):
            return self._apply_changes(op.changes, actor=op.actor, now=op.now)
        if isinstance(op, MarkActive):
            return self._mark_active(op.activity)
        if isinstance(op, ArchiveFacts):
            return self._archive(op.filter, actor=op.actor, now=op.now, cause=op.cause)
        if isinstance(op, DeleteFacts):
            return self._delete(op.filter, actor=op.actor, now=op.now, cause=op.cause)
        if isinstance(op, EraseFacts):
            return self._erase(op.filter, actor=op.actor, now=op.now, cause=op.cause)
        if isinstance(op, ForgetActivity):
            return self._forget_activity(op.user_id)
        raise TypeError(f"not a long-term write: {op!r}")

    def _lookup(self, op: LtmLookup) -> Any:
        if isinstance(op, AuditLog):
            return self._audit_log(op)
        if op.user_ids is not None:
            return self._last_active(op.user_ids)
        return self._activity_between(op.after, op.until)

    def _scan(self, after: str | None, limit: int, due: DueScan | None) -> list[Fact]:
        if due is None:
            return self._scan_all(after, limit)
        return self._scan_due(due.now, due.rule, after, limit)

    if TYPE_CHECKING:

        def _upsert(self, op: UpsertFact) -> Fact: ...

        def _update_retention(
            self, user_id: str, updates: list[RetentionUpdate], now: float
        ) -> int: ...

        def _apply_changes(
            self, changes: FactChanges, *, actor: str, now: float
        ) -> FactChangeCounts: ...

        def _mark_active(self, activity: dict[str, float]) -> None: ...

        def _archive(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int: ...

        def _delete(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int: ...

        def _erase(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int: ...

        def _forget_activity(self, user_id: str) -> bool: ...

        def _audit_log(self, op: AuditLog) -> list[AuditEntry]: ...

        def _last_active(self, user_ids: list[str]) -> dict[str, float]: ...

        def _activity_between(self, after: float, until: float) -> dict[str, float]: ...

        def _scan_all(self, after: str | None, limit: int) -> list[Fact]: ...

        def _scan_due(
            self, now: float, rule: DueRule, after: str | None, limit: int
        ) -> list[Fact]: ...
