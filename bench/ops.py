"""The layer operations the suites time, each as a turn does it under the system's strategy.

A turn does not call the stores bare: its forgetting engine adds the strategy's work.
These functions are that work around one store call, so the measured call is what a turn
pays for it:

- `stm_add`: the record gets the strategy's deadline for its type (`stm_expiry`);
- `stm_retrieve`, `ltm_retrieve`: the query is embedded (through the system's cached
  embedder), then the engine retrieves: over-fetch and decay re-rank when the strategy
  decays, and the access write when a rule reads access statistics (`touch=True`, as a
  turn's retrieval);
- `ltm_upsert`: the value is sealed when the strategy encrypts PII, and gets the
  strategy's deadline for its category (`ltm_expires_at`), as a promotion writes it.

On the null backend (no engine: its stores do not support forgetting) each is the bare
store call on the embedded vector: the harness's own overhead, as before strategies.
"""

from __future__ import annotations

from typing import Any

from reference.models import Category, Fact, Hit, MemoryRecord, MemoryType
from reference.stm.base import AddResult
from reference.system import MemorySystem

STM_KIND = MemoryType.INSTRUCTION  # the seeded and added texts: "Please remember ..."


def stm_add(system: MemorySystem, *, user_id: str, session_id: str, text: str) -> AddResult:
    engine = system.engine
    expiry: dict[str, Any] = {} if engine is None else engine.stm_expiry(STM_KIND)
    return system.stm.add(
        user_id=user_id, session_id=session_id, text=text, type=STM_KIND, force=True, **expiry
    )


def stm_retrieve(
    system: MemorySystem, *, user_id: str, session_id: str, text: str, k: int = 5
) -> list[Hit[MemoryRecord]]:
    vector = system.embedder.embed_one(text)
    if system.engine is None:
        return system.stm.query(
            user_id=user_id, session_id=session_id, embedding=vector, k=k, touch=False
        )
    return system.engine.retrieve_stm(
        user_id=user_id, session_id=session_id, embedding=vector, k=k, touch=True
    )


def ltm_retrieve(system: MemorySystem, *, user_id: str, text: str, k: int = 5) -> list[Hit[Fact]]:
    vector = system.embedder.embed_one(text)
    if system.engine is None:
        return system.ltm.query(user_id=user_id, embedding=vector, k=k)
    return system.engine.retrieve_ltm(user_id=user_id, embedding=vector, k=k, touch=True, text=text)


def ltm_upsert(
    system: MemorySystem,
    *,
    user_id: str,
    category: Category,
    key: str,
    value: dict[str, Any],
    text: str,
) -> Fact:
    engine = system.engine
    if engine is None:
        return system.ltm.upsert(
            user_id=user_id, category=category, key=key, value=value, text=text
        )
    stored = engine.seal(user_id=user_id, category=category, key=key, value=value)
    return system.ltm.upsert(
        user_id=user_id,
        category=category,
        key=key,
        value=stored,
        text=text,
        actor="promotion",
        expires_at=engine.ltm_expires_at(category),
    )
