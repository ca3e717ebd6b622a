"""The measured systems of the bench suites, as session fixtures (registered by
bench/conftest.py): all three layers on real servers seeded at the configured sizes, the
null backend, and each further LTM table size."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from bench.config import (
    STM_SESSION,
    STM_USER,
    BenchCase,
    BenchConfig,
    size_label,
)
from bench.null_backend import build_null_system
from bench.seed import (
    drop_ltm,
    drop_redis_keys,
    drop_stm,
    pg_url,
    seed_ltm,
    seed_sessions,
    seed_stm,
)
from reference.embedding import CachedEmbedder
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.settings import Settings

#: The run's figures that the gate writes into bench.json (seeding times among them).
RUN = pytest.StashKey[dict[str, Any]]()


def record_seeding(pytestconfig: pytest.Config, what: str, seconds: float) -> None:
    """How long one part of the setup took, for bench.json's `seeding_s`."""
    pytestconfig.stash[RUN]["seeding_s"][what] = round(seconds, 3)


@pytest.fixture(scope="session")
def real_case(
    pytestconfig: pytest.Config,
    bench_config: BenchConfig,
    bench_settings: Settings,
    query_embedder: CachedEmbedder,
) -> Iterator[BenchCase]:
    """All three layers on real servers, seeded at the configured sizes."""
    sizes, rows = bench_config.sizes, bench_config.ltm_rows[0]
    started = time.perf_counter()
    strategy = bench_config.strategy
    system = build_memory_system(bench_settings, embedder=query_embedder, strategy=strategy)
    namespace = system.session.namespace
    url, handle = pg_url(bench_settings)
    record_seeding(pytestconfig, "start_servers", time.perf_counter() - started)
    try:
        mark = time.perf_counter()
        sessions = seed_sessions(system.session, count=sizes.sessions)
        record_seeding(pytestconfig, "sessions", time.perf_counter() - mark)
        stm_s = seed_stm(
            system.stm,
            user_id=STM_USER,
            session_id=STM_SESSION,
            in_session=sizes.stm_session,
            total=sizes.stm_collection,
            now=system.clock.now(),
            strategy=strategy,
        )
        record_seeding(pytestconfig, "stm", stm_s)
        ltm = seed_ltm(
            url,
            namespace,
            rows=rows,
            per_user=sizes.ltm_facts_per_user,
            now=system.clock.now(),
            strategy=strategy,
        )
        for key, value in ltm.items():
            record_seeding(pytestconfig, f"{key}@{size_label(rows)}", value)
        yield BenchCase(
            backend="real",
            system=system,
            sessions=sessions,
            ltm_rows=rows,
            ltm_users=rows // sizes.ltm_facts_per_user,
            per_user=sizes.ltm_facts_per_user,
            label=size_label(rows),
        )
    finally:
        system.dispose()  # first: it writes what it holds (STM access statistics)
        drop_redis_keys(bench_settings, namespace)
        drop_stm(bench_settings, namespace)
        drop_ltm(url, namespace)
        if handle is not None:
            handle.close()


@pytest.fixture(scope="session")
def null_case(pytestconfig: pytest.Config, bench_config: BenchConfig) -> BenchCase:
    """The null backend, with the same ids as the real case (nothing is seeded)."""
    sizes = bench_config.sizes
    delay = float(pytestconfig.getoption("--bench-null-delay-ms"))
    return BenchCase(
        backend="null",
        system=build_null_system(session_delay_ms=delay, stm_delay_ms=delay, ltm_delay_ms=delay),
        sessions=[(f"su{i % 100}", f"ss{i}") for i in range(sizes.sessions)],
        ltm_rows=0,
        ltm_users=bench_config.ltm_rows[0] // sizes.ltm_facts_per_user,
        per_user=sizes.ltm_facts_per_user,
        label="null",
    )


@pytest.fixture(scope="session")
def case(request: pytest.FixtureRequest, backend: str) -> BenchCase:
    """The system under measurement for the `backend` parameter."""
    found: BenchCase = request.getfixturevalue(f"{backend}_case")
    return found


@pytest.fixture(scope="session")
def ltm_case(
    request: pytest.FixtureRequest,
    pytestconfig: pytest.Config,
    ltm_size: str | int,
    bench_config: BenchConfig,
) -> Iterator[BenchCase]:
    """The LTM table of `ltm_size` rows: the real case's, or one more namespace seeded
    for it (dropped when the tests of that size are done)."""
    if ltm_size == "null" or ltm_size == bench_config.ltm_rows[0]:
        name = "null_case" if ltm_size == "null" else "real_case"
        found: BenchCase = request.getfixturevalue(name)
        yield found
        return
    bench_settings: Settings = request.getfixturevalue("bench_settings")
    query_embedder: CachedEmbedder = request.getfixturevalue("query_embedder")
    rows, per_user = int(ltm_size), bench_config.sizes.ltm_facts_per_user
    namespace = Namespace(f"{bench_settings.prefix}_{size_label(rows)}")
    strategy = bench_config.strategy
    system = build_memory_system(
        bench_settings, embedder=query_embedder, namespace=namespace, strategy=strategy
    )
    url, handle = pg_url(bench_settings)
    try:
        now = system.clock.now()
        seeded = seed_ltm(url, namespace, rows=rows, per_user=per_user, now=now, strategy=strategy)
        for key, value in seeded.items():
            record_seeding(pytestconfig, f"{key}@{size_label(rows)}", value)
        yield BenchCase(
            backend="real",
            system=system,
            sessions=[],
            ltm_rows=rows,
            ltm_users=rows // per_user,
            per_user=per_user,
            label=size_label(rows),
        )
    finally:
        system.dispose()  # first: it writes what it holds (STM access statistics)
        drop_stm(bench_settings, namespace)
        drop_ltm(url, namespace)
        if handle is not None:
            handle.close()
