"""The forgetting engine's primitives of `InMemoryLongTermStore` (a mixin).

The same semantics as `reference.ltm.postgres_forgetting`, on the store's dicts, under
its lock, staged in a `Txn` so a failure half-way leaves nothing behind.
"""

from __future__ import annotations

import bisect
import dataclasses
import itertools
import json
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from reference.crypto import anonymise_value
from reference.dueindex import DueIndex
from reference.ltm.base import due_margin
from reference.ltm.common import as_real, audit_draft, copy_fact, copy_json, storable_json
from reference.ltm.filters import REDACTED, FactChangeCounts, FactChanges, LtmFilter
from reference.ltm.primitives import audit_matches
from reference.models import AuditEntry, Fact, RetentionUpdate, Status
from reference.policy.sweep import DueRule


@dataclass
class Txn:
    """Changes staged by one operation; nothing is visible until `_commit`."""

    puts: dict[str, tuple[Fact, np.ndarray | None]] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    # Rewrites of existing audit entries, by position in the log (erasure, anonymisation).
    audit_rewrites: dict[int, AuditEntry] = field(default_factory=dict)


class InMemoryForgetting:
    """The engine primitives; mixed into `InMemoryLongTermStore`, which provides the
    state below, `_matching`, `_write_audit` and `_commit`."""

    _lock: threading.RLock
    _facts: dict[str, Fact]
    _audit: list[AuditEntry]
    _last_active_at: dict[str, float]
    _activity_order: list[tuple[float, str]]
    _audit_by_fact: dict[str, list[int]]
    _audit_by_user: dict[str, list[int]]
    _due_expiry: DueIndex
    _due_archived: DueIndex
    _due_sealed: DueIndex
    _sorted_ids: list[str] | None

    if TYPE_CHECKING:

        def _matching(self, flt: LtmFilter, now: float) -> list[Fact]: ...

        def _write_audit(self, txn: Txn, entries: list[AuditEntry]) -> None: ...

        def _commit(self, txn: Txn) -> None: ...

        def _index_due(self, fact: Fact) -> None: ...

    def _update_retention(self, user_id: str, updates: list[RetentionUpdate], now: float) -> int:
        changed = 0
        with self._lock:
            for update in updates:
                fact = self._facts.get(update.record_id)
                if fact is None or fact.user_id != user_id or not fact.is_live(now):
                    continue
                touched = dataclasses.replace(
                    fact,
                    last_accessed_at=now,
                    access_count=fact.access_count + 1,
                    expires_at=update.expires_at,
                    importance=as_real(update.importance),
                )
                self._facts[fact.fact_id] = touched
                self._index_due(touched)
                changed += 1
        return changed

    def _erase(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        with self._lock:
            facts = self._matching(flt, now)
            gone = {f.fact_id for f in facts}
            txn = Txn()
            txn.deletes.extend(sorted(gone))
            for position in self._audit_by_user.get(flt.user_id, []):
                entry = self._audit[position]
                if entry.fact_id in gone or audit_matches(entry, flt):
                    txn.audit_rewrites[position] = _redacted(entry)
            erased = [audit_draft(f, "erase", actor, now, None, None, cause) for f in facts]
            self._write_audit(txn, erased)
            self._commit(txn)
            return len(facts)

    def _scan_all(self, after: str | None, limit: int) -> list[Fact]:
        with self._lock:
            if self._sorted_ids is None:
                self._sorted_ids = sorted(self._facts)
            ids = self._sorted_ids
            start = 0 if after is None else bisect.bisect_right(ids, after)
            page: list[Fact] = []
            for fact_id in itertools.islice(ids, start, None):
                fact = self._facts.get(fact_id)
                if fact is not None and fact.status is not Status.DELETED:
                    page.append(copy_fact(fact))
                    if len(page) >= limit:
                        break
            return page

    def _apply_changes(self, changes: FactChanges, *, actor: str, now: float) -> FactChangeCounts:
        with self._lock:
            txn = Txn()
            entries: list[AuditEntry] = []
            why = changes.cause_of
            removed = changes.delete | changes.erase
            deleted = [self._facts[f] for f in sorted(changes.delete) if f in self._facts]
            erased = [
                self._facts[f] for f in sorted(changes.erase - changes.delete) if f in self._facts
            ]
            txn.deletes.extend(f.fact_id for f in (*deleted, *erased))
            # A deleted fact's audit keeps its masked value; the sealed original goes.
            entries += [
                audit_draft(f, "delete", actor, now, _strip_seal(f.value), None, why(f.fact_id))
                for f in deleted
            ]
            deleted_ids = {f.fact_id for f in deleted}
            erased_ids = {f.fact_id for f in erased}
            entries += [
                audit_draft(f, "erase", actor, now, None, None, why(f.fact_id)) for f in erased
            ]
            archived = 0
            for fact_id in sorted(changes.archive - removed):
                fact = self._facts.get(fact_id)
                if fact is None or fact.status is not Status.ACTIVE:
                    continue
                new = dataclasses.replace(
                    fact, status=Status.ARCHIVED, updated_at=now, archive_reason=why(fact_id)
                )
                txn.puts[fact_id] = (new, None)
                entries.append(audit_draft(new, "archive", actor, now, None, None, why(fact_id)))
                archived += 1
            anonymised: set[str] = set()
            for fact_id in sorted(set(changes.anonymise) - removed):
                fact = self._facts.get(fact_id)
                if fact is None:
                    continue
                value = json.loads(storable_json("anonymise", changes.anonymise[fact_id]))
                staged = txn.puts.get(fact_id, (fact, None))[0]
                txn.puts[fact_id] = (dataclasses.replace(staged, value=value), None)
                entries.append(
                    audit_draft(
                        staged, "anonymise", actor, now, None, copy_json(value), why(fact_id)
                    )
                )
                anonymised.add(fact_id)
            touched = sorted(
                p
                for f in erased_ids | anonymised | deleted_ids
                for p in self._audit_by_fact.get(f, [])
            )
            for position in touched:
                entry = self._audit[position]
                if entry.fact_id in erased_ids:
                    txn.audit_rewrites[position] = _redacted(entry)
                elif entry.fact_id in anonymised or entry.fact_id in deleted_ids:
                    txn.audit_rewrites[position] = dataclasses.replace(
                        entry,
                        old_value=_strip_seal(entry.old_value),
                        new_value=_strip_seal(entry.new_value),
                    )
            self._write_audit(txn, entries)
            self._commit(txn)
            return FactChangeCounts(
                deleted=len(deleted),
                erased=len(erased),
                archived=archived,
                anonymised=len(anonymised),
            )

    def _scan_due(self, now: float, rule: DueRule, after: str | None, limit: int) -> list[Fact]:
        margin = due_margin(now)
        with self._lock:
            ids = set(self._due_expiry.due(now))
            if rule.archive_grace_s is not None:
                ids.update(self._due_archived.due(now - rule.archive_grace_s + margin))
            if rule.anonymise_after_s is not None:
                ids.update(self._due_sealed.due(now - rule.anonymise_after_s + margin))
            ordered = sorted(ids)
            start = 0 if after is None else bisect.bisect_right(ordered, after)
            return [copy_fact(self._facts[i]) for i in ordered[start : start + limit]]

    def earliest_due(self, rule: DueRule) -> float:
        # `policy.next_due_at` is the least of these deadlines, added as it adds them.
        with self._lock:
            moments = [self._due_expiry.first()]
            if rule.archive_grace_s is not None:
                moments.append(self._due_archived.first() + rule.archive_grace_s)
            if rule.anonymise_after_s is not None:
                moments.append(self._due_sealed.first() + rule.anonymise_after_s)
            return min(moments)

    def earliest_activity_after(self, after: float) -> float:
        with self._lock:
            order = self._activity_order
            i = bisect.bisect_right(order, (after, "\U0010ffff"))
            return order[i][0] if i < len(order) else float("inf")

    def _activity_between(self, after: float, until: float) -> dict[str, float]:
        with self._lock:
            order = self._activity_order
            lo = bisect.bisect_right(order, (after, "\U0010ffff"))
            hi = bisect.bisect_right(order, (until, "\U0010ffff"))
            return {user: at for at, user in order[lo:hi]}

    def _mark_active(self, activity: dict[str, float]) -> None:
        with self._lock:
            for user_id, at in activity.items():
                known = self._last_active_at.get(user_id)
                if known is not None and known >= at:
                    continue
                if known is not None:
                    self._activity_order.pop(
                        bisect.bisect_left(self._activity_order, (known, user_id))
                    )
                bisect.insort(self._activity_order, (at, user_id))
                self._last_active_at[user_id] = at

    def _last_active(self, user_ids: list[str]) -> dict[str, float]:
        with self._lock:
            return {u: self._last_active_at[u] for u in user_ids if u in self._last_active_at}

    def _forget_activity(self, user_id: str) -> bool:
        with self._lock:
            known = self._last_active_at.pop(user_id, None)
            if known is None:
                return False
            self._activity_order.pop(bisect.bisect_left(self._activity_order, (known, user_id)))
            return True


def _redacted(entry: AuditEntry) -> AuditEntry:
    """The entry with its values redacted (None stays None: there was no value)."""
    return dataclasses.replace(
        entry,
        old_value=None if entry.old_value is None else dict(REDACTED),
        new_value=None if entry.new_value is None else dict(REDACTED),
    )


def _strip_seal(value: dict[str, Any] | None) -> dict[str, Any] | None:
    """An audit value without its sealed original (the masked form stays)."""
    return None if value is None else anonymise_value(value)


__all__ = ["InMemoryForgetting", "Txn"]
