"""`LtmDeadlines`: each long-term fact's deadlines and each user's latest activity, as
the store wrote them, so that a store on a server can tell without a query that a sweep
has nothing to visit and no user became inactive.

Only for a store that is its namespace's only writer (a simulator's shard: the factory's
`sole_writer`): another writer's facts would be unknown here. The store notes every
write (`LongTermStore._apply_noted`) with what the fields of `policy.next_due_at` become: an
upsert's stored fact; an access's new expiry on a live fact of its user; a sweep
batch's archivals (at its time), anonymisations (the seal gone) and removals;
recorded activity, the latest kept. An archival by filter is read back by the store
(`indexed`). A fact deleted or erased by a filter stays listed, which is only a query
more: the first due scan past its deadline does not find it, and it goes (`scanned`).
A write that fails other than by refusing (a lost connection: it may or may not have
landed) leaves the store blind: every `earliest_*` is -inf from then on, and every
sweep looks.
"""

from __future__ import annotations

import bisect
from collections.abc import Collection, Iterable
from dataclasses import dataclass
from typing import Any

from reference.dueindex import DueIndex
from reference.errors import changed_nothing
from reference.ltm.primitives import (
    ApplyChanges,
    ForgetActivity,
    LtmWrite,
    MarkActive,
    RecordAccess,
    UpsertFact,
)
from reference.models import Fact, Status
from reference.policy.sweep import DueRule, sealed_at, value_sealed_at


@dataclass(slots=True)
class _Known:
    """What of a stored fact decides when it falls due, and whether an access reaches it."""

    user_id: str
    status: Status
    expires_at: float | None
    updated_at: float
    sealed_at: float | None


class LtmDeadlines:
    """The deadlines of every fact the store wrote and the activity it recorded (module
    docstring). Not thread-safe: a sole writer's sweeps and turns run on one thread."""

    __slots__ = ("_activity", "_archived", "_expiry", "_facts", "_order", "_sealed", "blind")

    def __init__(self) -> None:
        self._facts: dict[str, _Known] = {}
        # One index per deadline a fact can have (as `InMemoryLongTermStore` keeps them).
        self._expiry = DueIndex()  # expires_at
        self._archived = DueIndex()  # updated_at of an archived fact
        self._sealed = DueIndex()  # when its value was sealed
        self._activity: dict[str, float] = {}
        self._order: list[tuple[float, str]] = []  # (latest activity, user), sorted
        self.blind = False

    # ------------------------------------------------------------------ reads
    def earliest(self, rule: DueRule) -> float:
        """A moment before which no fact is due under `rule` (inf: none; -inf: blind)."""
        if self.blind:
            return float("-inf")
        moments = [self._expiry.first()]
        if rule.archive_grace_s is not None:
            moments.append(self._archived.first() + rule.archive_grace_s)
        if rule.anonymise_after_s is not None:
            moments.append(self._sealed.first() + rule.anonymise_after_s)
        return min(moments)

    def earliest_activity_after(self, after: float) -> float:
        """The earliest latest activity later than `after` (inf: none; -inf: blind)."""
        if self.blind:
            return float("-inf")
        i = bisect.bisect_right(self._order, (after, "\U0010ffff"))
        return self._order[i][0] if i < len(self._order) else float("inf")

    # ------------------------------------------------------------------ writes
    def applied(self, op: LtmWrite, result: Any) -> None:
        """`op` was written and returned `result`: note what it changed."""
        if isinstance(op, UpsertFact):
            self.indexed([result])
        elif isinstance(op, RecordAccess):
            for update in op.updates:
                known = self._facts.get(update.record_id)
                if known is not None and known.user_id == op.user_id and _live(known, op.now):
                    known.expires_at = update.expires_at
                    self._expiry.set(update.record_id, update.expires_at)
        elif isinstance(op, ApplyChanges):
            self._changed(op)
        elif isinstance(op, MarkActive):
            for user_id, at in op.activity.items():
                known_at = self._activity.get(user_id)
                if known_at is None or known_at < at:
                    self._forget_activity(user_id)
                    bisect.insort(self._order, (at, user_id))
                    self._activity[user_id] = at
        elif isinstance(op, ForgetActivity):
            self._forget_activity(op.user_id)

    def indexed(self, facts: Iterable[Fact]) -> None:
        """These facts are stored as they are."""
        for fact in facts:
            known = _Known(fact.user_id, fact.status, fact.expires_at, fact.updated_at, None)
            known.sealed_at = sealed_at(fact)
            self._put(fact.fact_id, known)

    def failed(self, exc: BaseException) -> None:
        """A write raised `exc`: unless it was refused, whether it landed is unknown."""
        if not changed_nothing(exc):
            self.blind = True

    def scanned(
        self,
        now: float,
        rule: DueRule,
        after: str | None,
        until: str | None,
        due: Collection[str],
    ) -> None:
        """A due scan at `now` under `rule` over the ids in (`after`, `until`] (None:
        unbounded) found `due`: a fact listed due there and not found is gone."""
        slack = 1e-6 * max(1.0, abs(now))  # candidates first, then the exact test
        listed = set(self._expiry.due(now))
        if rule.archive_grace_s is not None:
            listed.update(self._archived.due(now - rule.archive_grace_s + slack))
        if rule.anonymise_after_s is not None:
            listed.update(self._sealed.due(now - rule.anonymise_after_s + slack))
        for fact_id in listed:
            inside = (after is None or fact_id > after) and (until is None or fact_id <= until)
            if inside and fact_id not in due and self._due_at(fact_id, rule) <= now:
                self._discard(fact_id)

    # ------------------------------------------------------------------ helpers
    def _changed(self, op: ApplyChanges) -> None:
        changes = op.changes
        removed = changes.delete | changes.erase
        for fact_id in removed:
            self._discard(fact_id)
        for fact_id in changes.archive - removed:
            known = self._facts.get(fact_id)
            if known is not None and known.status is Status.ACTIVE:
                known.status, known.updated_at = Status.ARCHIVED, op.now
                self._archived.set(fact_id, op.now)
        for fact_id in set(changes.anonymise) - removed:
            known = self._facts.get(fact_id)
            if known is not None:
                known.sealed_at = value_sealed_at(changes.anonymise[fact_id])
                self._sealed.set(fact_id, known.sealed_at)

    def _due_at(self, fact_id: str, rule: DueRule) -> float:
        """`policy.next_due_at` of a listed fact (inf: never)."""
        known = self._facts[fact_id]
        moments = [known.expires_at]
        if known.status is Status.ARCHIVED and rule.archive_grace_s is not None:
            moments.append(known.updated_at + rule.archive_grace_s)
        if rule.anonymise_after_s is not None and known.sealed_at is not None:
            moments.append(known.sealed_at + rule.anonymise_after_s)
        return min((m for m in moments if m is not None), default=float("inf"))

    def _put(self, fact_id: str, known: _Known) -> None:
        if known.status is Status.DELETED:
            self._discard(fact_id)
            return
        self._facts[fact_id] = known
        self._expiry.set(fact_id, known.expires_at)
        self._archived.set(fact_id, known.updated_at if known.status is Status.ARCHIVED else None)
        self._sealed.set(fact_id, known.sealed_at)

    def _discard(self, fact_id: str) -> None:
        self._facts.pop(fact_id, None)
        for index in (self._expiry, self._archived, self._sealed):
            index.discard(fact_id)

    def _forget_activity(self, user_id: str) -> None:
        known_at = self._activity.pop(user_id, None)
        if known_at is not None:
            self._order.pop(bisect.bisect_left(self._order, (known_at, user_id)))


def _live(known: _Known, now: float) -> bool:
    return known.status is Status.ACTIVE and (known.expires_at is None or now < known.expires_at)


__all__ = ["LtmDeadlines"]
