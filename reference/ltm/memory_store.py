"""The in-memory long-term store: a first-class backend and the oracle of differential tests.

Semantics are those of `PostgresLongTermStore`, down to the details a test can see:
values come back as JSONB would return them, importance is rounded as `real` is, scores
are exact cosine similarities with ties broken by fact_id, every change is audited, and
a failed change leaves neither the fact nor its audit entry.

Lifecycle: build one per process (it is not shared across processes); `setup()` and
`dispose()` do nothing. Thread-safe: every operation holds one lock from its first read
to its commit.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading

import numpy as np

from reference.clock import Clock
from reference.dueindex import DueIndex
from reference.errors import InvalidInput
from reference.footprint import Usage, record_bytes
from reference.ids import new_id
from reference.keys import Namespace
from reference.lexical import lexical_terms
from reference.ltm.base import LongTermStore
from reference.ltm.common import (
    accessed_fact,
    as_real,
    audit_draft,
    copy_fact,
    copy_json,
    copy_plain,
    nonzero_vector,
    numbered,
    storable_json,
    storable_text,
)
from reference.ltm.dispatch import MethodPerOperation
from reference.ltm.filters import AUDIT_ACTIONS, LtmFilter
from reference.ltm.memory_forgetting import InMemoryForgetting, Txn
from reference.ltm.primitives import AuditLog, UpsertFact
from reference.models import AuditEntry, Category, Fact, Hit, Status
from reference.policy.sweep import sealed_at
from reference.text_interfaces import Embedder


class InMemoryLongTermStore(MethodPerOperation, InMemoryForgetting, LongTermStore):
    """Long-term facts in dicts, with exact cosine search over each user's vectors."""

    def __init__(self, *, clock: Clock, namespace: Namespace, embedder: Embedder) -> None:
        super().__init__(clock=clock, namespace=namespace, embedder=embedder)
        self._lock = threading.RLock()
        self._facts: dict[str, Fact] = {}
        # Each fact's vector as float64 (its float32 values exactly, as pgvector keeps
        # them): a query stacks them without converting.
        self._vectors: dict[str, np.ndarray] = {}
        # Each vector's squared norm, summed as a query sums it (`_search`).
        self._squares: dict[str, float] = {}
        # Each fact's searchable terms (`reference.lexical`), from its text.
        self._terms: dict[str, frozenset[str]] = {}
        self._by_key: dict[tuple[str, Category, str], str] = {}
        self._by_user: dict[str, set[str]] = {}
        self._audit: list[AuditEntry] = []
        # Positions in the audit log by fact and by user: erasure and sweeps rewrite the
        # entries of a few facts without walking the whole log.
        self._audit_by_fact: dict[str, list[int]] = {}
        self._audit_by_user: dict[str, list[int]] = {}
        self._next_audit_id = 1
        self._last_active_at: dict[str, float] = {}
        self._activity_order: list[tuple[float, str]] = []  # (last_active_at, user), sorted
        # The due index (`policy.next_due_at`), one heap per deadline a fact can have; a
        # sweep's rule says how long after each the fact falls due.
        self._due_expiry = DueIndex()  # expires_at
        self._due_archived = DueIndex()  # updated_at of an archived fact
        self._due_sealed = DueIndex()  # when its value was sealed
        # The footprint, kept as facts come and go: totals over active facts (`_usage`
        # takes off those past expiry), and each stored fact's payload bytes.
        self._bytes: dict[str, int] = {}
        self._usage_total = [0, 0]
        # Every fact_id in order, for `scan`; rebuilt after an insert. Deletions leave
        # stale ids behind (skipped), so a sweep, which only removes, sorts once.
        self._sorted_ids: list[str] | None = None

    # ------------------------------------------------------------------ transactions
    def _write_audit(self, txn: Txn, entries: list[AuditEntry]) -> None:
        """Stage audit entries; the hook tests use to make a change fail half-way."""
        for entry in entries:
            # Mirrors the CHECK constraint on the audit table.
            if entry.action not in AUDIT_ACTIONS:
                raise InvalidInput("action", f"unknown audit action {entry.action!r}")
            txn.audit.append(entry)

    def _commit(self, txn: Txn) -> None:
        # Only dict and list updates from here on: nothing that can fail half-way.
        for fact_id in txn.deletes:
            fact = self._facts.pop(fact_id)
            self._count_usage(fact, -1)
            del self._bytes[fact_id]
            for index in (self._due_expiry, self._due_archived, self._due_sealed):
                index.discard(fact_id)
            del self._vectors[fact_id]
            del self._squares[fact_id]
            self._terms.pop(fact_id, None)
            del self._by_key[(fact.user_id, fact.category, fact.key)]
            owned = self._by_user[fact.user_id]
            owned.discard(fact_id)
            if not owned:
                del self._by_user[fact.user_id]
        for fact_id, (fact, vector) in txn.puts.items():
            prior = self._facts.get(fact_id)
            if prior is None:
                self._sorted_ids = None
            else:
                self._count_usage(prior, -1)
            self._facts[fact_id] = fact
            if vector is not None:
                self._vectors[fact_id] = vector
                self._squares[fact_id] = float(np.add.reduce(vector * vector))
            self._bytes[fact_id] = record_bytes(fact, self._vectors[fact_id].size)
            self._count_usage(fact, 1)
            self._by_key[(fact.user_id, fact.category, fact.key)] = fact_id
            self._by_user.setdefault(fact.user_id, set()).add(fact_id)
            self._index_due(fact)
        for position, entry in txn.audit_rewrites.items():
            self._audit[position] = entry
        for entry in txn.audit:
            position = len(self._audit)
            self._audit.append(numbered(entry, self._next_audit_id))
            self._audit_by_fact.setdefault(entry.fact_id, []).append(position)
            self._audit_by_user.setdefault(entry.user_id, []).append(position)
            self._next_audit_id += 1

    def _count_usage(self, fact: Fact, sign: int) -> None:
        if fact.status is Status.ACTIVE:
            self._usage_total[0] += sign
            self._usage_total[1] += sign * self._bytes[fact.fact_id]

    def _usage(self, now: float) -> Usage:
        with self._lock:
            records, size = self._usage_total
            for fact_id in self._due_expiry.due(now):  # active and past expiry: not live
                if self._facts[fact_id].status is Status.ACTIVE:
                    records -= 1
                    size -= self._bytes[fact_id]
            return Usage(records, size)

    def _index_due(self, fact: Fact) -> None:
        """Index a stored fact by each deadline it has (the caller holds the lock)."""
        live = fact.status is not Status.DELETED
        self._due_expiry.set(fact.fact_id, fact.expires_at if live else None)
        archived = fact.updated_at if fact.status is Status.ARCHIVED else None
        self._due_archived.set(fact.fact_id, archived)
        self._due_sealed.set(fact.fact_id, sealed_at(fact) if live else None)

    # ------------------------------------------------------------------ primitives
    def _upsert(self, op: UpsertFact) -> Fact:
        (
            user_id,
            category,
            key,
            value,
            text,
            importance,
            expires_at,
            actor,
            embedding,
            now,
            cause,
        ) = op
        encoded = storable_json("value", value)
        storable_text("key", key)
        storable_text("text", text)
        vector = nonzero_vector("embedding", embedding).astype(np.float64)  # a copy
        terms = frozenset(lexical_terms(text))
        # As JSONB returns it; the audit entry gets its own copy (a JSON round trip).
        stored = json.loads(encoded)
        with self._lock:
            txn = Txn()
            prior_id = self._by_key.get((user_id, category, key))
            prior = self._facts[prior_id] if prior_id is not None else None
            if prior is None:
                fact = Fact(
                    fact_id=new_id(),
                    user_id=user_id,
                    category=category,
                    key=key,
                    value=stored,
                    text=text,
                    version=1,
                    created_at=now,
                    updated_at=now,
                    last_accessed_at=now,
                    access_count=0,
                    importance=as_real(importance),
                    expires_at=expires_at,
                    status=Status.ACTIVE,
                )
                action, old_value = "insert", None
            else:
                # Access statistics survive a new value: restating is not reading.
                fact = Fact(
                    fact_id=prior.fact_id,
                    user_id=prior.user_id,
                    category=prior.category,
                    key=prior.key,
                    value=stored,
                    text=text,
                    version=prior.version + 1,
                    created_at=prior.created_at,
                    updated_at=now,
                    last_accessed_at=prior.last_accessed_at,
                    access_count=prior.access_count,
                    importance=as_real(importance),
                    expires_at=expires_at,
                    status=Status.ACTIVE,
                )
                # Stored values are JSON-normalised: a structural copy is a JSON round trip.
                action, old_value = "update", copy_plain(prior.value)
            txn.puts[fact.fact_id] = (fact, vector)
            self._write_audit(
                txn,
                [audit_draft(fact, action, actor, now, old_value, copy_plain(stored), cause)],
            )
            self._commit(txn)
            self._terms[fact.fact_id] = terms
            return copy_fact(fact)

    def _fetch(self, flt: LtmFilter, now: float, *, touch: bool) -> list[Fact]:
        with self._lock:
            found = self._matching(flt, now)
            if touch:
                found = [self._touch(fact.fact_id, now) for fact in found]
            return [copy_fact(fact) for fact in found]

    def _search(
        self, embedding: np.ndarray, flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        # pgvector compares in float32: the query is rounded as `vector` rounds it.
        query = (
            embedding if embedding.dtype == np.float32 else nonzero_vector("embedding", embedding)
        )
        with self._lock:
            owned = self._by_user.get(flt.user_id, ())
            candidates = [fid for fid in owned if flt.matches(self._facts[fid], now)]
            if not candidates:
                if not np.count_nonzero(query):
                    nonzero_vector("embedding", embedding)  # the zero vector: refused
                return []
            # The query rides along as the last row (float64, exactly its float32
            # values): its square comes out of the same pass as the dot products.
            # Row-wise sums, not BLAS: equal vectors must get bit-equal scores (ties).
            # (`np.add.reduce` is what `ndarray.sum` calls.)
            # A row's squared norm is summed once, when it is stored (row-wise sums of
            # one row or of many are the same bits).
            matrix = np.array([*(self._vectors[fid] for fid in candidates), query], np.float64)
            *dots, square = np.add.reduce(matrix * matrix[-1], 1).tolist()
            norms = [self._squares[fid] for fid in candidates]
            if not square:  # float32 squares never underflow in float64: a zero vector
                nonzero_vector("embedding", embedding)  # refused as PostgreSQL refuses it
            # pgvector clamps the similarity to [-1, 1] and returns 1 - it as the distance.
            # Per row in Python floats: the IEEE operations numpy would do, without the
            # overhead of numpy calls on a few dozen values.
            distances = []
            for dot, norm in zip(dots, norms, strict=True):
                similarity = dot / math.sqrt(norm * square)
                similarity = -1.0 if similarity < -1.0 else 1.0 if similarity > 1.0 else similarity
                distances.append(1.0 - similarity)
            ranked = sorted(zip(distances, candidates, strict=True))[:k]
            return [
                Hit(
                    record=copy_fact(self._touch(fid, now) if touch else self._facts[fid]),
                    score=1.0 - d,
                )
                for d, fid in ranked
            ]

    def _lexical_matches(
        self, terms: list[str], flt: LtmFilter, now: float
    ) -> tuple[int, list[tuple[str, list[str]]]]:
        with self._lock:
            owned = self._by_user.get(flt.user_id, ())
            matching = [fid for fid in owned if flt.matches(self._facts[fid], now)]
            out = []
            for fid in matching:
                held = [term for term in terms if term in self._terms[fid]]
                if held:
                    out.append((fid, held))
            return len(matching), out

    def _archive(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        with self._lock:
            txn = Txn()
            entries = []
            for fact in self._matching(flt, now):
                if fact.status is not Status.ACTIVE:
                    continue
                archived = dataclasses.replace(
                    fact, status=Status.ARCHIVED, updated_at=now, archive_reason=cause
                )
                txn.puts[fact.fact_id] = (archived, None)
                entries.append(audit_draft(archived, "archive", actor, now, None, None, cause))
            self._write_audit(txn, entries)
            self._commit(txn)
            return len(entries)

    def _delete(self, flt: LtmFilter, *, actor: str, now: float, cause: str) -> int:
        with self._lock:
            facts = self._matching(flt, now)
            txn = Txn()
            txn.deletes.extend(fact.fact_id for fact in facts)
            entries = [
                audit_draft(fact, "delete", actor, now, copy_json(fact.value), None, cause)
                for fact in facts
            ]
            self._write_audit(txn, entries)
            self._commit(txn)
            return len(facts)

    def _count(self, flt: LtmFilter | None, now: float) -> int:
        with self._lock:
            if flt is None:
                return sum(1 for fact in self._facts.values() if fact.is_live(now))
            owned = self._by_user.get(flt.user_id, ())
            return sum(1 for fid in owned if flt.matches(self._facts[fid], now))

    def _audit_log(self, op: AuditLog) -> list[AuditEntry]:
        with self._lock:
            if op.user_id is None:
                entries: list[AuditEntry] = self._audit
            else:
                entries = self._audit_entries(op.user_id, op.fact_id)
            return [
                dataclasses.replace(
                    e, old_value=copy_json(e.old_value), new_value=copy_json(e.new_value)
                )
                for e in entries
                if op.since <= e.at <= op.until
            ]

    # ------------------------------------------------------------------ helpers
    def _audit_entries(self, user_id: str, fact_id: str | None) -> list[AuditEntry]:
        """The user's audit entries (of one fact), oldest first; the caller holds the lock."""
        if fact_id is None:
            positions = self._audit_by_user.get(user_id, [])
        else:
            positions = self._audit_by_fact.get(fact_id, [])
        entries = (self._audit[i] for i in positions)
        return [e for e in entries if e.user_id == user_id]

    def _matching(self, flt: LtmFilter, now: float) -> list[Fact]:
        if flt.categories is not None and flt.keys is not None:  # by the unique key
            user = flt.user_id
            ids = (self._by_key.get((user, c, k)) for c in flt.categories for k in flt.keys)
            facts = [self._facts[fid] for fid in ids if fid is not None]
        else:
            facts = [self._facts[fid] for fid in self._by_user.get(flt.user_id, ())]
        return sorted(
            (fact for fact in facts if flt.matches(fact, now)),
            key=lambda fact: (fact.created_at, fact.fact_id),
        )

    def _touch(self, fact_id: str, now: float) -> Fact:
        touched = accessed_fact(self._facts[fact_id], now)
        self._facts[fact_id] = touched
        return touched


__all__ = [
    "InMemoryLongTermStore",
    "as_real",
    "audit_draft",
    "nonzero_vector",
    "storable_json",
    "storable_text",
]
