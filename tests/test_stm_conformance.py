"""Conformance suite of the short-term layer: every backend passes the same tests.

Time moves only through the virtual clock (`clock.advance`); nothing sleeps. The
differential tests at the end replay one random history on the in-memory store (the
oracle) and on Chroma, and demand the same answers in the same order. Scores agree to
1e-6, not bit for bit: Chroma gives back a stored vector within an ulp of float32 of
what it was given (it normalises for cosine), never the same bits.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from reference.clock import VirtualClock
from reference.errors import BackendUnavailable, ConfigurationError, InvalidInput
from reference.models import Hit, MemoryRecord, MemoryType, RetentionUpdate, Status
from reference.stm.base import DEFAULT_STM_TTL_S, ShortTermStore
from reference.stm.chroma_client import make_chroma_client, parse_chroma_url
from reference.stm.chroma_store import ChromaShortTermStore
from reference.stm.filters import StmFilter
from reference.stm.memory_store import cosine_scores, storable_record, storable_vector, top_k
from reference.stm.primitives import DeleteRecords, PutRecord, StmWrite, WriteAccess
from reference.text_interfaces import Embedder, IntentDecision, PiiMasker
from tests.conftest import T0
from tests.fixtures.stm_backends import (
    MINIMAL,
    STM_BACKENDS,
    StmStoreFactory,
    chroma_backend_params,
    chroma_client,
    raw_documents,
    sweep_due,
)

TTL = DEFAULT_STM_TTL_S
ALICE, BOB = "alice", "bob"
PHONE, EMAIL, CN_ID = "13812345678", "alice.wang@example.com", "11010519491231002X"
SEATS = "remember that I prefer window seats"
FLIGHT = "book a flight to Paris next Monday"
HOTEL = "i need a hotel near the airport"
REPORT = "send the report to my manager"
TRAIN = "请帮我订明天去上海的高铁票"


def _add(store: ShortTermStore, text: str, **kw: Any) -> str:
    kw.setdefault("user_id", ALICE)
    kw.setdefault("session_id", "s1")
    result = store.add(text=text, **kw)
    assert result.accepted and result.record is not None, result.reason
    return result.record.record_id


def sequential_ids() -> Callable[[], str]:
    """Reproducible record ids r000000, r000001, ... (two stores given one each agree)."""
    counter = itertools.count()
    return lambda: f"r{next(counter):06d}"


def _ids(hits: list[Any]) -> list[str]:
    return [h.record.record_id for h in hits]


# ---------------------------------------------------------------- add
def test_add_sets_every_field_from_clock_and_intent(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    clock.advance(0.123456789)
    meta = {"src": "chat", "turn": 3, "ok": True, "w": 0.5, "地点": "北京"}
    result = stm_store.add(user_id=ALICE, session_id="s1", text=SEATS, importance=7, metadata=meta)
    record = result.record
    assert result.accepted and record is not None
    assert result.intent.keep and result.reason == result.intent.reason
    assert record.type is result.intent.kind is MemoryType.PREFERENCE
    assert (record.user_id, record.session_id, record.text) == (ALICE, "s1", SEATS)
    assert record.created_at == record.last_accessed_at == T0 + 0.123456789
    assert record.expires_at == record.created_at + TTL
    assert (record.status, record.access_count, record.importance) == (Status.ACTIVE, 0, 7.0)
    assert record.metadata == meta
    # Every field round-trips exactly, types included (True stays bool, 3 stays int).
    stored = stm_store.get(user_id=ALICE, record_id=record.record_id)
    assert stored == record
    assert {k: type(v) for k, v in stored.metadata.items()} == {k: type(v) for k, v in meta.items()}
    assert stm_store.records(filter=StmFilter(user_id=ALICE)) == [record]


def test_add_with_explicit_type_and_ttl(stm_store: ShortTermStore) -> None:
    record = stm_store.add(
        user_id=ALICE, session_id="s1", text=FLIGHT, type="fact", ttl_s=60
    ).record
    assert record is not None
    assert (record.type, record.expires_at) == (MemoryType.FACT, T0 + 60)


def test_every_add_gets_a_fresh_id(stm_store: ShortTermStore) -> None:
    """Ids are never the caller's: a chosen id could replace another user's record."""
    first, second = _add(stm_store, SEATS), _add(stm_store, SEATS)
    assert first != second and len(first) == 32
    assert stm_store.count() == 2


@pytest.mark.parametrize("text", ["今天天气真好", "hello!", "haha ok"])
def test_chitchat_is_rejected_with_a_reason(stm_store: ShortTermStore, text: str) -> None:
    result = stm_store.add(user_id=ALICE, session_id="s1", text=text)
    assert not result.accepted and result.record is None
    assert result.reason and result.reason == result.intent.reason
    assert stm_store.count() == 0
    assert stm_store.records(filter=StmFilter(user_id=ALICE, include_dead=True)) == []
    assert raw_documents(stm_store) in (None, [])


def test_force_stores_chitchat(stm_store: ShortTermStore) -> None:
    result = stm_store.add(user_id=ALICE, session_id="s1", text="hello!", force=True)
    assert result.accepted and result.record is not None
    assert not result.intent.keep and result.record.type is MemoryType.CONVERSATION
    assert stm_store.get(user_id=ALICE, record_id=result.record.record_id) == result.record


def test_pii_is_stored_masked(
    stm_store: ShortTermStore, pii: PiiMasker, embedder: Embedder
) -> None:
    text = f"my phone is {PHONE}, email {EMAIL}, 身份证 {CN_ID}"
    record_id = _add(stm_store, text, force=True)
    masked = pii.mask(text)
    stored = stm_store.get(user_id=ALICE, record_id=record_id)
    assert stored is not None and stored.text == masked
    hits = stm_store.query(user_id=ALICE, session_id="s1", text=text)
    # The vector is the masked text's: querying with that vector is an exact match.
    assert hits[0].score == pytest.approx(1.0)
    exact = stm_store.query(
        user_id=ALICE, session_id="s1", embedding=embedder.embed_one(masked), k=1
    )
    assert exact[0].score == pytest.approx(1.0)
    documents = raw_documents(stm_store)
    seen = [stored.text, hits[0].record.text, *(documents or [])]
    if documents is not None:
        assert documents == [masked]
    for raw in (PHONE, EMAIL, CN_ID):
        assert all(raw not in value for value in seen)


# ---------------------------------------------------------------- query
def test_query_returns_top_k_of_the_session_best_first(stm_store: ShortTermStore) -> None:
    texts = [SEATS, FLIGHT, HOTEL, REPORT, TRAIN, "book a flight to Rome on Friday"]
    ids = {text: _add(stm_store, text) for text in texts}
    _add(stm_store, FLIGHT, session_id="s2")
    _add(stm_store, FLIGHT, user_id=BOB)
    hits = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=3)
    assert len(hits) == 3
    assert hits[0].record.record_id == ids[FLIGHT] and hits[0].score == pytest.approx(1.0)
    assert hits[1].record.record_id == ids["book a flight to Rome on Friday"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert all(h.record.session_id == "s1" and h.record.user_id == ALICE for h in hits)
    everything = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=100)
    assert sorted(_ids(everything)) == sorted(ids.values())
    assert stm_store.query(user_id=ALICE, session_id="nobody", text=FLIGHT) == []


def test_query_by_embedding_and_types(stm_store: ShortTermStore, embedder: Embedder) -> None:
    seats = _add(stm_store, SEATS)
    _add(stm_store, FLIGHT)
    vector = embedder.embed_one(SEATS)
    assert _ids(stm_store.query(user_id=ALICE, session_id="s1", embedding=vector, k=1)) == [seats]
    # The embedding wins over the text.
    hits = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, embedding=vector, k=1)
    assert _ids(hits) == [seats]
    only = stm_store.query(
        user_id=ALICE,
        session_id="s1",
        text=SEATS,
        types=frozenset({MemoryType.INSTRUCTION}),
    )
    assert [h.record.type for h in only] == [MemoryType.INSTRUCTION]
    assert stm_store.query(user_id=ALICE, session_id="s1", text=SEATS, types=frozenset()) == []


def test_ties_go_to_the_smaller_record_id(stm_store: ShortTermStore) -> None:
    ids = sorted(_add(stm_store, HOTEL) for _ in range(4))
    _add(stm_store, REPORT)
    hits = stm_store.query(user_id=ALICE, session_id="s1", text=HOTEL, k=3)
    assert _ids(hits) == ids[:3]
    assert hits[0].score == hits[1].score == hits[2].score


def test_query_without_touch_changes_nothing(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    flight = _add(stm_store, FLIGHT)
    clock.advance(30)
    (hit,) = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1, touch=False)
    assert (hit.record.access_count, hit.record.last_accessed_at) == (0, T0)
    stored = stm_store.get(user_id=ALICE, record_id=flight)
    assert stored is not None and stored.access_count == 0


def test_query_touches_what_it_returns(stm_store: ShortTermStore, clock: VirtualClock) -> None:
    flight, seats = _add(stm_store, FLIGHT), _add(stm_store, SEATS)
    clock.advance(30)
    (hit,) = stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    assert (hit.record.record_id, hit.record.access_count) == (flight, 1)
    assert hit.record.last_accessed_at == T0 + 30
    clock.advance(30)
    stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT, k=1)
    touched = stm_store.get(user_id=ALICE, record_id=flight)
    untouched = stm_store.get(user_id=ALICE, record_id=seats)
    assert touched is not None and untouched is not None
    assert (touched.access_count, touched.last_accessed_at) == (2, T0 + 60)
    assert (untouched.access_count, untouched.last_accessed_at) == (0, T0)
    assert touched.expires_at == T0 + TTL  # a touch does not extend the TTL


# ---------------------------------------------------------------- isolation
def test_no_read_crosses_users_or_sessions(stm_store: ShortTermStore) -> None:
    bobs = _add(stm_store, FLIGHT, user_id=BOB, session_id="s1")
    other_session = _add(stm_store, FLIGHT, session_id="s2")
    assert stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT) == []
    assert _ids(stm_store.query(user_id=ALICE, session_id="s2", text=FLIGHT)) == [other_session]
    assert stm_store.get(user_id=ALICE, record_id=bobs) is None
    assert stm_store.records(filter=StmFilter(user_id=ALICE, record_ids=frozenset({bobs}))) == []
    flt = StmFilter(user_id=ALICE, record_ids=frozenset({bobs}), include_dead=True)
    assert stm_store.count(filter=flt) == 0
    assert stm_store.delete(filter=flt) == 0
    assert stm_store.get(user_id=BOB, record_id=bobs) is not None


CRAFTED = ["*", "a:b", "$ne", "{'$ne': 1}", 'x"y', "a'b", "", " ", "a b", "../x", "-x", "a/b"]


@pytest.mark.parametrize("bad", CRAFTED)
def test_crafted_ids_are_refused_naming_the_field(stm_store: ShortTermStore, bad: str) -> None:
    kept = _add(stm_store, FLIGHT)
    calls: list[tuple[str, Any]] = [
        ("user_id", lambda: stm_store.add(user_id=bad, session_id="s1", text=FLIGHT)),
        ("session_id", lambda: stm_store.add(user_id=ALICE, session_id=bad, text=FLIGHT)),
        ("user_id", lambda: stm_store.query(user_id=bad, session_id="s1", text=FLIGHT)),
        ("session_id", lambda: stm_store.query(user_id=ALICE, session_id=bad, text=FLIGHT)),
        ("record_id", lambda: stm_store.get(user_id=ALICE, record_id=bad)),
        ("user_id", lambda: stm_store.get(user_id=bad, record_id="r1")),
        ("user_id", lambda: StmFilter(user_id=bad)),
        ("session_id", lambda: StmFilter(user_id=ALICE, session_id=bad)),
        ("record_ids", lambda: StmFilter(user_id=ALICE, record_ids=frozenset({bad}))),
    ]
    for field, call in calls:
        with pytest.raises(InvalidInput) as info:
            call()
        assert info.value.field == field
    assert _ids(stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT)) == [kept]
    assert stm_store.count() == 1


# ---------------------------------------------------------------- expiry
def test_expired_records_vanish_without_a_sweep(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    record_id = _add(stm_store, FLIGHT)
    short = _add(stm_store, SEATS, ttl_s=10)
    clock.advance(10)  # expires_at == now: expired (a record lives while now < expires_at)
    assert _ids(stm_store.query(user_id=ALICE, session_id="s1", text=SEATS)) == [record_id]
    assert stm_store.get(user_id=ALICE, record_id=short) is None
    clock.advance(TTL + 1)
    assert stm_store.query(user_id=ALICE, session_id="s1", text=FLIGHT) == []
    assert stm_store.get(user_id=ALICE, record_id=record_id) is None
    assert stm_store.count() == 0
    assert stm_store.count(filter=StmFilter(user_id=ALICE, session_id="s1")) == 0
    assert stm_store.records(filter=StmFilter(user_id=ALICE)) == []
    # Still stored until swept: sweeps and forgetting can see them.
    dead = stm_store.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    assert sorted(r.record_id for r in dead) == sorted([record_id, short])


def test_the_engines_sweep_removes_expired_in_pages(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    for i in range(5):
        _add(stm_store, f"{FLIGHT} number {i}", ttl_s=10)
    keep = [_add(stm_store, SEATS), _add(stm_store, HOTEL, user_id=BOB)]
    assert sweep_due(stm_store) == 0
    clock.advance(11)
    assert [sweep_due(stm_store, limit=2) for _ in range(4)] == [2, 2, 1, 0]
    alive = stm_store.records(filter=StmFilter(user_id=ALICE, include_dead=True))
    assert [r.record_id for r in alive] == keep[:1]
    assert stm_store.count() == 2


# ---------------------------------------------------------------- get / records / delete / count
def test_records_delete_and_count_by_filter(stm_store: ShortTermStore, clock: VirtualClock) -> None:
    ids = []
    for text, session in [(SEATS, "s1"), (FLIGHT, "s1"), (HOTEL, "s2"), (REPORT, "s2")]:
        clock.advance(1)
        ids.append(_add(stm_store, text, session_id=session))
    _add(stm_store, FLIGHT, user_id=BOB)
    alice = StmFilter(user_id=ALICE)
    assert [r.record_id for r in stm_store.records(filter=alice)] == ids  # oldest first
    s2 = StmFilter(user_id=ALICE, session_id="s2")
    assert [r.record_id for r in stm_store.records(filter=s2)] == ids[2:]
    some = StmFilter(user_id=ALICE, record_ids=frozenset({ids[0], ids[3], "missing"}))
    assert [r.record_id for r in stm_store.records(filter=some)] == [ids[0], ids[3]]
    instructions = StmFilter(user_id=ALICE, types=frozenset({MemoryType.INSTRUCTION}))
    assert stm_store.count(filter=instructions) == 3
    assert (stm_store.count(filter=alice), stm_store.count()) == (4, 5)
    assert stm_store.count(filter=StmFilter(user_id=ALICE, types=frozenset())) == 0
    assert stm_store.delete(filter=StmFilter(user_id=ALICE, record_ids=frozenset())) == 0
    assert (
        stm_store.delete(filter=StmFilter(user_id=ALICE, session_id="s1", types=instructions.types))
        == 1
    )
    assert stm_store.delete(filter=s2) == 2
    assert [r.record_id for r in stm_store.records(filter=alice)] == ids[:1]
    assert stm_store.count() == 2


def test_delete_spares_expired_records_unless_asked(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    _add(stm_store, SEATS, ttl_s=5)
    _add(stm_store, FLIGHT)
    clock.advance(5)
    assert stm_store.delete(filter=StmFilter(user_id=ALICE)) == 1
    everything = StmFilter(user_id=ALICE, include_dead=True)
    assert stm_store.count(filter=everything) == 1
    assert stm_store.delete(filter=everything) == 1
    assert stm_store.count(filter=everything) == 0


# ---------------------------------------------------------------- engine primitives
def test_never_expires_and_a_given_intent(stm_store: ShortTermStore, clock: VirtualClock) -> None:
    decision = IntentDecision(keep=True, kind=MemoryType.FACT, reason="the caller's")
    result = stm_store.add(
        user_id=ALICE, session_id="s1", text=FLIGHT, never_expires=True, intent=decision
    )
    assert result.record is not None and result.record.expires_at is None
    assert (result.reason, result.record.type) == ("the caller's", MemoryType.FACT)
    clock.advance(10 * 365 * 86400)
    assert stm_store.get(user_id=ALICE, record_id=result.record.record_id) == result.record
    assert sweep_due(stm_store) == 0
    with pytest.raises(InvalidInput, match=r"^ttl_s: "):
        stm_store.add(user_id=ALICE, session_id="s1", text=FLIGHT, ttl_s=5, never_expires=True)


def test_touch_stores_retention_in_one_write(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    flight, seats, bobs = (
        _add(stm_store, FLIGHT),
        _add(stm_store, SEATS),
        _add(stm_store, HOTEL, user_id=BOB),
    )
    short = _add(stm_store, REPORT, ttl_s=10)
    clock.advance(20)
    updates = [
        RetentionUpdate(flight, clock.now() + 500, 7.5),
        RetentionUpdate(seats, None, 0.0),
        RetentionUpdate(bobs, None, 9.0),  # another user's: skipped
        RetentionUpdate(short, None, 9.0),  # expired: an access never resurrects
        RetentionUpdate("missing", None, 9.0),
    ]
    assert stm_store.touch(user_id=ALICE, updates=updates) == 2
    got = stm_store.get(user_id=ALICE, record_id=flight)
    assert got is not None
    assert (got.expires_at, got.importance, got.access_count) == (clock.now() + 500, 7.5, 1)
    assert got.last_accessed_at == clock.now()
    never = stm_store.get(user_id=ALICE, record_id=seats)
    assert never is not None and (never.expires_at, never.importance) == (None, 0.0)
    assert stm_store.get(user_id=BOB, record_id=bobs).access_count == 0  # type: ignore[union-attr]
    assert stm_store.get(user_id=ALICE, record_id=short) is None
    clock.advance(500)
    assert stm_store.get(user_id=ALICE, record_id=flight) is None
    assert sweep_due(stm_store) == 2  # flight at its new deadline, and short
    with pytest.raises(InvalidInput, match=r"^importance: "):
        stm_store.touch(user_id=ALICE, updates=[RetentionUpdate(seats, None, -1.0)])


def test_similar_reaches_every_session_and_dead_records(
    stm_store: ShortTermStore, clock: VirtualClock, embedder: Embedder
) -> None:
    here, there = _add(stm_store, FLIGHT), _add(stm_store, FLIGHT, session_id="s2")
    old = _add(stm_store, FLIGHT, session_id="s3", ttl_s=5)
    _add(stm_store, SEATS)
    _add(stm_store, FLIGHT, user_id=BOB)
    clock.advance(10)
    vector = embedder.embed_one(FLIGHT)
    hits = stm_store.similar(user_id=ALICE, embedding=vector, min_score=0.99)
    assert sorted(_ids(hits)) == sorted([here, there, old])
    live = stm_store.similar(user_id=ALICE, embedding=vector, min_score=0.99, include_dead=False)
    assert sorted(_ids(live)) == sorted([here, there])
    assert stm_store.similar(user_id="nobody", embedding=vector, min_score=0.1) == []
    assert all(h.record.access_count == 0 for h in hits)


def test_scan_pages_the_namespace_by_id_and_purge_removes(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    ids = [
        _add(stm_store, FLIGHT, user_id=user, ttl_s=5 if n % 3 == 0 else None)
        for n, user in enumerate([ALICE, BOB] * 6)
    ]
    clock.advance(10)  # a third are expired: a scan still sees them
    pages, after = [], None
    while page := stm_store.scan(after=after, limit=5):
        pages.append([r.record_id for r in page])
        after = page[-1].record_id
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [i for p in pages for i in p] == sorted(ids)
    assert stm_store.purge(record_ids=set(pages[0]) | {"gone"}) == 5
    assert stm_store.purge(record_ids=pages[0]) == 0
    assert [r.record_id for r in stm_store.scan(limit=100)] == sorted(ids)[5:]
    assert stm_store.scan(after=sorted(ids)[-1], limit=3) == []
    with pytest.raises(InvalidInput, match=r"^limit: "):
        stm_store.scan(limit=0)


def test_scan_due_is_exact_at_the_boundary_and_pages_by_id(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    now = T0 + 5  # "now" records expire exactly then, "later" ones a microsecond after
    due_now = [_add(stm_store, FLIGHT, user_id=u, ttl_s=5) for u in (ALICE, BOB, ALICE, BOB)]
    never = _add(stm_store, SEATS, never_expires=True)
    default = _add(stm_store, HOTEL)  # the store's TTL
    clock.advance(1e-6)
    later = _add(stm_store, REPORT, ttl_s=5)
    assert clock.now() + 5 > now

    def due(at: float, limit: int = 1000) -> list[str]:
        ids: list[str] = []
        after = None
        while True:
            page = stm_store.scan_due(now=at, after=after, limit=limit)
            assert all(not r.is_live(at) for r in page.records)
            ids += [r.record_id for r in page.records]
            if page.after is None:
                return ids
            after = page.after

    stored = stm_store.scan(limit=100)
    assert due(now - 1e-6) == []
    assert due(now) == sorted(due_now)
    assert due(now, limit=3) == sorted(due_now)  # pages of 3 and 1
    first = stm_store.scan_due(now=now, limit=3)
    assert (len(first.records), first.after) == (3, sorted(due_now)[2])
    assert stm_store.scan_due(now=now, after=sorted(due_now)[1]).records == [
        r for r in stm_store.scan_due(now=now).records[2:]
    ]
    assert due(now + 2e-6) == sorted([*due_now, later])
    assert due(T0 + TTL) == sorted([*due_now, later, default])
    assert never not in due(T0 + 100 * 365 * 86400)
    # A read: nothing changed; a purged record is no longer due.
    assert stm_store.scan(limit=100) == stored
    stm_store.purge(record_ids=due_now[:2])
    assert due(now) == sorted(due_now[2:])
    with pytest.raises(InvalidInput, match=r"^limit: "):
        stm_store.scan_due(now=now, limit=0)


def test_scan_due_lists_records_that_are_not_active(
    stm_store: ShortTermStore, clock: VirtualClock
) -> None:
    kept = _add(stm_store, FLIGHT, never_expires=True)
    other = _add(stm_store, SEATS)
    record = stm_store.get(user_id=ALICE, record_id=kept)
    assert record is not None
    # No public operation leaves a short-term record inactive (archiving one removes it),
    # but a store written by another version may hold one: a sweep must see it at once.
    stm_store._apply(PutRecord(replace(record, status=Status.ARCHIVED), np.ones(384)))
    assert [r.record_id for r in stm_store.scan_due(now=T0).records] == [kept]
    assert other not in [r.record_id for r in stm_store.scan_due(now=T0 + 1).records]


# ---------------------------------------------------------------- bad input
NAN = [math.nan] + [0.0] * 383
BAD_ADDS: list[tuple[str, dict[str, Any]]] = [
    ("text", {"text": ""}),
    ("text", {"text": " \n\t "}),
    ("text", {"text": "a" * 8001}),
    ("text", {"text": "bad \ud800 surrogate"}),
    ("importance", {"importance": 11}),
    ("importance", {"importance": -0.5}),
    ("importance", {"importance": math.nan}),
    ("ttl_s", {"ttl_s": 0}),
    ("type", {"type": "bogus"}),
    ("embedding", {"embedding": [0.1] * 383}),
    ("embedding", {"embedding": NAN}),
    ("embedding", {"embedding": [0.0] * 384}),
    ("metadata", {"metadata": {"_private": 1}}),
    ("metadata.x", {"metadata": {"x": math.nan}}),
    ("metadata.x", {"metadata": {"x": 2**70}}),
    ("metadata.x", {"metadata": {"x": [1, 2]}}),
]


@pytest.mark.parametrize(("field", "kwargs"), BAD_ADDS, ids=[f for f, _ in BAD_ADDS])
def test_bad_add_is_refused_naming_the_field(
    stm_store: ShortTermStore, field: str, kwargs: dict[str, Any]
) -> None:
    args: dict[str, Any] = {"user_id": ALICE, "session_id": "s1", "text": FLIGHT, "force": True}
    with pytest.raises(InvalidInput) as info:
        stm_store.add(**(args | kwargs))
    assert info.value.field == field
    assert stm_store.count(filter=StmFilter(user_id=ALICE, include_dead=True)) == 0


BAD_QUERIES: list[tuple[str, dict[str, Any]]] = [
    ("k", {"k": 0}),
    ("k", {"k": 1001}),
    ("text", {"text": "  "}),
    ("text", {"text": None}),
    ("text", {"text": "x" * 8001}),
    ("embedding", {"embedding": [0.1] * 385}),
    ("embedding", {"embedding": NAN}),
    ("embedding", {"embedding": [0.0] * 384}),
]


@pytest.mark.parametrize(("field", "kwargs"), BAD_QUERIES, ids=[f for f, _ in BAD_QUERIES])
def test_bad_query_is_refused_naming_the_field(
    stm_store: ShortTermStore, field: str, kwargs: dict[str, Any]
) -> None:
    _add(stm_store, FLIGHT)
    with pytest.raises(InvalidInput) as info:
        stm_store.query(**({"user_id": ALICE, "session_id": "s1", "text": FLIGHT} | kwargs))
    assert info.value.field == field


# ---------------------------------------------------------------- differential
WORDS = [
    *("flight", "hotel", "paris", "rome", "train", "ticket", "seat", "window", "aisle"),
    *("refund", "order", "invoice", "address", "phone", "email", "manager", "report"),
    *("meeting", "monday", "friday", "北京", "上海", "高铁", "酒店", "订单"),
]


def _history(seed: int, steps: int) -> list[tuple[str, dict[str, Any]]]:
    """A seeded random history of adds, queries, clock moves, sweeps and deletes."""
    rng = random.Random(seed)
    texts = [" ".join(rng.sample(WORDS, rng.randint(1, 4))) for _ in range(25)]
    ops: list[tuple[str, dict[str, Any]]] = []
    for _ in range(steps):
        where = {"user_id": rng.choice([ALICE, BOB]), "session_id": rng.choice(["s1", "s2"])}
        roll = rng.random()
        if roll < 0.55:  # repeats of a few texts make exact score ties
            kind = rng.choice([None, "fact", "preference"])
            ttl = rng.choice([None, 60.0, 600.0])
            ops.append(
                (
                    "add",
                    where
                    | {
                        "text": rng.choice(texts),
                        "type": kind,
                        "ttl_s": ttl,
                        "force": True,
                    },
                )
            )
        elif roll < 0.85:
            ops.append(("query", where | {"text": rng.choice(texts), "k": rng.randint(1, 8)}))
        elif roll < 0.93:
            ops.append(("advance", {"seconds": rng.choice([1.0, 30.0, 120.0])}))
        elif roll < 0.97:
            ops.append(("sweep", {"batch_size": rng.randint(1, 5)}))
        else:
            ops.append(("delete", {"filter": StmFilter(**where)}))
    return ops


class _Score(float):
    """A score that equals another within 1e-6 (see the module docstring)."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, float) and abs(self - other) <= 1e-6

    __hash__ = float.__hash__


def _replay(
    store: ShortTermStore, clock: VirtualClock, ops: list[tuple[str, dict[str, Any]]]
) -> list[Any]:
    out: list[Any] = []
    for op, kwargs in ops:
        if op == "add":
            record = store.add(**kwargs).record
            out.append(record)
        elif op == "query":
            out.append([(h.record, _Score(h.score)) for h in store.query(**kwargs)])
        elif op == "advance":
            clock.advance(kwargs["seconds"])
        elif op == "sweep":
            out.append(("swept", sweep_due(store, limit=kwargs["batch_size"])))
        else:
            out.append(("deleted", store.delete(**kwargs)))
    out.append(("count", store.count()))
    out.append(("swept", sweep_due(store, limit=10_000)))
    for user in (ALICE, BOB):
        out.append(store.records(filter=StmFilter(user_id=user, include_dead=True)))
    return out


@pytest.mark.parametrize("chroma", chroma_backend_params())
@pytest.mark.parametrize("scan_limit", [100, 0], ids=["scan", "hnsw"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_chroma_matches_the_in_memory_oracle(
    make_stm_store: StmStoreFactory, chroma: str, scan_limit: int, seed: int
) -> None:
    ops = _history(seed, 160)
    oracle_clock, chroma_clock = VirtualClock(T0), VirtualClock(T0)
    oracle = make_stm_store("memory", clock=oracle_clock, id_factory=sequential_ids())
    expected = _replay(oracle, oracle_clock, ops)
    store = make_stm_store(
        chroma, clock=chroma_clock, scan_limit=scan_limit, id_factory=sequential_ids()
    )
    assert _replay(store, chroma_clock, ops) == expected


@pytest.mark.parametrize("chroma", chroma_backend_params())
def test_chroma_hnsw_path_is_exact_within_ef(make_stm_store: StmStoreFactory, chroma: str) -> None:
    """A session larger than the scan limit goes through HNSW; while it fits in `ef`, the
    filtered search is exhaustive, so the ranking is still exactly the oracle's."""
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((240, 384)).astype(np.float32)
    oracle = make_stm_store("memory", id_factory=sequential_ids())
    store = make_stm_store(chroma, scan_limit=10, id_factory=sequential_ids())
    for target in (oracle, store):
        for i, vector in enumerate(vectors):
            session = "big" if i % 3 == 0 else f"other{i % 7}"
            _add(target, f"{HOTEL} {i}", session_id=session, embedding=vector, force=True)
    for query in rng.standard_normal((15, 384)):
        expected = oracle.query(user_id=ALICE, session_id="big", embedding=query, k=10)
        got = store.query(user_id=ALICE, session_id="big", embedding=query, k=10)
        assert _ids(got) == _ids(expected)
        assert [h.score for h in got] == pytest.approx([h.score for h in expected], abs=1e-6)


@pytest.mark.parametrize("chroma", chroma_backend_params())
def test_chroma_hnsw_path_looks_past_expired_neighbours(
    make_stm_store: StmStoreFactory, clock: VirtualClock, chroma: str
) -> None:
    """Liveness is checked after the HNSW fetch, so expired records nearest the query
    must make the fetch grow until k live records are found."""
    rng = np.random.default_rng(11)
    query = rng.standard_normal(384)
    near = query + 0.1 * rng.standard_normal((40, 384))
    far = rng.standard_normal((5, 384))
    oracle = make_stm_store("memory", id_factory=sequential_ids())
    store = make_stm_store(chroma, scan_limit=0, id_factory=sequential_ids())
    for target in (oracle, store):
        near_ids = {
            _add(target, f"{FLIGHT} {i}", embedding=v, ttl_s=10) for i, v in enumerate(near)
        }
        for i, vector in enumerate(far):
            _add(target, f"{HOTEL} {i}", embedding=vector)
    clock.advance(10)
    expected = oracle.query(user_id=ALICE, session_id="s1", embedding=query, k=3)
    got = store.query(user_id=ALICE, session_id="s1", embedding=query, k=3)
    assert _ids(got) == _ids(expected) and not set(_ids(got)) & near_ids


# ---------------------------------------------------------------- Chroma layout and client
@pytest.mark.parametrize("chroma", chroma_backend_params())
def test_chroma_layout_is_one_collection_with_flat_metadata(
    make_stm_store: StmStoreFactory, chroma: str
) -> None:
    store = make_stm_store(chroma)
    record_id = _add(store, SEATS, metadata={"src": "chat"})
    _add(store, FLIGHT, user_id=BOB, session_id="s9")
    assert isinstance(store, ChromaShortTermStore)
    collection = store.client.get_collection(store.namespace.stm_collection)
    assert collection.configuration["hnsw"]["space"] == "cosine"
    assert collection.count() == 2
    (metadata,) = collection.get(ids=[record_id], include=["metadatas"])["metadatas"]
    assert metadata == {
        "user_id": ALICE,
        "session_id": "s1",
        "scope": f"{ALICE}/s1",
        "type": "preference",
        "created_at": T0,
        "last_accessed_at": T0,
        "access_count": 0,
        "importance": 5.0,
        "expires_at": T0 + TTL,
        "status": "active",
        "m_src": "chat",
    }


@pytest.mark.parametrize("chroma", chroma_backend_params())
def test_chroma_refuses_a_collection_of_another_space(
    request: pytest.FixtureRequest, make_stm_store: StmStoreFactory, chroma: str
) -> None:
    store = make_stm_store(chroma)  # registers the collection for deletion after the test
    assert isinstance(store, ChromaShortTermStore)
    name = store.namespace.stm_collection
    store.client.delete_collection(name)
    chroma_client(request, chroma).create_collection(
        name, configuration={"hnsw": {"space": "l2"}}, embedding_function=None
    )
    with pytest.raises(ConfigurationError, match="cosine"):
        make_stm_store(chroma)


@pytest.mark.parametrize(
    "url",
    [
        "",
        "localhost:8000",
        "ftp://host",
        "http://",
        "http://h:99999",
        "http://h:x",
        "http://u:p@h:1",
        "http://h:1/api",
        "http://h:1?x=1",
    ],
)
def test_bad_chroma_url_is_refused(url: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as info:
        make_chroma_client(url, tmp_path)
    assert info.value.field == "chroma_url"


def test_chroma_url_defaults_and_unreachable_server(tmp_path: Path) -> None:
    assert parse_chroma_url("http://127.0.0.1") == ("127.0.0.1", 8000, False)
    assert parse_chroma_url("https://chroma.example.com/") == ("chroma.example.com", 443, True)
    with pytest.raises(BackendUnavailable):
        make_chroma_client("http://127.0.0.1:9", tmp_path)


def test_embedded_client_is_one_per_directory(data_dir: Path) -> None:
    client = make_chroma_client(None, data_dir)
    assert make_chroma_client(None, data_dir / ".") is client
    assert (data_dir / "chroma").is_dir()


# ---------------------------------------------------------------- a backend from the primitives
class MinimalShortTermStore(ShortTermStore):
    """A short-term backend written from the five primitives alone: dicts, brute force,
    the shared storage rules (`storable_*`) and exact cosine. It runs the whole suite
    above (the "minimal" backend): the public API comes from `ShortTermStore`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stored: dict[str, MemoryRecord] = {}
        self.vectors: dict[str, np.ndarray] = {}

    def _apply(self, op: StmWrite) -> Any:
        if isinstance(op, PutRecord):
            storable_record(op.record)
            self.vectors[op.record.record_id] = storable_vector("embedding", op.embedding).copy()
            self.stored[op.record.record_id] = op.record
            return None
        if isinstance(op, WriteAccess):
            for write in op.writes:
                if write.record_id in self.stored:
                    self.stored[write.record_id] = write.apply(self.stored[write.record_id])
            return None
        ids = (
            [r.record_id for r in self._fetch(op.filter, op.now)]
            if isinstance(op, DeleteRecords)
            else [i for i in op.record_ids if i in self.stored]
        )
        for record_id in ids:
            del self.stored[record_id], self.vectors[record_id]
        return len(ids)

    def _fetch(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        found = [r for r in self.stored.values() if flt.matches(r, now)]
        return sorted(found, key=lambda r: (r.created_at, r.record_id))

    def _search(
        self, embedding: Any, flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        query = storable_vector("embedding", embedding)
        found = self._fetch(flt, now)
        if not found:
            return []
        scores = cosine_scores(np.stack([self.vectors[r.record_id] for r in found]), query)
        best = top_k(((float(s), r.record_id, r) for s, r in zip(scores, found, strict=True)), k)
        return [Hit(record=record, score=score) for score, _, record in best]

    def _count(self, flt: StmFilter | None, now: float) -> int:
        if flt is None:
            return sum(r.is_live(now) for r in self.stored.values())
        return len(self._fetch(flt, now))

    def _scan(self, after: str | None, limit: int, due_at: float | None) -> list[MemoryRecord]:
        page = sorted(
            (r for r in self.stored.values() if after is None or r.record_id > after),
            key=lambda r: r.record_id,
        )
        if due_at is not None:
            page = [r for r in page if not r.is_live(due_at)]
        return page[:limit]


@pytest.fixture(params=[*STM_BACKENDS, MINIMAL])
def stm_backend(request: pytest.FixtureRequest) -> str:
    """Every short-term backend, and the minimal one above."""
    return str(request.param)


@pytest.fixture
def minimal_stm_store_class() -> type[ShortTermStore]:
    return MinimalShortTermStore
