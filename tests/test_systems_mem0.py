"""The mem0 adapter: per-user search, native expiry (hidden, kept), deletion, no network.

The hashing embedder stands in for MiniLM (the model does not matter here); mem0 itself,
its local Qdrant and its SQLite history are real.
"""

from __future__ import annotations

import importlib
import importlib.util
import socket
import sys
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from memharness.systems import MissingExtra, adapter_class
from memharness.systems.base import Footprint
from memharness.systems.mem0_adapter import (
    DAY_S,
    LLMCalled,
    Mem0Adapter,
    expiration_date,
    is_expired,
)
from reference.embedding import HashingEmbedder
from reference.errors import InvalidInput
from reference.settings import Settings
from tests.conftest import T0


@pytest.fixture(scope="module")
def embedder() -> HashingEmbedder:
    return HashingEmbedder()


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path)


@pytest.fixture
def adapter(embedder: HashingEmbedder, settings: Settings) -> Iterator[Mem0Adapter]:
    opened = Mem0Adapter.open(
        namespace=f"t{uuid.uuid4().hex[:8]}", embedder=embedder, settings=settings
    )
    yield opened
    opened.close()


def _add(
    adapter: Mem0Adapter, user: str, text: str, at: float = T0, ttl_s: float | None = None
) -> str:
    return adapter.add(
        user_id=user, session_id="s1", text=text, at=at, metadata={"kind": "fact"}, ttl_s=ttl_s
    ).memory_ids[0]


def test_the_registry_opens_it_with_a_temp_data_dir(
    embedder: HashingEmbedder, settings: Settings
) -> None:
    cls = adapter_class("mem0")
    assert cls is Mem0Adapter
    opened = cls.open(namespace="conformance-ns", embedder=embedder, settings=settings)
    try:
        assert opened.capabilities.native_expiry is not None
        assert opened.capabilities.native_expiry.granularity_s == DAY_S
        assert opened.capabilities.native_expiry.expired == "hidden"
        assert not opened.capabilities.native_expiry.refresh_on_read
        assert Path(settings.data_dir, "mem0").is_dir()
    finally:
        opened.close()


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    real_find_spec = importlib.util.find_spec

    def without_mem0(name: str, *args: Any, **kwargs: Any) -> Any:
        return None if name == "mem0" else real_find_spec(name, *args, **kwargs)

    monkeypatch.setattr(importlib.util, "find_spec", without_mem0)
    monkeypatch.delitem(sys.modules, "memharness.systems.mem0_adapter")
    with pytest.raises(MissingExtra, match=r"pip install -e '\.\[mem0\]'"):
        adapter_class("mem0")


def test_search_sees_only_the_users_own_memories(adapter: Mem0Adapter) -> None:
    mine = _add(adapter, "alice", "my parcel goes to the Berlin office")
    _add(adapter, "bob", "my parcel goes to the Paris office")
    hits = adapter.search(user_id="alice", query="where does my parcel go", k=5, at=T0)
    assert [h.memory_id for h in hits] == [mine]
    assert hits[0].text == "my parcel goes to the Berlin office"
    assert adapter.search(user_id="carol", query="parcel office", k=5, at=T0) == []


def test_two_adapters_do_not_share_memories(
    embedder: HashingEmbedder, settings: Settings, adapter: Mem0Adapter
) -> None:
    _add(adapter, "alice", "I prefer tea over coffee")
    other = Mem0Adapter.open(namespace="other", embedder=embedder, settings=settings)
    try:
        assert other.collection != adapter.collection
        assert other.search(user_id="alice", query="tea or coffee", k=5, at=T0) == []
    finally:
        other.close()


def test_expiry_is_a_utc_date_and_hides_from_the_next_midnight(adapter: Mem0Adapter) -> None:
    ttl = 2 * DAY_S
    at = T0 + 10 * 3600  # 2026-01-01T10:00Z: expiration_date 2026-01-03
    memory_id = _add(adapter, "alice", "my locker code is 4711", at=at, ttl_s=ttl)
    assert adapter.expiry_of(memory_id) == expiration_date(at, ttl) == "2026-01-03"

    def found(when: float) -> bool:
        hits = adapter.search(user_id="alice", query="locker code", k=5, at=when)
        return memory_id in [h.memory_id for h in hits]

    assert found(at + ttl)  # 2026-01-03T10:00: expired by the TTL, still shown (day)
    assert found(T0 + 3 * DAY_S - 1)  # the last second of 2026-01-03
    assert not found(T0 + 3 * DAY_S)  # midnight: hidden
    # hidden, not deleted: still in the vector store, and searching did not change it
    assert adapter.in_vector_store(user_id="alice", memory_id=memory_id)
    assert adapter.holds(user_id="alice", memory_id=memory_id)
    assert adapter.expiry_of(memory_id) == "2026-01-03"
    assert adapter.footprint().memories == 1
    assert adapter.sweep(T0 + 30 * DAY_S) == 0  # mem0 has no sweep: it stays
    assert adapter.in_vector_store(user_id="alice", memory_id=memory_id)


def test_memories_without_ttl_never_expire(adapter: Mem0Adapter) -> None:
    memory_id = _add(adapter, "alice", "my name is Alice Smith")
    hits = adapter.search(user_id="alice", query="my name", k=5, at=T0 + 3650 * DAY_S)
    assert [h.memory_id for h in hits] == [memory_id]


def test_the_virtual_rule_hides_what_mem0s_wall_clock_rule_hides(adapter: Mem0Adapter) -> None:
    """Same memories hidden by mem0's own check (wall clock) and by the adapter's filter at
    the same date: the filter is mem0's rule, only the date comes from the harness."""
    now = datetime.now(UTC)
    today = datetime(now.year, now.month, now.day, 12, tzinfo=UTC).timestamp()
    stored = T0
    ids = {
        offset: _add(
            adapter,
            "alice",
            f"note number {offset}",
            at=stored,
            ttl_s=today - stored + offset * DAY_S,
        )
        for offset in (-2, -1, 0, 1)
    }
    native = adapter._memory.search("note number", top_k=10, filters={"user_id": "alice"})
    by_mem0 = {row["id"] for row in native["results"]}
    by_adapter = {
        h.memory_id for h in adapter.search(user_id="alice", query="note number", k=10, at=today)
    }
    assert by_adapter == by_mem0 == {ids[0], ids[1]}
    assert all(is_expired(adapter.expiry_of(ids[d]), today) for d in (-2, -1))


def test_expired_neighbours_crowd_live_memories_out_as_in_mem0(adapter: Mem0Adapter) -> None:
    """mem0 drops expired memories from its pool of max(4k, 60) nearest, not before: 60
    expired near duplicates hide a live memory from a k=1 search. The adapter keeps that."""
    now = datetime.now(UTC)
    today = datetime(now.year, now.month, now.day, 12, tzinfo=UTC).timestamp()
    yesterday_ttl = today - T0 - DAY_S
    text = "my favourite colour is blue"
    expired = [_add(adapter, "alice", text, at=T0, ttl_s=yesterday_ttl) for _ in range(61)]
    live = _add(adapter, "alice", "my favourite colour was red before that")

    def both(k: int) -> tuple[list[str], list[str]]:
        native = adapter._memory.search(text, top_k=k, filters={"user_id": "alice"})
        hits = adapter.search(user_id="alice", query=text, k=k, at=today)
        return [r["id"] for r in native["results"]], [h.memory_id for h in hits]

    assert both(1) == ([], [])  # the pool of 60 holds only expired memories
    assert both(16) == ([live], [live])  # a pool of 64 reaches the live one
    for memory_id in expired[:2]:
        adapter.delete(user_id="alice", memory_id=memory_id)
    assert both(1) == ([live], [live])  # 59 expired: the 60th nearest is the live one


def test_delete_removes_the_vector_but_history_keeps_the_text(adapter: Mem0Adapter) -> None:
    gone = _add(adapter, "alice", "my phone is 555-0100")
    kept = _add(adapter, "alice", "my phone case is blue")
    with pytest.raises(InvalidInput, match="memory_id"):
        adapter.delete(user_id="bob", memory_id=gone)  # not bob's: nothing happens
    adapter.delete(user_id="alice", memory_id=gone)
    hits = adapter.search(user_id="alice", query="my phone", k=5, at=T0)
    assert [h.memory_id for h in hits] == [kept]
    assert not adapter.in_vector_store(user_id="alice", memory_id=gone)
    assert adapter.holds(user_id="alice", memory_id=gone)  # mem0's history table has it
    assert not adapter.holds(user_id="bob", memory_id=gone)  # alice's, not bob's
    assert not adapter.holds(user_id="alice", memory_id="not-a-uuid")
    history = adapter._memory.db.get_history(gone)
    assert [row["event"] for row in history] == ["ADD", "DELETE"]
    assert history[1]["old_memory"] == "my phone is 555-0100"
    adapter.delete(user_id="alice", memory_id=gone)  # already gone: a no-op
    with pytest.raises(InvalidInput, match="memory_id"):
        adapter.delete(user_id="alice", memory_id="not-a-uuid")


def test_delete_user_removes_every_vector_of_that_user_only(adapter: Mem0Adapter) -> None:
    alice = [_add(adapter, "alice", f"alice fact {i}") for i in range(3)]
    bob = _add(adapter, "bob", "bob fact")
    adapter.delete_user(user_id="alice")
    assert adapter.search(user_id="alice", query="alice fact", k=5, at=T0) == []
    assert not any(adapter.in_vector_store(user_id="alice", memory_id=m) for m in alice)
    assert adapter.in_vector_store(user_id="bob", memory_id=bob)
    assert adapter.footprint().memories == 1


def test_holds_is_read_only(adapter: Mem0Adapter) -> None:
    memory_id = _add(adapter, "alice", "I live in Lisbon", ttl_s=DAY_S)
    before = adapter._memory.vector_store.get(vector_id=memory_id).payload
    history = adapter._memory.db.get_history(memory_id)
    footprint = adapter.footprint()
    for _ in range(3):
        assert adapter.holds(user_id="alice", memory_id=memory_id)
    assert not adapter.holds(user_id="bob", memory_id=str(uuid.uuid4()))
    assert adapter._memory.vector_store.get(vector_id=memory_id).payload == before
    assert adapter._memory.db.get_history(memory_id) == history
    assert adapter.footprint() == footprint


def test_footprint_counts_points_texts_vectors_and_history(adapter: Mem0Adapter) -> None:
    assert adapter.footprint() == Footprint(memories=0, bytes=0)
    first = _add(adapter, "alice", "abcd")  # 4 bytes
    _add(adapter, "alice", "é")  # 2 bytes in UTF-8
    vectors = 2 * 384 * 4
    history = 4 + 2  # the ADD rows keep the texts
    assert adapter.footprint() == Footprint(memories=2, bytes=6 + vectors + history)
    adapter.delete(user_id="alice", memory_id=first)  # the DELETE row keeps "abcd" again
    assert adapter.footprint() == Footprint(memories=1, bytes=2 + 384 * 4 + history + 4)


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("user_id", {"user_id": "has space"}),
        ("user_id", {"user_id": ""}),
        ("text", {"text": "  "}),
        ("ttl_s", {"ttl_s": 0}),
        ("ttl_s", {"ttl_s": float("inf")}),
        ("ttl_s", {"ttl_s": True}),
        ("at", {"at": float("nan")}),
    ],
)
def test_bad_input_names_the_field_and_writes_nothing(
    adapter: Mem0Adapter, field: str, kwargs: dict[str, Any]
) -> None:
    args: dict[str, Any] = {
        "user_id": "alice",
        "session_id": "s",
        "text": "hello there",
        "at": T0,
        "metadata": {},
        "ttl_s": None,
    }
    with pytest.raises(InvalidInput) as err:
        adapter.add(**{**args, **kwargs})
    assert err.value.field == field
    assert adapter.footprint().memories == 0
    with pytest.raises(InvalidInput, match="k"):
        adapter.search(user_id="alice", query="hello", k=0, at=T0)


def test_no_llm_is_called_and_none_could_be(adapter: Mem0Adapter) -> None:
    _add(adapter, "alice", "remember that I am vegetarian")
    adapter.search(user_id="alice", query="diet", k=3, at=T0)
    with pytest.raises(LLMCalled):  # had mem0 called it, add or search would have raised
        adapter._memory.llm.generate_response(messages=[{"role": "user", "content": "x"}])


def test_telemetry_is_off_and_posthog_never_called(
    adapter: Mem0Adapter, monkeypatch: pytest.MonkeyPatch
) -> None:
    import posthog

    telemetry = importlib.import_module("mem0.memory.telemetry")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("posthog was called")

    monkeypatch.setattr(posthog.Posthog, "capture", refuse)
    monkeypatch.setattr(posthog.Posthog, "__init__", refuse)
    assert telemetry.MEM0_TELEMETRY is False
    assert telemetry.client_telemetry.posthog is None
    memory_id = _add(adapter, "alice", "telemetry check")
    adapter.search(user_id="alice", query="telemetry", k=1, at=T0)
    adapter.delete(user_id="alice", memory_id=memory_id)
    assert telemetry._oss_telemetry_instance is None  # never built


def test_no_connection_leaves_the_host(
    embedder: HashingEmbedder, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    attempts: list[object] = []
    real_connect = socket.socket.connect
    real_create = socket.create_connection

    def local(address: object) -> bool:
        host = address[0] if isinstance(address, tuple) else address
        return isinstance(host, str) and host in ("127.0.0.1", "::1", "localhost")

    def guarded_connect(self: socket.socket, address: Any) -> None:
        if self.family != socket.AF_UNIX and not local(address):
            attempts.append(address)
            raise OSError(f"network access in a test: {address!r}")
        real_connect(self, address)

    def guarded_create(address: Any, *args: Any, **kwargs: Any) -> socket.socket:
        if not local(address):
            attempts.append(address)
            raise OSError(f"network access in a test: {address!r}")
        return real_create(address, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "create_connection", guarded_create)
    with pytest.raises(OSError, match="network access"):  # the guard works
        socket.create_connection(("192.0.2.1", 443), timeout=0.1)
    attempts.clear()

    opened = Mem0Adapter.open(namespace="offline", embedder=embedder, settings=settings)
    try:
        memory_id = _add(opened, "alice", "offline memory", ttl_s=DAY_S)
        opened.search(user_id="alice", query="offline", k=3, at=T0)
        opened.holds(user_id="alice", memory_id=memory_id)
        opened.footprint()
        opened.delete(user_id="alice", memory_id=memory_id)
        opened.delete_user(user_id="alice")
    finally:
        opened.close()
    assert attempts == []


def test_close_drops_the_collection_and_the_directory(
    embedder: HashingEmbedder, settings: Settings
) -> None:
    opened = Mem0Adapter.open(namespace="closing", embedder=embedder, settings=settings)
    _add(opened, "alice", "soon gone")
    directory = opened._directory
    assert directory.is_dir() and (directory / "history.db").exists()
    opened.close()
    opened.close()  # twice is fine
    assert not directory.exists()
    with pytest.raises(RuntimeError, match="closed"):
        opened.search(user_id="alice", query="gone", k=1, at=T0)


def test_expiration_date_rounds_up_to_the_day() -> None:
    assert expiration_date(T0, 1.0) == "2026-01-01"  # hidden from 2026-01-02T00:00
    assert expiration_date(T0 + DAY_S - 1, 1.0) == "2026-01-02"
    assert not is_expired("2026-01-01", T0 + DAY_S - 1)
    assert is_expired("2026-01-01", T0 + DAY_S)
    assert not is_expired(None, T0 + 1e9)
    assert (datetime.fromtimestamp(T0, UTC) + timedelta(days=1)).date().isoformat() == "2026-01-02"
