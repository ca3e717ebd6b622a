"""Memory systems under test: the reference, and adapters for other systems (`base.py`).

`SYSTEMS` names each; an adapter's module is imported only when asked for, so a system
whose optional extra is not installed costs nothing until it is used, and then fails
with a message naming the extra (`MissingExtra`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from memharness.systems.base import MemoryAdapter


@dataclass(frozen=True)
class SystemEntry:
    name: str
    module: str  # the adapter's module ("" for the reference: it has its own replay)
    cls: str
    extra: str | None  # the optional extra that installs it
    summary: str


SYSTEMS: dict[str, SystemEntry] = {
    e.name: e
    for e in (
        SystemEntry(
            "reference", "", "", None, "the four-layer reference (Redis, ChromaDB, pgvector)"
        ),
        SystemEntry(
            "langgraph-memory",
            "memharness.systems.langgraph_memory",
            "LangGraphMemoryAdapter",
            "langgraph",
            "LangGraph InMemoryStore (no native TTL: the harness sweeps)",
        ),
        SystemEntry(
            "langgraph-postgres",
            "memharness.systems.langgraph_postgres",
            "LangGraphPostgresAdapter",
            "langgraph",
            "LangGraph PostgresStore with its native TTL and pgvector index",
        ),
        SystemEntry(
            "mem0",
            "memharness.systems.mem0_adapter",
            "Mem0Adapter",
            "mem0",
            "mem0 (infer=False, local embedder and vector store, native expiration_date)",
        ),
    )
}


class UnknownSystem(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(f"--system: unknown system {name!r}; known: {', '.join(SYSTEMS)}")


class MissingExtra(RuntimeError):
    """The system's optional dependencies are not installed."""

    def __init__(self, entry: SystemEntry, missing: str) -> None:
        super().__init__(
            f"--system {entry.name} needs the optional extra {entry.extra!r} "
            f"(module {missing!r} is not installed): pip install -e '.[{entry.extra}]'"
        )
        self.entry = entry


def adapter_class(name: str) -> type[MemoryAdapter]:
    """The adapter class of a system other than the reference."""
    entry = SYSTEMS.get(name)
    if entry is None or not entry.module:
        raise UnknownSystem(name)
    try:
        module = importlib.import_module(entry.module)
    except ModuleNotFoundError as exc:
        if exc.name and not exc.name.startswith("memharness"):
            raise MissingExtra(entry, exc.name) from exc
        raise
    cls: type[MemoryAdapter] = getattr(module, entry.cls)
    return cls
