"""A Chroma STM collection and a PostgreSQL LTM table record the embedder whose vectors
they hold; a store with another embedder refuses to open them, and a collection from
before the record is stamped."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from reference.embedding import CachedEmbedder, HashingEmbedder
from reference.errors import ConfigurationError
from reference.keys import Namespace
from reference.stm.base import ShortTermStore
from reference.stm.chroma_store import EMBEDDER_KEY
from tests.fixtures.ltm_backends import LTM_BACKENDS, LtmStoreFactory
from tests.fixtures.stm_backends import chroma_backend_params, chroma_client


@pytest.mark.parametrize("backend", chroma_backend_params())
def test_another_embedder_is_refused(
    backend: str, make_stm_store: Callable[..., ShortTermStore], namespace: Namespace
) -> None:
    first = make_stm_store(backend)
    first.add(user_id="u1", session_id="s1", text="I prefer window seats on long flights")
    # the same identity (a cache in front changes nothing) opens it
    same = make_stm_store(backend, embedder=CachedEmbedder(HashingEmbedder()))
    assert same.count() == 1
    with pytest.raises(ConfigurationError, match="hashing/memh-v1/d384/k3") as info:
        make_stm_store(backend, embedder=HashingEmbedder(slots_per_feature=2))
    assert namespace.stm_collection in str(info.value)
    assert "hashing/memh-v1/d384/k2" in str(info.value)


@pytest.mark.parametrize("backend", chroma_backend_params())
def test_a_collection_without_a_record_is_stamped(
    request: pytest.FixtureRequest,
    backend: str,
    make_stm_store: Callable[..., ShortTermStore],
    namespace: Namespace,
) -> None:
    client: Any = chroma_client(request, backend)
    client.create_collection(namespace.stm_collection, configuration={"hnsw": {"space": "cosine"}})
    store = make_stm_store(backend)
    metadata = client.get_collection(namespace.stm_collection).metadata
    assert metadata[EMBEDDER_KEY] == store.embedder.identity
    with pytest.raises(ConfigurationError):
        make_stm_store(backend, embedder=HashingEmbedder(dim=64))


@pytest.mark.parametrize("ltm_backend", [b for b in LTM_BACKENDS if "pg" in str(b.values[0])])
def test_the_ltm_table_records_its_embedder(ltm_store_factory: LtmStoreFactory) -> None:
    first = ltm_store_factory()
    first.setup()
    first.setup()  # idempotent
    ltm_store_factory(embedder=CachedEmbedder(HashingEmbedder())).setup()
    with pytest.raises(ConfigurationError, match="hashing/memh-v1/d384/k3"):
        ltm_store_factory(embedder=HashingEmbedder(slots_per_feature=2)).setup()
