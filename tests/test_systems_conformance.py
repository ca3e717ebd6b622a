"""The adapter conformance suite: every system under test in `SYSTEMS` (the reference has
its own replay) passes the same checks, or says by `Unsupported` (and its capabilities)
that it cannot: user isolation in search, a read-only `holds`, `delete`, `delete_user`
of one user only, a footprint that counts, and `close` that drops what it stored.

A system whose optional extra is missing fails (the extras are installed in CI). A
system that keeps a deleted memory's text (`deletes_keep_text`: mem0's history) must
still drop it from search, and `holds` must keep saying it is there.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from memharness.systems import SYSTEMS, adapter_class
from memharness.systems.base import MemoryAdapter, Unsupported
from reference.settings import Settings
from reference.text_interfaces import Embedder

ADAPTERS = [name for name, entry in SYSTEMS.items() if entry.module]
T0 = 1_717_200_000.0  # 2024-06-01, a virtual time
_names = itertools.count()


@pytest.fixture(params=ADAPTERS)
def system(
    request: pytest.FixtureRequest, embedder: Embedder, data_dir: Path
) -> Iterator[tuple[type[MemoryAdapter], MemoryAdapter, Settings, str]]:
    cls = adapter_class(request.param)
    settings = Settings(backend="embedded", data_dir=data_dir)
    namespace = f"conf_{request.param.replace('-', '_')}_{next(_names)}"
    adapter = cls.open(namespace=namespace, embedder=embedder, settings=settings)
    adapter.set_clock(T0)
    try:
        yield cls, adapter, settings, namespace
    finally:
        adapter.close()


def _add(adapter: MemoryAdapter, user: str, text: str, at: float = T0) -> str:
    written = adapter.add(
        user_id=user, session_id=f"{user}.s0", text=text, at=at, metadata={}, ttl_s=None
    )
    assert len(written.memory_ids) == 1
    return written.memory_ids[0]


def _ids(adapter: MemoryAdapter, user: str, query: str) -> set[str]:
    return {h.memory_id for h in adapter.search(user_id=user, query=query, k=10, at=T0 + 1)}


def test_search_returns_only_the_users_own_memories(system: tuple) -> None:
    adapter = system[1]
    mine = _add(adapter, "u1", "My favourite colour is green")
    theirs = _add(adapter, "u2", "My favourite colour is green")
    assert _ids(adapter, "u1", "favourite colour") == {mine}
    assert _ids(adapter, "u2", "favourite colour") == {theirs}
    assert _ids(adapter, "u3", "favourite colour") == set()


def test_holds_is_read_only(system: tuple) -> None:
    adapter = system[1]
    memory = _add(adapter, "u1", "I live at 12 Oak Street")
    before = (adapter.footprint(), _ids(adapter, "u1", "where do I live"))
    for _ in range(3):
        assert adapter.holds(user_id="u1", memory_id=memory)
    assert not adapter.holds(user_id="u2", memory_id=memory), "another user's id holds nothing"
    assert (adapter.footprint(), _ids(adapter, "u1", "where do I live")) == before


def test_delete_removes_the_memory_or_says_it_cannot(system: tuple) -> None:
    adapter = system[1]
    gone = _add(adapter, "u1", "My dentist is Dr Wong")
    kept = _add(adapter, "u1", "I prefer window seats")
    if not adapter.capabilities.delete:
        with pytest.raises(Unsupported):
            adapter.delete(user_id="u1", memory_id=gone)
        return
    adapter.delete(user_id="u1", memory_id=gone)
    kept_text = adapter.capabilities.deletes_keep_text
    assert adapter.holds(user_id="u1", memory_id=gone) is kept_text
    assert adapter.holds(user_id="u1", memory_id=kept)
    assert gone not in _ids(adapter, "u1", "dentist")
    assert adapter.footprint().memories == 1


def test_delete_user_removes_that_user_only(system: tuple) -> None:
    adapter = system[1]
    a = [_add(adapter, "u1", t) for t in ("I like tea", "My cat is called Tom")]
    b = _add(adapter, "u2", "I like tea")
    if not adapter.capabilities.delete_user:
        with pytest.raises(Unsupported):
            adapter.delete_user(user_id="u1")
        return
    adapter.delete_user(user_id="u1")
    kept_text = adapter.capabilities.deletes_keep_text
    assert [adapter.holds(user_id="u1", memory_id=m) for m in a] == [kept_text] * 2
    assert _ids(adapter, "u1", "tea") == set()
    assert adapter.holds(user_id="u2", memory_id=b) and _ids(adapter, "u2", "tea") == {b}
    assert adapter.footprint().memories == 1


def test_footprint_counts_what_is_held(system: tuple) -> None:
    adapter = system[1]
    empty = adapter.footprint()
    assert empty.memories == 0
    for i, text in enumerate(("I like tea", "I like coffee", "My sister is Ann")):
        _add(adapter, f"u{i % 2}", text)
    held = adapter.footprint()
    assert held.memories == 3 and held.bytes > empty.bytes


def test_close_drops_what_it_stored(system: tuple, embedder: Embedder) -> None:
    cls, adapter, settings, namespace = system
    _add(adapter, "u1", "I like tea")
    adapter.close()
    again = cls.open(namespace=namespace, embedder=embedder, settings=settings)
    try:
        assert again.footprint().memories == 0
        assert _ids(again, "u1", "tea") == set()
    finally:
        again.close()
