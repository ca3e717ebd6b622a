"""One registry of backends: layer -> backend name -> "module:Class", imported lazily.

Importing a backend pulls in its client library (redis, chromadb, psycopg), so nothing
is imported until a backend is asked for by name.
"""

from __future__ import annotations

import importlib
from typing import Any

from reference.errors import InvalidInput

BACKENDS: dict[str, dict[str, str]] = {
    "session": {
        "memory": "reference.session.memory_store:InMemorySessionStore",
        "redis": "reference.session.redis_store:RedisSessionStore",
    },
    "stm": {
        "memory": "reference.stm.memory_store:InMemoryShortTermStore",
        "chroma": "reference.stm.chroma_store:ChromaShortTermStore",
    },
    "ltm": {
        "memory": "reference.ltm.memory_store:InMemoryLongTermStore",
        "postgres": "reference.ltm.postgres_store:PostgresLongTermStore",
    },
}


def load_backend(layer: str, name: str) -> Any:
    """The class registered for `layer` under `name`."""
    try:
        target = BACKENDS[layer][name]
    except KeyError:
        known = ", ".join(f"{lay}:{n}" for lay, names in BACKENDS.items() for n in names)
        raise InvalidInput(
            "backend", f"no {layer!r} backend named {name!r}; known: {known}"
        ) from None
    module_name, _, class_name = target.partition(":")
    return getattr(importlib.import_module(module_name), class_name)
