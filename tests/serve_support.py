"""Builders shared by the service's tests: a system, a keys file, a client on the app."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from memharness.serve.app import create_app
from memharness.serve.auth import KeyStore
from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.settings import Settings
from reference.system import MemorySystem
from tests.conftest import T0

KEY = generate_key()


def memory_system(prefix: str, tmp_path: Path, *, strategy: str = "hybrid") -> MemorySystem:
    """A system on the in-memory backends with the hashing embedder and a virtual clock."""
    settings = Settings(backend="memory", data_dir=tmp_path, prefix=prefix, encryption_key=KEY)
    return build_memory_system(
        settings,
        clock=VirtualClock(T0),
        embedder=HashingEmbedder(),
        namespace=Namespace(prefix),
        strategy=strategy,
    )


def client_for(system: MemorySystem, keys: KeyStore, **options: Any) -> TestClient:
    return TestClient(create_app(system, keys, **options), raise_server_exceptions=True)


def auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}
