"""The long-term layer: stable facts, unique by `(user_id, category, key)`, versioned, audited.

Episodes (category `episode`, the utterances of ended sessions, `reference.forgetting.
consolidation`) are facts like any other here, each under a key of its own.

Lifecycle of a `LongTermStore`: built once per process (or per Ray actor) by
`reference.factory`; `setup()` applies pending schema migrations (idempotent) and must
run before use; `dispose()` closes the connection pool. `upsert`, `get` and `query` are
the timed operations of the LTM SLA.

Every change writes an audit entry in the same transaction as the change: a failed write
leaves neither the row nor its audit entry behind. Every read names the user.

The forgetting engine needs a few more operations (`supports_forgetting`): per-fact
retention updates on access (`touch`), a similarity search over dead facts too
(`similar`), erasure with redaction of the audit values (`erase`), namespace-wide
paging and batched changes for sweeps (`scan`, `apply_changes`), and the per-user
activity that archival reads (`mark_active`, `last_active`, `forget_activity`). Only
`scan` and `apply_changes` span users; the engine is their only caller.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

from reference.clock import Clock
from reference.errors import InvalidInput
from reference.footprint import Usage, scanned_usage
from reference.keys import Namespace
from reference.models import AuditEntry, Category, DuePage, Fact, Hit, RetentionUpdate, Status
from reference.policy.sweep import DueRule, next_due_at
from reference.records import fast_init
from reference.text_interfaces import Embedder
from reference.validation import (
    check_category,
    check_embedding,
    check_id,
    check_importance,
    check_json_object,
    check_k,
    check_key,
    check_retention,
    check_text,
    check_timestamp,
)

AUDIT_ACTIONS = ("insert", "update", "archive", "delete", "erase", "anonymise")
#: What an erased value becomes in the audit log: the entry stays (who, when, what, key),
#: the value does not. Distinct from None, which means "no value" (an insert's old value).
REDACTED: dict[str, Any] = {"_redacted": True}


@fast_init
@dataclass(frozen=True, slots=True)
class FactChanges:
    """One sweep batch's changes, by fact_id, across users; applied in one transaction.

    A fact named under `delete` or `erase` is only removed (archive and anonymise skip
    it). `delete` keeps the removed value in its audit entry; `erase` redacts every audit
    value of the fact. `anonymise` maps a fact to its new value (the sealed original
    dropped), and strips the sealed payload from the fact's audit values as well.
    """

    delete: frozenset[str] = frozenset()
    erase: frozenset[str] = frozenset()
    archive: frozenset[str] = frozenset()
    anonymise: Mapping[str, dict[str, Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in ("delete", "erase", "archive"):
            object.__setattr__(self, name, frozenset(getattr(self, name)))
        for fact_id in (*self.delete, *self.erase, *self.archive, *self.anonymise):
            check_id("fact_ids", fact_id)
        for value in self.anonymise.values():
            check_json_object("anonymise", value)

    def __bool__(self) -> bool:
        return bool(self.delete or self.erase or self.archive or self.anonymise)


@fast_init
@dataclass(frozen=True, slots=True)
class FactChangeCounts:
    """How many facts `apply_changes` changed, per kind of change."""

    deleted: int = 0
    erased: int = 0
    archived: int = 0
    anonymised: int = 0


@fast_init
@dataclass(frozen=True, slots=True)
class LtmFilter:
    """Which facts of one user an operation applies to. Unset fields match everything."""

    user_id: str
    categories: frozenset[Category] | None = None
    keys: frozenset[str] | None = None
    fact_ids: frozenset[str] | None = None
    #: Include archived and expired facts (archival, erasure, inspection).
    include_dead: bool = False

    def __post_init__(self) -> None:
        check_id("user_id", self.user_id)
        if self.keys is not None:  # upsert strips keys, so a filter must match stripped keys
            object.__setattr__(self, "keys", frozenset(check_key("keys", k) for k in self.keys))
        for category in self.categories or ():
            check_category("categories", category)
        for fact_id in self.fact_ids or ():
            check_id("fact_ids", fact_id)

    def matches(self, fact: Fact, now: float) -> bool:
        """The in-memory meaning of the filter; real backends translate it to SQL."""
        return (
            fact.user_id == self.user_id
            and (self.categories is None or fact.category in self.categories)
            and (self.keys is None or fact.key in self.keys)
            and (self.fact_ids is None or fact.fact_id in self.fact_ids)
            and fact.status is not Status.DELETED
            and (self.include_dead or fact.is_live(now))
        )


class LongTermStore(ABC):
    """Versioned structured facts with vector search, within a user."""

    #: The backend implements the engine's primitives (see the module docstring); a
    #: store without them can serve turns but not a `ForgettingEngine`.
    supports_forgetting: ClassVar[bool] = False

    def __init__(self, *, clock: Clock, namespace: Namespace, embedder: Embedder) -> None:
        self.clock = clock
        self.namespace = namespace
        self.embedder = embedder

    # ------------------------------------------------------------------ lifecycle
    @abstractmethod
    def setup(self) -> None:
        """Create or migrate the schema; safe to call any number of times."""

    def dispose(self) -> None:
        """Release connections. The store is unusable afterwards."""

    def drop(self) -> None:
        """Remove everything this namespace has in the layer (its tables), then release
        connections: for throwaway namespaces (simulation shards). Unusable afterwards."""
        self.dispose()

    # ------------------------------------------------------------------ public API
    def upsert(
        self,
        *,
        user_id: str,
        category: Category | str,
        key: str,
        value: dict[str, Any],
        text: str,
        importance: float = 5.0,
        expires_at: float | None = None,
        actor: str = "system",
        embedding: Sequence[float] | np.ndarray | None = None,
    ) -> Fact:
        """Insert the fact, or supersede the current value of `(user_id, category, key)`.

        A new value increments `version` and reactivates an archived fact. The embedding
        is of `text` unless given.
        """
        check_id("user_id", user_id)
        cat = check_category("category", category)
        key = check_key("key", key)
        check_json_object("value", value)
        check_text("text", text)
        check_importance("importance", importance)
        check_id("actor", actor)
        if expires_at is not None and not isinstance(expires_at, int | float):
            raise InvalidInput(
                "expires_at", f"must be an epoch timestamp or None, got {expires_at!r}"
            )
        vector = self._vector(text, embedding)
        return self._upsert(
            user_id=user_id,
            category=cat,
            key=key,
            value=value,
            text=text,
            importance=float(importance),
            expires_at=None if expires_at is None else float(expires_at),
            actor=actor,
            embedding=vector,
            now=self.clock.now(),
        )

    def get(self, *, user_id: str, category: Category | str, key: str) -> Fact | None:
        """The live fact at `(user_id, category, key)`, touched (access stats), or None."""
        check_id("user_id", user_id)
        cat = check_category("category", category)
        key = check_key("key", key)
        return self._get(user_id=user_id, category=cat, key=key, now=self.clock.now())

    def query(
        self,
        *,
        user_id: str,
        text: str | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        k: int = 5,
        categories: frozenset[Category] | None = None,
        touch: bool = True,
    ) -> list[Hit[Fact]]:
        """The `k` live facts of this user most similar to the query, best first.

        With `touch` (the default) the returned facts count as accessed; an observer that
        must not change what it measures (a probe) passes `touch=False`.
        """
        check_k("k", k)
        flt = LtmFilter(user_id=user_id, categories=categories)
        if embedding is None:
            if text is None:
                raise InvalidInput("text", "give the query text or its embedding")
            check_text("text", text)
        vector = self._vector(text or "", embedding)
        return self._query(vector, flt, k, self.clock.now(), touch=touch)

    def archive(self, *, filter: LtmFilter, actor: str = "system") -> int:
        """Set matching live facts to archived (no longer returned); returns how many."""
        check_id("actor", actor)
        return self._archive(filter, actor=actor, now=self.clock.now())

    def delete(self, *, filter: LtmFilter, actor: str = "system") -> int:
        """Hard-delete matching facts, archived and expired ones included whatever the
        filter's `include_dead` says; returns how many."""
        check_id("actor", actor)
        return self._delete(filter, actor=actor, now=self.clock.now())

    def facts(self, *, filter: LtmFilter) -> list[Fact]:
        """Matching facts ordered by (created_at, fact_id), without touching them."""
        return self._list(filter, self.clock.now())

    def count(self, *, filter: LtmFilter | None = None) -> int:
        """Facts matching `filter` (live ones unless it says `include_dead`), or the live
        facts of the whole namespace when None (footprint)."""
        return self._count(filter, self.clock.now())

    def usage(self) -> Usage:
        """Live facts of the whole namespace and their payload bytes
        (`reference.footprint`) now: the layer's footprint. A read: it changes nothing."""
        return self._usage(self.clock.now())

    def audit_log(self, *, user_id: str, fact_id: str | None = None) -> list[AuditEntry]:
        """The user's audit entries (optionally of one fact), oldest first."""
        check_id("user_id", user_id)
        if fact_id is not None:
            check_id("fact_id", fact_id)
        return self._audit_log(user_id=user_id, fact_id=fact_id)

    def sweep_expired(self, *, batch_size: int = 1000, actor: str = "sweeper") -> int:
        """Hard-delete up to `batch_size` facts past expires_at (audited); returns how many."""
        if batch_size < 1:
            raise InvalidInput("batch_size", f"must be at least 1, got {batch_size}")
        check_id("actor", actor)
        return self._sweep(now=self.clock.now(), batch_size=batch_size, actor=actor)

    # ------------------------------------------------------------------ engine API
    def touch(self, *, user_id: str, updates: Sequence[RetentionUpdate]) -> int:
        """Count an access to each of the user's live facts named in `updates` (by
        fact_id), storing its new `expires_at` and `importance`; one transaction. Returns
        how many changed; a fact gone or no longer live is skipped (no resurrection)."""
        check_id("user_id", user_id)
        by_id: dict[str, RetentionUpdate] = {}
        for update in updates:
            if not isinstance(update, RetentionUpdate):
                raise InvalidInput("updates", f"must hold RetentionUpdate items, got {update!r}")
            check_retention(update)
            by_id[update.record_id] = update
        if not by_id:
            return 0
        return self._update_retention(user_id, list(by_id.values()), self.clock.now())

    def similar(
        self,
        *,
        user_id: str,
        embedding: Sequence[float] | np.ndarray,
        min_score: float,
        include_dead: bool = True,
    ) -> list[Hit[Fact]]:
        """Every fact of the user (archived and expired too, unless `include_dead` is
        False) at least `min_score` similar to `embedding`, best first; nothing touched."""
        flt = LtmFilter(user_id=user_id, include_dead=include_dead)
        vector = self._vector("", embedding)
        now = self.clock.now()
        total = self._count(flt, now)
        if total == 0:
            return []
        hits = self._query(vector, flt, total, now, touch=False)
        return [hit for hit in hits if hit.score >= min_score]

    def erase(self, *, filter: LtmFilter, actor: str = "forget") -> int:
        """Erase: hard-delete the matching facts (dead ones included) and, in the same
        transaction, redact the values of every audit entry of the user that the filter
        matches (by fact_id, category and key, whether or not the fact still exists) or
        that belongs to a deleted fact. Each erased fact gets an 'erase' audit entry.
        Returns how many facts were deleted."""
        check_id("actor", actor)
        return self._erase(filter, actor=actor, now=self.clock.now())

    def scan(self, *, after: str | None = None, limit: int = 1000) -> list[Fact]:
        """Up to `limit` facts of the whole namespace (every user and status) with
        fact_id > `after`, in fact_id order: the pages of a sweep."""
        if after is not None:
            check_id("after", after)
        check_k("limit", limit, limit=1_000_000)
        return self._scan(after, limit)

    def scan_due(
        self, *, now: float, rule: DueRule, after: str | None = None, limit: int = 1000
    ) -> DuePage[Fact]:
        """The facts of the whole namespace due at `now` under `rule`
        (`policy.next_due_at` at or before it: expired, an archived fact's grace over, a
        sealed value's anonymisation deadline passed), fact_id > `after`, in fact_id
        order, a page of at most `limit` candidates at a time: what a sweep must visit.
        A read: it changes nothing."""
        if after is not None:
            check_id("after", after)
        check_k("limit", limit, limit=1_000_000)
        now = check_timestamp("now", now)
        candidates = self._scan_due(now, rule, after, limit)
        due = [f for f in candidates if (d := next_due_at(f, rule)) is not None and d <= now]
        return DuePage(due, candidates[-1].fact_id if len(candidates) >= limit else None)

    def earliest_due(self, rule: DueRule) -> float:
        """A moment before which `scan_due` under `rule` finds nothing (inf: no fact has
        a deadline), or -inf when this store cannot tell without a query (a sweep then
        looks). A read."""
        return float("-inf")

    def earliest_activity_after(self, after: float) -> float:
        """The earliest recorded latest activity later than `after` (inf: none), or -inf
        when this store cannot tell without a query: no user's inactivity period can end
        before it plus the period. A read."""
        return float("-inf")

    def inactive_users(self, *, after: float, until: float) -> list[str]:
        """Users whose recorded latest activity is in (`after`, `until`], sorted: the
        users a sweep archives when `until` is its `now` less the inactivity period and
        `after` the same of the sweep before it. A read."""
        if after >= until:
            return []
        return self._inactive_users(float(after), float(until))

    def apply_changes(self, changes: FactChanges, *, actor: str = "sweeper") -> FactChangeCounts:
        """Apply one sweep batch's changes (see `FactChanges`) in one transaction."""
        check_id("actor", actor)
        if not isinstance(changes, FactChanges):
            raise InvalidInput("changes", f"must be FactChanges, got {type(changes).__name__}")
        if not changes:
            return FactChangeCounts()
        return self._apply_changes(changes, actor=actor, now=self.clock.now())

    def mark_active(self, *, activity: Mapping[str, float]) -> None:
        """Record users' latest activity (user_id -> epoch seconds); a time earlier than
        the one stored leaves it unchanged. Archival reads it back with `last_active`."""
        checked = {
            check_id("user_id", user): check_timestamp("activity", at)
            for user, at in activity.items()
        }
        if checked:
            self._mark_active(checked)

    def last_active(self, *, user_ids: Collection[str]) -> dict[str, float]:
        """The recorded latest activity of these users; users never recorded are absent."""
        ids = sorted({check_id("user_ids", u) for u in user_ids})
        return self._last_active(ids) if ids else {}

    def forget_activity(self, *, user_id: str) -> bool:
        """Drop the user's activity record (erasure of everything about the user)."""
        return self._forget_activity(check_id("user_id", user_id))

    # ------------------------------------------------------------------ helpers
    def _vector(self, text: str, embedding: Sequence[float] | np.ndarray | None) -> np.ndarray:
        """The one vector an operation uses: the checked `embedding` (`check_embedding`,
        not copied), else the embedding of `text`, float32 or float64, never converted
        again on the way to the backend."""
        if embedding is not None:
            return check_embedding("embedding", embedding)
        vector = self.embedder.embed_one(text)
        return vector if vector.dtype == np.float32 else np.asarray(vector, dtype=np.float64)

    # ------------------------------------------------------------------ backend primitives
    @abstractmethod
    def _upsert(
        self,
        *,
        user_id: str,
        category: Category,
        key: str,
        value: dict[str, Any],
        text: str,
        importance: float,
        expires_at: float | None,
        actor: str,
        embedding: Any,
        now: float,
    ) -> Fact:
        """One transaction: insert (version 1, audit 'insert') or update (version + 1,
        status active, audit 'update' with old and new value)."""

    @abstractmethod
    def _get(self, *, user_id: str, category: Category, key: str, now: float) -> Fact | None: ...

    # `embedding` is what `_vector` returns: a 1-D float32 or float64 array, which a
    # backend may not keep without copying. Typed Any because backends written when it was
    # a list of floats still annotate `list[float]` (np.asarray takes either).
    @abstractmethod
    def _query(
        self, embedding: Any, flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        """Top-k by cosine similarity (score = 1 - cosine distance); ties by fact_id.
        With `touch`, returned facts get last_accessed_at=now, access_count+1 (same
        transaction)."""

    @abstractmethod
    def _archive(self, flt: LtmFilter, *, actor: str, now: float) -> int: ...

    @abstractmethod
    def _delete(self, flt: LtmFilter, *, actor: str, now: float) -> int: ...

    @abstractmethod
    def _list(self, flt: LtmFilter, now: float) -> list[Fact]: ...

    @abstractmethod
    def _count(self, flt: LtmFilter | None, now: float) -> int: ...

    @abstractmethod
    def _audit_log(self, *, user_id: str, fact_id: str | None) -> list[AuditEntry]: ...

    @abstractmethod
    def _sweep(self, *, now: float, batch_size: int, actor: str) -> int: ...

    # Engine primitives: not abstract, so a backend that serves turns only (a benchmark's
    # null store) need not have them; `supports_forgetting` says whether it does.
    def _update_retention(self, user_id: str, updates: list[RetentionUpdate], now: float) -> int:
        """For each update naming a live fact of `user_id`: last_accessed_at=now,
        access_count+1, expires_at and importance as given. One transaction, no audit
        (an access is not a change of the memory)."""
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _erase(self, flt: LtmFilter, *, actor: str, now: float) -> int:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _scan(self, after: str | None, limit: int) -> list[Fact]:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _apply_changes(self, changes: FactChanges, *, actor: str, now: float) -> FactChangeCounts:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _scan_due(self, now: float, rule: DueRule, after: str | None, limit: int) -> list[Fact]:
        """Up to `limit` facts (not deleted) with fact_id > `after`, in fact_id order,
        among which every fact due under `rule` at `now`; a few more may come (time
        arithmetic is compared with a margin): `scan_due` keeps the due ones."""
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _usage(self, now: float) -> Usage:
        """Pages through every fact (`_scan`); a backend that keeps counters overrides."""
        return scanned_usage(self._scan, self.embedder.dim, now)

    def _inactive_users(self, after: float, until: float) -> list[str]:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _mark_active(self, activity: dict[str, float]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _last_active(self, user_ids: list[str]) -> dict[str, float]:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")

    def _forget_activity(self, user_id: str) -> bool:
        raise NotImplementedError(f"{type(self).__name__} does not support forgetting")


def due_margin(now: float) -> float:
    """How much earlier than exact a backend may look for due facts: `start + period <=
    now` is queried as `start <= now - period + margin`, so float rounding never hides
    a due fact (the store then keeps exactly the due ones)."""
    return 1e-9 * max(1.0, abs(now))


def audit_matches(entry: AuditEntry, flt: LtmFilter) -> bool:
    """Whether an audit entry is one of the user's that `flt` names (for erasure):
    by category, key and fact_id, whether or not the fact still exists."""
    return (
        entry.user_id == flt.user_id
        and (flt.categories is None or entry.category in flt.categories)
        and (flt.keys is None or entry.key in flt.keys)
        and (flt.fact_ids is None or entry.fact_id in flt.fact_ids)
    )
