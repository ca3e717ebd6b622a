"""The in-memory short-term store: a first-class backend and the oracle of differential tests.

Semantics are those of `ChromaShortTermStore`, down to what a test can see: vectors are
kept as float32 values (as Chroma keeps them), scores are exact cosine similarities, bit
for bit what `cosine_scores` computes (which the Chroma backend uses to rank its
candidates), ties go to the smaller record_id, and the same inputs are refused for the
same reasons.

Lifecycle: build one per process (it is not shared across processes); `dispose()` drops
the data. Thread-safe: every operation holds one lock.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import math
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import numpy as np

from reference.clock import Clock
from reference.dueindex import DueIndex
from reference.errors import InvalidInput
from reference.footprint import Usage, record_bytes
from reference.keys import Namespace
from reference.models import Hit, MemoryRecord, Status
from reference.stm.access import AccessWrite
from reference.stm.base import DEFAULT_STM_TTL_S, ShortTermStore
from reference.stm.deadlines import due_at
from reference.stm.filters import StmFilter
from reference.stm.primitives import (
    DeleteRecords,
    PurgeRecords,
    PutRecord,
    StmWrite,
    WriteAccess,
)
from reference.text_interfaces import Embedder, IntentFilter, PiiMasker

T = TypeVar("T")

_INT64 = (-(2**63), 2**63 - 1)

# --------------------------------------------------------------------------- shared rules
# Both backends apply these, so they accept, refuse and rank exactly alike. The checks
# belong in base.py/validation.py: they are inputs Chroma cannot store or cosine cannot score.


def storable_vector(field: str, embedding: Sequence[float] | np.ndarray) -> np.ndarray:
    """The embedding as float32, as Chroma stores it (a float32 array is not copied); a
    zero vector has no cosine."""
    vector = np.asarray(embedding, dtype=np.float32)
    if not np.count_nonzero(vector):  # as `.any()`, without its Python wrapper
        raise InvalidInput(field, "is the zero vector; cosine similarity is undefined")
    return vector


def storable_record(record: MemoryRecord) -> None:
    """Refuses what Chroma would store wrongly: it drops the whole metadata of a record
    with a NaN, turns ints beyond int64 into floats, and cannot encode lone surrogates."""
    _storable_str("text", record.text)
    for key, value in record.metadata.items():
        field = f"metadata.{key}"
        _storable_str("metadata", key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int) and not _INT64[0] <= value <= _INT64[1]:
            raise InvalidInput(field, f"{value} does not fit in a signed 64-bit integer")
        if isinstance(value, float) and not math.isfinite(value):
            raise InvalidInput(field, f"must be finite, got {value}")
        if isinstance(value, str):
            _storable_str(field, value)


def _storable_str(field: str, text: str) -> None:
    try:
        text.encode()
    except UnicodeEncodeError:
        raise InvalidInput(field, "contains unpaired surrogates (not valid UTF-8)") from None


def cosine_scores(vectors: np.ndarray, query: Sequence[float] | np.ndarray) -> np.ndarray:
    """Cosine similarity of each float32 row with the query, in float64.

    Row-wise sums (not a BLAS matrix product, whose summation order depends on the
    matrix shape) make a record's score the same whichever candidates it is scored with,
    so both backends rank near-ties alike.
    """
    matrix = np.asarray(vectors, dtype=np.float64).reshape(-1, len(query))
    q = np.asarray(query, dtype=np.float64)
    dots = (matrix * q).sum(axis=1)
    norms = np.sqrt((matrix * matrix).sum(axis=1)) * math.sqrt(float((q * q).sum()))
    scores: np.ndarray = np.clip(dots / norms, -1.0, 1.0)
    return scores


def top_k(scored: Iterable[tuple[float, str, T]], k: int) -> list[tuple[float, str, T]]:
    """The k best (score, record_id, item) triples: score descending, then record_id."""
    return heapq.nsmallest(k, scored, key=lambda item: (-item[0], item[1]))


# --------------------------------------------------------------------------- the store


class InMemoryShortTermStore(ShortTermStore):
    """Short-term memory in process dicts, with exact cosine top-k."""

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
        super().__init__(
            clock=clock,
            namespace=namespace,
            embedder=embedder,
            intent_filter=intent_filter,
            pii=pii,
            ttl_s=ttl_s,
            id_factory=id_factory,
        )
        self._lock = threading.RLock()
        self._by_id: dict[str, MemoryRecord] = {}
        # Each record's vector as float64 (its float32 values exactly, as Chroma keeps
        # them) with its norm: what `cosine_scores` computes for the row, done once.
        self._vectors: dict[str, tuple[np.ndarray, float]] = {}
        self._by_user: dict[str, set[str]] = {}
        self._by_scope: dict[tuple[str, str], set[str]] = {}
        # Every record by the moment a sweep must visit it (`policy.next_due_at`).
        self._due = DueIndex()
        # The footprint, kept as records come and go: payload bytes per record, and the
        # totals over active records (`_usage` takes off those past expiry).
        self._bytes: dict[str, int] = {}
        self._usage_total = [0, 0]
        # All record ids in order, for `scan`; rebuilt after an insert. Removals leave
        # stale ids behind (skipped), so a sweep, which only removes, sorts once.
        self._sorted_ids: list[str] | None = None

    # ------------------------------------------------------------------ primitives
    def _apply(self, op: StmWrite) -> Any:
        if isinstance(op, PutRecord):
            return self._put(op.record, op.embedding)
        if isinstance(op, WriteAccess):
            return self._write_access(op.writes)
        if isinstance(op, DeleteRecords):
            return self._delete(op.filter, op.now)
        if isinstance(op, PurgeRecords):
            return self._purge(op.record_ids)
        raise TypeError(f"not a short-term write: {op!r}")

    def _scan(self, after: str | None, limit: int, due_at: float | None) -> list[MemoryRecord]:
        if due_at is None:
            return self._scan_all(after, limit)
        return self._scan_due(due_at, after, limit)

    def _put(self, record: MemoryRecord, embedding: np.ndarray) -> None:
        storable_record(record)
        vector = np.asarray(embedding, dtype=np.float32).astype(np.float64)  # a copy
        # As `cosine_scores` computes a row's norm (row-wise sums are the same bits;
        # `np.add.reduce` is what `ndarray.sum` calls).
        square = float(np.add.reduce(vector * vector))
        if not square:  # float32 squares never underflow in float64: all zero
            storable_vector("embedding", embedding)  # refused as Chroma refuses it
        norm = math.sqrt(square)
        with self._lock:
            self._remove(record.record_id)
            self._sorted_ids = None
            self._by_id[record.record_id] = record
            self._vectors[record.record_id] = (vector, norm)
            self._by_user.setdefault(record.user_id, set()).add(record.record_id)
            scope = (record.user_id, record.session_id)
            self._by_scope.setdefault(scope, set()).add(record.record_id)
            self._due.set(record.record_id, due_at(record))
            self._bytes[record.record_id] = size = record_bytes(record, len(vector))
            if record.status is Status.ACTIVE:
                self._usage_total[0] += 1
                self._usage_total[1] += size

    def _search(
        self, embedding: np.ndarray, flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        # `cosine_scores` bit for bit, with each row's norm computed at `_put`, and the
        # few per-row operations in Python floats (the same IEEE operations). A session
        # holds a handful of records: numpy calls, not arithmetic, are the cost here.
        if embedding.dtype != np.float32:
            storable_vector("embedding", embedding)  # what Chroma refuses, refused alike
        with self._lock:
            matching = self._matching(flt, now)
            rows = [self._vectors[r.record_id] for r in matching]
        if not matching:
            if not np.count_nonzero(embedding):
                storable_vector("embedding", embedding)  # the zero vector: refused
            return []
        # The query rides along as the last row (float64, exactly its values): its
        # square comes out of the same pass as the dot products.
        matrix = np.array([*(vector for vector, _ in rows), embedding], dtype=np.float64)
        *dots, square = np.add.reduce(matrix * matrix[-1], 1).tolist()
        if not square:  # float32 squares never underflow in float64: the zero vector
            storable_vector("embedding", embedding)
        query_norm = math.sqrt(square)
        scored = []
        for dot, (_, norm), record in zip(dots, rows, matching, strict=True):
            score = dot / (norm * query_norm)
            score = -1.0 if score < -1.0 else 1.0 if score > 1.0 else score  # np.clip
            scored.append((score, record.record_id, record))
        return [Hit(record=record, score=score) for score, _, record in top_k(scored, k)]

    def _write_access(self, writes: list[AccessWrite]) -> None:
        with self._lock:
            for write in writes:
                record = self._by_id.get(write.record_id)
                if record is not None:
                    self._by_id[write.record_id] = write.apply(record)
                    self._due.set(write.record_id, due_at(self._by_id[write.record_id]))

    def _fetch(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        with self._lock:
            found = self._matching(flt, now)
        return sorted(found, key=lambda r: (r.created_at, r.record_id))

    def _delete(self, flt: StmFilter, now: float) -> int:
        with self._lock:
            found = self._matching(flt, now)
            for record in found:
                self._remove(record.record_id)
            return len(found)

    def _count(self, flt: StmFilter | None, now: float) -> int:
        with self._lock:
            if flt is None:
                return sum(1 for r in self._by_id.values() if r.is_live(now))
            return len(self._matching(flt, now))

    def _scan_all(self, after: str | None, limit: int) -> list[MemoryRecord]:
        with self._lock:
            if self._sorted_ids is None:
                self._sorted_ids = sorted(self._by_id)
            ids = self._sorted_ids
            start = 0 if after is None else bisect.bisect_right(ids, after)
            page: list[MemoryRecord] = []
            for record_id in itertools.islice(ids, start, None):
                record = self._by_id.get(record_id)
                if record is not None:
                    page.append(record)
                    if len(page) >= limit:
                        break
            return page

    def _scan_due(self, now: float, after: str | None, limit: int) -> list[MemoryRecord]:
        with self._lock:
            ids = sorted(self._due.due(now))
            start = 0 if after is None else bisect.bisect_right(ids, after)
            return [self._by_id[i] for i in ids[start : start + limit]]

    def earliest_due(self) -> float:
        with self._lock:
            return self._due.first()

    def _usage(self, now: float) -> Usage:
        with self._lock:
            records, size = self._usage_total
            for record_id in self._due.due(now):  # active and past expiry: not live
                record = self._by_id[record_id]
                if record.status is Status.ACTIVE:
                    records -= 1
                    size -= self._bytes[record_id]
            return Usage(records, size)

    def _purge(self, record_ids: list[str]) -> int:
        with self._lock:
            found = [r for r in record_ids if r in self._by_id]
            for record_id in found:
                self._remove(record_id)
            return len(found)

    def dispose(self) -> None:
        """Drop every record."""
        with self._lock:
            self._sorted_ids = None
            self._by_id.clear()
            self._vectors.clear()
            self._by_user.clear()
            self._by_scope.clear()
            self._due = DueIndex()
            self._bytes.clear()
            self._usage_total = [0, 0]

    # ------------------------------------------------------------------ helpers
    def _matching(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        """Records matching the filter; the caller holds the lock."""
        if flt.record_ids is not None:
            ids: Iterable[str] = flt.record_ids
        elif flt.session_id is not None:
            ids = self._by_scope.get((flt.user_id, flt.session_id), ())
        else:
            ids = self._by_user.get(flt.user_id, ())
        found = (self._by_id.get(record_id) for record_id in ids)
        return [r for r in found if r is not None and flt.matches(r, now)]

    def _remove(self, record_id: str) -> None:
        """Forget one record and its index entries; the caller holds the lock."""
        record = self._by_id.pop(record_id, None)
        if record is None:
            return
        del self._vectors[record_id]
        self._due.discard(record_id)
        size = self._bytes.pop(record_id)
        if record.status is Status.ACTIVE:
            self._usage_total[0] -= 1
            self._usage_total[1] -= size
        _discard(self._by_user, record.user_id, record_id)
        _discard(self._by_scope, (record.user_id, record.session_id), record_id)


def _discard(index: dict[T, set[str]], key: T, record_id: str) -> None:
    ids = index.get(key)
    if ids is not None:
        ids.discard(record_id)
        if not ids:
            del index[key]


__all__ = [
    "InMemoryShortTermStore",
    "cosine_scores",
    "storable_record",
    "storable_vector",
    "top_k",
]
