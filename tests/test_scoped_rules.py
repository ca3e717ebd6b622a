"""Sliding window, importance and decay rules scoped by `types` and `layers`; the importance
rule of R10 (docs/requirements.md) (`ttl_from: written`); the `seed_mixed` built-in."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from reference.models import Category, Event, Fact, Hit, MemoryRecord, MemoryType
from reference.policy.expiry import expires_at_on_write, expiry_rule, on_access
from reference.policy.invalidation import invalidations_for
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.ranking import rerank
from reference.policy.rules import DAY_S
from reference.policy.strategy import Strategy, StrategyError
from tests.conftest import T0
from tests.fixtures.replay import replay_scenario

HOUR = 3600.0


def make(**blocks: Any) -> Strategy:
    return Strategy.model_validate({"name": "scoped", "description": "d", **blocks})


def stm(kind: MemoryType, *, at: float = T0, importance: float = 5.0, **meta: Any) -> MemoryRecord:
    return MemoryRecord(
        record_id=f"r-{kind.value}",
        user_id="alice",
        session_id="s1",
        text=kind.value,
        type=kind,
        created_at=at,
        last_accessed_at=at,
        importance=importance,
        metadata=meta,
    )


def ltm(category: Category, *, at: float = T0, importance: float = 5.0) -> Fact:
    return Fact(
        fact_id=f"f-{category.value}",
        user_id="alice",
        category=category,
        key=category.value,
        value={"value": "x"},
        text=category.value,
        version=1,
        created_at=at,
        updated_at=at,
        last_accessed_at=at,
        importance=importance,
    )


# ---------------------------------------------------------------------- sliding
SLIDING_CONVERSATION = {"sliding": {"window_s": HOUR, "types": ["conversation"], "layers": ["stm"]}}


def test_a_scoped_sliding_window_gives_a_deadline_to_its_types_only() -> None:
    scoped = make(**SLIDING_CONVERSATION)
    assert expires_at_on_write(scoped, kind=MemoryType.CONVERSATION, now=T0) == T0 + HOUR
    assert expires_at_on_write(scoped, kind=MemoryType.PREFERENCE, now=T0) is None
    # LTM is out of its layers, even for a category named like a type it lists.
    assert expires_at_on_write(scoped, kind=Category.FACT, now=T0) is None
    everywhere = make(sliding={"window_s": HOUR})
    for kind in (MemoryType.PREFERENCE, Category.FACT, Category.EPISODE):
        assert expires_at_on_write(everywhere, kind=kind, now=T0) == T0 + HOUR


def test_a_type_reaches_the_ltm_category_of_the_same_name_as_ttl_rules_do() -> None:
    scoped = make(sliding={"window_s": HOUR, "types": ["preference"]})
    assert expires_at_on_write(scoped, kind=MemoryType.PREFERENCE, now=T0) == T0 + HOUR
    assert expires_at_on_write(scoped, kind=Category.PREFERENCE, now=T0) == T0 + HOUR
    assert expires_at_on_write(scoped, kind=Category.PROFILE, now=T0) is None
    ltm_only = make(sliding={"window_s": HOUR, "types": ["preference"], "layers": ["ltm"]})
    assert expires_at_on_write(ltm_only, kind=MemoryType.PREFERENCE, now=T0) is None
    assert expires_at_on_write(ltm_only, kind=Category.PREFERENCE, now=T0) == T0 + HOUR


def test_an_access_slides_only_what_the_window_covers() -> None:
    scoped = make(ttl={"by_type": {"preference": 30 * DAY_S}}, **SLIDING_CONVERSATION)
    chat = stm(MemoryType.CONVERSATION)
    later = T0 + 0.5 * HOUR
    assert on_access(scoped, chat, now=later).expires_at == later + HOUR
    pref = stm(MemoryType.PREFERENCE)
    assert on_access(scoped, pref, now=later).expires_at == T0 + 30 * DAY_S  # fixed: no slide


def test_expiry_rule_names_the_rule_that_covers_the_record() -> None:
    scoped = make(ttl={"default_s": 2 * HOUR}, **SLIDING_CONVERSATION)
    chat = replace(stm(MemoryType.CONVERSATION), expires_at=T0 + HOUR)
    fact_record = replace(stm(MemoryType.FACT), expires_at=T0 + 2 * HOUR)
    assert expiry_rule(scoped, chat) == "sliding.window_s"
    assert expiry_rule(scoped, fact_record) == "ttl.default_s"


# ---------------------------------------------------------------------- importance
def test_a_scoped_importance_rule_scores_and_times_its_types_only() -> None:
    scoped = make(importance={"types": ["fact"]})
    assert expires_at_on_write(scoped, kind=MemoryType.FACT, importance=5, now=T0) is not None
    assert expires_at_on_write(scoped, kind=MemoryType.INSTRUCTION, importance=5, now=T0) is None
    later = T0 + DAY_S
    covered = on_access(scoped, stm(MemoryType.FACT), now=later)
    assert covered.importance == pytest.approx(5.0 - 0.1 + 1.0)  # decayed a day, then boosted
    untouched = on_access(scoped, stm(MemoryType.INSTRUCTION), now=later)
    assert (untouched.importance, untouched.expires_at) == (5.0, None)


#: Seed 002 §4.1: created_at + 7 d x (1 + score/10 x 2); below 2, created_at + 1 d.
SEED_TABLE_DAYS = [(0.0, 1.0), (1.9, 1.0), (2.0, 9.8), (5.0, 14.0), (8.0, 18.2), (10.0, 21.0)]


@pytest.mark.parametrize(("score", "days"), SEED_TABLE_DAYS)
def test_ttl_from_written_is_the_seeds_table(score: float, days: float) -> None:
    seed = make(importance={"ttl_from": "written"})
    for kind in (MemoryType.FACT, Category.EPISODE):
        at = expires_at_on_write(seed, kind=kind, importance=score, now=T0)
        assert at is not None and (at - T0) / DAY_S == pytest.approx(days)


def test_the_default_counts_from_the_last_access_with_decay() -> None:
    default = make(importance={})
    at = expires_at_on_write(default, kind=MemoryType.FACT, importance=5, now=T0)
    assert at is not None and (at - T0) / DAY_S == pytest.approx(14 / 1.14)  # 12.3 days


def test_under_ttl_from_written_an_access_rescored_still_counts_from_the_write() -> None:
    seed = make(importance={"ttl_from": "written"})
    record = stm(MemoryType.FACT, importance=5.0)
    later = T0 + 3 * DAY_S
    update = on_access(seed, record, now=later)
    assert update.importance == pytest.approx(5.0 - 0.3 + 1.0)
    assert update.expires_at == pytest.approx(T0 + 7 * DAY_S * (1 + 2 * update.importance / 10))
    stored = replace(
        record, expires_at=update.expires_at, importance=update.importance, last_accessed_at=later
    )
    assert expiry_rule(seed, stored) == "importance"


# ---------------------------------------------------------------------- decay
def test_a_scoped_decay_rule_ages_its_types_only() -> None:
    scoped = make(decay={"lambda_per_day": 1.0, "types": ["conversation"]})
    old_chat = stm(MemoryType.CONVERSATION, at=T0 - 10 * DAY_S)
    old_fact = stm(MemoryType.FACT, at=T0 - 10 * DAY_S)
    hits = [Hit(record=old_chat, score=0.9), Hit(record=old_fact, score=0.8)]
    ranked = rerank(hits, strategy=scoped, now=T0, k=2)
    assert [h.record.type for h in ranked] == [MemoryType.FACT, MemoryType.CONVERSATION]
    assert ranked[0].score == 0.8  # untouched
    assert ranked[1].score == pytest.approx(0.9 * 2.718281828459045**-10)


# ---------------------------------------------------------------------- validation
@pytest.mark.parametrize(
    ("block", "field", "words"),
    [
        ("sliding:\n  window_s: 60\n  types: []\n", "sliding.types", "must not be empty"),
        ("sliding:\n  window_s: 60\n  types: [session]\n", "sliding.types", "session is not"),
        ("importance:\n  layers: [disk]\n", "importance.layers[0]", "'stm' or 'ltm'"),
        ("decay:\n  types: [chitchat]\n", "decay.types[0]", "conversation"),
        ("importance:\n  ttl_from: created\n", "importance.ttl_from", "'written'"),
    ],
)
def test_scope_mistakes_name_the_field_and_line(block: str, field: str, words: str) -> None:
    with pytest.raises(StrategyError) as info:
        parse_strategy(f"name: x\ndescription: d\n{block}", source="mine.yaml")
    problem = info.value.problems[0]
    assert (problem.file, problem.field) == ("mine.yaml", field)
    assert problem.line is not None and problem.line >= 4
    assert words in problem.message


def test_a_scope_that_covers_everything_hashes_as_no_scope() -> None:
    plain = make(sliding={"window_s": HOUR}, importance={}, decay={})
    spelled = make(
        sliding={"window_s": HOUR, "layers": ["stm", "ltm"]},
        importance={"layers": ["ltm", "stm"], "ttl_from": "last_access"},
        decay={},
    )
    assert plain.fingerprint() == spelled.fingerprint()
    assert "types" not in plain.to_yaml() and "ttl_from" not in plain.to_yaml()
    narrowed = make(sliding={"window_s": HOUR, "types": ["conversation"]}, importance={}, decay={})
    seeded = make(sliding={"window_s": HOUR}, importance={"ttl_from": "written"}, decay={})
    assert len({plain.fingerprint(), narrowed.fingerprint(), seeded.fingerprint()}) == 3
    assert parse_strategy(narrowed.to_yaml()) == narrowed


# ---------------------------------------------------------------------- seed_mixed
def test_seed_mixed_is_the_seeds_mixed_policy() -> None:
    mixed = load_strategy("seed_mixed")
    write = {kind: expires_at_on_write(mixed, kind=kind, now=T0) for kind in [*MemoryType]}
    assert write[MemoryType.CONVERSATION] == write[MemoryType.INSTRUCTION] == T0 + HOUR
    assert write[MemoryType.SENSITIVE] == T0 + HOUR  # no longer than the cache
    assert write[MemoryType.PREFERENCE] == T0 + 30 * DAY_S
    assert expires_at_on_write(mixed, kind=Category.PREFERENCE, now=T0) == T0 + 30 * DAY_S
    assert write[MemoryType.FACT] is None and write[MemoryType.PROFILE] is None
    # An access slides the cache but never a preference.
    later = T0 + 0.5 * HOUR
    assert on_access(mixed, stm(MemoryType.INSTRUCTION), now=later).expires_at == later + HOUR
    assert on_access(mixed, stm(MemoryType.PREFERENCE), now=later).expires_at == T0 + 30 * DAY_S
    # Claims go when their ticket closes.
    claim = stm(MemoryType.FACT, ticket_id="T1")
    other = replace(stm(MemoryType.FACT, ticket_id="T2"), record_id="r2")
    closed = Event(
        name="ticket_closed", user_id="alice", at=T0 + DAY_S, payload={"ticket_id": "T1"}
    )
    decisions = invalidations_for(closed, [claim, other], [], strategy=mixed)
    assert [(d.record_id, d.action.value) for d in decisions] == [("r-fact", "delete")]


SCOPED_REPLAY = """
name: scoped
users:
  - id: ann
    timeline:
      - {at: 0, session: s1, say: "Please book a table at Luigi's for Friday evening.",
         facts: [{id: booking, type: fact}]}
      - {at: 10, session: s1, say: "I booked a hotel room in Paris for May.",
         facts: [{id: hotel, type: fact}]}
      - {at: 7200, session: s1, probe: "Where did I book a table?", needed: [booking]}
      - {at: 7201, session: s1, probe: "Which hotel did I book in Paris?", needed: [hotel]}
"""


def test_a_replay_slides_out_the_conversation_cache_and_keeps_the_claim(tmp_path: Path) -> None:
    def verdicts(strategy: Strategy) -> dict[int, dict[str, str]]:
        result = replay_scenario(tmp_path, SCOPED_REPLAY, strategy, prefix="scoped")
        return {r["step"]: r["verdicts"] for r in result.probe_records}

    # seed_mixed: the request (an instruction) slid out after an hour unread; the
    # claim (a fact) has no time rule and is found.
    assert verdicts(load_strategy("seed_mixed")) == {2: {"booking": "over-forgotten"}}
    # The same window over every type loses the claim too.
    everything = load_strategy("seed_mixed").with_params({"sliding.types": None})
    assert verdicts(everything) == {
        2: {"booking": "over-forgotten"},
        3: {"hotel": "over-forgotten"},
    }
