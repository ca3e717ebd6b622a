"""Compaction of the embedded Chroma short-term collection (`reference.stm.chroma_generations`).

After churn the deleted records stay bounded; a compaction keeps every live record as it
was (text, metadata, expiry, access statistics, vector) and findable, leaves no forgotten
record in any Chroma collection nor its vectors in the old collection's files, keeps the
collection's configuration and embedder identity, and replays writes made during the copy.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from reference.clock import VirtualClock
from reference.stm import chroma_generations
from reference.stm.base import ShortTermStore
from reference.stm.chroma_generations import NEXT_SUFFIX, vector_segment
from reference.stm.chroma_store import EMBEDDER_KEY, ChromaShortTermStore
from reference.stm.filters import StmFilter
from tests.fixtures.stm_backends import raw_documents, sweep_due

EMBEDDED = "chroma-embedded"
TEXTS = [
    "remember that I prefer window seats",
    "book a flight to Paris next Monday",
    "i need a hotel near the airport",
    "send the report to my manager",
    "remind me to call the dentist tomorrow",
    "my daughter's birthday is on the fifth of May",
]


@pytest.fixture
def store(make_stm_store: Callable[..., ShortTermStore]) -> Iterator[ChromaShortTermStore]:
    made = make_stm_store(EMBEDDED, ttl_s=600.0)
    assert isinstance(made, ChromaShortTermStore)
    made.generations.min_dead = 8  # compact after a few deletes, not a thousand
    yield made
    names = {c.name for c in made.client.list_collections()}
    assert made.namespace.stm_collection + NEXT_SUFFIX not in names


def _add(store: ShortTermStore, text: str, session: str = "s1", **kw: Any) -> str:
    result = store.add(user_id="alice", session_id=session, text=text, **kw)
    assert result.accepted and result.record is not None, result.reason
    return result.record.record_id


def _persist_dir(store: ChromaShortTermStore) -> Path:
    return Path(store.client.get_settings().persist_directory)


def _churn(
    store: ChromaShortTermStore, clock: VirtualClock, rounds: int, first: int = 0
) -> list[str]:
    """Adds records in session "churn" that expire and are swept; returns the swept ids."""
    swept: list[str] = []
    for round_ in range(first, first + rounds):
        ids = [_add(store, f"{text} (round {round_})", session="churn") for text in TEXTS]
        clock.advance(601.0)
        assert sweep_due(store) == len(ids)
        swept += ids
    return swept


def test_churn_keeps_the_deleted_records_bounded_and_the_live_ones_intact(
    store: ChromaShortTermStore, clock: VirtualClock
) -> None:
    kept = [_add(store, text, session="keep", never_expires=True) for text in TEXTS[:3]]
    clock.advance(1.0)
    store.query(user_id="alice", session_id="keep", text=TEXTS[0], k=1)  # an access
    store.flush_access()
    before = {r.record_id: r for r in store.records(filter=StmFilter(user_id="alice"))}
    vectors_before = _vectors(store, kept)
    segment_before = vector_segment(_persist_dir(store), str(store._collection.id))
    assert segment_before is not None and (_persist_dir(store) / segment_before).is_dir()

    swept = _churn(store, clock, 1)
    assert _logged(store, "(round 0)")  # Chroma's log holds the swept text...
    swept += _churn(store, clock, 5, first=1)

    generations = store.generations
    assert generations.compactions >= 2
    live = store.count()
    assert generations.deleted <= max(generations.min_dead, generations.ratio * live) + len(TEXTS)
    after = {r.record_id: r for r in store.records(filter=StmFilter(user_id="alice"))}
    assert set(after) == set(kept)
    assert after == before  # every field, access statistics and expiry included
    assert before[kept[0]].access_count == 1
    assert _vectors(store, kept) == pytest.approx(vectors_before, abs=1e-6)
    for record_id, text in zip(kept, TEXTS[:3], strict=True):
        hits = store.query(user_id="alice", session_id="keep", text=text, k=1, touch=False)
        assert [h.record.record_id for h in hits] == [record_id]

    documents = raw_documents(store) or []
    assert not any("(round" in doc for doc in documents)  # swept text: gone
    assert store.get(user_id="alice", record_id=swept[0]) is None
    names = {c.name for c in store.client.list_collections()}
    assert names >= {store.namespace.stm_collection}
    assert not (_persist_dir(store) / segment_before).exists()  # the old vectors: gone
    assert not _logged(store, "(round 0)")  # ...until the old generation is dropped


def test_the_copy_keeps_the_configuration_and_the_embedder(
    store: ChromaShortTermStore, clock: VirtualClock
) -> None:
    _add(store, TEXTS[0], session="keep", never_expires=True)
    first = store.client.get_collection(store.namespace.stm_collection)
    _churn(store, clock, 2)
    assert store.generations.compactions >= 1
    now = store.client.get_collection(store.namespace.stm_collection)
    assert now.id != first.id
    assert now.metadata[EMBEDDER_KEY] == store.embedder.identity
    assert now.configuration["hnsw"] == first.configuration["hnsw"]


def test_writes_during_the_copy_are_replayed(
    store: ChromaShortTermStore, clock: VirtualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    doomed = _add(store, TEXTS[0], session="keep")
    touched = _add(store, TEXTS[3], session="keep")
    copy = chroma_generations._write
    during: list[str] = []

    def write_while_copying(collection: Any, rows: dict[str, Any], batch: int) -> None:
        if not during:  # the bulk copy: the old collection changes under it
            assert store.purge(record_ids=[doomed]) == 1
            store.query(user_id="alice", session_id="keep", text=TEXTS[3], k=1)
            store.flush_access()
            during.append(_add(store, TEXTS[2], session="keep"))
        copy(collection, rows, batch)

    monkeypatch.setattr(chroma_generations, "_write", write_while_copying)
    assert store.generations.compact()
    records = {r.record_id: r for r in store.records(filter=StmFilter(user_id="alice"))}
    assert set(records) == {touched, during[0]}
    assert records[touched].access_count == 1
    assert TEXTS[0] not in (raw_documents(store) or [])


def test_every_store_of_the_collection_sees_the_swap(
    store: ChromaShortTermStore, make_stm_store: Callable[..., ShortTermStore]
) -> None:
    other = make_stm_store(EMBEDDED)
    record_id = _add(store, TEXTS[0])
    assert store.generations.compact()
    assert other.get(user_id="alice", record_id=record_id) is not None
    added = _add(other, TEXTS[1])
    assert store.get(user_id="alice", record_id=added) is not None


def test_a_swap_that_cannot_wait_for_the_readers_gives_up_cleanly(
    store: ChromaShortTermStore,
) -> None:
    record_id = _add(store, TEXTS[0])
    before = store.client.get_collection(store.namespace.stm_collection).id
    store.generations.wait_s = 0.0
    entered, release = threading.Event(), threading.Event()

    def read_slowly() -> None:
        with store.generations.lock.shared():
            entered.set()
            release.wait(timeout=30)

    reader = threading.Thread(target=read_slowly)
    reader.start()
    entered.wait(timeout=30)
    try:
        assert store.generations.compact() is False
    finally:
        release.set()
        reader.join()
    assert store.client.get_collection(store.namespace.stm_collection).id == before
    assert store.generations.compactions == 0
    assert store.get(user_id="alice", record_id=record_id) is not None
    store.generations.wait_s = 5.0
    assert store.generations.compact()
    assert store.get(user_id="alice", record_id=record_id) is not None


def test_an_interrupted_compaction_is_finished_or_undone_on_open(
    store: ChromaShortTermStore, make_stm_store: Callable[..., ShortTermStore]
) -> None:
    record_id = _add(store, TEXTS[0])
    client, name = store.client, store.namespace.stm_collection
    old = client.get_collection(name)
    # Crashed during the copy: both exist, the copy is dropped.
    client.create_collection(name + NEXT_SUFFIX, metadata=old.metadata)
    reopened = make_stm_store(EMBEDDED)
    assert {c.name for c in client.list_collections()} >= {name}
    assert name + NEXT_SUFFIX not in {c.name for c in client.list_collections()}
    assert reopened.get(user_id="alice", record_id=record_id) is not None
    # Crashed between the drop and the rename: the finished copy takes the name.
    old.modify(name=name + NEXT_SUFFIX)
    reopened = make_stm_store(EMBEDDED)
    assert reopened.get(user_id="alice", record_id=record_id) is not None
    assert name + NEXT_SUFFIX not in {c.name for c in client.list_collections()}


def _vectors(store: ChromaShortTermStore, ids: list[str]) -> list[float]:
    got = store._collection.get(ids=sorted(ids), include=["embeddings"])
    return [float(x) for row in got["embeddings"] for x in row]


def _logged(store: ChromaShortTermStore, text: str) -> int:
    """How many rows of Chroma's log (`embeddings_queue`) hold `text`."""
    catalogue = f"file:{_persist_dir(store) / 'chroma.sqlite3'}?mode=ro"
    with contextlib.closing(sqlite3.connect(catalogue, uri=True)) as db:
        row = db.execute(
            "SELECT count(*) FROM embeddings_queue WHERE CAST(metadata AS TEXT) LIKE ?",
            (f"%{text}%",),
        ).fetchone()
    return int(row[0])
