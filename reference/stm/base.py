"""The short-term layer: intentful utterances of a session, searchable by meaning.

Lifecycle of a `ShortTermStore`: built once per process (or per Ray actor) by
`reference.factory` with the run's `Clock`, `Namespace`, embedder, intent filter and PII
masker; not shared across processes; `dispose()` releases the client. `add` and `query`
are the timed operations of the STM SLA (query includes the query embedding unless the
caller passes one).

Every read names the user: a filter without `user_id` cannot be built, so no call returns
another user's records. Records past `expires_at`, or not active, are never returned.
"""

from __future__ import annotations

import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from reference.clock import Clock
from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.models import Hit, MemoryRecord, MemoryType, Status
from reference.text import Embedder, IntentDecision, IntentFilter, PiiMasker
from reference.validation import (
    check_embedding,
    check_id,
    check_importance,
    check_k,
    check_memory_type,
    check_positive,
    check_text,
)

DEFAULT_STM_TTL_S = 3600.0
MetadataValue = str | int | float | bool


@dataclass(frozen=True, slots=True)
class StmFilter:
    """Which records of one user an operation applies to. Unset fields match everything."""

    user_id: str
    session_id: str | None = None
    record_ids: frozenset[str] | None = None
    types: frozenset[MemoryType] | None = None
    #: Include records past expires_at or not active (sweeps and forgetting only).
    include_dead: bool = False

    def __post_init__(self) -> None:
        check_id("user_id", self.user_id)
        if self.session_id is not None:
            check_id("session_id", self.session_id)
        for record_id in self.record_ids or ():
            check_id("record_ids", record_id)

    def matches(self, record: MemoryRecord, now: float) -> bool:
        """The in-memory meaning of the filter; real backends translate it to queries."""
        return (
            record.user_id == self.user_id
            and (self.session_id is None or record.session_id == self.session_id)
            and (self.record_ids is None or record.record_id in self.record_ids)
            and (self.types is None or record.type in self.types)
            and (self.include_dead or record.is_live(now))
        )


@dataclass(frozen=True, slots=True)
class AddResult:
    """What `add` did: the stored record, or why the utterance was not stored."""

    accepted: bool
    reason: str
    record: MemoryRecord | None
    intent: IntentDecision


class ShortTermStore(ABC):
    """Session-scoped semantic memory with per-record expiry."""

    def __init__(
        self,
        *,
        clock: Clock,
        namespace: Namespace,
        embedder: Embedder,
        intent_filter: IntentFilter,
        pii: PiiMasker,
        ttl_s: float = DEFAULT_STM_TTL_S,
        id_factory: Callable[[], str] | None = None,
    ) -> None:
        self.clock = clock
        self.namespace = namespace
        self.embedder = embedder
        self.intent_filter = intent_filter
        self.pii = pii
        self.ttl_s = check_positive("ttl_s", ttl_s)
        # Ids come from the store, never from a caller of `add` (a chosen id could replace
        # another user's record); an injected factory makes runs reproducible.
        self._new_id = id_factory or _random_id

    # ------------------------------------------------------------------ public API
    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        type: MemoryType | None = None,
        importance: float = 5.0,
        ttl_s: float | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        metadata: dict[str, MetadataValue] | None = None,
        force: bool = False,
    ) -> AddResult:
        """Store an utterance if the intent filter keeps it (or `force`); PII is masked first.

        The embedding is of the masked text; pass `embedding` to reuse one already computed
        for the same masked text. `ttl_s=None` takes the store's default.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_text("text", text)
        check_importance("importance", importance)
        if type is not None:
            type = check_memory_type("type", type)
        if ttl_s is not None:
            check_positive("ttl_s", ttl_s)
        metadata = _check_metadata(metadata or {})

        masked = self.pii.mask(text)
        decision = self.intent_filter.classify(masked)
        if not decision.keep and not force:
            return AddResult(accepted=False, reason=decision.reason, record=None, intent=decision)
        vector = self._vector("embedding", masked, embedding)
        now = self.clock.now()
        record = MemoryRecord(
            record_id=check_id("record_id", self._new_id()),
            user_id=user_id,
            session_id=session_id,
            text=masked,
            type=type or decision.kind or MemoryType.CONVERSATION,
            created_at=now,
            last_accessed_at=now,
            access_count=0,
            importance=float(importance),
            expires_at=now + (ttl_s if ttl_s is not None else self.ttl_s),
            status=Status.ACTIVE,
            metadata=metadata,
        )
        self._put(record, vector)
        return AddResult(accepted=True, reason=decision.reason, record=record, intent=decision)

    def query(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str | None = None,
        embedding: Sequence[float] | np.ndarray | None = None,
        k: int = 5,
        types: frozenset[MemoryType] | None = None,
        touch: bool = True,
    ) -> list[Hit[MemoryRecord]]:
        """The `k` live records of this session most similar to the query, best first.

        Give `text` or `embedding` (the embedding wins). With `touch` (the default) the
        returned records count as accessed (`last_accessed_at`, `access_count`); an
        observer that must not change what it measures (a probe) passes `touch=False`.
        """
        check_k("k", k)
        flt = StmFilter(user_id=user_id, session_id=session_id, types=types)
        if embedding is None:
            if text is None:
                raise InvalidInput("text", "give the query text or its embedding")
            vector = self._vector("embedding", self.pii.mask(check_text("text", text)), None)
        else:
            vector = self._vector("embedding", "", embedding)
        now = self.clock.now()
        hits = self._query(vector, flt, k, now)
        if hits and touch:
            self._touch([h.record.record_id for h in hits], now)
            hits = [
                Hit(
                    record=_touched(h.record, now),
                    score=h.score,
                )
                for h in hits
            ]
        return hits

    def get(self, *, user_id: str, record_id: str) -> MemoryRecord | None:
        """One live record of this user, without touching it."""
        check_id("record_id", record_id)
        found = self._records(
            StmFilter(user_id=user_id, record_ids=frozenset({record_id})), self.clock.now()
        )
        return found[0] if found else None

    def records(self, *, filter: StmFilter) -> list[MemoryRecord]:
        """Records matching the filter, oldest first, without touching them."""
        return self._records(filter, self.clock.now())

    def delete(self, *, filter: StmFilter) -> int:
        """Remove the matching records (live or not when `include_dead`); returns how many."""
        return self._delete(filter, self.clock.now())

    def count(self, *, filter: StmFilter | None = None) -> int:
        """Live records matching `filter`, or in the whole namespace when None (footprint)."""
        return self._count(filter, self.clock.now())

    def sweep_expired(self, *, batch_size: int = 1000) -> int:
        """Remove up to `batch_size` records whose expires_at has passed; returns how many."""
        if batch_size < 1:
            raise InvalidInput("batch_size", f"must be at least 1, got {batch_size}")
        return self._sweep(self.clock.now(), batch_size)

    def dispose(self) -> None:
        """Release the client. The store is unusable afterwards."""

    # ------------------------------------------------------------------ helpers
    def _vector(
        self, field: str, text: str, embedding: Sequence[float] | np.ndarray | None
    ) -> list[float]:
        if embedding is not None:
            return check_embedding(field, embedding)
        return [float(x) for x in self.embedder.embed_one(text)]

    # ------------------------------------------------------------------ backend primitives
    @abstractmethod
    def _put(self, record: MemoryRecord, embedding: list[float]) -> None:
        """Insert or replace the record with this record_id."""

    @abstractmethod
    def _query(
        self, embedding: list[float], flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        """Top-k by cosine similarity (score = 1 - cosine distance) among matching records;
        ties broken by record_id ascending."""

    @abstractmethod
    def _touch(self, record_ids: list[str], now: float) -> None:
        """Set last_accessed_at=now and increment access_count of these records."""

    @abstractmethod
    def _records(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        """Matching records ordered by (created_at, record_id)."""

    @abstractmethod
    def _delete(self, flt: StmFilter, now: float) -> int: ...

    @abstractmethod
    def _count(self, flt: StmFilter | None, now: float) -> int: ...

    @abstractmethod
    def _sweep(self, now: float, batch_size: int) -> int: ...


def _random_id() -> str:
    return uuid.uuid4().hex


def _touched(record: MemoryRecord, now: float) -> MemoryRecord:
    from dataclasses import replace

    return replace(record, last_accessed_at=now, access_count=record.access_count + 1)


def _check_metadata(metadata: dict[str, MetadataValue]) -> dict[str, MetadataValue]:
    for key, value in metadata.items():
        if not isinstance(key, str) or not key or key.startswith("_"):
            raise InvalidInput(
                "metadata", f"key {key!r} must be a non-empty string not starting with '_'"
            )
        if not isinstance(value, str | int | float | bool):
            raise InvalidInput(
                f"metadata.{key}", f"must be str, int, float or bool, got {type(value).__name__}"
            )
    return metadata
