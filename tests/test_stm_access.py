"""Access statistics written behind the request (`reference.stm.access`).

On every STM backend: an access is seen by every read at once, whether or not it has
been written (an extended expiry keeps the record live to get, records, count, query,
scan_due, usage and the engine's sweep), and it never outlives a delete. On Chroma: the
write waits in the buffer until it is full, a sweep, or `dispose`; the stored rows then
hold it; a failed write keeps it; a flush that lands during a read makes the read fetch
again. (tests/test_engine.py: a sweep sees the window an access moved.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from reference.clock import VirtualClock
from reference.errors import BackendUnavailable
from reference.models import MemoryRecord, RetentionUpdate
from reference.stm.access import AccessBuffer, AccessWrite
from reference.stm.base import DEFAULT_STM_TTL_S, ShortTermStore
from reference.stm.chroma_store import ChromaShortTermStore
from reference.stm.filters import StmFilter
from tests.conftest import T0
from tests.fixtures.stm_backends import chroma_backend_params, sweep_due

TTL = DEFAULT_STM_TTL_S
ALICE = "alice"
FLIGHT = "book a flight to Paris next Monday"
SEATS = "remember that I prefer window seats"


def _add(store: ShortTermStore, text: str, **kw: Any) -> MemoryRecord:
    result = store.add(user_id=ALICE, session_id="s1", text=text, force=True, **kw)
    assert result.record is not None
    return result.record


def _stored(store: ChromaShortTermStore, record_id: str) -> dict[str, Any]:
    """The record's metadata as Chroma holds it (not through the store)."""
    collection = store.client.get_collection(store.namespace.stm_collection)
    found = collection.get(ids=[record_id], include=["metadatas"])
    return dict(found["metadatas"][0]) if found["ids"] else {}


def test_an_access_that_moves_expiry_is_seen_by_every_read(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    flight, seats = _add(stm_store, FLIGHT), _add(stm_store, SEATS)
    (hit,) = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1, touch=False)
    later = T0 + TTL + 1000
    update = RetentionUpdate(flight.record_id, later, 8.0)
    assert stm_store.touch(user_id=ALICE, updates=[update], seen=[hit.record]) == 1

    clock.set(T0 + TTL + 10)  # past the stored expiry, before the one the access set
    mine = StmFilter(user_id=ALICE)
    got = stm_store.get(user_id=ALICE, record_id=flight.record_id)
    assert got is not None
    assert (got.expires_at, got.importance, got.access_count) == (later, 8.0, 1)
    assert got.last_accessed_at == T0
    assert [r.record_id for r in stm_store.records(filter=mine)] == [flight.record_id]
    assert stm_store.count(filter=mine) == stm_store.count() == 1
    assert stm_store.usage().records == 1
    hits = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=5, touch=False)
    assert [h.record for h in hits] == [got]
    due = stm_store.scan_due(now=clock.now()).records
    assert [r.record_id for r in due] == [seats.record_id]
    assert sweep_due(stm_store) == 1  # seats; the flight's window was moved
    assert stm_store.get(user_id=ALICE, record_id=flight.record_id) == got

    clock.set(later)
    assert stm_store.get(user_id=ALICE, record_id=flight.record_id) is None
    assert stm_store.count() == 0
    assert [r.record_id for r in stm_store.scan_due(now=clock.now()).records] == [flight.record_id]


def test_touch_counts_from_the_records_the_caller_saw(stm_store: ShortTermStore) -> None:
    flight = _add(stm_store, FLIGHT)
    touched = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    assert touched[0].record.access_count == 1
    (hit,) = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1, touch=False)
    assert hit.record.access_count == 1  # the buffered access is read back
    again = RetentionUpdate(flight.record_id, hit.record.expires_at, 6.0)
    assert stm_store.touch(user_id=ALICE, updates=[again], seen=[hit.record]) == 1
    got = stm_store.get(user_id=ALICE, record_id=flight.record_id)
    assert got is not None and (got.access_count, got.importance) == (2, 6.0)
    assert stm_store.touch(user_id="bob", updates=[again], seen=[hit.record]) == 0


def test_an_access_never_outlives_a_delete(stm_store: ShortTermStore) -> None:
    flight = _add(stm_store, FLIGHT)
    stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    assert stm_store.delete(filter=StmFilter(user_id=ALICE)) == 1
    stm_store.flush_access()
    assert stm_store.get(user_id=ALICE, record_id=flight.record_id) is None
    assert stm_store.records(filter=StmFilter(user_id=ALICE, include_dead=True)) == []
    if isinstance(stm_store, ChromaShortTermStore):
        assert _stored(stm_store, flight.record_id) == {}


@pytest.fixture(params=chroma_backend_params())
def chroma_store(request: pytest.FixtureRequest, make_stm_store: Any) -> ChromaShortTermStore:
    store = make_stm_store(request.param, access_buffer=2)
    assert isinstance(store, ChromaShortTermStore)
    return store


def test_chroma_writes_accesses_in_a_batch_behind_the_request(
    chroma_store: ChromaShortTermStore, clock: VirtualClock
) -> None:
    records = [_add(chroma_store, f"{FLIGHT} number {i}") for i in range(3)]
    ids = [r.record_id for r in records]
    clock.advance(5)
    for record in records[:2]:
        chroma_store.query(user_id=ALICE, session_id="s1", text=record.text, k=1)
    assert [_stored(chroma_store, i)["access_count"] for i in ids] == [0, 0, 0]  # buffered
    chroma_store.query(user_id=ALICE, session_id="s1", text=records[2].text, k=1)
    # the third access put the buffer over its limit of 2: a background thread wrote all
    # three in one batch
    chroma_store.wait_for_flush()
    assert [_stored(chroma_store, i)["access_count"] for i in ids] == [1, 1, 1]
    assert [_stored(chroma_store, i)["last_accessed_at"] for i in ids] == [T0 + 5] * 3

    chroma_store.query(user_id=ALICE, session_id="s1", text=records[0].text, k=1)
    assert _stored(chroma_store, ids[0])["access_count"] == 1
    assert chroma_store.flush_access() == 1
    assert _stored(chroma_store, ids[0])["access_count"] == 2
    assert chroma_store.flush_access() == 0


def test_chroma_dispose_writes_what_is_buffered(
    chroma_store: ChromaShortTermStore, make_stm_store: Any, clock: VirtualClock
) -> None:
    flight = _add(chroma_store, FLIGHT)
    chroma_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    chroma_store.dispose()
    assert _stored(chroma_store, flight.record_id)["access_count"] == 1


def test_chroma_keeps_accesses_whose_write_failed(
    chroma_store: ChromaShortTermStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    flight = _add(chroma_store, FLIGHT)
    chroma_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    collection = chroma_store._collection

    def down(**_: Any) -> None:
        raise ConnectionError("chroma went away")

    monkeypatch.setattr(collection, "update", down)
    with pytest.raises(BackendUnavailable, match=r"^short-term memory: Chroma .*chroma went away"):
        chroma_store.flush_access()
    got = chroma_store.get(user_id=ALICE, record_id=flight.record_id)
    assert got is not None and got.access_count == 1  # still seen
    monkeypatch.undo()
    assert chroma_store.flush_access() == 1
    assert _stored(chroma_store, flight.record_id)["access_count"] == 1


def test_reads_and_accesses_do_not_wait_for_a_flush_in_flight() -> None:
    buffer = AccessBuffer(limit=10)
    first = AccessWrite("r1", ALICE, 5.0, 1, None, 5.0)
    buffer.put([first])
    seen: list[Mapping[str, AccessWrite]] = []

    def slow_write(batch: list[AccessWrite]) -> None:
        # While the batch is being written (here: from this very call, which holds the
        # flush), a read lays it and a new access goes into the buffer: neither waits.
        buffer.overlaid(lambda: 0, lambda rows, pending: seen.append(dict(pending)) or rows)
        buffer.put([AccessWrite("r1", ALICE, 9.0, 2, None, 5.0)])

    assert buffer.flush(slow_write) == 1
    assert seen == [{"r1": first}]
    assert buffer.ids() == ["r1"] and buffer.has_user(ALICE)  # the newer access waits
    assert buffer.flush(lambda batch: None) == 1
    assert len(buffer) == 0 and not buffer.has_user(ALICE)


def test_a_failed_flush_puts_its_batch_back_under_newer_accesses() -> None:
    buffer = AccessBuffer(limit=10)
    buffer.put([AccessWrite("r1", ALICE, 5.0, 1, None, 5.0)])
    buffer.put([AccessWrite("r2", ALICE, 5.0, 1, None, 5.0)])
    newer = AccessWrite("r1", ALICE, 9.0, 2, None, 5.0)

    def failing(batch: list[AccessWrite]) -> None:
        buffer.put([newer])
        raise BackendUnavailable("chroma: down")

    with pytest.raises(BackendUnavailable):
        buffer.flush(failing)
    written: list[AccessWrite] = []
    assert buffer.flush(written.extend) == 2
    assert sorted(written, key=lambda w: w.record_id)[0] == newer


def test_a_flush_landing_during_a_read_makes_it_read_again() -> None:
    buffer = AccessBuffer(limit=10)
    write = AccessWrite("r1", ALICE, 5.0, 1, None, 5.0)
    buffer.put([write])
    stored: dict[str, int] = {"r1": 0}
    reads: list[int] = []

    def read() -> int:
        seen = stored["r1"]  # the row as fetched ...
        if not reads:  # ... and, during the first fetch, a flush lands
            buffer.flush(lambda batch: stored.update({w.record_id: w.access_count for w in batch}))
        reads.append(seen)
        return seen

    def lay(count: int, pending: Mapping[str, AccessWrite]) -> int:
        return pending["r1"].access_count if "r1" in pending else count

    assert buffer.overlaid(read, lay) == 1  # not the stale 0 of the first fetch
    assert reads == [0, 1]
    assert len(buffer) == 0


def test_chroma_dispose_after_the_collection_was_dropped_under_it(
    chroma_store: ChromaShortTermStore,
) -> None:
    # A namespace dropped by another (the bench's teardown did this): the buffered
    # accesses have no record left to go to, and dispose says nothing of it.
    _add(chroma_store, FLIGHT)
    chroma_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    chroma_store.client.delete_collection(chroma_store.namespace.stm_collection)
    chroma_store.dispose()  # must not raise
    assert len(chroma_store._access) == 0  # the buffered access was dropped, not kept
