"""LangGraph's PostgresStore as a system under test: its native TTL on the virtual clock.

On the session's embedded PostgreSQL (pgserver, with pgvector), with the hashing
embedder. Time only moves by `set_clock`/`at`: nothing sleeps.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from memharness.systems import adapter_class
from memharness.systems.langgraph_postgres import (
    LangGraphPostgresAdapter,
    schema_name,
    ttl_minutes,
)
from reference.errors import InvalidInput
from reference.ltm.embedded_pg import EmbeddedPostgres
from reference.settings import Settings
from reference.text_interfaces import Embedder
from tests.conftest import T0

Open = Callable[..., LangGraphPostgresAdapter]


@pytest.fixture
def settings(data_dir: Path, embedded_pg: EmbeddedPostgres) -> Settings:
    """Settings whose embedded PostgreSQL is the session's (held by `embedded_pg`)."""
    return Settings(data_dir=data_dir)


@pytest.fixture
def open_adapter(settings: Settings, embedder: Embedder) -> Iterator[Open]:
    """Opens adapters in fresh namespaces; closes whatever the test left open."""
    opened: list[LangGraphPostgresAdapter] = []

    def _open(**options: Any) -> LangGraphPostgresAdapter:
        namespace = options.pop("namespace", f"t{uuid.uuid4().hex[:10]}")
        adapter = LangGraphPostgresAdapter.open(
            namespace=namespace, embedder=embedder, settings=settings, **options
        )
        opened.append(adapter)
        return adapter

    yield _open
    for adapter in opened:
        adapter.close()


def _add(
    adapter: LangGraphPostgresAdapter,
    text: str,
    *,
    user: str = "alice",
    at: float = T0,
    ttl_s: float | None = None,
) -> str:
    written = adapter.add(
        user_id=user, session_id="s1", text=text, at=at, metadata={"n": 1}, ttl_s=ttl_s
    )
    assert len(written.memory_ids) == 1
    return written.memory_ids[0]


def _expires_at(adapter: LangGraphPostgresAdapter, key: str) -> float | None:
    row = adapter.store.conn.execute(  # type: ignore[union-attr]
        "SELECT expires_at FROM store WHERE key = %s", (key,)
    ).fetchone()
    assert row is not None
    value = row["expires_at"]
    return None if value is None else float(value.timestamp())


def test_registry_opens_it_and_it_says_what_it_does(open_adapter: Open) -> None:
    assert adapter_class("langgraph-postgres") is LangGraphPostgresAdapter
    adapter = open_adapter(refresh_on_read=False, omit_expired=True)
    native = adapter.capabilities.native_expiry
    assert native is not None
    assert (native.granularity_s, native.expired, native.clock) == (60.0, "hidden", "virtual")
    assert native.refresh_on_read is False
    default = open_adapter().capabilities.native_expiry
    assert default is not None and default.refresh_on_read and default.expired == "readable"


def test_search_returns_only_the_users_own_memories(open_adapter: Open) -> None:
    a, b = open_adapter(), open_adapter()
    paris = _add(a, "I live in Paris", user="alice")
    _add(a, "I live in Rome", user="bob")
    _add(b, "I live in Oslo", user="alice")  # same user id, another instance
    _add(a, "I live in Lima", user="alice.x")  # dots are escaped, not namespace levels
    hits = a.search(user_id="alice", query="where do I live", k=10, at=T0)
    assert [h.memory_id for h in hits] == [paris]
    assert hits[0].text == "I live in Paris" and 0.0 < hits[0].score <= 1.0 + 1e-6
    assert [h.text for h in b.search(user_id="alice", query="live", k=10, at=T0)] == [
        "I live in Oslo"
    ]
    assert a.search(user_id="carol", query="live", k=10, at=T0) == []


def test_search_ranks_by_similarity(open_adapter: Open) -> None:
    adapter = open_adapter()
    _add(adapter, "my dog is called Rex")
    cat = _add(adapter, "my cat is called Tom")
    hits = adapter.search(user_id="alice", query="what is my cat called", k=1, at=T0)
    assert [h.memory_id for h in hits] == [cat]


def test_ttl_is_computed_on_the_virtual_clock_in_whole_minutes(open_adapter: Open) -> None:
    adapter = open_adapter()
    key = _add(adapter, "short lived", at=T0, ttl_s=61)  # rounds up to 2 minutes
    kept = _add(adapter, "kept", at=T0)
    assert _expires_at(adapter, key) == T0 + 120
    assert _expires_at(adapter, kept) is None
    assert ttl_minutes(60) == 1 and ttl_minutes(60.001) == 2 and ttl_minutes(None) is None
    assert ttl_minutes(120.0000001) == 2
    with pytest.raises(InvalidInput, match="ttl_s"):
        ttl_minutes(float("inf"))
    # The server's own clock is untouched on other connections.
    with psycopg.connect(adapter_url(adapter)) as other:
        row = other.execute("SELECT now()").fetchone()
    assert row is not None and abs(row[0].timestamp() - datetime.now(UTC).timestamp()) < 300


def adapter_url(adapter: LangGraphPostgresAdapter) -> str:
    info = adapter.store.conn.info  # type: ignore[union-attr]
    return f"host={info.host} port={info.port} user={info.user} dbname={info.dbname}"


def test_expired_memories_stay_readable_until_a_sweep_deletes_them(open_adapter: Open) -> None:
    adapter = open_adapter(refresh_on_read=False, sweep_interval_minutes=0)
    key = _add(adapter, "my locker code is 4411", at=T0, ttl_s=60)
    assert adapter.sweep(T0 + 59) == 0 and adapter.holds(user_id="alice", memory_id=key)
    # Expired (T0 + 60) but not swept: LangGraph's default (omit_expired=False) returns it.
    hits = adapter.search(user_id="alice", query="locker code", k=5, at=T0 + 3600)
    assert [h.memory_id for h in hits] == [key]
    assert adapter.sweep(T0 + 3600) == 1
    assert not adapter.holds(user_id="alice", memory_id=key)
    assert adapter.search(user_id="alice", query="locker code", k=5, at=T0 + 3601) == []
    assert adapter.footprint().memories == 0


def test_omit_expired_hides_until_the_sweep(open_adapter: Open) -> None:
    adapter = open_adapter(refresh_on_read=False, omit_expired=True, sweep_interval_minutes=0)
    key = _add(adapter, "my locker code is 4411", at=T0, ttl_s=60)
    assert len(adapter.search(user_id="alice", query="locker", k=5, at=T0 + 59)) == 1
    assert adapter.search(user_id="alice", query="locker", k=5, at=T0 + 61) == []
    assert adapter.holds(user_id="alice", memory_id=key)  # hidden, still kept
    assert adapter.sweep(T0 + 61) == 1
    assert not adapter.holds(user_id="alice", memory_id=key)


@pytest.mark.parametrize("refresh", [True, False])
def test_refresh_on_read_restarts_the_ttl(open_adapter: Open, refresh: bool) -> None:
    adapter = open_adapter(refresh_on_read=refresh, sweep_interval_minutes=0)
    key = _add(adapter, "my gate code is 9090", at=T0, ttl_s=60)
    assert len(adapter.search(user_id="alice", query="gate code", k=5, at=T0 + 50)) == 1
    assert _expires_at(adapter, key) == (T0 + 110 if refresh else T0 + 60)
    assert adapter.sweep(T0 + 100) == (0 if refresh else 1)
    assert adapter.holds(user_id="alice", memory_id=key) is refresh
    assert adapter.sweep(T0 + 111) == (1 if refresh else 0)
    assert not adapter.holds(user_id="alice", memory_id=key)


def test_a_probe_search_refreshes_nothing(open_adapter: Open) -> None:
    """A read-only (probe) search passes refresh_ttl=False: measuring changes nothing."""
    adapter = open_adapter(refresh_on_read=True, sweep_interval_minutes=0)
    key = _add(adapter, "my gate code is 9090", at=T0, ttl_s=60)
    hits = adapter.search(user_id="alice", query="gate code", k=5, at=T0 + 50, read_only=True)
    assert [h.memory_id for h in hits] == [key]
    assert _expires_at(adapter, key) == T0 + 60
    assert adapter.sweep(T0 + 61) == 1


def test_reading_an_expired_unswept_memory_revives_it(open_adapter: Open) -> None:
    """LangGraph's refresh applies to every row a search returns, expired ones too (with
    omit_expired=False): a memory read between its expiry and the sweep lives again."""
    adapter = open_adapter(refresh_on_read=True, sweep_interval_minutes=0)
    key = _add(adapter, "my gate code is 9090", at=T0, ttl_s=60)
    hits = adapter.search(user_id="alice", query="gate code", k=5, at=T0 + 3600)
    assert [h.memory_id for h in hits] == [key]
    assert _expires_at(adapter, key) == T0 + 3660
    assert adapter.sweep(T0 + 3601) == 0
    assert adapter.holds(user_id="alice", memory_id=key)


def test_holds_and_footprint_are_read_only(open_adapter: Open) -> None:
    adapter = open_adapter(refresh_on_read=True, sweep_interval_minutes=0)
    key = _add(adapter, "my gate code is 9090", at=T0, ttl_s=60)
    adapter.set_clock(T0 + 50)
    for _ in range(3):
        assert adapter.holds(user_id="alice", memory_id=key)
        adapter.footprint()
    assert _expires_at(adapter, key) == T0 + 60
    assert not adapter.holds(user_id="bob", memory_id=key)
    assert not adapter.holds(user_id="alice", memory_id="no-such-id")
    assert adapter.sweep(T0 + 61) == 1


def test_sweeps_follow_the_interval_on_virtual_time(open_adapter: Open) -> None:
    adapter = open_adapter(sweep_interval_minutes=5)
    key = _add(adapter, "temporary", at=T0, ttl_s=60)
    assert adapter.sweep(T0) == 0  # the first call sweeps (nothing due)
    assert adapter.sweep(T0 + 299) == 0  # within the interval: no sweep yet
    assert adapter.holds(user_id="alice", memory_id=key)
    assert adapter.sweep(T0 + 300) == 1
    assert not adapter.holds(user_id="alice", memory_id=key)


def test_one_instances_sweep_never_touches_another(open_adapter: Open) -> None:
    a, b = open_adapter(sweep_interval_minutes=0), open_adapter(sweep_interval_minutes=0)
    in_b = _add(b, "lives an hour", at=T0, ttl_s=3600)
    assert a.sweep(T0 + 10 * 86_400) == 0  # a's clock is days ahead of b's
    assert b.holds(user_id="alice", memory_id=in_b)
    assert b.sweep(T0 + 3601) == 1


def test_delete_removes_one_memory_and_its_vector(open_adapter: Open) -> None:
    adapter = open_adapter()
    gone = _add(adapter, "forget me")
    kept = _add(adapter, "keep me")
    before = adapter.footprint()
    adapter.delete(user_id="alice", memory_id=gone)
    after = adapter.footprint()
    assert not adapter.holds(user_id="alice", memory_id=gone)
    assert adapter.holds(user_id="alice", memory_id=kept)
    assert (before.memories, after.memories) == (2, 1)
    assert 0 < after.bytes < before.bytes
    assert [h.memory_id for h in adapter.search(user_id="alice", query="me", k=5, at=T0)] == [kept]


def test_delete_user_removes_all_of_theirs_expired_included(open_adapter: Open) -> None:
    adapter = open_adapter(sweep_interval_minutes=0)
    theirs = [_add(adapter, f"fact {i}", user="u.1", ttl_s=60 if i % 2 else None) for i in range(5)]
    other = _add(adapter, "fact of another", user="u%2E1")  # the escaped form of "u.1"
    adapter.set_clock(T0 + 3600)  # the ones with a TTL are expired, not yet swept
    adapter.delete_user(user_id="u.1")
    assert not any(adapter.holds(user_id="u.1", memory_id=k) for k in theirs)
    assert adapter.holds(user_id="u%2E1", memory_id=other)
    assert adapter.footprint().memories == 1
    adapter.delete_user(user_id="nobody")  # nothing to delete: no error


def test_footprint_counts_rows_and_bytes(open_adapter: Open, embedder: Embedder) -> None:
    adapter = open_adapter()
    assert adapter.footprint().memories == 0 and adapter.footprint().bytes == 0
    _add(adapter, "one")
    one = adapter.footprint()
    _add(adapter, "two", user="bob")
    two = adapter.footprint()
    assert (one.memories, two.memories) == (1, 2)
    assert one.bytes > embedder.dim * 4  # the vector alone is dim float32s
    assert two.bytes > one.bytes


def test_a_pg_url_is_used_instead_of_the_embedded_server(
    tmp_path: Path, embedded_pg: EmbeddedPostgres, embedder: Embedder
) -> None:
    """With `pg_url` set, no embedded server is started under `data_dir`."""
    settings = Settings(data_dir=tmp_path / "unused", pg_url=SecretStr(embedded_pg.url))
    adapter = LangGraphPostgresAdapter.open(
        namespace=f"t{uuid.uuid4().hex[:10]}", embedder=embedder, settings=settings
    )
    try:
        key = _add(adapter, "on the external server")
        assert adapter.holds(user_id="alice", memory_id=key)
    finally:
        adapter.close()
    assert not (tmp_path / "unused").exists()


def test_close_drops_every_row_and_only_this_instances_tables(
    open_adapter: Open, settings: Settings, embedder: Embedder
) -> None:
    namespace = f"t{uuid.uuid4().hex[:10]}"
    other = open_adapter()
    kept = _add(other, "still here")
    adapter = LangGraphPostgresAdapter.open(
        namespace=namespace, embedder=embedder, settings=settings
    )
    _add(adapter, "dropped")
    url = adapter_url(adapter)
    with pytest.raises(InvalidInput, match="namespace"):
        LangGraphPostgresAdapter.open(namespace=namespace, embedder=embedder, settings=settings)
    adapter.close()
    adapter.close()  # idempotent
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema_name(namespace),)
        ).fetchone()
    assert row == (0,)
    assert other.holds(user_id="alice", memory_id=kept)
    again = open_adapter(namespace=namespace)  # the name is free again, and empty
    assert again.footprint().memories == 0


def test_bad_input_names_the_field_and_writes_nothing(open_adapter: Open) -> None:
    adapter = open_adapter()
    for bad, field in (
        ({"user_id": ""}, "user_id"),
        ({"ttl_s": -5}, "ttl_s"),
        ({"text": "  "}, "text"),
        ({"at": float("nan")}, "at"),
        ({"metadata": {"when": {1, 2}}}, "metadata"),
        ({"metadata": {"score": float("inf")}}, "metadata"),
    ):
        args: dict[str, Any] = {
            "user_id": "alice",
            "session_id": "s",
            "text": "hello",
            "at": T0,
            "metadata": {},
            "ttl_s": None,
        }
        args.update(bad)
        with pytest.raises(InvalidInput, match=field):
            adapter.add(**args)
    with pytest.raises(InvalidInput, match="k"):
        adapter.search(user_id="alice", query="x", k=0, at=T0)
    assert adapter.footprint().memories == 0
