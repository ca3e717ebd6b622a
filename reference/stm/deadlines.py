"""`StmDeadlines`: when each short-term record falls due, as its store wrote it, so that a
store on a server can tell without a query that a sweep has nothing to visit.

Only for a store that is its namespace's only writer (a simulator's shard: the factory's
`sole_writer`): another writer's records would be unknown here. The store notes every
write (`ShortTermStore._apply_noted`): a record put is due at its expiry (at once when it is
not active), an access stores the expiry it carries, a purge drops its records. A
record deleted by a filter (a forget command, an erasure) stays listed, which is only
a query more: the first due scan past its deadline does not find it, and it goes
(`scanned`). A write that fails other than by refusing (a lost connection: it may or
may not have landed) leaves the store blind: `earliest` is -inf from then on, and every
sweep looks.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from typing import Any

from reference.dueindex import DueIndex
from reference.errors import changed_nothing
from reference.models import MemoryRecord, Status
from reference.stm.primitives import PurgeRecords, PutRecord, StmWrite, WriteAccess


class StmDeadlines:
    """When each record the store wrote falls due (module docstring). Not thread-safe: a
    sole writer's sweeps and turns run on one thread."""

    __slots__ = ("_due", "blind")

    def __init__(self) -> None:
        self._due = DueIndex()  # record_id -> `policy.next_due_at`
        self.blind = False

    def earliest(self) -> float:
        """A moment before which no record is due (inf: none; -inf: blind)."""
        return float("-inf") if self.blind else self._due.first()

    def applied(self, op: StmWrite, result: Any) -> None:
        """`op` was written: note the deadlines it set."""
        if isinstance(op, PutRecord):
            self._due.set(op.record.record_id, due_at(op.record))
        elif isinstance(op, WriteAccess):  # accesses reach active records only
            for write in op.writes:
                self._due.set(write.record_id, write.expires_at)
        elif isinstance(op, PurgeRecords):
            for record_id in op.record_ids:
                self._due.discard(record_id)

    def failed(self, exc: BaseException) -> None:
        """A write raised `exc`: unless it was refused, whether it landed is unknown."""
        if not changed_nothing(exc):
            self.blind = True

    def scanned(
        self, now: float, after: str | None, until: str | None, due: Collection[str]
    ) -> None:
        """A due scan at `now` over the ids in (`after`, `until`] (None: unbounded) found
        `due`: a record listed due there and not found is gone."""
        for record_id in self._due.due(now):
            inside = (after is None or record_id > after) and (until is None or record_id <= until)
            if inside and record_id not in due:
                self._due.discard(record_id)


def due_at(record: MemoryRecord) -> float | None:
    """`policy.next_due_at` of an STM record (no rule applies to one): its expiry, or at
    once when it is not active."""
    if record.status is not Status.ACTIVE:
        return -math.inf
    return record.expires_at


__all__ = ["StmDeadlines", "due_at"]
