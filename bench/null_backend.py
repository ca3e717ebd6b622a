"""Backends that do nothing, to measure the harness's own overhead, and slowed variants.

A null store implements its layer's ABC with primitives that return at once (an empty
result, or the record just built), so timing one of its public calls measures what the
harness and the layer's shared code cost: the benchmark loop, validation, PII masking of
inputs, building the returned record. Subtract it from, or report it beside, the real
backend's figures.

`delay_ms` turns a null store into a *slowed* one: every primitive busy-waits that long
(busy, not `sleep`, so the delay is exact and does not depend on the scheduler's timer
slack). A test uses it to show that the SLA gate fails on a backend that breaches an SLA.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np

from reference.clock import Clock, SystemClock
from reference.footprint import Usage
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.ltm.filters import FactChangeCounts, LtmFilter
from reference.ltm.primitives import (
    ApplyChanges,
    AuditLog,
    DueScan,
    LtmLookup,
    LtmWrite,
    UpsertFact,
)
from reference.models import (
    Fact,
    Hit,
    MemoryRecord,
    SessionState,
    SessionStatus,
    Status,
)
from reference.pii import RegexPiiMasker
from reference.policy.intent import RuleIntentFilter
from reference.session.base import SessionStore
from reference.session.primitives import (
    AppendMessage,
    DeleteUserSessions,
    ListSessions,
    ReadContext,
    ReadSession,
    SessionOp,
    SetTaskState,
)
from reference.stm.base import ShortTermStore
from reference.stm.filters import StmFilter
from reference.stm.primitives import PutRecord, StmWrite, WriteAccess
from reference.system import MemorySystem
from reference.text_interfaces import Embedder


def busy_wait(delay_s: float) -> None:
    """Spin for `delay_s` seconds (a stand-in for a backend doing work)."""
    if delay_s <= 0:
        return
    end = time.perf_counter() + delay_s
    while time.perf_counter() < end:
        pass


def slowed(target: Callable[..., object], delay_ms: float) -> Callable[..., object]:
    """`target`, each call of it busy-waiting `delay_ms` first (`--bench-slow`)."""

    def call(*args: Any, **kwargs: Any) -> object:
        busy_wait(delay_ms / 1000.0)
        return target(*args, **kwargs)

    return call


class NullSessionStore(SessionStore):
    """Sessions that are never stored: every read finds a fresh open session."""

    def __init__(self, *, delay_ms: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_ms / 1000.0

    def _state(self, user_id: str, session_id: str, now: float) -> SessionState:
        return SessionState(
            session_id=session_id,
            user_id=user_id,
            channel="web",
            started_at=now,
            last_active_at=now,
            expires_at=now + self.ttl_s,
            status=SessionStatus.ACTIVE,
        )

    def _apply(self, op: SessionOp) -> Any:
        if isinstance(op, ListSessions):
            return []
        if isinstance(op, DeleteUserSessions):
            return 0
        busy_wait(self.delay_s)
        if isinstance(op, ReadSession | SetTaskState):
            return self._state(op.user_id, op.session_id, op.now)
        if isinstance(op, AppendMessage):
            return [op.message_id]
        if isinstance(op, ReadContext):
            return []
        return True  # create, close, reset, delete

    def _sweep(self, now: float, batch_size: int) -> int:
        return 0

    def _count(self, now: float) -> int:
        return 0

    def _usage(self, now: float) -> Usage:
        return Usage(0, 0)


class NullShortTermStore(ShortTermStore):
    """Short-term memory that keeps nothing and finds nothing."""

    def __init__(self, *, delay_ms: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_ms / 1000.0

    def _apply(self, op: StmWrite) -> Any:
        if isinstance(op, PutRecord | WriteAccess):
            busy_wait(self.delay_s)
            return None
        return 0

    def _search(
        self, embedding: Any, flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        busy_wait(self.delay_s)
        return []

    def _fetch(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        return []

    def _count(self, flt: StmFilter | None, now: float) -> int:
        return 0

    def _scan(self, after: str | None, limit: int, due_at: float | None) -> list[MemoryRecord]:
        return []


class NullLongTermStore(LongTermStore):
    """Long-term memory that keeps nothing: upsert returns the fact it would have stored."""

    def __init__(self, *, delay_ms: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_ms / 1000.0

    def _apply(self, op: LtmWrite) -> Any:
        if not isinstance(op, UpsertFact):
            return FactChangeCounts() if isinstance(op, ApplyChanges) else 0
        busy_wait(self.delay_s)
        return Fact(
            fact_id="null",
            user_id=op.user_id,
            category=op.category,
            key=op.key,
            value=op.value,
            text=op.text,
            version=1,
            created_at=op.now,
            updated_at=op.now,
            last_accessed_at=op.now,
            access_count=0,
            importance=op.importance,
            expires_at=op.expires_at,
            status=Status.ACTIVE,
        )

    def _fetch(self, flt: LtmFilter, now: float, *, touch: bool) -> list[Fact]:
        if touch:  # `get`, a timed operation
            busy_wait(self.delay_s)
        return []

    def _search(
        self, embedding: Any, flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        busy_wait(self.delay_s)
        return []

    def _count(self, flt: LtmFilter | None, now: float) -> int:
        return 0

    def _scan(self, after: str | None, limit: int, due: DueScan | None) -> list[Fact]:
        return []

    def _lookup(self, op: LtmLookup) -> Any:
        return [] if isinstance(op, AuditLog) else {}


class NullEmbedder(Embedder):
    """The same unit vector for every text: no model, no hashing."""

    name = "null"

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self._row = np.zeros(dim, dtype=np.float32)
        self._row[0] = 1.0

    def embed(self, texts: Any) -> np.ndarray:
        return np.tile(self._row, (len(texts), 1))

    def embed_one(self, text: str) -> np.ndarray:
        return self._row


def build_null_system(
    *,
    clock: Clock | None = None,
    session_delay_ms: float = 0.0,
    stm_delay_ms: float = 0.0,
    ltm_delay_ms: float = 0.0,
    prefix: str = "null",
) -> MemorySystem:
    """A `MemorySystem` on the null stores (optionally slowed per layer).

    PII masking, the intent filter and promotion are the real ones: they are part of a
    turn whatever the backend, so the null turn is the turn minus backends and model.
    """
    clock = clock or SystemClock()
    namespace = Namespace(prefix)
    embedder = NullEmbedder()
    pii = RegexPiiMasker()
    return MemorySystem(
        clock=clock,
        session=NullSessionStore(
            clock=clock, namespace=namespace, pii=pii, delay_ms=session_delay_ms
        ),
        stm=NullShortTermStore(
            clock=clock,
            namespace=namespace,
            embedder=embedder,
            intent_filter=RuleIntentFilter(),
            pii=pii,
            delay_ms=stm_delay_ms,
        ),
        ltm=NullLongTermStore(
            clock=clock, namespace=namespace, embedder=embedder, delay_ms=ltm_delay_ms
        ),
        embedder=embedder,
        pii=pii,
    )
