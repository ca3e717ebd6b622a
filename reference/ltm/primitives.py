"""What a long-term backend writes: six primitives (`LtmPrimitives`) and the typed
operations two of them execute.

Each operation is a checked request built by `LongTermStore`'s public API: a backend
never validates input or reads the clock, it executes. A write is one transaction with its audit
entries; `_apply` returns what the operation's docstring says.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Any, NamedTuple

from reference.footprint import Usage, scanned_usage
from reference.lexical import lexical_matches
from reference.models import AuditEntry, Category, Fact, Hit, RetentionUpdate
from reference.policy.sweep import DueRule

if TYPE_CHECKING:  # base.py builds these operations and imports this module
    from reference.ltm.filters import FactChanges, LtmFilter
    from reference.text_interfaces import Embedder


class UpsertFact(NamedTuple):
    """Insert (version 1, audit 'insert') or supersede the fact at `(user_id, category,
    key)` (version + 1, status active, audit 'update' with old and new value; access
    statistics kept). Returns the stored `Fact`."""

    user_id: str
    category: Category
    key: str
    value: dict[str, Any]
    text: str
    importance: float
    expires_at: float | None
    actor: str
    #: What `LongTermStore._vector` returns: a 1-D float32 or float64 array, which a
    #: backend may not keep without copying.
    embedding: Any
    now: float
    #: The audit entry's cause (`AuditEntry.cause`).
    cause: str = ""


class ArchiveFacts(NamedTuple):
    """Set the matching active facts to archived (`updated_at=now`, audit 'archive').
    Returns how many. Each archived fact keeps `cause` as its `archive_reason`."""

    filter: LtmFilter
    actor: str
    now: float
    #: The audit entries' cause (and the archived facts' `archive_reason`).
    cause: str = ""


class DeleteFacts(NamedTuple):
    """Hard-delete the matching facts (the filter includes dead ones); each gets an audit
    'delete' keeping its value. Returns how many."""

    filter: LtmFilter
    actor: str
    now: float
    #: The audit entries' cause.
    cause: str = ""


class EraseFacts(NamedTuple):
    """Hard-delete the matching facts (dead ones included) and redact (`REDACTED`) the
    values of every audit entry of the user that the filter matches (`audit_matches`) or
    that belongs to a fact deleted here; each erased fact gets an audit 'erase' without
    values. Returns how many facts were deleted."""

    filter: LtmFilter
    actor: str
    now: float
    #: The audit entries' cause.
    cause: str = ""


class ApplyChanges(NamedTuple):
    """One sweep batch (`FactChanges`: see its docstring). Returns `FactChangeCounts`."""

    changes: FactChanges
    actor: str
    now: float


class RecordAccess(NamedTuple):
    """For each update naming a live fact of `user_id`: last_accessed_at=now,
    access_count + 1, expires_at and importance as given; no audit (an access is not a
    change of the memory). Returns how many facts changed."""

    user_id: str
    updates: list[RetentionUpdate]
    now: float


class MarkActive(NamedTuple):
    """Record users' latest activity (user_id -> time); an earlier time than the one
    stored leaves it. Returns None."""

    activity: dict[str, float]


class ForgetActivity(NamedTuple):
    """Drop the user's activity record. Returns whether there was one."""

    user_id: str


LtmWrite = (
    UpsertFact
    | ArchiveFacts
    | DeleteFacts
    | EraseFacts
    | ApplyChanges
    | RecordAccess
    | MarkActive
    | ForgetActivity
)


class AuditLog(NamedTuple):
    """The user's audit entries (every user's if `user_id` is None; of one fact if
    `fact_id`) written at `since` <= at <= `until`, by audit_id."""

    user_id: str | None
    fact_id: str | None
    since: float = float("-inf")
    until: float = float("inf")


class Activity(NamedTuple):
    """Recorded latest activity (user_id -> time) of these users, or, with `user_ids`
    None, of every user whose time is in (`after`, `until`]."""

    user_ids: list[str] | None
    after: float = float("-inf")
    until: float = float("inf")


LtmLookup = AuditLog | Activity


class DueScan(NamedTuple):
    """What makes a fact a candidate of a due scan: `policy.next_due_at` under `rule` at
    or before `now` (a backend may return a few more: `due_margin`)."""

    now: float
    rule: DueRule


class LtmPrimitives(ABC):
    """The primitives of a long-term backend; `LongTermStore` builds its public API on
    them. Optional overrides, for speed only: `_usage` (default: pages through `_scan`),
    `earliest_due` and `earliest_activity_after` (default: cannot tell)."""

    embedder: Embedder

    def _usage(self, now: float) -> Usage:
        """Pages through every fact (`_scan`); a backend that keeps counters overrides."""
        return scanned_usage(
            lambda after, limit: self._scan(after, limit, None), self.embedder.dim, now
        )

    @abstractmethod
    def _apply(self, op: LtmWrite) -> Any:
        """Execute one write (above) in one transaction, its audit entries included;
        return what the operation's docstring says."""

    @abstractmethod
    def _fetch(self, flt: LtmFilter, now: float, *, touch: bool) -> list[Fact]:
        """The facts matching `flt` (`LtmFilter.matches`), by (created_at, fact_id). With
        `touch`, each gets last_accessed_at=now, access_count + 1 (same transaction)."""

    @abstractmethod
    def _search(
        self, embedding: Any, flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        """Top-k matching facts by cosine similarity (score = 1 - cosine distance), ties
        by fact_id; `embedding` as in `UpsertFact`, refused if zero. With `touch`, as
        `_fetch`."""

    def _lexical_matches(
        self, terms: list[str], flt: LtmFilter, now: float
    ) -> tuple[int, list[tuple[str, list[str]]]]:
        """How many facts match `flt`, and those of them whose text holds a query term:
        (fact_id, its query terms). Nothing touched. A default that reads every matching
        fact (`_fetch`); the built-in backends keep each fact's terms and use an index."""
        facts = self._fetch(flt, now, touch=False)
        return len(facts), lexical_matches(terms, ((f.fact_id, f.text) for f in facts))

    def _ranked(
        self, embedding: Any, terms: list[str], flt: LtmFilter, k: int, now: float
    ) -> tuple[list[str], int, list[tuple[str, list[str]]]]:
        """What a fused query ranks, nothing touched: the ids of the top-k matching facts
        by cosine similarity (as `_search` orders them), then `_lexical_matches(terms)`
        (0 and none without terms). A default from those two; a backend that reads both
        at once overrides."""
        dense = [hit.record.fact_id for hit in self._search(embedding, flt, k, now, touch=False)]
        if not terms:
            return dense, 0, []
        total, matches = self._lexical_matches(terms, flt, now)
        return dense, total, matches

    @abstractmethod
    def _count(self, flt: LtmFilter | None, now: float) -> int:
        """How many facts match `flt`; None: the live facts of the whole namespace."""

    @abstractmethod
    def _scan(self, after: str | None, limit: int, due: DueScan | None) -> list[Fact]:
        """Up to `limit` facts of the namespace (every user; not deleted) with fact_id >
        `after`, in fact_id order; with `due`, only candidates of a due scan, among which
        every fact due (`scan_due` keeps the due ones)."""

    @abstractmethod
    def _lookup(self, op: LtmLookup) -> Any:
        """Read the audit log or the activity table (above)."""


def audit_matches(entry: AuditEntry, flt: LtmFilter) -> bool:
    """Whether an audit entry is one of the user's that `flt` names (for erasure):
    by category, key and fact_id, whether or not the fact still exists."""
    return (
        entry.user_id == flt.user_id
        and (flt.categories is None or entry.category in flt.categories)
        and (flt.keys is None or entry.key in flt.keys)
        and (flt.fact_ids is None or entry.fact_id in flt.fact_ids)
    )
