"""Conformance suite of the long-term layer: every backend passes the same tests.

The in-memory backend is the oracle: the last test checks PostgreSQL against it on
10,000 facts. Time only moves through the virtual clock.
"""

from __future__ import annotations

import dataclasses
import json
import math
import threading
from typing import Any

import numpy as np
import psycopg
import pytest

from reference.clock import VirtualClock
from reference.crypto import anonymise_value
from reference.errors import InvalidInput, MemoryStoreError
from reference.forgetting.plans import anonymised
from reference.ids import new_id
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.ltm.common import (
    accessed_fact,
    as_real,
    audit_draft,
    copy_fact,
    copy_json,
    nonzero_vector,
    numbered,
    storable_json,
    storable_text,
)
from reference.ltm.filters import AUDIT_ACTIONS, REDACTED, FactChangeCounts, FactChanges, LtmFilter
from reference.ltm.memory_store import InMemoryLongTermStore
from reference.ltm.postgres_store import PostgresLongTermStore
from reference.ltm.primitives import (
    ApplyChanges,
    ArchiveFacts,
    AuditLog,
    DeleteFacts,
    DueScan,
    ForgetActivity,
    LtmLookup,
    LtmWrite,
    MarkActive,
    RecordAccess,
    UpsertFact,
    audit_matches,
)
from reference.models import AuditEntry, Category, Fact, Hit, RetentionUpdate, Status
from reference.policy.sweep import DueRule, next_due_at
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.fixtures.ltm_backends import LTM_BACKENDS, MINIMAL, LtmStoreFactory

DIM = 384


def unit(seed: int) -> np.ndarray:
    """A reproducible random unit vector."""
    v = np.random.default_rng(seed).standard_normal(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def put(
    store: LongTermStore,
    key: str,
    *,
    user: str = "u1",
    seed: int | None = None,
    category: str = "preference",
    **kwargs: Any,
) -> Fact:
    kwargs.setdefault("value", {"v": key})
    kwargs.setdefault("text", f"the {key}")
    if seed is not None:
        kwargs["embedding"] = unit(seed)
    return store.upsert(user_id=user, category=category, key=key, **kwargs)


def everything(store: LongTermStore, user: str = "u1") -> list[Fact]:
    return store.facts(filter=LtmFilter(user_id=user, include_dead=True))


def actions(store: LongTermStore, user: str = "u1") -> list[str]:
    return [e.action for e in store.audit_log(user_id=user)]


# ---------------------------------------------------------------------------- upsert


def test_upsert_inserts_version_1_and_audits_insert(ltm_store: LongTermStore, clock: VirtualClock):
    fact = put(
        ltm_store, "drink", value={"v": "tea"}, text="I drink tea", importance=7.5, actor="agent"
    )
    assert (fact.version, fact.status, fact.value, fact.importance) == (
        1,
        Status.ACTIVE,
        {"v": "tea"},
        7.5,
    )
    assert fact.created_at == fact.updated_at == fact.last_accessed_at == clock.now()
    assert fact.access_count == 0 and fact.expires_at is None
    [entry] = ltm_store.audit_log(user_id="u1")
    assert entry == AuditEntry(
        audit_id=1,
        fact_id=fact.fact_id,
        user_id="u1",
        category=Category.PREFERENCE,
        key="drink",
        action="insert",
        actor="agent",
        at=clock.now(),
        version=1,
        old_value=None,
        new_value={"v": "tea"},
        cause="",
    )


def test_upsert_of_same_key_supersedes(ltm_store: LongTermStore, clock: VirtualClock):
    old = put(ltm_store, "city", value={"v": "Paris"}, text="I live in Paris", seed=1)
    clock.advance(60)
    new = put(ltm_store, "  city ", value={"v": "Lyon"}, text="I live in Lyon", seed=2, actor="bob")
    assert (new.fact_id, new.key, new.version) == (old.fact_id, "city", 2)
    assert (new.created_at, new.updated_at) == (old.created_at, clock.now())
    assert ltm_store.get(user_id="u1", category="preference", key="city").value == {"v": "Lyon"}
    hits = ltm_store.query(user_id="u1", embedding=unit(1), k=5)
    assert [h.record.text for h in hits] == ["I live in Lyon"]
    assert len(everything(ltm_store)) == 1
    entries = ltm_store.audit_log(user_id="u1", fact_id=old.fact_id)
    assert [(e.action, e.version, e.actor) for e in entries] == [
        ("insert", 1, "system"),
        ("update", 2, "bob"),
    ]
    assert (entries[1].old_value, entries[1].new_value) == ({"v": "Paris"}, {"v": "Lyon"})
    assert entries[0].audit_id < entries[1].audit_id


def test_same_key_in_other_category_or_user_is_another_fact(ltm_store: LongTermStore):
    a = put(ltm_store, "name")
    b = put(ltm_store, "name", category="profile")
    c = put(ltm_store, "name", user="u2")
    assert len({a.fact_id, b.fact_id, c.fact_id}) == 3
    assert {a.version, b.version, c.version} == {1}


def test_returned_values_are_copies(ltm_store: LongTermStore):
    fact = put(ltm_store, "diet", value={"v": ["vegan"]})
    fact.value["v"].append("raw")
    got = ltm_store.get(user_id="u1", category="preference", key="diet")
    assert got is not None and got.value == {"v": ["vegan"]}
    got.value["v"].clear()
    assert ltm_store.facts(filter=LtmFilter(user_id="u1"))[0].value == {"v": ["vegan"]}


# ---------------------------------------------------------------------------- get / query


def test_get_returns_live_only_and_touches(ltm_store: LongTermStore, clock: VirtualClock):
    put(ltm_store, "drink")
    clock.advance(10)
    first = ltm_store.get(user_id="u1", category="preference", key="drink")
    clock.advance(10)
    second = ltm_store.get(user_id="u1", category="preference", key="drink")
    assert first is not None and second is not None
    assert (first.access_count, second.access_count) == (1, 2)
    assert second.last_accessed_at == clock.now()
    assert ltm_store.get(user_id="u2", category="preference", key="drink") is None
    assert ltm_store.get(user_id="u1", category="profile", key="drink") is None
    assert ltm_store.get(user_id="u1", category="preference", key="food") is None
    assert actions(ltm_store) == ["insert"]  # reads are not audited


def test_query_stays_within_the_user(ltm_store: LongTermStore):
    for i in range(3):
        put(ltm_store, f"k{i}", user="alice", seed=i)
    put(ltm_store, "k0", user="bob", seed=100)
    hits = ltm_store.query(user_id="bob", embedding=unit(0), k=10)
    assert [h.record.user_id for h in hits] == ["bob"]
    assert ltm_store.query(user_id="carol", embedding=unit(0), k=10) == []


@pytest.mark.parametrize(
    "user_id", ["u1' OR '1'='1", "u1%", "*", "", " u1", "a:b", "x" * 129, "u1\x00", "ü"]
)
def test_crafted_user_ids_are_rejected(ltm_store: LongTermStore, user_id: str):
    put(ltm_store, "drink")
    calls = [
        lambda: ltm_store.query(user_id=user_id, embedding=unit(0)),
        lambda: ltm_store.get(user_id=user_id, category="preference", key="drink"),
        lambda: put(ltm_store, "drink", user=user_id),
        lambda: ltm_store.audit_log(user_id=user_id),
        lambda: LtmFilter(user_id=user_id),
    ]
    for call in calls:
        with pytest.raises(InvalidInput) as err:
            call()
        assert err.value.field == "user_id"


def test_query_filters_by_category(ltm_store: LongTermStore):
    put(ltm_store, "a", category="preference", seed=1)
    put(ltm_store, "b", category="profile", seed=2)
    put(ltm_store, "c", category="entity", seed=3)
    wanted = frozenset({Category.PROFILE, Category.ENTITY})
    hits = ltm_store.query(user_id="u1", embedding=unit(1), k=10, categories=wanted)
    assert sorted(h.record.key for h in hits) == ["b", "c"]
    assert ltm_store.query(user_id="u1", embedding=unit(1), categories=frozenset()) == []


def test_query_ranks_by_cosine_and_honours_k(ltm_store: LongTermStore):
    base = unit(7)
    noise = unit(8)
    for i, weight in enumerate([0.0, 0.3, 0.6, 1.0, 2.0]):
        put(ltm_store, f"k{i}", embedding=base + weight * noise)
    put(ltm_store, "text-only", text="a completely different sentence about weather")
    hits = ltm_store.query(user_id="u1", embedding=base * 3.0, k=3)  # cosine ignores scale
    assert [h.record.key for h in hits] == ["k0", "k1", "k2"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    scores = [h.score for h in ltm_store.query(user_id="u1", embedding=base, k=10)]
    assert len(scores) == 6 and scores == sorted(scores, reverse=True)
    by_text = ltm_store.query(user_id="u1", text="different sentence about the weather", k=1)
    assert by_text[0].record.key == "text-only"


def test_query_breaks_ties_by_fact_id(ltm_store: LongTermStore):
    facts = [put(ltm_store, f"twin{i}", seed=5) for i in range(6)]
    hits = ltm_store.query(user_id="u1", embedding=unit(5), k=4)
    assert [h.record.fact_id for h in hits] == sorted(f.fact_id for f in facts)[:4]


def test_query_touches_only_what_it_returns(ltm_store: LongTermStore, clock: VirtualClock):
    put(ltm_store, "near", seed=1)
    put(ltm_store, "far", embedding=-unit(1))
    clock.advance(30)
    [hit] = ltm_store.query(user_id="u1", embedding=unit(1), k=1)
    assert (hit.record.key, hit.record.access_count, hit.record.last_accessed_at) == (
        "near",
        1,
        clock.now(),
    )
    far = ltm_store.facts(filter=LtmFilter(user_id="u1", keys=frozenset({"far"})))[0]
    assert (far.access_count, far.last_accessed_at) == (0, clock.now() - 30)


# ---------------------------------------------------------------------------- expiry


def test_expired_facts_are_never_returned_even_before_a_sweep(
    ltm_store: LongTermStore, clock: VirtualClock
):
    put(ltm_store, "temp", seed=1, expires_at=clock.now() + 100)
    put(ltm_store, "kept", seed=2)
    assert ltm_store.count(filter=LtmFilter(user_id="u1")) == 2
    clock.advance(100)  # expires_at == now: expired
    assert ltm_store.get(user_id="u1", category="preference", key="temp") is None
    assert [h.record.key for h in ltm_store.query(user_id="u1", embedding=unit(1), k=5)] == ["kept"]
    assert ltm_store.count(filter=LtmFilter(user_id="u1")) == 1
    assert ltm_store.count() == 1
    assert [f.key for f in ltm_store.facts(filter=LtmFilter(user_id="u1"))] == ["kept"]
    assert len(everything(ltm_store)) == 2  # still stored until swept
    stale = put(ltm_store, "born-dead", seed=1, expires_at=clock.now() - 1)
    assert stale.version == 1  # stored (and audited), but never returned
    assert ltm_store.get(user_id="u1", category="preference", key="born-dead") is None
    assert [h.record.key for h in ltm_store.query(user_id="u1", embedding=unit(1), k=5)] == ["kept"]
    assert ltm_store.count() == 1


def test_expired_facts_are_due_and_removed_in_pages_with_audit(
    ltm_store: LongTermStore, clock: VirtualClock
):
    for i in range(5):
        put(ltm_store, f"e{i}", user=f"u{i % 2}", expires_at=clock.now() + 10 + i)
    put(ltm_store, "later", expires_at=clock.now() + 1000)
    put(ltm_store, "forever")
    clock.advance(50)
    removed, after = [], None
    while True:  # the engine's sweep: a page of what is due, then one batch of changes
        page = ltm_store.scan_due(now=clock.now(), rule=DueRule(), after=after, limit=2)
        ids = frozenset(f.fact_id for f in page.records)
        removed.append(ltm_store.apply_changes(FactChanges(delete=ids), actor="janitor").deleted)
        if page.after is None:
            break
        after = page.after
    assert sum(removed) == 5 and all(n <= 2 for n in removed)
    assert sorted(f.key for f in everything(ltm_store, "u0") + everything(ltm_store, "u1")) == [
        "forever",
        "later",
    ]
    deletes = [
        e for u in ("u0", "u1") for e in ltm_store.audit_log(user_id=u) if e.action == "delete"
    ]
    assert sorted(e.key for e in deletes) == [f"e{i}" for i in range(5)]
    assert {(e.actor, e.at) for e in deletes} == {("janitor", clock.now())}
    assert all(e.old_value == {"v": e.key} and e.new_value is None for e in deletes)


# ---------------------------------------------------------------------------- archive / delete


def test_archive_hides_and_upsert_reactivates(ltm_store: LongTermStore, clock: VirtualClock):
    fact = put(ltm_store, "addr", seed=1)
    put(ltm_store, "other", seed=2)
    clock.advance(5)
    flt = LtmFilter(user_id="u1", keys=frozenset({"addr"}))
    assert ltm_store.archive(filter=flt, actor="forgetter") == 1
    assert ltm_store.archive(filter=flt) == 0  # already archived: not live, not matched
    assert ltm_store.get(user_id="u1", category="preference", key="addr") is None
    assert [h.record.key for h in ltm_store.query(user_id="u1", embedding=unit(1))] == ["other"]
    [archived] = ltm_store.facts(filter=dataclasses.replace(flt, include_dead=True))
    assert (archived.status, archived.version, archived.updated_at) == (
        Status.ARCHIVED,
        1,
        clock.now(),
    )
    entry = ltm_store.audit_log(user_id="u1", fact_id=fact.fact_id)[-1]
    assert (entry.action, entry.actor, entry.version, entry.at) == (
        "archive",
        "forgetter",
        1,
        clock.now(),
    )
    back = put(ltm_store, "addr", value={"v": "new"}, seed=1)
    assert (back.status, back.version, back.fact_id) == (Status.ACTIVE, 2, fact.fact_id)
    assert actions(ltm_store)[-1] == "update"


def test_delete_hard_deletes_archived_too_and_audits(ltm_store: LongTermStore, clock: VirtualClock):
    a = put(ltm_store, "a", value={"v": "secret"})
    put(ltm_store, "b")
    put(ltm_store, "c", category="profile")
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"a"})))
    clock.advance(1)
    flt = LtmFilter(user_id="u1", categories=frozenset({Category.PREFERENCE}))
    assert ltm_store.delete(filter=flt, actor="user") == 2
    assert [f.key for f in everything(ltm_store)] == ["c"]
    assert ltm_store.delete(filter=flt) == 0
    entry = ltm_store.audit_log(user_id="u1", fact_id=a.fact_id)[-1]
    assert (entry.action, entry.actor, entry.at) == ("delete", "user", clock.now())
    assert (entry.old_value, entry.new_value) == ({"v": "secret"}, None)
    again = put(ltm_store, "a")
    assert again.version == 1 and again.fact_id != a.fact_id


# ---------------------------------------------------------------------------- engine primitives

SEALED_VALUE = {"v": "138****5678", "_sealed": "v1:00000000:AAAA", "_sealed_at": 1.0}


def values(store: LongTermStore, user: str = "u1", key: str | None = None) -> list[Any]:
    return [
        (e.old_value, e.new_value)
        for e in store.audit_log(user_id=user)
        if key is None or e.key == key
    ]


def test_touch_stores_retention_and_never_resurrects(ltm_store: LongTermStore, clock: VirtualClock):
    a = put(ltm_store, "a")
    b = put(ltm_store, "b", expires_at=clock.now() + 5)
    c = put(ltm_store, "c", user="u2")
    clock.advance(10)
    updates = [
        RetentionUpdate(a.fact_id, clock.now() + 100, 1 / 3),
        RetentionUpdate(b.fact_id, None, 1.0),  # expired: stays expired
        RetentionUpdate(c.fact_id, None, 1.0),  # another user's
    ]
    assert ltm_store.touch(user_id="u1", updates=updates) == 1
    got = ltm_store.facts(filter=LtmFilter(user_id="u1", keys=frozenset({"a"})))[0]
    assert (got.expires_at, got.importance, got.access_count, got.last_accessed_at) == (
        clock.now() + 100,
        as_real(1 / 3),
        1,
        clock.now(),
    )
    [dead] = ltm_store.facts(
        filter=LtmFilter(user_id="u1", keys=frozenset({"b"}), include_dead=True)
    )
    assert (dead.expires_at, dead.access_count) == (T0 + 5, 0)
    assert everything(ltm_store, "u2")[0].access_count == 0
    assert actions(ltm_store) == ["insert", "insert"]  # an access is not audited


def test_similar_reaches_dead_facts_and_touches_nothing(
    ltm_store: LongTermStore, clock: VirtualClock
):
    put(ltm_store, "a", seed=1)
    put(ltm_store, "b", seed=1, expires_at=clock.now() + 1)
    put(ltm_store, "c", seed=1)
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"c"})))
    put(ltm_store, "d", seed=2)
    put(ltm_store, "e", seed=1, user="u2")
    clock.advance(5)
    hits = ltm_store.similar(user_id="u1", embedding=unit(1), min_score=0.99)
    assert sorted(h.record.key for h in hits) == ["a", "b", "c"]
    live = ltm_store.similar(user_id="u1", embedding=unit(1), min_score=0.99, include_dead=False)
    assert [h.record.key for h in live] == ["a"]
    assert all(f.access_count == 0 for f in everything(ltm_store))


def test_erase_deletes_and_redacts_the_audit_by_fact_and_key(
    ltm_store: LongTermStore, clock: VirtualClock
):
    address = put(ltm_store, "address", category="profile", value={"v": "12 Oak"})
    put(ltm_store, "address", category="profile", value={"v": "5 Elm"})
    put(ltm_store, "phone", category="profile", value={"v": "138"})
    ltm_store.delete(filter=LtmFilter(user_id="u1", keys=frozenset({"phone"})))  # audit keeps it
    put(ltm_store, "shipping", value={"v": "SF"})
    put(ltm_store, "address", category="profile", value={"v": "Bob's"}, user="u2")
    clock.advance(1)
    flt = LtmFilter(user_id="u1", keys=frozenset({"address", "phone"}))
    assert ltm_store.erase(filter=flt, actor="forget") == 1  # phone was gone already
    assert [f.key for f in everything(ltm_store)] == ["shipping"]
    for key in ("address", "phone"):
        assert all(v in (None, REDACTED) for pair in values(ltm_store, key=key) for v in pair)
    [*_, last] = ltm_store.audit_log(user_id="u1", fact_id=address.fact_id)
    assert (last.action, last.actor, last.at, last.version) == ("erase", "forget", clock.now(), 2)
    assert (last.old_value, last.new_value) == (None, None)
    assert values(ltm_store, key="shipping") == [(None, {"v": "SF"})]
    assert values(ltm_store, "u2") == [(None, {"v": "Bob's"})]
    # Everything about the user: every fact, the whole audit redacted.
    assert ltm_store.erase(filter=LtmFilter(user_id="u1")) == 1
    assert everything(ltm_store) == []
    assert all(v in (None, REDACTED) for pair in values(ltm_store) for v in pair)
    assert len(everything(ltm_store, "u2")) == 1


def test_scan_pages_every_user_and_status_by_id(ltm_store: LongTermStore, clock: VirtualClock):
    made = [
        put(
            ltm_store, f"k{n}", user=f"u{n % 2}", expires_at=clock.now() + 1 if n % 4 == 0 else None
        )
        for n in range(12)
    ]
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"k1", "k3"})))
    clock.advance(5)
    pages, after = [], None
    while page := ltm_store.scan(after=after, limit=5):
        pages.append([f.fact_id for f in page])
        after = page[-1].fact_id
    assert [len(p) for p in pages] == [5, 5, 2]
    assert [i for p in pages for i in p] == sorted(f.fact_id for f in made)
    statuses = {f.status for f in ltm_store.scan(limit=100)}
    assert statuses == {Status.ACTIVE, Status.ARCHIVED}
    with pytest.raises(InvalidInput, match=r"^limit: "):
        ltm_store.scan(limit=0)


def test_apply_changes_in_one_transaction(ltm_store: LongTermStore, clock: VirtualClock):
    gone = put(ltm_store, "gone", value=SEALED_VALUE)
    erased = put(ltm_store, "erased", value={"v": "x"})
    kept = put(ltm_store, "kept")
    sealed = put(ltm_store, "sealed", value={"v": "old", "_sealed": "v1:11111111:BBBB"})
    sealed = put(ltm_store, "sealed", value=SEALED_VALUE)
    bobs = put(ltm_store, "bobs", user="u2")
    clock.advance(7)
    plain = {"v": "138****5678", "_anonymised": True}
    changes = FactChanges(
        delete=frozenset({gone.fact_id, bobs.fact_id}),
        erase=frozenset({erased.fact_id}),
        archive=frozenset({kept.fact_id, gone.fact_id}),
        anonymise={sealed.fact_id: plain, gone.fact_id: plain},
    )
    assert ltm_store.apply_changes(changes, actor="sweeper") == FactChangeCounts(
        deleted=2, erased=1, archived=1, anonymised=1
    )
    by_key = {f.key: f for f in everything(ltm_store)}
    assert sorted(by_key) == ["kept", "sealed"] and everything(ltm_store, "u2") == []
    assert by_key["kept"].status is Status.ARCHIVED
    now_sealed = by_key["sealed"]
    assert (now_sealed.value, now_sealed.version, now_sealed.updated_at) == (plain, 2, T0)
    # No sealed original is left in the audit: of the anonymised fact, nor of the deleted.
    assert "_sealed" not in repr(values(ltm_store))
    assert values(ltm_store, key="sealed") == [
        (None, {"v": "old", "_anonymised": True}),
        ({"v": "old", "_anonymised": True}, plain),
        (None, plain),
    ]
    assert values(ltm_store, key="gone")[-1] == (plain, None)
    assert values(ltm_store, key="erased") == [(None, REDACTED), (None, None)]
    assert [(e.key, e.action, e.actor) for e in ltm_store.audit_log(user_id="u1")][-4:] == [
        ("gone", "delete", "sweeper"),
        ("erased", "erase", "sweeper"),
        ("kept", "archive", "sweeper"),
        ("sealed", "anonymise", "sweeper"),
    ]
    assert ltm_store.apply_changes(FactChanges()) == FactChangeCounts()


def test_activity_keeps_the_latest_time_per_user(ltm_store: LongTermStore):
    ltm_store.mark_active(activity={"u1": T0 + 5, "u2": T0})
    ltm_store.mark_active(activity={"u1": T0 + 1})
    assert ltm_store.last_active(user_ids=["u1", "u2", "u3"]) == {"u1": T0 + 5, "u2": T0}
    assert ltm_store.forget_activity(user_id="u1") is True
    assert ltm_store.forget_activity(user_id="u1") is False
    assert ltm_store.last_active(user_ids=["u1"]) == {}


# ---------------------------------------------------------------------------- due index

US = 1e-6  # a microsecond: distinct from T0 + x at epoch magnitudes (the ulp is ~2e-7)
GRACE, ANON = 100.0, 50.0
DUE_RULE = DueRule(archive_grace_s=GRACE, anonymise_after_s=ANON)


def due_keys(store: LongTermStore, now: float, rule: DueRule = DUE_RULE) -> list[str]:
    page = store.scan_due(now=now, rule=rule, limit=1000)
    assert page.after is None
    return sorted(f.key for f in page.records)


def sealed(at: float | None, **extra: Any) -> dict[str, Any]:
    value: dict[str, Any] = {"v": "138****5678", "_sealed": "v1:00000000:AAAA", **extra}
    if at is not None:
        value["_sealed_at"] = at
    return value


def test_scan_due_is_exact_at_the_boundary(ltm_store: LongTermStore, clock: VirtualClock):
    now = T0 + GRACE  # every "*_now" fact falls due exactly then, every "*_later" 1 us later
    put(ltm_store, "plain")
    put(ltm_store, "plain_expiring", expires_at=now + 1000)
    put(ltm_store, "expired_now", expires_at=now)
    put(ltm_store, "expired_later", expires_at=now + US)
    put(ltm_store, "sealed_now", value=sealed(now - ANON))
    put(ltm_store, "sealed_later", value=sealed(now - ANON + US))
    put(ltm_store, "nested_now", value={"v": 1, "card": sealed(now - ANON), "x": sealed(now)})
    put(ltm_store, "unstamped", value=sealed(None))  # no valid stamp: due at once
    put(ltm_store, "bad_stamp", value=sealed(None, _sealed_at="yesterday"))
    put(ltm_store, "deep", value={"a": {"b": sealed(0.0)}})  # two levels down: not a seal
    put(ltm_store, "anonymised", value={"v": "138****5678", "_anonymised": True})
    put(ltm_store, "archived_now")
    put(ltm_store, "archived_later")
    put(ltm_store, "deleted", expires_at=T0 + 1)
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"archived_now"})))
    clock.advance(US)
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"archived_later"})))
    ltm_store.delete(filter=LtmFilter(user_id="u1", keys=frozenset({"deleted"})))

    due_at_once = ["bad_stamp", "unstamped"]
    assert due_keys(ltm_store, T0) == due_at_once
    assert due_keys(ltm_store, now - US) == due_at_once
    exact = sorted(["archived_now", "expired_now", "nested_now", "sealed_now", *due_at_once])
    assert due_keys(ltm_store, now) == exact
    assert due_keys(ltm_store, now + 2 * US) == sorted(
        [*exact, "archived_later", "expired_later", "sealed_later"]
    )
    # A rule field that is None drops its kind of deadline; expiry always counts.
    assert due_keys(ltm_store, now, DueRule()) == ["expired_now"]
    assert due_keys(ltm_store, now, DueRule(archive_grace_s=GRACE)) == [
        "archived_now",
        "expired_now",
    ]
    assert due_keys(ltm_store, now + 10**6, DueRule()) == [
        "expired_later",
        "expired_now",
        "plain_expiring",
    ]
    # A read: nothing was touched.
    assert all(f.access_count == 0 for f in everything(ltm_store))


def test_scan_due_pages_by_id(ltm_store: LongTermStore, clock: VirtualClock):
    facts = [
        put(ltm_store, f"k{n:02d}", user=f"u{n % 3}", expires_at=T0 + 5 if n % 2 else None)
        for n in range(15)
    ]
    clock.advance(10)
    due = sorted(f.fact_id for f in facts if f.expires_at is not None)
    pages, after = [], None
    while True:
        page = ltm_store.scan_due(now=clock.now(), rule=DUE_RULE, after=after, limit=3)
        pages.append([f.fact_id for f in page.records])
        if page.after is None:
            break
        assert page.after == pages[-1][-1]  # every candidate here is due
        after = page.after
    assert [i for p in pages for i in p] == due
    assert [len(p) for p in pages] == [3, 3, 1]
    assert ltm_store.scan_due(now=clock.now(), rule=DUE_RULE, after=due[3], limit=100).records == [
        f for f in ltm_store.scan_due(now=clock.now(), rule=DUE_RULE, limit=100).records[4:]
    ]
    assert ltm_store.scan_due(now=clock.now(), rule=DUE_RULE, after=due[-1]).records == []
    with pytest.raises(InvalidInput, match=r"^limit: "):
        ltm_store.scan_due(now=clock.now(), rule=DUE_RULE, limit=0)
    with pytest.raises(InvalidInput, match=r"^now: "):
        ltm_store.scan_due(now=math.inf, rule=DUE_RULE)


def test_scan_due_follows_every_write_of_the_value(ltm_store: LongTermStore, clock: VirtualClock):
    later = T0 + 10 * ANON
    card = put(ltm_store, "card", value=sealed(T0))
    phone = put(ltm_store, "phone", value={"v": "plain"})
    gone = put(ltm_store, "gone", value=sealed(T0))
    assert due_keys(ltm_store, later) == ["card", "gone"]
    # An upsert replaces the value: the seal goes with it, or comes with it.
    put(ltm_store, "card", value={"v": "now plain"})
    put(ltm_store, "phone", value={"v": {"nested": 1}, "f": sealed(T0 + 1)})
    assert due_keys(ltm_store, later) == ["gone", "phone"]
    assert due_keys(ltm_store, T0 + 1 + ANON - US) == ["gone"]
    # Anonymised by a sweep: the value keeps no seal, so the fact is no longer due.
    [fresh] = [f for f in everything(ltm_store) if f.fact_id == phone.fact_id]
    plain = anonymised(fresh.value)
    changes = FactChanges(anonymise={phone.fact_id: plain}, delete=frozenset({gone.fact_id}))
    assert ltm_store.apply_changes(changes) == FactChangeCounts(deleted=1, anonymised=1)
    assert due_keys(ltm_store, later) == []
    # Archived, a fact falls due when its grace is over, and a deleted one never.
    clock.advance(1)
    archived_at = clock.now()
    assert ltm_store.apply_changes(FactChanges(archive=frozenset({card.fact_id}))).archived == 1
    assert due_keys(ltm_store, archived_at + GRACE - US) == []
    assert due_keys(ltm_store, archived_at + GRACE) == ["card"]
    ltm_store.delete(filter=LtmFilter(user_id="u1"))
    assert due_keys(ltm_store, archived_at + 10**6) == []


def test_inactive_users_by_last_activity(ltm_store: LongTermStore):
    ltm_store.mark_active(activity={"u3": T0, "u2": T0 + 5, "u1": T0 + 5, "u4": T0 + 10})
    inactive = ltm_store.inactive_users
    assert inactive(after=T0, until=T0 + 5) == ["u1", "u2"]  # (after, until]
    assert inactive(after=-math.inf, until=T0) == ["u3"]
    assert inactive(after=-math.inf, until=T0 + 10) == ["u1", "u2", "u3", "u4"]
    assert inactive(after=T0 + 5, until=T0 + 10 - US) == []
    assert inactive(after=T0 + 5, until=T0 + 5) == []
    assert inactive(after=T0 + 9, until=T0 + 1) == []
    ltm_store.mark_active(activity={"u2": T0 + 20, "u1": T0 + 1})  # earlier: unchanged
    ltm_store.forget_activity(user_id="u4")
    assert inactive(after=-math.inf, until=T0 + 10) == ["u1", "u3"]
    assert inactive(after=T0 + 10, until=math.inf) == ["u2"]


# ---------------------------------------------------------------------------- list / count


def test_list_and_count_apply_every_filter_field(ltm_store: LongTermStore, clock: VirtualClock):
    facts = []
    for i, cat in enumerate(["preference", "profile", "entity", "preference"]):
        facts.append(put(ltm_store, f"k{i}", category=cat))
        clock.advance(1)
    put(ltm_store, "k0", user="u2")
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"k3"})))

    def keys(**kw: Any) -> list[str]:
        flt = LtmFilter(user_id="u1", **kw)
        listed = [f.key for f in ltm_store.facts(filter=flt)]
        assert ltm_store.count(filter=flt) == len(listed)
        return listed

    assert keys() == ["k0", "k1", "k2"]  # ordered by created_at
    assert keys(include_dead=True) == ["k0", "k1", "k2", "k3"]
    assert keys(categories=frozenset({Category.PREFERENCE})) == ["k0"]
    assert keys(keys=frozenset({"k1", "k2", "zz"})) == ["k1", "k2"]
    assert keys(fact_ids=frozenset({facts[2].fact_id})) == ["k2"]
    assert keys(keys=frozenset()) == []
    assert ltm_store.count() == 4  # whole namespace, live only
    assert all(f.access_count == 0 for f in everything(ltm_store))  # listing does not touch


# ---------------------------------------------------------------------------- setup


def test_setup_is_idempotent_and_safe_in_parallel(
    ltm_store: LongTermStore, ltm_store_factory: LtmStoreFactory
):
    put(ltm_store, "kept")
    ltm_store.setup()
    ltm_store.setup()
    others = [ltm_store_factory() for _ in range(4)]
    errors: list[BaseException] = []

    def run(store: LongTermStore) -> None:
        try:
            store.setup()
        except BaseException as exc:  # surfaced below, in the test's thread
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in others]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert ltm_store.get(user_id="u1", category="preference", key="kept") is not None
    if isinstance(ltm_store, PostgresLongTermStore):
        assert ltm_store.schema_versions() == [1, 2, 3, 4, 5, 6, 7]
        assert others[0].count() == 1


# ---------------------------------------------------------------------------- bad input

BAD_INPUT = {
    "unknown category": ("category", {"category": "hobby"}),
    "empty key": ("key", {"key": "  "}),
    "long text": ("text", {"text": "x" * 8001}),
    "wrong dim": ("embedding", {"embedding": [0.1] * 383}),
    "NaN": ("embedding", {"embedding": [math.nan] + [0.1] * 383}),
    "zero vector": ("embedding", {"embedding": [0.0] * 384}),
    "non-JSON value": ("value", {"value": {"when": object()}}),
    "NUL in value": ("value", {"value": {"v": "a\x00b"}}),
    "importance high": ("importance", {"importance": 10.5}),
    "importance NaN": ("importance", {"importance": math.nan}),
    "bad actor": ("actor", {"actor": "robert'); DROP TABLE x;--"}),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUT))
def test_bad_upsert_input_names_the_field(ltm_store: LongTermStore, case: str):
    field, override = BAD_INPUT[case]
    args: dict[str, Any] = {
        "user_id": "u1",
        "category": "fact",
        "key": "k",
        "value": {},
        "text": "t",
    }
    with pytest.raises(InvalidInput) as err:
        ltm_store.upsert(**{**args, **override})
    assert err.value.field == field
    assert ltm_store.count() == 0 and ltm_store.audit_log(user_id="u1") == []


@pytest.mark.parametrize(
    ("field", "kwargs"),
    [
        ("k", {"k": 0}),
        ("k", {"k": 1001}),
        ("text", {"text": None}),
        ("embedding", {"embedding": [1.0]}),
    ],
)
def test_bad_query_input_names_the_field(
    ltm_store: LongTermStore, field: str, kwargs: dict[str, Any]
):
    with pytest.raises(InvalidInput) as err:
        ltm_store.query(user_id="u1", **kwargs)
    assert err.value.field == field


# ---------------------------------------------------------------------------- transactions

FAILURES = (RuntimeError, MemoryStoreError, psycopg.Error)


def break_audit(store: LongTermStore, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    """Make the audit write fail after the fact itself was written in the same transaction.

    "raise": the hook raises; "constraint": the store really writes an entry that the
    audit table's CHECK (or the in-memory mirror of it) refuses.
    """
    original = store._write_audit  # type: ignore[attr-defined]

    def broken(txn: Any, entries: list[AuditEntry]) -> None:
        if how == "raise":
            raise RuntimeError("audit log unavailable")
        original(txn, [dataclasses.replace(e, action="tampered") for e in entries])

    monkeypatch.setattr(store, "_write_audit", broken)


@pytest.mark.parametrize("how", ["raise", "constraint"])
def test_failed_audit_write_leaves_neither_fact_nor_entry(
    ltm_store: LongTermStore, monkeypatch: pytest.MonkeyPatch, clock: VirtualClock, how: str
):
    kept = put(ltm_store, "kept", value={"v": 1})
    clock.advance(1)
    put(ltm_store, "doomed", expires_at=clock.now() + 1)
    before = ltm_store.audit_log(user_id="u1")
    clock.advance(5)
    with monkeypatch.context() as patch:
        break_audit(ltm_store, patch, how)
        operations = [
            lambda: put(ltm_store, "new"),
            lambda: put(ltm_store, "kept", value={"v": 2}),
            lambda: ltm_store.archive(filter=LtmFilter(user_id="u1")),
            lambda: ltm_store.delete(filter=LtmFilter(user_id="u1")),
            lambda: ltm_store.erase(filter=LtmFilter(user_id="u1")),
            lambda: ltm_store.apply_changes(
                FactChanges(archive=frozenset({kept.fact_id}), delete=frozenset({kept.fact_id}))
            ),
        ]
        for operation in operations:
            with pytest.raises(FAILURES):
                operation()
    assert ltm_store.audit_log(user_id="u1") == before
    assert [(f.key, f.version, f.status, f.value) for f in everything(ltm_store)] == [
        ("kept", 1, Status.ACTIVE, {"v": 1}),
        ("doomed", 1, Status.ACTIVE, {"v": "doomed"}),
    ]
    # The store is still usable, and the ids keep increasing.
    again = put(ltm_store, "kept", value={"v": 3})
    assert (again.fact_id, again.version) == (kept.fact_id, 2)
    assert ltm_store.audit_log(user_id="u1")[-1].audit_id > before[-1].audit_id


# ---------------------------------------------------------------------------- oracle


def test_query_matches_the_in_memory_oracle_on_2000_facts(
    ltm_store: LongTermStore, clock: VirtualClock, namespace: Namespace, embedder: Embedder
):
    oracle = InMemoryLongTermStore(clock=clock, namespace=namespace, embedder=embedder)
    rng = np.random.default_rng(20260101)
    categories = list(Category)
    users = [f"user{i:03d}" for i in range(50)]  # 40 facts each: a user is 2% of the rows
    # 2,000 rows keep CI quick; the latency probe (`memharness latency`) runs at 10,000+.
    vectors = rng.standard_normal((2_000, DIM)).astype(np.float32)
    for i, vector in enumerate(vectors):
        spec = {
            "user_id": users[i % len(users)],
            "category": categories[int(rng.integers(len(categories)))],
            "key": f"key{i}",
            "value": {"i": i},
            "text": f"fact {i}",
            "importance": float(rng.uniform(0, 10)),  # compares float4 rounding too
            "expires_at": clock.now() + 3600 if i % 7 == 0 else None,
            "embedding": vector,
        }
        for store in (ltm_store, oracle):
            store.upsert(**spec)
    clock.advance(7200)  # every seventh fact has expired (not swept)
    for store in (ltm_store, oracle):
        store.archive(filter=LtmFilter(user_id=users[0], categories=frozenset({Category.FACT})))
    assert ltm_store.count() == oracle.count()

    for q in range(40):
        user = users[q % 5]
        query = rng.standard_normal(DIM).astype(np.float32)
        cats = frozenset(categories[:2]) if q % 4 == 0 else None
        k = [1, 5, 10, 50][q % 4]
        got = ltm_store.query(user_id=user, embedding=query, k=k, categories=cats)
        want = oracle.query(user_id=user, embedding=query, k=k, categories=cats)
        assert [h.record.key for h in got] == [h.record.key for h in want]
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    for user in users[:5]:  # same versions, statuses, access counts, timestamps
        got_facts, want_facts = (
            sorted((dataclasses.replace(f, fact_id="") for f in everything(s, user)), key=str)
            for s in (ltm_store, oracle)
        )
        assert got_facts == want_facts


# ---------------------------------------------------------------------------- episodes


def test_episodes_are_facts_under_a_key_of_their_own(ltm_store: LongTermStore):
    # Consolidated utterances (reference.forgetting.consolidation): one key each, so two
    # episodes never supersede each other, and a query finds them beside the facts.
    a = put(ltm_store, "episode:r1", category="episode", seed=1, value={"topic": "seat"})
    b = put(ltm_store, "episode:r2", category="episode", seed=2, value={"topic": "seat"})
    put(ltm_store, "seat", category="preference", seed=3)
    assert (a.version, b.version, a.category) == (1, 1, Category.EPISODE)
    hits = ltm_store.query(user_id="u1", embedding=unit(2), k=3, touch=False)
    assert hits[0].record.key == "episode:r2" and len(hits) == 3
    only = LtmFilter(user_id="u1", categories=frozenset({Category.EPISODE}))
    assert sorted(f.key for f in ltm_store.facts(filter=only)) == ["episode:r1", "episode:r2"]


# ---------------------------------------------------------------------------- minimal backend
class MinimalLongTermStore(LongTermStore):
    """A long-term backend written from the six primitives alone: dicts and brute force,
    the shared storage rules (`reference.ltm.common`), exact cosine. Each write works on
    copies and swaps them in at the end: a failure half-way leaves nothing. It runs the
    whole suite above (the "minimal" backend): the public API comes from `LongTermStore`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.stored: dict[str, Fact] = {}
        self.vectors: dict[str, np.ndarray] = {}
        self.audit: list[AuditEntry] = []
        self.activity: dict[str, float] = {}

    def _write_audit(self, staged: list[AuditEntry], entries: list[AuditEntry]) -> None:
        """Append entries to the staged log (the hook the transaction tests break)."""
        for entry in entries:
            if entry.action not in AUDIT_ACTIONS:
                raise InvalidInput("action", f"unknown audit action {entry.action!r}")
            staged.append(numbered(entry, len(staged) + 1))

    def _apply(self, op: LtmWrite) -> Any:
        if isinstance(op, MarkActive):
            for user, at in op.activity.items():
                self.activity[user] = max(at, self.activity.get(user, at))
            return None
        if isinstance(op, ForgetActivity):
            return self.activity.pop(op.user_id, None) is not None
        facts, vectors, audit = dict(self.stored), dict(self.vectors), list(self.audit)
        new: list[AuditEntry] = []
        result = self._write(op, facts, vectors, audit, new)
        self._write_audit(audit, new)
        self.stored, self.vectors, self.audit = facts, vectors, audit
        return result

    def _write(
        self,
        op: LtmWrite,
        facts: dict[str, Fact],
        vectors: dict[str, np.ndarray],
        audit: list[AuditEntry],
        new: list[AuditEntry],
    ) -> Any:
        if isinstance(op, UpsertFact):
            value = json.loads(storable_json("value", op.value))
            storable_text("key", op.key)
            storable_text("text", op.text)
            vector = nonzero_vector("embedding", op.embedding).astype(np.float64)
            ident = (op.user_id, op.category, op.key)
            prior = next(
                (f for f in facts.values() if (f.user_id, f.category, f.key) == ident), None
            )
            fact = Fact(
                fact_id=new_id() if prior is None else prior.fact_id,
                user_id=op.user_id,
                category=op.category,
                key=op.key,
                value=value,
                text=op.text,
                version=1 if prior is None else prior.version + 1,
                created_at=op.now if prior is None else prior.created_at,
                updated_at=op.now,
                last_accessed_at=op.now if prior is None else prior.last_accessed_at,
                access_count=0 if prior is None else prior.access_count,
                importance=as_real(op.importance),
                expires_at=op.expires_at,
                status=Status.ACTIVE,
            )
            facts[fact.fact_id], vectors[fact.fact_id] = fact, vector
            old = None if prior is None else copy_json(prior.value)
            action = "insert" if prior is None else "update"
            new.append(audit_draft(fact, action, op.actor, op.now, old, copy_json(value), op.cause))
            return copy_fact(fact)
        if isinstance(op, RecordAccess):
            changed = 0
            for update in op.updates:
                fact = facts.get(update.record_id)
                if fact is not None and fact.user_id == op.user_id and fact.is_live(op.now):
                    facts[fact.fact_id] = dataclasses.replace(
                        accessed_fact(fact, op.now),
                        expires_at=update.expires_at,
                        importance=as_real(update.importance),
                    )
                    changed += 1
            return changed
        if isinstance(op, ApplyChanges):
            return _apply_changes(op, facts, audit, new)
        found = _matching(facts, op.filter, op.now)
        if isinstance(op, ArchiveFacts):
            for fact in found:
                if fact.status is Status.ACTIVE:
                    archived = dataclasses.replace(
                        fact, status=Status.ARCHIVED, updated_at=op.now, archive_reason=op.cause
                    )
                    facts[fact.fact_id] = archived
                    new.append(
                        audit_draft(archived, "archive", op.actor, op.now, None, None, op.cause)
                    )
            return len(new)
        for fact in found:
            del facts[fact.fact_id]
        if isinstance(op, DeleteFacts):
            new += [
                audit_draft(f, "delete", op.actor, op.now, copy_json(f.value), None, op.cause)
                for f in found
            ]
        else:  # EraseFacts
            gone = {f.fact_id for f in found}
            for i, entry in enumerate(audit):
                if entry.user_id == op.filter.user_id and (
                    entry.fact_id in gone or audit_matches(entry, op.filter)
                ):
                    audit[i] = _redacted(entry)
            new += [audit_draft(f, "erase", op.actor, op.now, None, None, op.cause) for f in found]
        return len(found)

    def _fetch(self, flt: LtmFilter, now: float, *, touch: bool) -> list[Fact]:
        found = _matching(self.stored, flt, now)
        if touch:
            found = [accessed_fact(f, now) for f in found]
            self.stored.update((f.fact_id, f) for f in found)
        return [copy_fact(f) for f in found]

    def _search(
        self, embedding: Any, flt: LtmFilter, k: int, now: float, *, touch: bool
    ) -> list[Hit[Fact]]:
        query = nonzero_vector("embedding", embedding).astype(np.float64)
        ranked = []
        for fact in _matching(self.stored, flt, now):
            vector = self.vectors[fact.fact_id]
            dot, norms = float(np.add.reduce(vector * query)), float(np.add.reduce(vector * vector))
            similarity = dot / math.sqrt(norms * float(np.add.reduce(query * query)))
            ranked.append((1.0 - min(1.0, max(-1.0, similarity)), fact.fact_id))
        hits = []
        for distance, fact_id in sorted(ranked)[:k]:
            fact = self.stored[fact_id]
            if touch:
                fact = self.stored[fact_id] = accessed_fact(fact, now)
            hits.append(Hit(record=copy_fact(fact), score=1.0 - distance))
        return hits

    def _count(self, flt: LtmFilter | None, now: float) -> int:
        if flt is None:
            return sum(f.is_live(now) for f in self.stored.values())
        return len(_matching(self.stored, flt, now))

    def _scan(self, after: str | None, limit: int, due: DueScan | None) -> list[Fact]:
        page = [
            copy_fact(f)
            for fact_id, f in sorted(self.stored.items())
            if (after is None or fact_id > after)
            and (due is None or ((at := next_due_at(f, due.rule)) is not None and at <= due.now))
        ]
        return page[:limit]

    def _lookup(self, op: LtmLookup) -> Any:
        if isinstance(op, AuditLog):
            return [
                dataclasses.replace(
                    e, old_value=copy_json(e.old_value), new_value=copy_json(e.new_value)
                )
                for e in self.audit
                if op.user_id in (None, e.user_id)
                and op.fact_id in (None, e.fact_id)
                and op.since <= e.at <= op.until
            ]
        if op.user_ids is not None:
            return {u: self.activity[u] for u in op.user_ids if u in self.activity}
        return {u: at for u, at in self.activity.items() if op.after < at <= op.until}


def _matching(facts: dict[str, Fact], flt: LtmFilter, now: float) -> list[Fact]:
    found = [f for f in facts.values() if flt.matches(f, now)]
    return sorted(found, key=lambda f: (f.created_at, f.fact_id))


def _apply_changes(
    op: ApplyChanges, facts: dict[str, Fact], audit: list[AuditEntry], new: list[AuditEntry]
) -> FactChangeCounts:
    changes, actor, now = op
    why = changes.cause_of
    removed = changes.delete | changes.erase
    deleted = [facts.pop(i) for i in sorted(changes.delete) if i in facts]
    erased = [facts.pop(i) for i in sorted(changes.erase - changes.delete) if i in facts]
    new += [
        audit_draft(f, "delete", actor, now, anonymise_value(f.value), None, why(f.fact_id))
        for f in deleted
    ]
    new += [audit_draft(f, "erase", actor, now, None, None, why(f.fact_id)) for f in erased]
    archived = 0
    for fact_id in sorted(changes.archive - removed):
        fact = facts.get(fact_id)
        if fact is not None and fact.status is Status.ACTIVE:
            facts[fact_id] = dataclasses.replace(
                fact, status=Status.ARCHIVED, updated_at=now, archive_reason=why(fact_id)
            )
            new.append(audit_draft(facts[fact_id], "archive", actor, now, None, None, why(fact_id)))
            archived += 1
    anonymised = set()
    for fact_id in sorted(set(changes.anonymise) - removed):
        if fact_id in facts:
            value = json.loads(storable_json("anonymise", changes.anonymise[fact_id]))
            facts[fact_id] = dataclasses.replace(facts[fact_id], value=value)
            new.append(
                audit_draft(
                    facts[fact_id], "anonymise", actor, now, None, copy_json(value), why(fact_id)
                )
            )
            anonymised.add(fact_id)
    stripped = anonymised | {f.fact_id for f in deleted}
    for i, entry in enumerate(audit):
        if entry.fact_id in {f.fact_id for f in erased}:
            audit[i] = _redacted(entry)
        elif entry.fact_id in stripped:
            audit[i] = dataclasses.replace(
                entry,
                old_value=None if entry.old_value is None else anonymise_value(entry.old_value),
                new_value=None if entry.new_value is None else anonymise_value(entry.new_value),
            )
    return FactChangeCounts(len(deleted), len(erased), archived, len(anonymised))


def _redacted(entry: AuditEntry) -> AuditEntry:
    return dataclasses.replace(
        entry,
        old_value=None if entry.old_value is None else dict(REDACTED),
        new_value=None if entry.new_value is None else dict(REDACTED),
    )


@pytest.fixture(params=[*LTM_BACKENDS, MINIMAL])
def ltm_backend(request: pytest.FixtureRequest) -> str:
    """Every long-term backend, and the minimal one above."""
    return str(request.param)


@pytest.fixture
def minimal_ltm_store_class() -> type[LongTermStore]:
    return MinimalLongTermStore
