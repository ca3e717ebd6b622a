"""Pure forgetting decisions on the virtual timeline: expiry on write and access, the
importance formula, decay ranking, event invalidation, archival, anonymisation, sweeps."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.errors import InvalidInput
from reference.models import Category, Event, Fact, Hit, MemoryRecord, MemoryType, Status
from reference.policy.decisions import Decision
from reference.policy.expiry import expires_at_on_write, on_access
from reference.policy.importance import expiry_delay, score_after_access, ttl_for_score
from reference.policy.invalidation import invalidations_for
from reference.policy.loading import BUILTINS, load_strategy
from reference.policy.oracle import OracleAdvice
from reference.policy.ranking import rerank
from reference.policy.rules import DAY_S, ImportanceRule
from reference.policy.strategy import Strategy
from reference.policy.sweep import select_for_forgetting
from tests.conftest import T0

HOUR = 3600.0
KINDS: list[MemoryType | Category] = [*MemoryType, *Category]


def record(
    record_id: str = "r1",
    *,
    at: float = T0,
    type: MemoryType = MemoryType.CONVERSATION,
    user_id: str = "alice",
    expires_at: float | None = None,
    status: Status = Status.ACTIVE,
    importance: float = 5.0,
    **metadata: str | int | float | bool,
) -> MemoryRecord:
    return MemoryRecord(
        record_id=record_id,
        user_id=user_id,
        session_id="s1",
        text=f"text of {record_id}",
        type=type,
        created_at=at,
        last_accessed_at=at,
        importance=importance,
        expires_at=expires_at,
        status=status,
        metadata=dict(metadata),
    )


def fact(
    fact_id: str = "f1",
    *,
    at: float = T0,
    category: Category = Category.PROFILE,
    key: str = "address",
    value: dict[str, Any] | None = None,
    user_id: str = "alice",
    expires_at: float | None = None,
    status: Status = Status.ACTIVE,
) -> Fact:
    return Fact(
        fact_id=fact_id,
        user_id=user_id,
        category=category,
        key=key,
        value=value if value is not None else {"value": "x"},
        text=f"text of {fact_id}",
        version=1,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        expires_at=expires_at,
        status=status,
    )


def strategy(name: str, **overrides: Any) -> Strategy:
    return load_strategy(name).with_params(overrides) if overrides else load_strategy(name)


def acts(decisions: list[Decision]) -> list[tuple[str, str]]:
    return [(d.record_id, d.action.value) for d in decisions]


# ---------------------------------------------------------------------- expiry on write
def test_keep_all_and_event_driven_and_oracle_give_no_deadline() -> None:
    for name in ("keep_all", "recency_decay", "event_driven", "oracle"):
        for kind in KINDS:
            assert expires_at_on_write(strategy(name), kind=kind, now=T0) is None, (name, kind)


def test_fixed_ttl_gives_everything_the_same_deadline() -> None:
    fixed = strategy("fixed_ttl", **{"ttl.default_s": HOUR})
    assert {expires_at_on_write(fixed, kind=k, importance=9, now=T0) for k in KINDS} == {T0 + HOUR}


@pytest.mark.parametrize(
    ("kind", "ttl"),
    [
        (MemoryType.SESSION, 1800.0),
        (MemoryType.CONVERSATION, HOUR),
        (MemoryType.INSTRUCTION, HOUR),
        (MemoryType.PREFERENCE, 30 * DAY_S),
        (MemoryType.SENSITIVE, HOUR),
        (MemoryType.FACT, None),
        (Category.PREFERENCE, 30 * DAY_S),
        (Category.PROFILE, None),
        (Category.FACT, None),
        (Category.KNOWLEDGE, None),
    ],
)
def test_typed_ttl_by_type_and_category(kind: MemoryType | Category, ttl: float | None) -> None:
    expected = None if ttl is None else T0 + ttl
    assert expires_at_on_write(strategy("typed_ttl"), kind=kind, now=T0) == expected
    assert expires_at_on_write(strategy("hybrid"), kind=kind, now=T0) == expected


def test_categories_fall_back_to_the_same_named_type_then_the_default() -> None:
    custom = Strategy.model_validate(
        {
            "name": "c",
            "description": "d",
            "ttl": {
                "default_s": 60,
                "by_type": {"preference": 600, "profile": 900},
                "by_category": {"profile": None},
            },
        }
    )
    assert expires_at_on_write(custom, kind=Category.PREFERENCE, now=T0) == T0 + 600
    assert expires_at_on_write(custom, kind=Category.PROFILE, now=T0) is None  # null wins
    assert expires_at_on_write(custom, kind=MemoryType.PROFILE, now=T0) == T0 + 900
    assert expires_at_on_write(custom, kind=Category.ENTITY, now=T0) == T0 + 60


def test_time_rules_combine_by_the_earliest_deadline() -> None:
    both = strategy("typed_ttl", **{"sliding.window_s": 600})
    assert expires_at_on_write(both, kind=MemoryType.CONVERSATION, now=T0) == T0 + 600
    assert expires_at_on_write(both, kind=Category.FACT, now=T0) == T0 + 600


def test_bad_kinds_and_times_are_rejected() -> None:
    with pytest.raises(InvalidInput, match="kind: must be a MemoryType or a Category"):
        expires_at_on_write(strategy("typed_ttl"), kind="preference", now=T0)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="now"):
        expires_at_on_write(strategy("typed_ttl"), kind=MemoryType.FACT, now=math.nan)
    with pytest.raises(InvalidInput, match="importance"):
        expires_at_on_write(
            strategy("importance"), kind=MemoryType.FACT, importance=math.inf, now=T0
        )


# ---------------------------------------------------------------------- access
def test_sliding_window_refreshes_on_access_and_expires_without_one() -> None:
    clock = VirtualClock(T0)
    sliding = strategy("sliding_window")
    first = record(expires_at=expires_at_on_write(sliding, kind=MemoryType.FACT, now=clock.now()))
    assert first.expires_at == T0 + DAY_S
    clock.advance(20 * HOUR)
    update = on_access(sliding, first, now=clock.now())
    assert update.expires_at == T0 + 44 * HOUR and update.importance == first.importance
    touched = dataclasses.replace(first, last_accessed_at=clock.now(), expires_at=update.expires_at)
    clock.set(T0 + 44 * HOUR - 1)
    assert select_for_forgetting([touched], strategy=sliding, now=clock.now()) == []
    clock.advance(1)
    assert acts(select_for_forgetting([touched], strategy=sliding, now=clock.now())) == [
        ("r1", "expire")
    ]


def test_access_never_extends_a_fixed_ttl_nor_resurrects_an_expired_record() -> None:
    fixed = strategy("fixed_ttl")
    written = record(expires_at=T0 + 7 * DAY_S)
    assert on_access(fixed, written, now=T0 + DAY_S).expires_at == T0 + 7 * DAY_S
    gone = on_access(strategy("sliding_window"), written, now=T0 + 8 * DAY_S)
    assert gone.expires_at == T0 + 7 * DAY_S


def test_an_updated_fact_counts_its_ttl_from_the_update() -> None:
    typed = strategy("typed_ttl")
    pref = dataclasses.replace(
        fact(category=Category.PREFERENCE, key="seat", expires_at=T0 + 40 * DAY_S),
        updated_at=T0 + 10 * DAY_S,
    )
    assert on_access(typed, pref, now=T0 + 11 * DAY_S).expires_at == T0 + 40 * DAY_S


# ---------------------------------------------------------------------- importance
def no_decay() -> Strategy:
    return strategy("importance", **{"importance.decay_per_day": 0})


@pytest.mark.parametrize(
    ("score", "days"),
    [(10, 21.0), (9, 19.6), (5, 14.0), (2, 9.8), (1.99, 1.0), (1, 1.0), (0, 1.0)],
)
def test_the_seed_formula_and_its_low_score_rule(score: float, days: float) -> None:
    # ttl = base * (1 + score/10 * 2) with base 7 d; a score below 2 gets 1 day.
    at = expires_at_on_write(no_decay(), kind=MemoryType.FACT, importance=score, now=T0)
    assert at == pytest.approx(T0 + days * DAY_S)
    assert ttl_for_score(ImportanceRule(), score) == pytest.approx(days * DAY_S)


def test_the_seeds_example_a_3_day_old_9_outlives_a_1_day_old_1() -> None:
    imp = no_decay()
    important = record("nine", importance=9)
    trivial = record("one", at=T0 + 2 * DAY_S, importance=1)
    stored = [
        dataclasses.replace(
            r,
            expires_at=expires_at_on_write(
                imp, kind=r.type, importance=r.importance, now=r.created_at
            ),
        )
        for r in (important, trivial)
    ]
    now = T0 + 3 * DAY_S  # "nine" is 3 days old, "one" 1 day old
    assert acts(select_for_forgetting(stored, strategy=imp, now=now)) == [("one", "expire")]


def test_time_lowers_the_score_and_can_drop_it_into_the_low_score_rule() -> None:
    rule = ImportanceRule()  # base 7 d, decay 0.1/day
    # s0 = 5: tau >= 7d * (1 + (5 - 0.1 tau/d)/5)  <=>  tau >= 14 d / 1.14, score still 3.77.
    assert expiry_delay(rule, 5.0) == pytest.approx(14 * DAY_S / 1.14)
    steep = ImportanceRule(decay_per_day=1.0)
    # s0 = 2.5 falls below 2 after half a day; from then on the TTL is the low one: 1 day.
    assert expiry_delay(steep, 2.5) == pytest.approx(DAY_S)
    slow = ImportanceRule(decay_per_day=0.25)
    # s0 = 2.5 falls below 2 after 2 days, already older than the 1-day low TTL: it
    # expires the moment it drops.
    assert expiry_delay(slow, 2.5) == pytest.approx(2 * DAY_S)
    floor = ImportanceRule(low_score=0.0, decay_per_day=5.0)
    # Without a low-score rule the score bottoms out at 0, which grants the base TTL.
    assert expiry_delay(floor, 1.0) == pytest.approx(7 * DAY_S)


def test_access_raises_the_score_and_recomputes_the_deadline() -> None:
    imp = strategy("importance")
    written = record(importance=5.0, expires_at=T0 + expiry_delay(ImportanceRule(), 5.0))
    update = on_access(imp, written, now=T0 + 2 * DAY_S)
    assert update.importance == pytest.approx(5.0 - 0.2 + 1.0)
    assert update.expires_at == pytest.approx(
        T0 + 2 * DAY_S + expiry_delay(ImportanceRule(), update.importance)
    )
    assert update.expires_at is not None and written.expires_at is not None
    assert update.expires_at > written.expires_at
    capped = on_access(imp, dataclasses.replace(written, importance=10.0), now=T0)
    assert capped.importance == 10.0
    assert score_after_access(ImportanceRule(access_boost=3), 9.5, 0) == 10.0


# ---------------------------------------------------------------------- decay ranking
def test_decay_reranks_old_memories_down_and_keeps_top_k() -> None:
    now = T0 + 30 * DAY_S
    old = record("old", at=T0)
    new = record("new", at=T0 + 29 * DAY_S)
    hits = [Hit(old, 0.9), Hit(new, 0.6)]
    decayed = rerank(hits, strategy=strategy("recency_decay"), now=now, k=2)
    assert [h.record.record_id for h in decayed] == ["new", "old"]
    assert decayed[1].score == pytest.approx(0.9 * math.exp(-0.1 * 30))
    assert decayed[0].score == pytest.approx(0.6 * math.exp(-0.1))
    assert rerank(hits, strategy=strategy("recency_decay"), now=now, k=1) == decayed[:1]
    assert rerank(hits, strategy=strategy("typed_ttl"), now=now, k=1) == [hits[0]]
    assert rerank(hits, strategy=strategy("keep_all"), now=now, k=5) == hits


def test_decay_ages_from_the_write_by_default_or_from_the_last_access() -> None:
    now = T0 + 10 * DAY_S
    touched = dataclasses.replace(record("old", at=T0), last_accessed_at=now)
    fresh = record("new", at=T0 + 9 * DAY_S)
    hits = [Hit(touched, 0.8), Hit(fresh, 0.7)]
    written = rerank(hits, strategy=strategy("recency_decay"), now=now, k=2)
    assert [h.record.record_id for h in written] == ["new", "old"]
    by_access = strategy("recency_decay", **{"decay.age_from": "last_access"})
    assert [h.record.record_id for h in rerank(hits, strategy=by_access, now=now, k=2)] == [
        "old",
        "new",
    ]
    superseded = dataclasses.replace(fact(at=T0), updated_at=now)  # a fact ages from its update
    assert rerank([Hit(superseded, 0.5)], strategy=strategy("recency_decay"), now=now, k=1)[
        0
    ].score == pytest.approx(0.5)


def test_decay_keeps_ties_in_order_and_never_rewards_age_for_negative_scores() -> None:
    now = T0 + 10 * DAY_S
    a, b = record("a", at=T0), record("b", at=T0)
    assert [
        h.record
        for h in rerank(
            [Hit(a, 0.5), Hit(b, 0.5)], strategy=strategy("recency_decay"), now=now, k=2
        )
    ] == [a, b]
    old, new = record("old", at=T0), record("new", at=now)
    ranked = rerank(
        [Hit(old, -0.1), Hit(new, -0.1)], strategy=strategy("recency_decay"), now=now, k=2
    )
    assert [h.record.record_id for h in ranked] == ["new", "old"]


# ---------------------------------------------------------------------- events
def test_profile_update_archives_older_facts_and_notes_on_those_fields() -> None:
    event = Event("profile_updated", "alice", T0 + DAY_S, {"fields": ["Address", "company"]})
    facts = [
        fact("addr"),
        fact("phone", key="phone"),
        fact("later", key="company", at=T0 + 2 * DAY_S),  # written after the event
        fact("bob", user_id="bob"),
        fact("pref", category=Category.PREFERENCE),
        fact("done", status=Status.ARCHIVED),  # archived already: idempotent redelivery
    ]
    records = [record("note", topic="address"), record("chat"), record("other", topic="phone")]
    decisions = invalidations_for(event, records, facts, strategy=strategy("hybrid"))
    assert acts(decisions) == [("note", "archive"), ("addr", "archive")]
    assert {d.layer for d in decisions} == {"stm", "ltm"}
    assert all(d.user_id == "alice" and "profile_updated" in d.reason for d in decisions)


def test_order_completion_deletes_what_was_said_for_that_order() -> None:
    # Whatever its type: "for this order please ship it by express" is an instruction,
    # and consolidated into an episode it would outlive the order.
    event = Event("order_completed", "alice", T0 + HOUR, {"order_id": 42})
    records = [
        record("pref", type=MemoryType.PREFERENCE, order_id="42"),
        record("other-order", type=MemoryType.PREFERENCE, order_id="43"),
        record("instruction", type=MemoryType.INSTRUCTION, order_id="42"),
        record("no-order", type=MemoryType.PREFERENCE),
    ]
    facts = [
        fact("ltm-pref", category=Category.PREFERENCE, key="delivery", value={"order_id": "42"}),
        fact("profile", value={"order_id": "42"}),
    ]
    decisions = invalidations_for(event, records, facts, strategy=strategy("event_driven"))
    assert acts(decisions) == [
        ("pref", "delete"),
        ("instruction", "delete"),
        ("ltm-pref", "delete"),
    ]


def test_ticket_closed_deletes_its_claims_and_payloads_without_the_field_do_nothing() -> None:
    records = [record("claim", ticket_id="T-1"), record("other", ticket_id="T-2")]
    closed = Event("ticket_closed", "alice", T0 + HOUR, {"ticket_id": "T-1"})
    hybrid = strategy("hybrid")
    assert acts(invalidations_for(closed, records, [], strategy=hybrid)) == [("claim", "delete")]
    payloads: list[dict[str, Any]] = [{}, {"fields": []}, {"fields": "  "}]
    for payload in payloads:
        for name in ("ticket_closed", "profile_updated"):
            empty = Event(name, "alice", T0 + HOUR, payload)
            assert invalidations_for(empty, records, [fact()], strategy=hybrid) == []
    unknown = Event("user_moved", "alice", T0 + HOUR, {"fields": ["address"]})
    assert invalidations_for(unknown, records, [fact()], strategy=hybrid) == []
    assert invalidations_for(closed, records, [], strategy=strategy("typed_ttl")) == []


def test_knowledge_updates_touch_long_term_memory_only() -> None:
    event = Event("knowledge_updated", "alice", T0 + HOUR, {"keys": "refund_policy"})
    facts = [fact("kb", category=Category.KNOWLEDGE, key="refund_policy")]
    records = [record("note", topic="refund_policy")]
    assert acts(invalidations_for(event, records, facts, strategy=strategy("hybrid"))) == [
        ("kb", "archive")
    ]


def test_overlapping_rules_give_one_decision_the_strongest() -> None:
    both = Strategy.model_validate(
        {
            "name": "both",
            "description": "d",
            "events": [
                {"event": "e", "keys_from": "fields", "action": "archive"},
                {"event": "e", "keys_from": "fields", "layers": ["ltm"], "action": "delete"},
            ],
        }
    )
    event = Event("e", "alice", T0 + HOUR, {"fields": ["address"]})
    assert acts(invalidations_for(event, [record(topic="address")], [fact()], strategy=both)) == [
        ("r1", "archive"),
        ("f1", "delete"),
    ]


# ---------------------------------------------------------------------- sweeps
def test_archival_of_inactive_users_and_deletion_after_the_grace_period() -> None:
    hybrid = strategy("hybrid")
    seen = {"alice": T0}
    live = fact("live")
    before = T0 + 90 * DAY_S - 1
    assert select_for_forgetting([live], strategy=hybrid, now=before, last_active=seen) == []
    at = T0 + 90 * DAY_S
    assert acts(select_for_forgetting([live], strategy=hybrid, now=at, last_active=seen)) == [
        ("live", "archive")
    ]
    assert select_for_forgetting([live], strategy=hybrid, now=at) == []  # activity unknown
    archived = dataclasses.replace(live, status=Status.ARCHIVED, updated_at=at)
    assert select_for_forgetting([archived], strategy=hybrid, now=at + 30 * DAY_S - 1) == []
    assert acts(select_for_forgetting([archived], strategy=hybrid, now=at + 30 * DAY_S)) == [
        ("live", "delete")
    ]
    note = record("note", status=Status.ARCHIVED, archived_at=at + DAY_S)
    assert select_for_forgetting([note], strategy=hybrid, now=at + 30 * DAY_S) == []
    assert acts(select_for_forgetting([note], strategy=hybrid, now=at + 31 * DAY_S)) == [
        ("note", "delete")
    ]
    unstamped = record("unstamped", status=Status.ARCHIVED)  # grace from when alice went idle
    sweep = select_for_forgetting(
        [unstamped], strategy=hybrid, now=at + 30 * DAY_S, last_active=seen
    )
    assert acts(sweep) == [("unstamped", "delete")]


def test_sealed_pii_is_anonymised_after_the_deadline() -> None:
    hybrid = strategy("hybrid")
    sealed = fact(value={"value": "138****5678", "_sealed": "v1:ab:xyz", "_sealed_at": T0})
    assert select_for_forgetting([sealed], strategy=hybrid, now=T0 + DAY_S - 1) == []
    assert acts(select_for_forgetting([sealed], strategy=hybrid, now=T0 + DAY_S)) == [
        ("f1", "anonymise")
    ]
    field = fact(value={"phone": {"_sealed": "v1:ab:xyz", "_sealed_at": T0 + HOUR}})
    assert select_for_forgetting([field], strategy=hybrid, now=T0 + DAY_S) == []
    assert len(select_for_forgetting([field], strategy=hybrid, now=T0 + DAY_S + HOUR)) == 1
    undated = fact(value={"_sealed": "v1:ab:xyz", "_sealed_at": "yesterday"})
    assert acts(select_for_forgetting([undated], strategy=hybrid, now=T0)) == [("f1", "anonymise")]
    assert select_for_forgetting([sealed], strategy=strategy("typed_ttl"), now=T0 + 9 * DAY_S) == []
    anonymised = fact(value={"value": "138****5678", "_anonymised": True})
    assert select_for_forgetting([anonymised], strategy=hybrid, now=T0 + 9 * DAY_S) == []


def test_a_hybrid_sweep_over_mixed_records() -> None:
    hybrid = strategy("hybrid")
    now = T0 + 100 * DAY_S
    sealed = {"_sealed": "v1:ab:xyz", "_sealed_at": T0}
    memories: list[MemoryRecord | Fact] = [
        record("expired", user_id="bob", expires_at=T0 + HOUR),
        record("bob-live", user_id="bob", at=now - HOUR, expires_at=now + HOUR),
        fact("bob-pii", user_id="bob", value=sealed),
        fact("idle", user_id="carol"),
        fact("idle-pii", user_id="carol", value=sealed),
        fact("deleted", user_id="carol", status=Status.DELETED, expires_at=T0),
        dataclasses.replace(
            fact("old-archive", user_id="bob", status=Status.ARCHIVED), updated_at=T0
        ),
    ]
    seen = {"bob": now - HOUR, "carol": T0}
    decisions = select_for_forgetting(memories, strategy=hybrid, now=now, last_active=seen)
    assert acts(decisions) == [
        ("expired", "expire"),
        ("bob-pii", "anonymise"),
        ("idle", "archive"),
        ("idle-pii", "archive"),
        ("idle-pii", "anonymise"),
        ("old-archive", "delete"),
    ]
    assert [d.layer for d in decisions[:2]] == ["stm", "ltm"]


def test_the_oracle_keeps_exactly_what_the_probes_need() -> None:
    oracle = strategy("oracle")
    memories: list[MemoryRecord | Fact] = [record("needed"), record("noise"), fact("addr")]
    advice = OracleAdvice(
        needed_until=lambda m: math.inf if getattr(m, "record_id", "") != "noise" else None
    )
    decisions = select_for_forgetting(memories, strategy=oracle, now=T0 + DAY_S, oracle=advice)
    assert acts(decisions) == [("noise", "delete")]
    with pytest.raises(InvalidInput, match="oracle"):
        select_for_forgetting(memories, strategy=oracle, now=T0)
    ignored = select_for_forgetting(memories, strategy=strategy("keep_all"), now=T0, oracle=advice)
    assert ignored == []


# ---------------------------------------------------------------------- properties
timelines = st.lists(st.floats(min_value=0, max_value=200 * DAY_S), max_size=6).map(sorted)


def written_and_accessed(
    strat: Strategy, kind: MemoryType | Category, importance: float, accesses: list[float]
) -> MemoryRecord | Fact:
    """A record written at T0 and touched at each offset, as an engine would store it."""
    at = expires_at_on_write(strat, kind=kind, importance=importance, now=T0)
    memory: MemoryRecord | Fact
    if isinstance(kind, Category):
        memory = dataclasses.replace(fact(category=kind), importance=importance, expires_at=at)
    else:
        memory = record(type=kind, importance=importance, expires_at=at)
    for offset in accesses:
        now = T0 + offset
        if not memory.is_live(now):
            break
        update = on_access(strat, memory, now=now)
        memory = dataclasses.replace(
            memory,
            last_accessed_at=now,
            access_count=memory.access_count + 1,
            importance=update.importance,
            expires_at=update.expires_at,
        )
    return memory


@given(
    kind=st.sampled_from(KINDS),
    importance=st.floats(min_value=0, max_value=10),
    accesses=timelines,
    later=st.floats(min_value=0, max_value=400 * DAY_S),
    idle=st.floats(min_value=0, max_value=400 * DAY_S),
    status=st.sampled_from([Status.ACTIVE, Status.ARCHIVED]),
)
def test_keep_all_never_selects_anything(
    kind: MemoryType | Category,
    importance: float,
    accesses: list[float],
    later: float,
    idle: float,
    status: Status,
) -> None:
    keep = strategy("keep_all")
    memory = dataclasses.replace(
        written_and_accessed(keep, kind, importance, accesses), status=status
    )
    if isinstance(memory, Fact):
        memory = dataclasses.replace(memory, value={"_sealed": "v1:x:y", "_sealed_at": T0})
    assert memory.expires_at is None
    now = T0 + max(accesses, default=0) + later
    assert (
        select_for_forgetting([memory], strategy=keep, now=now, last_active={"alice": now - idle})
        == []
    )


@given(
    name=st.sampled_from([n for n in BUILTINS if n != "keep_all"]),
    kind=st.sampled_from(KINDS),
    importance=st.floats(min_value=0, max_value=10),
    accesses=timelines,
    probe=st.floats(min_value=0, max_value=1),
)
def test_no_strategy_selects_a_record_before_its_expires_at(
    name: str, kind: MemoryType | Category, importance: float, accesses: list[float], probe: float
) -> None:
    strat = strategy(name)
    memory = written_and_accessed(strat, kind, importance, accesses)
    start = max(memory.last_accessed_at, T0)
    end = memory.expires_at if memory.expires_at is not None else start + 400 * DAY_S
    now = start + probe * (end - start)
    assume(now < end)
    advice = OracleAdvice(needed_until=lambda _: math.inf)
    active = {"alice": now}  # an active user, nothing sealed: only expiry could select
    assert (
        select_for_forgetting([memory], strategy=strat, now=now, last_active=active, oracle=advice)
        == []
    )
    if memory.expires_at is not None:
        after = select_for_forgetting(
            [memory], strategy=strat, now=end, last_active=active, oracle=advice
        )
        assert acts(after) == [(after[0].record_id, "expire")]


def brute_force_first_expiry(rule: ImportanceRule, s0: float, horizon: float) -> float:
    """Step a sweeper along a fine grid; return the first instant it finds the record
    expired (written here independently of `reference.policy.importance`)."""
    taus = np.linspace(0.0, horizon, 200_001)
    score = np.maximum(0.0, min(s0, rule.max_score) - rule.decay_per_day * taus / DAY_S)
    ttl = np.where(
        score < rule.low_score,
        rule.low_score_ttl_s,
        rule.base_s * (1 + score / rule.max_score * 2),
    )
    expired = taus >= ttl
    return float(taus[int(np.argmax(expired))]) if expired.any() else math.inf


@settings(max_examples=300, deadline=None)
@given(
    base=st.floats(min_value=60, max_value=30 * DAY_S),
    low=st.sampled_from([0.0, 1.0, 2.0, 3.5]),
    low_ttl=st.floats(min_value=60, max_value=30 * DAY_S),
    decay=st.one_of(st.just(0.0), st.floats(min_value=1e-3, max_value=20)),
    s0=st.floats(min_value=0, max_value=10),
)
def test_importance_closed_form_matches_brute_force(
    base: float, low: float, low_ttl: float, decay: float, s0: float
) -> None:
    rule = ImportanceRule(base_s=base, low_score=low, low_score_ttl_s=low_ttl, decay_per_day=decay)
    closed = expiry_delay(rule, s0)
    horizon = max(low_ttl, 3 * base) * 1.01  # no score grants more than this
    step = horizon / 200_000
    brute = brute_force_first_expiry(rule, s0, horizon)
    # Nothing before the closed form is expired (up to one grid step)...
    assert brute >= closed - step - 1e-6 * closed

    # ...and the closed form itself is expired, at once or just after (the infimum case).
    def expired(tau: float) -> bool:
        score = max(0.0, min(s0, 10.0) - decay * tau / DAY_S)
        return tau >= (low_ttl if score < low else base * (1 + score / 10 * 2))

    eps = 1e-7 * max(closed, 1.0)
    assert expired(closed) or expired(closed + eps)
    assert closed <= horizon
