"""Conformance of the audit's causes and archived facts' reasons: every LTM backend keeps
why each change happened, identically (the in-memory store is the oracle)."""

from __future__ import annotations

import pytest

from reference.clock import VirtualClock
from reference.errors import InvalidInput
from reference.ltm.base import LongTermStore
from reference.ltm.filters import MAX_CAUSE_CHARS, REDACTED, FactChanges, LtmFilter
from reference.models import Status
from tests.conftest import T0


def put(store: LongTermStore, key: str, *, user: str = "u1", cause: str = "") -> str:
    fact = store.upsert(
        user_id=user,
        category="profile",
        key=key,
        value={"value": f"{key} value"},
        text=f"my {key} is {key} value",
        cause=cause,
    )
    return fact.fact_id


def dead(store: LongTermStore, user: str = "u1") -> dict[str, object]:
    facts = store.facts(filter=LtmFilter(user_id=user, include_dead=True))
    return {f.key: (f.status, f.archive_reason) for f in facts}


def causes(store: LongTermStore, user: str = "u1") -> list[tuple[str, str, str]]:
    return [(e.key, e.action, e.cause) for e in store.audit_log(user_id=user)]


def test_every_write_keeps_its_cause(ltm_store: LongTermStore, clock: VirtualClock) -> None:
    put(ltm_store, "city", cause="promotion: profile stated in a turn")
    put(ltm_store, "phone")
    clock.advance(10)
    archived = ltm_store.archive(
        filter=LtmFilter(user_id="u1", keys=frozenset({"city"})),
        actor="events",
        cause="event moved at t (rule 0)",
    )
    ltm_store.delete(filter=LtmFilter(user_id="u1", keys=frozenset({"phone"})), cause="admin")
    assert archived == 1
    assert causes(ltm_store) == [
        ("city", "insert", "promotion: profile stated in a turn"),
        ("phone", "insert", ""),
        ("city", "archive", "event moved at t (rule 0)"),
        ("phone", "delete", "admin"),
    ]
    assert dead(ltm_store) == {"city": (Status.ARCHIVED, "event moved at t (rule 0)")}


def test_an_archived_fact_keeps_its_reason_until_a_new_value(ltm_store: LongTermStore) -> None:
    put(ltm_store, "city")
    assert dead(ltm_store) == {"city": (Status.ACTIVE, None)}
    ltm_store.archive(filter=LtmFilter(user_id="u1"), cause="sweep: user inactive since t")
    assert dead(ltm_store) == {"city": (Status.ARCHIVED, "sweep: user inactive since t")}
    ltm_store.upsert(
        user_id="u1", category="profile", key="city", value={"value": "Rome"}, text="Rome"
    )
    assert dead(ltm_store) == {"city": (Status.ACTIVE, None)}


def test_a_sweep_batch_keeps_each_facts_cause(
    ltm_store: LongTermStore, clock: VirtualClock
) -> None:
    ids = {key: put(ltm_store, key) for key in ("a", "b", "c", "d")}
    changes = FactChanges(
        delete=frozenset({ids["a"]}),
        erase=frozenset({ids["b"]}),
        archive=frozenset({ids["c"], ids["d"]}),
        anonymise={ids["d"]: {"value": "masked"}},
        causes={
            ids["a"]: "sweep: expired by ttl.default_s",
            ids["b"]: "sweep: grace period over",
            ids["c"]: "sweep: user inactive",
        },
    )
    clock.advance(5)
    ltm_store.apply_changes(changes)
    later = [(k, a, c) for k, a, c in causes(ltm_store) if a != "insert"]
    assert sorted(later) == [
        ("a", "delete", "sweep: expired by ttl.default_s"),
        ("b", "erase", "sweep: grace period over"),
        ("c", "archive", "sweep: user inactive"),
        ("d", "anonymise", ""),
        ("d", "archive", ""),
    ]
    assert dead(ltm_store) == {
        "c": (Status.ARCHIVED, "sweep: user inactive"),
        "d": (Status.ARCHIVED, ""),
    }


def test_erasure_redacts_values_and_keeps_the_cause(ltm_store: LongTermStore) -> None:
    put(ltm_store, "phone", cause="promotion: profile stated in a turn")
    ltm_store.upsert(
        user_id="u1", category="profile", key="phone", value={"value": "138"}, text="138"
    )
    ltm_store.erase(filter=LtmFilter(user_id="u1", keys=frozenset({"phone"})), cause="forget")
    entries = ltm_store.audit_log(user_id="u1")
    assert [(e.action, e.cause) for e in entries] == [
        ("insert", "promotion: profile stated in a turn"),
        ("update", ""),
        ("erase", "forget"),
    ]
    assert all(v in (None, REDACTED) for e in entries for v in (e.old_value, e.new_value))


def test_audit_entries_span_users_and_a_time_range(
    ltm_store: LongTermStore, clock: VirtualClock
) -> None:
    put(ltm_store, "a", user="u1")
    clock.advance(100)
    put(ltm_store, "b", user="u2")
    clock.advance(100)
    put(ltm_store, "c", user="u1")
    every = ltm_store.audit_entries()
    assert [(e.user_id, e.key) for e in every] == [("u1", "a"), ("u2", "b"), ("u1", "c")]
    assert [e.key for e in ltm_store.audit_entries(user_id="u1")] == ["a", "c"]
    window = ltm_store.audit_entries(since=T0 + 100, until=T0 + 200)
    assert [e.key for e in window] == ["b", "c"]
    assert [e.key for e in ltm_store.audit_entries(until=T0 + 99.5)] == ["a"]
    assert ltm_store.audit_entries(user_id="nobody") == []


@pytest.mark.parametrize(
    ("cause", "message"),
    [(7, "must be a string"), ("x" * (MAX_CAUSE_CHARS + 1), "the limit is"), (" ", "empty")],
)
def test_a_bad_cause_is_refused_before_anything_changes(
    ltm_store: LongTermStore, cause: object, message: str
) -> None:
    with pytest.raises(InvalidInput, match=message):
        ltm_store.upsert(
            user_id="u1",
            category="profile",
            key="k",
            value={},
            text="t",
            cause=cause,  # type: ignore[arg-type]
        )
    with pytest.raises(InvalidInput, match=message):
        FactChanges(archive=frozenset({"f1"}), causes={"f1": cause})  # type: ignore[dict-item]
    assert ltm_store.audit_log(user_id="u1") == []
