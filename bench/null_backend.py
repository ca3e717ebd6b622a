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
from reference.keys import Namespace
from reference.ltm.base import LongTermStore, LtmFilter
from reference.models import (
    AuditEntry,
    Category,
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
from reference.stm.access import AccessWrite
from reference.stm.base import ShortTermStore, StmFilter
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

    def _create(self, state: SessionState) -> bool:
        busy_wait(self.delay_s)
        return True

    def _get(
        self, *, user_id: str, session_id: str, now: float, refresh_until: float | None
    ) -> SessionState | None:
        busy_wait(self.delay_s)
        return self._state(user_id, session_id, now)

    def _append(
        self, *, user_id: str, session_id: str, message_id: str, now: float, refresh_until: float
    ) -> list[str] | None:
        busy_wait(self.delay_s)
        return [message_id]

    def _context(self, *, user_id: str, session_id: str, now: float) -> list[str] | None:
        busy_wait(self.delay_s)
        return []

    def _set_task_state(
        self,
        *,
        user_id: str,
        session_id: str,
        task_state: dict[str, Any],
        now: float,
        refresh_until: float,
    ) -> SessionState | None:
        busy_wait(self.delay_s)
        return self._state(user_id, session_id, now)

    def _close(self, *, user_id: str, session_id: str, now: float) -> bool:
        busy_wait(self.delay_s)
        return True

    def _delete(self, *, user_id: str, session_id: str) -> bool:
        busy_wait(self.delay_s)
        return True

    def _list_user(self, *, user_id: str, now: float) -> list[SessionState]:
        return []

    def _delete_user(self, *, user_id: str) -> int:
        return 0

    def _sweep(self, *, now: float, batch_size: int) -> int:
        return 0

    def _count(self, *, now: float) -> int:
        return 0


class NullShortTermStore(ShortTermStore):
    """Short-term memory that keeps nothing and finds nothing."""

    def __init__(self, *, delay_ms: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_ms / 1000.0

    def _put(self, record: MemoryRecord, embedding: list[float]) -> None:
        busy_wait(self.delay_s)

    def _query(
        self, embedding: list[float], flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        busy_wait(self.delay_s)
        return []

    def _write_access(self, writes: list[AccessWrite]) -> None:
        busy_wait(self.delay_s)

    def _records(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        return []

    def _delete(self, flt: StmFilter, now: float) -> int:
        return 0

    def _count(self, flt: StmFilter | None, now: float) -> int:
        return 0

    def _sweep(self, now: float, batch_size: int) -> int:
        return 0


class NullLongTermStore(LongTermStore):
    """Long-term memory that keeps nothing: upsert returns the fact it would have stored."""

    def __init__(self, *, delay_ms: float = 0.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.delay_s = delay_ms / 1000.0

    def setup(self) -> None:
        return None

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
        busy_wait(self.delay_s)
        return Fact(
            fact_id="null",
            user_id=user_id,
            category=category,
            key=key,
            value=value,
            text=text,
            version=1,
            created_at=now,
            updated_at=now,
            last_accessed_at=now,
            access_count=0,
            importance=importance,
            expires_at=expires_at,
            status=Status.ACTIVE,
        )

    def _get(self, *, user_id: str, category: Category, key: str, now: float) -> Fact | None:
        busy_wait(self.delay_s)
        return None

    def _query(
        self, embedding: list[float], flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        busy_wait(self.delay_s)
        return []

    def _archive(self, flt: LtmFilter, *, actor: str, now: float) -> int:
        return 0

    def _delete(self, flt: LtmFilter, *, actor: str, now: float) -> int:
        return 0

    def _list(self, flt: LtmFilter, now: float) -> list[Fact]:
        return []

    def _count(self, flt: LtmFilter | None, now: float) -> int:
        return 0

    def _audit_log(self, *, user_id: str, fact_id: str | None) -> list[AuditEntry]:
        return []

    def _sweep(self, *, now: float, batch_size: int, actor: str) -> int:
        return 0


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
