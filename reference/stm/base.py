"""The short-term layer: intentful utterances of a session, searchable by meaning.

Lifecycle of a `ShortTermStore`: built once per process (or per Ray actor) by
`reference.factory` with the run's `Clock`, `Namespace`, embedder, intent filter and PII
masker; not shared across processes; `dispose()` releases the client. `add` and `query`
are the timed operations of the STM SLA (query includes the query embedding unless the
caller passes one).

Every read names the user: a filter without `user_id` cannot be built, so no call returns
another user's records. Records past `expires_at`, or not active, are never returned.

The forgetting engine needs a few more operations: per-record retention updates on
access (`touch`), a user-wide similarity search over dead records too (`similar`, for
forget commands), and namespace-wide paging and removal by id (`scan`, `scan_due`,
`purge`) for sweeps, which span users. They are the only calls that are not scoped to
one user, and the engine is their only caller.

Every public method validates its input, reads the clock and makes one call of a
backend primitive (`reference.stm.primitives`), so backends cannot differ in what they
accept.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from reference.clock import Clock
from reference.errors import InvalidInput
from reference.footprint import Usage
from reference.ids import new_id
from reference.keys import Namespace
from reference.models import DuePage, Hit, MemoryRecord, MemoryType, RetentionUpdate, Status
from reference.records import fast_init
from reference.stm.access import AccessWrite
from reference.stm.deadlines import StmDeadlines
from reference.stm.filters import StmFilter
from reference.stm.primitives import (
    DeleteRecords,
    PurgeRecords,
    PutRecord,
    StmPrimitives,
    StmWrite,
    WriteAccess,
)
from reference.text_interfaces import Embedder, IntentDecision, IntentFilter, PiiMasker
from reference.validation import (
    check_embedding,
    check_id,
    check_importance,
    check_k,
    check_memory_type,
    check_positive,
    check_retention,
    check_text,
)

DEFAULT_STM_TTL_S = 3600.0
MetadataValue = str | int | float | bool


@fast_init
@dataclass(frozen=True, slots=True)
class AddResult:
    """What `add` did: the stored record, or why the utterance was not stored."""

    accepted: bool
    reason: str
    record: MemoryRecord | None
    intent: IntentDecision


class ShortTermStore(StmPrimitives):
    """Session-scoped semantic memory with per-record expiry."""

    #: When each record written falls due, when the store is its namespace's only
    #: writer (`reference.stm.deadlines`; set by the factory's `sole_writer`).
    deadlines: StmDeadlines | None = None

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
        self._new_id = id_factory or new_id
        #: Whether every record id is new: `new_id`'s (122 random bits) never repeat, so a
        #: backend need not look for a stored record that an add replaces.
        self.fresh_ids = id_factory is None

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
        never_expires: bool = False,
        intent: IntentDecision | None = None,
    ) -> AddResult:
        """Store an utterance if the intent filter keeps it (or `force`); PII is masked first.

        The embedding is of the masked text; pass `embedding` to reuse one already computed
        for the same masked text. `ttl_s=None` takes the store's default; `never_expires`
        stores no deadline at all (a strategy without a time rule for this type). `intent`
        is the filter's decision when the caller already classified the masked text.
        """
        check_id("user_id", user_id)
        check_id("session_id", session_id)
        check_text("text", text)
        check_importance("importance", importance)
        if type is not None:
            type = check_memory_type("type", type)
        if ttl_s is not None:
            check_positive("ttl_s", ttl_s)
            if never_expires:
                raise InvalidInput("ttl_s", "must be None when never_expires is set")
        if intent is not None and not isinstance(intent, IntentDecision):
            raise InvalidInput("intent", f"must be an IntentDecision, got {intent!r}")
        metadata = _check_metadata(metadata or {})

        masked = self.pii.mask(text)
        decision = intent if intent is not None else self.intent_filter.classify(masked)
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
            expires_at=None
            if never_expires
            else now + (ttl_s if ttl_s is not None else self.ttl_s),
            status=Status.ACTIVE,
            metadata=metadata,
        )
        self._apply_noted(PutRecord(record, vector))
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
        hits = self._search(vector, flt, k, now)
        if hits and touch:
            writes = [AccessWrite.after(h.record, now) for h in hits]
            self._apply_noted(WriteAccess(writes))
            hits = [
                Hit(record=w.apply(h.record), score=h.score)
                for h, w in zip(hits, writes, strict=True)
            ]
        return hits

    def get(self, *, user_id: str, record_id: str) -> MemoryRecord | None:
        """One live record of this user, without touching it."""
        check_id("record_id", record_id)
        found = self._fetch(
            StmFilter(user_id=user_id, record_ids=frozenset({record_id})), self.clock.now()
        )
        return found[0] if found else None

    def records(self, *, filter: StmFilter) -> list[MemoryRecord]:
        """Records matching the filter, oldest first, without touching them."""
        return self._fetch(filter, self.clock.now())

    def delete(self, *, filter: StmFilter) -> int:
        """Remove the matching records (live or not when `include_dead`); returns how many."""
        deleted: int = self._apply_noted(DeleteRecords(filter, self.clock.now()))
        return deleted

    def count(self, *, filter: StmFilter | None = None) -> int:
        """Live records matching `filter`, or in the whole namespace when None (footprint)."""
        return self._count(filter, self.clock.now())

    def usage(self) -> Usage:
        """Live records of the whole namespace and their payload bytes
        (`reference.footprint`) now: the layer's footprint. A read: it changes nothing."""
        return self._usage(self.clock.now())

    def flush_access(self) -> int:
        """Write the access statistics held behind the request (`reference.stm.access`);
        how many records. Reads never need it (they see buffered accesses); a sweep, a
        shutdown and a process that hands over to another call it. 0 for a backend that
        writes accesses at once."""
        return 0

    # ------------------------------------------------------------------ engine API
    def touch(
        self,
        *,
        user_id: str,
        updates: Sequence[RetentionUpdate],
        seen: Sequence[MemoryRecord] = (),
    ) -> int:
        """Count an access to each of the user's live records named in `updates`, storing
        its new `expires_at` and `importance` with it (one write); returns how many.

        `seen`: the records as a read of this store just returned them (a query's hits);
        their statistics are not read again. A record that is gone or no longer live is
        skipped: an access never resurrects.
        """
        check_id("user_id", user_id)
        checked = _check_updates(updates)
        if not checked:
            return 0
        now = self.clock.now()
        known = {r.record_id: r for r in seen}
        unknown = frozenset(u.record_id for u in checked if u.record_id not in known)
        if unknown:
            flt = StmFilter(user_id=user_id, record_ids=unknown)
            known.update((r.record_id, r) for r in self._fetch(flt, now))
        writes = [
            AccessWrite.after(record, now, update)
            for update in checked
            if (record := known.get(update.record_id)) is not None
            and record.user_id == user_id
            and record.is_live(now)
        ]
        if writes:
            self._apply_noted(WriteAccess(writes))
        return len(writes)

    def similar(
        self,
        *,
        user_id: str,
        embedding: Sequence[float] | np.ndarray,
        min_score: float,
        include_dead: bool = True,
    ) -> list[Hit[MemoryRecord]]:
        """Every record of the user in any session (expired ones too, unless
        `include_dead` is False) whose similarity to `embedding` is at least `min_score`,
        best first; nothing is touched. For forget commands, which must reach all of it."""
        flt = StmFilter(user_id=user_id, include_dead=include_dead)
        vector = self._vector("embedding", "", embedding)
        now = self.clock.now()
        total = self._count(flt, now)
        if total == 0:
            return []
        hits = self._search(vector, flt, total, now)
        return [hit for hit in hits if hit.score >= min_score]

    def scan(self, *, after: str | None = None, limit: int = 1000) -> list[MemoryRecord]:
        """Up to `limit` records of the whole namespace (every user, live or not) with
        record_id > `after`, in record_id order: the pages of a sweep."""
        if after is not None:
            check_id("after", after)
        check_k("limit", limit, limit=1_000_000)
        return self._scan(after, limit, None)

    def scan_due(
        self, *, now: float, after: str | None = None, limit: int = 1000
    ) -> DuePage[MemoryRecord]:
        """The records of the whole namespace due at `now` (`policy.next_due_at` at or
        before it: past `expires_at`, or not active), record_id > `after`, in record_id
        order, a page of at most `limit` candidates at a time: what a sweep must visit.
        A read: it changes nothing."""
        if after is not None:
            check_id("after", after)
        check_k("limit", limit, limit=1_000_000)
        if now < self.earliest_due():
            return DuePage([], None)  # nothing asked of the backend
        candidates = self._scan(after, limit, float(now))
        due = [r for r in candidates if not r.is_live(now) and r.status is not Status.DELETED]
        until = candidates[-1].record_id if len(candidates) >= limit else None
        if self.deadlines is not None:
            self.deadlines.scanned(now, after, until, {r.record_id for r in due})
        return DuePage(due, until)

    def earliest_due(self) -> float:
        """A moment before which `scan_due` finds nothing (inf: no record has a deadline),
        or -inf when this store cannot tell without a query (a sweep then looks): a
        backend's index, or the `deadlines` of a store that is its namespace's only
        writer. A read."""
        return float("-inf") if self.deadlines is None else self.deadlines.earliest()

    def purge(self, *, record_ids: Collection[str]) -> int:
        """Remove these records of the namespace, whoever owns them; returns how many
        existed. For sweeps, whose pages span users."""
        ids = sorted({check_id("record_ids", r) for r in record_ids})
        purged: int = self._apply_noted(PurgeRecords(ids)) if ids else 0
        return purged

    def dispose(self) -> None:
        """Release the client. The store is unusable afterwards."""

    def drop(self) -> None:
        """Remove everything this namespace has in the layer (its collection), then release
        connections: for throwaway namespaces (simulation shards). Unusable afterwards."""
        self.dispose()

    # ------------------------------------------------------------------ helpers
    def _apply_noted(self, op: StmWrite) -> Any:
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

    def _vector(
        self, field: str, text: str, embedding: Sequence[float] | np.ndarray | None
    ) -> np.ndarray:
        """The one vector an operation uses: the checked `embedding` (`check_embedding`,
        not copied), else the embedding of `text`, float32 or float64, never converted
        again on the way to the backend."""
        if embedding is not None:
            return check_embedding(field, embedding)
        vector = self.embedder.embed_one(text)
        return vector if vector.dtype == np.float32 else np.asarray(vector, dtype=np.float64)


def _check_updates(updates: Sequence[RetentionUpdate]) -> list[RetentionUpdate]:
    """Validated updates, the last one per record winning (one write per record)."""
    by_id: dict[str, RetentionUpdate] = {}
    for update in updates:
        if not isinstance(update, RetentionUpdate):
            raise InvalidInput("updates", f"must hold RetentionUpdate items, got {update!r}")
        check_retention(update)
        by_id[update.record_id] = update
    return list(by_id.values())


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
