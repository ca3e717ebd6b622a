"""LangGraph's `InMemoryStore` as a system under test (`--system langgraph-memory`).

Each user's memories live under the namespace `(<namespace>, <user id>)`, one item per
`say` (`{"text": ...}` plus the scenario's metadata), indexed on `text` with the
harness's embedder (`index={"dims", "embed", "fields"}`). The store has no TTL
(`supports_ttl` is False): the harness applies the strategy by sweeps, deleting by key
(`memharness/sim/peer_replay.py`). Search is LangGraph's own: brute-force cosine over
the namespace's vectors.

Lifecycle: `open` builds an empty store in this process (a Ray worker builds its own;
nothing of it is pickled); `close` deletes every item it wrote and drops the store.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langgraph.store.memory import InMemoryStore

from memharness.systems.base import (
    Capabilities,
    Footprint,
    Hit,
    MemoryAdapter,
    Written,
)

if TYPE_CHECKING:
    from reference.embedding import Embedder
    from reference.settings import Settings

#: Bytes of one stored vector component (LangGraph keeps Python floats; counted as the
#: float32 the embedder made, as the other systems store them).
_VECTOR_BYTES = 4


class LangGraphMemoryAdapter(MemoryAdapter):
    """LangGraph `InMemoryStore` with a vector index on the memory's text."""

    name = "langgraph-memory"
    extra = "langgraph"

    def __init__(self, *, namespace: str, embedder: Embedder) -> None:
        self.namespace = namespace
        self.embedder = embedder
        self.capabilities = Capabilities(native_expiry=None)
        self.store = InMemoryStore(
            index={"dims": embedder.dim, "embed": self._embed, "fields": ["text"]}
        )
        self._ids = itertools.count()
        #: memory id -> (user id, bytes held): the footprint, counted as items come and go.
        self._held: dict[str, tuple[str, int]] = {}
        self.now = 0.0

    @classmethod
    def open(
        cls, *, namespace: str, embedder: Embedder, settings: Settings
    ) -> LangGraphMemoryAdapter:
        return cls(namespace=namespace, embedder=embedder)

    def _embed(self, texts: Sequence[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.embedder.embed(list(texts))]

    def _ns(self, user_id: str) -> tuple[str, str]:
        return (self.namespace, user_id)

    def set_clock(self, at: float) -> None:
        self.now = at  # nothing in the store reads a clock: it never expires anything

    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float,
        metadata: dict[str, Any],
        ttl_s: float | None,
    ) -> Written:
        memory_id = f"m{next(self._ids)}"
        value = {**metadata, "text": text, "session_id": session_id, "at": at}
        self.store.put(self._ns(user_id), memory_id, value)
        size = len(text.encode()) + self.embedder.dim * _VECTOR_BYTES
        self._held[memory_id] = (user_id, size)
        return Written([memory_id])

    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        items = self.store.search(self._ns(user_id), query=query, limit=k)
        return [
            Hit(item.key, str(item.value.get("text", "")), float(item.score or 0.0))
            for item in items
            if item.namespace == self._ns(user_id)  # a prefix search: this user's alone
        ]

    def holds(self, *, user_id: str, memory_id: str) -> bool:
        return self.store.get(self._ns(user_id), memory_id) is not None

    def delete(self, *, user_id: str, memory_id: str) -> None:
        self.store.delete(self._ns(user_id), memory_id)
        held = self._held.get(memory_id)
        if held is not None and held[0] == user_id:
            del self._held[memory_id]

    def delete_user(self, *, user_id: str) -> None:
        for memory_id in [m for m, (u, _) in self._held.items() if u == user_id]:
            self.delete(user_id=user_id, memory_id=memory_id)

    def footprint(self) -> Footprint:
        return Footprint(
            memories=len(self._held), bytes=sum(size for _, size in self._held.values())
        )

    def close(self) -> None:
        for memory_id, (user_id, _) in list(self._held.items()):
            self.store.delete(self._ns(user_id), memory_id)
        self._held.clear()
