"""The long-term layer: stable facts, unique by `(user_id, category, key)`, versioned, audited.

Lifecycle of a `LongTermStore`: built once per process (or per Ray actor) by
`reference.factory`; `setup()` applies pending schema migrations (idempotent) and must
run before use; `dispose()` closes the connection pool. `upsert`, `get` and `query` are
the timed operations of the LTM SLA.

Every change writes an audit entry in the same transaction as the change: a failed write
leaves neither the row nor its audit entry behind. Every read names the user.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reference.clock import Clock
from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.models import AuditEntry, Category, Fact, Hit, Status
from reference.text import Embedder
from reference.validation import (
    check_category,
    check_embedding,
    check_id,
    check_importance,
    check_json_object,
    check_k,
    check_key,
    check_text,
)

AUDIT_ACTIONS = ("insert", "update", "archive", "delete")


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

    # ------------------------------------------------------------------ helpers
    def _vector(self, text: str, embedding: Sequence[float] | np.ndarray | None) -> list[float]:
        if embedding is not None:
            return check_embedding("embedding", embedding)
        return [float(x) for x in self.embedder.embed_one(text)]

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
        embedding: list[float],
        now: float,
    ) -> Fact:
        """One transaction: insert (version 1, audit 'insert') or update (version + 1,
        status active, audit 'update' with old and new value)."""

    @abstractmethod
    def _get(self, *, user_id: str, category: Category, key: str, now: float) -> Fact | None: ...

    @abstractmethod
    def _query(
        self, embedding: list[float], flt: LtmFilter, k: int, now: float, *, touch: bool
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
