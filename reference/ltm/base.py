"""The long-term layer: stable facts, unique by `(user_id, category, key)`, versioned, audited.

Episodes (category `episode`, the utterances of ended sessions, `reference.forgetting.
consolidation`) are facts like any other here, each under a key of its own.

Lifecycle of a `LongTermStore`: built once per process (or per Ray actor) by
`reference.factory`; `setup()` applies pending schema migrations (idempotent) and must
run before use; `dispose()` closes the connection pool. `upsert`, `get` and `query` are
the timed operations of the LTM SLA.

Every change writes an audit entry in the same transaction as the change: a failed write
leaves neither the row nor its audit entry behind. Every read names the user.

The "engine API" is the forgetting engine's; only its scans and `apply_changes` span
users. Every public method validates its input, reads the clock and makes one call of a
backend primitive (`reference.ltm.primitives`), so backends cannot differ in what they
accept.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from typing import Any

import numpy as np

from reference.clock import Clock
from reference.errors import InvalidInput
from reference.footprint import Usage
from reference.keys import Namespace
from reference.lexical import DEFAULT_RRF_K, fuse, lexical_pool, lexical_ranking, query_terms
from reference.ltm.deadlines import LtmDeadlines
from reference.ltm.filters import FactChangeCounts, FactChanges, LtmFilter, check_cause
from reference.ltm.primitives import (
    Activity,
    ApplyChanges,
    ArchiveFacts,
    AuditLog,
    DeleteFacts,
    DueScan,
    EraseFacts,
    ForgetActivity,
    LtmPrimitives,
    LtmWrite,
    MarkActive,
    RecordAccess,
    UpsertFact,
)
from reference.models import AuditEntry, Category, DuePage, Fact, Hit, RetentionUpdate
from reference.policy.sweep import DueRule, next_due_at
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


class LongTermStore(LtmPrimitives):
    """Versioned structured facts with vector search, within a user."""

    #: Each fact's deadlines and each user's activity as written, when the store is its
    #: namespace's only writer (`reference.ltm.deadlines`; set by the factory's
    #: `sole_writer`).
    deadlines: LtmDeadlines | None = None

    def __init__(self, *, clock: Clock, namespace: Namespace, embedder: Embedder) -> None:
        self.clock = clock
        self.namespace = namespace
        self.embedder = embedder

    # ------------------------------------------------------------------ lifecycle
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
        cause: str = "",
    ) -> Fact:
        """Insert the fact, or supersede the current value of `(user_id, category, key)`:
        a new value increments `version` and reactivates an archived fact (its
        `archive_reason` cleared). The embedding is of `text` unless given; `cause` says
        why in the audit entry (never the value)."""
        check_id("user_id", user_id)
        cat = check_category("category", category)
        key = check_key("key", key)
        check_json_object("value", value)
        check_text("text", text)
        check_importance("importance", importance)
        check_id("actor", actor)
        check_cause("cause", cause)
        if expires_at is not None and not isinstance(expires_at, int | float):
            raise InvalidInput(
                "expires_at", f"must be an epoch timestamp or None, got {expires_at!r}"
            )
        vector = self._vector(text, embedding)
        expiry = None if expires_at is None else float(expires_at)
        fact = (user_id, cat, key, value, text, float(importance), expiry, actor, vector)
        return self._apply_noted(UpsertFact(*fact, self.clock.now(), cause))

    def get(self, *, user_id: str, category: Category | str, key: str) -> Fact | None:
        """The live fact at `(user_id, category, key)`, touched (access stats), or None."""
        check_id("user_id", user_id)
        cat = check_category("category", category)
        key = check_key("key", key)
        flt = LtmFilter(user_id=user_id, categories=frozenset((cat,)), keys=frozenset((key,)))
        found = self._fetch(flt, self.clock.now(), touch=True)
        return found[0] if found else None

    def query(
        self,
        *,
        user_id: str,
        text: str | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        k: int = 5,
        categories: frozenset[Category] | None = None,
        touch: bool = True,
        lexical: bool = False,
        rrf_k: int = DEFAULT_RRF_K,
    ) -> list[Hit[Fact]]:
        """The `k` live facts of this user most similar to the query, best first.

        With `touch` (the default) the returned facts count as accessed; an observer that
        must not change what it measures (a probe) passes `touch=False`. With `lexical`
        (the query `text` is then required), the dense ranking is fused with the lexical
        one by reciprocal rank (`reference.lexical`) and a hit's score is its fused score.
        """
        check_k("k", k)
        flt = LtmFilter(user_id=user_id, categories=categories)
        if embedding is None or lexical:
            if text is None:
                need = "lexical retrieval needs the query text" if lexical else "give the query"
                raise InvalidInput("text", need if lexical else f"{need} text or its embedding")
            check_text("text", text)
        vector = self._vector(text or "", embedding)
        if not lexical:
            return self._search(vector, flt, k, self.clock.now(), touch=touch)
        check_k("rrf_k", rrf_k, limit=100_000)
        return self._fused(text or "", vector, flt, k, rrf_k, touch=touch)

    def archive(self, *, filter: LtmFilter, actor: str = "system", cause: str = "") -> int:
        """Set matching live facts to archived (no longer returned), each keeping `cause`
        as its `archive_reason`; returns how many."""
        check_id("actor", actor)
        check_cause("cause", cause)
        now = self.clock.now()
        archived: int = self._apply_noted(ArchiveFacts(filter, actor, now, cause))
        if self.deadlines is not None and archived:  # which ones: read back
            everything = dataclasses.replace(filter, include_dead=True)
            self.deadlines.indexed(self._fetch(everything, now, touch=False))
        return archived

    def delete(self, *, filter: LtmFilter, actor: str = "system", cause: str = "") -> int:
        """Hard-delete matching facts, archived and expired ones included whatever the
        filter's `include_dead` says; returns how many."""
        check_id("actor", actor)
        check_cause("cause", cause)
        everything = dataclasses.replace(filter, include_dead=True)
        return self._apply_noted(DeleteFacts(everything, actor, self.clock.now(), cause))

    def facts(self, *, filter: LtmFilter) -> list[Fact]:
        """Matching facts ordered by (created_at, fact_id), without touching them."""
        return self._fetch(filter, self.clock.now(), touch=False)

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
        return self._lookup(AuditLog(user_id, fact_id))

    def audit_entries(
        self, *, user_id: str | None = None, since: float | None = None, until: float | None = None
    ) -> list[AuditEntry]:
        """The audit entries of one user (None: every user) written at `since` <= at <=
        `until` (None: unbounded), in audit_id order: what an audit report lists. A read."""
        if user_id is not None:
            check_id("user_id", user_id)
        low = float("-inf") if since is None else check_timestamp("since", since)
        high = float("inf") if until is None else check_timestamp("until", until)
        return self._lookup(AuditLog(user_id, None, low, high))

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
        return self._apply_noted(RecordAccess(user_id, list(by_id.values()), self.clock.now()))

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
        hits = self._search(vector, flt, total, now, touch=False)
        return [hit for hit in hits if hit.score >= min_score]

    def erase(self, *, filter: LtmFilter, actor: str = "forget", cause: str = "") -> int:
        """Erase: hard-delete the matching facts (dead ones included) and, in the same
        transaction, redact the values of every audit entry of the user that the filter
        matches (by fact_id, category and key, whether or not the fact still exists) or
        that belongs to a deleted fact. Each erased fact gets an 'erase' audit entry.
        Returns how many facts were deleted. `cause` is kept as it is: it must not hold
        the erased value (name the command's scope or topic, not its text)."""
        check_id("actor", actor)
        check_cause("cause", cause)
        everything = dataclasses.replace(filter, include_dead=True)
        return self._apply_noted(EraseFacts(everything, actor, self.clock.now(), cause))

    def scan(self, *, after: str | None = None, limit: int = 1000) -> list[Fact]:
        """Up to `limit` facts of the whole namespace (every user and status) with
        fact_id > `after`, in fact_id order: the pages of a sweep."""
        if after is not None:
            check_id("after", after)
        check_k("limit", limit, limit=1_000_000)
        return self._scan(after, limit, None)

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
        if now < self.earliest_due(rule):
            return DuePage([], None)  # nothing asked of the backend
        candidates = self._scan(after, limit, DueScan(now, rule))
        due = [f for f in candidates if (d := next_due_at(f, rule)) is not None and d <= now]
        until = candidates[-1].fact_id if len(candidates) >= limit else None
        if self.deadlines is not None:
            self.deadlines.scanned(now, rule, after, until, {f.fact_id for f in due})
        return DuePage(due, until)

    def earliest_due(self, rule: DueRule) -> float:
        """A moment before which `scan_due` under `rule` finds nothing (inf: no fact has
        a deadline), or -inf when this store cannot tell without a query (a sweep then
        looks): a backend's index, or the `deadlines` of a store that is its namespace's
        only writer. A read."""
        return float("-inf") if self.deadlines is None else self.deadlines.earliest(rule)

    def earliest_activity_after(self, after: float) -> float:
        """The earliest recorded latest activity later than `after` (inf: none), or -inf
        when this store cannot tell without a query: no user's inactivity period can end
        before it plus the period. As `earliest_due`. A read."""
        if self.deadlines is None:
            return float("-inf")
        return self.deadlines.earliest_activity_after(after)

    def inactive_users(self, *, after: float, until: float) -> list[str]:
        """Users whose recorded latest activity is in (`after`, `until`], sorted: the
        users a sweep archives when `until` is its `now` less the inactivity period and
        `after` the same of the sweep before it. A read."""
        if after >= until or self.earliest_activity_after(after) > until:
            return []
        return sorted(self._lookup(Activity(None, float(after), float(until))))

    def apply_changes(self, changes: FactChanges, *, actor: str = "sweeper") -> FactChangeCounts:
        """Apply one sweep batch's changes (see `FactChanges`) in one transaction."""
        check_id("actor", actor)
        if not isinstance(changes, FactChanges):
            raise InvalidInput("changes", f"must be FactChanges, got {type(changes).__name__}")
        if not changes:
            return FactChangeCounts()
        return self._apply_noted(ApplyChanges(changes, actor, self.clock.now()))

    def mark_active(self, *, activity: Mapping[str, float]) -> None:
        """Record users' latest activity (user_id -> epoch seconds); a time earlier than
        the one stored leaves it unchanged. Archival reads it back with `last_active`."""
        checked = {
            check_id("user_id", user): check_timestamp("activity", at)
            for user, at in activity.items()
        }
        if checked:
            self._apply_noted(MarkActive(checked))

    def last_active(self, *, user_ids: Collection[str]) -> dict[str, float]:
        """The recorded latest activity of these users; users never recorded are absent."""
        ids = sorted({check_id("user_ids", u) for u in user_ids})
        if not ids:
            return {}
        return self._lookup(Activity(ids))

    def forget_activity(self, *, user_id: str) -> bool:
        """Drop the user's activity record (erasure of everything about the user)."""
        return self._apply_noted(ForgetActivity(check_id("user_id", user_id)))

    # ------------------------------------------------------------------ helpers
    def _apply_noted(self, op: LtmWrite) -> Any:
        """`_apply(op)`, noted in `deadlines` when the store keeps them."""
        if self.deadlines is None:
            return self._apply(op)
        try:
            result = self._apply(op)
        except BaseException as exc:
            self.deadlines.failed(exc)
            raise
        self.deadlines.applied(op, result)
        return result

    def _fused(
        self, text: str, vector: np.ndarray, flt: LtmFilter, k: int, rrf_k: int, *, touch: bool
    ) -> list[Hit[Fact]]:
        """Dense and lexical rankings of the user's facts, fused (see `query`)."""
        now = self.clock.now()
        pool = lexical_pool(k)
        terms = query_terms(text)
        dense, total, matches = self._ranked(vector, terms, flt, pool, now)
        ranked: list[str] = []
        if terms:
            ranked = lexical_ranking(terms, matches, total=total, limit=pool, dense=dense)
        fused = fuse([dense, ranked], rrf_k=rrf_k)[:k]
        if not fused:
            return []
        chosen = dataclasses.replace(flt, fact_ids=frozenset(fid for fid, _ in fused))
        by_id = {fact.fact_id: fact for fact in self._fetch(chosen, now, touch=touch)}
        return [Hit(record=by_id[fid], score=score) for fid, score in fused if fid in by_id]

    def _vector(self, text: str, embedding: Sequence[float] | np.ndarray | None) -> np.ndarray:
        """The one vector an operation uses: the checked `embedding` (`check_embedding`,
        not copied), else the embedding of `text`, float32 or float64, never converted
        again on the way to the backend."""
        if embedding is not None:
            return check_embedding("embedding", embedding)
        vector = self.embedder.embed_one(text)
        return vector if vector.dtype == np.float32 else np.asarray(vector, dtype=np.float64)


def due_margin(now: float) -> float:
    """How much earlier than exact a backend may look for due facts: `start + period <=
    now` is queried as `start <= now - period + margin`, so float rounding never hides
    a due fact (the store then keeps exactly the due ones)."""
    return 1e-9 * max(1.0, abs(now))
