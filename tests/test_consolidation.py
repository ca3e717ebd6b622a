"""Consolidation: ended sessions settle into LTM as episodes (`reference.forgetting.
consolidation`), on the in-memory and the embedded backends alike.

Sessions end by their TTL (a sweep after it) or by `close_session`; each live STM record
becomes one episode, unless its score is under the strategy's floor or a fact stated at
or after it holds its key; then the session leaves STM. Forget commands, events and PII
masking treat an episode as the record it came from.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reference.clock import VirtualClock
from reference.crypto import is_sealed
from reference.factory import build_memory_system
from reference.forgetting.consolidation import (
    episode_key,
    episode_source,
    initial_importance,
)
from reference.keys import Namespace
from reference.ltm.filters import REDACTED, LtmFilter
from reference.models import Category, Event, Fact, MemoryRecord, MemoryType
from reference.pii import contains_raw_pii
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import StrategyError
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from reference.turns import TurnResult
from tests.conftest import T0
from tests.test_engine import ALICE, BOB, MakeSystem, drop_embedded_namespace, settings

SESSION_TTL = 1800.0


@pytest.fixture(params=["memory", "embedded"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def make_system(
    backend: str, clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[MakeSystem]:
    """`make(strategy)`: a system on this test's backend (as in test_engine.py)."""
    built: list[MemorySystem] = []

    def make(strategy: Any = "keep_all") -> MemorySystem:
        system = build_memory_system(
            settings(backend, namespace, data_dir),
            clock=clock,
            embedder=embedder,
            namespace=namespace,
            strategy=strategy,
        )
        built.append(system)
        return system

    yield make
    for system in built:
        system.dispose()
    if backend == "embedded":
        drop_embedded_namespace(data_dir, namespace)


def episodes(system: MemorySystem, user: str = ALICE, *, dead: bool = False) -> list[Fact]:
    facts = system.ltm.facts(
        filter=LtmFilter(user_id=user, categories=frozenset({Category.EPISODE}), include_dead=dead)
    )
    return facts


def stm_of(system: MemorySystem, session: str, user: str = ALICE) -> list[MemoryRecord]:
    return system.stm.records(filter=StmFilter(user_id=user, session_id=session))


def say(
    system: MemorySystem, text: str, session: str = "s1", user: str = ALICE, **meta: str
) -> TurnResult:
    return system.turn(user_id=user, session_id=session, text=text, metadata=meta or None)


# ---------------------------------------------------------------------------- when


def test_close_consolidates_each_utterance_into_one_episode(make_system: MakeSystem):
    system = make_system("keep_all")
    a = say(system, "Please book a table for two at 7pm at Luigi's.", speaker="Ann")
    b = say(system, "I went hiking with my sister last weekend.", speaker="Ann")
    say(system, "Hi there!")  # chit-chat: never stored, nothing to consolidate
    records = {r.record_id: r for r in stm_of(system, "s1")}
    assert set(records) == {a.stm.record.record_id, b.stm.record.record_id}  # type: ignore[union-attr]

    done = system.close_session(user_id=ALICE, session_id="s1")

    assert (done.sessions, done.records, done.consolidated) == (1, 2, 2)
    assert stm_of(system, "s1") == []  # the session left STM
    stored = {f.key: f for f in episodes(system)}
    assert {f.key for f in done.episodes} == set(stored)
    assert set(stored) == {episode_key(rid) for rid in records}
    for fact in stored.values():
        record = records[episode_source(fact) or ""]
        assert fact.text == record.text and fact.version == 1
        assert fact.importance == initial_importance(record)
        assert fact.value["session_id"] == "s1" and fact.value["said_at"] == record.created_at
        assert fact.value["kind"] == record.type.value and fact.value["speaker"] == "Ann"
        assert fact.value["message_id"] == record.metadata["message_id"]
    # A later session finds them in LTM (STM is scoped to its own session).
    recalled = system.recall(user_id=ALICE, session_id="s2", query="hiking with my sister")
    assert recalled.stm_hits == []
    assert recalled.ltm_hits[0].record.key == episode_key(b.stm.record.record_id)  # type: ignore[union-attr]


def test_a_sweep_consolidates_a_session_once_its_ttl_has_run_out(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("keep_all")
    say(system, "I went hiking with my sister last weekend.")
    clock.advance(SESSION_TTL - 60)
    say(system, "I adopted a cat named Miso.")  # the session slides on
    clock.advance(SESSION_TTL - 60)
    stats = system.sweep()  # past the first turn's TTL, not the second's
    assert (stats.sessions_consolidated, stats.episodes) == (0, ())
    assert len(stm_of(system, "s1")) == 2
    dry = system.sweep(dry_run=True, at=clock.now() + 120)
    assert (dry.sessions_consolidated, dry.consolidated, dry.episodes) == (1, 2, ())
    assert len(stm_of(system, "s1")) == 2 and episodes(system) == []  # a dry run writes nothing
    stats = system.sweep()
    assert (stats.sessions_consolidated, stats.consolidated, len(stats.episodes)) == (1, 2, 2)
    assert stm_of(system, "s1") == [] and len(episodes(system)) == 2
    assert system.sweep(at=clock.now() + 10 * SESSION_TTL).sessions_consolidated == 0


def test_rules_promotion_consolidates_nothing(make_system: MakeSystem, clock: VirtualClock):
    system = make_system(load_strategy("keep_all").with_params({"promotion": "rules"}))
    say(system, "I went hiking with my sister last weekend.")
    assert system.close_session(user_id=ALICE, session_id="s1").consolidated == 0
    clock.advance(10 * SESSION_TTL)
    assert system.sweep().sessions_consolidated == 0
    assert episodes(system) == [] and len(stm_of(system, "s1")) == 1


# ---------------------------------------------------------------------------- what


def test_the_floor_keeps_low_scores_out_and_they_leave_stm_too(make_system: MakeSystem):
    system = make_system(load_strategy("keep_all").with_params({"consolidation.min_importance": 4}))
    low = say(system, "What kind of jobs are you thinking of?")  # a question about the other: 1
    kept = say(system, "I went hiking with my sister last weekend.")  # fact: 5
    done = system.close_session(user_id=ALICE, session_id="s1")
    assert [episode_source(f) for f in episodes(system)] == [kept.stm.record.record_id]  # type: ignore[union-attr]
    assert stm_of(system, "s1") == []
    # The dropped record is named with its rule (what `memharness explain` reports).
    [(record_id, rule, why)] = done.dropped
    assert record_id == low.stm.record.record_id  # type: ignore[union-attr]
    assert rule == "consolidation.min_importance" and "under the floor 4.00" in why


def test_a_fact_stated_at_or_after_a_record_holds_its_key(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("keep_all")
    old = say(system, "I prefer window seats.")  # key `seat`; not promoted: said once
    clock.advance(60)
    say(system, "My address is 12 Oak Street, Springfield.")  # promoted inline: profile
    clock.advance(60)
    say(system, "I always want an aisle seat.")  # promoted: a stable preference, key `seat`
    done = system.close_session(user_id=ALICE, session_id="s1")
    assert old.stm.record.record_id in {r for r, _, _ in done.dropped}  # type: ignore[union-attr]
    assert {rule for _, rule, _ in done.dropped} == {"consolidation: held as a fact"}
    texts = {f.text for f in episodes(system)}
    # The address and the aisle seat are facts already; the older window seat's key is
    # held by a newer fact; nothing else was said.
    assert texts == set(), texts
    assert old.stm.record is not None and old.promoted is None
    facts = system.ltm.facts(filter=LtmFilter(user_id=ALICE))
    assert {f.category for f in facts} == {Category.PROFILE, Category.PREFERENCE}


def test_a_newer_statement_is_consolidated_beside_an_older_fact(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("keep_all")
    say(system, "I always want an aisle seat.", session="s0")  # a fact, key `seat`
    system.close_session(user_id=ALICE, session_id="s0")
    clock.advance(60)
    newer = say(system, "These days I prefer window seats.")  # said once: not promoted
    system.close_session(user_id=ALICE, session_id="s1")
    assert newer.promoted is None
    assert [f.text for f in episodes(system)] == [newer.masked_text]


def test_initial_importance_follows_the_seed_rule():
    def score(text: str, kind: MemoryType) -> float:
        return initial_importance(MemoryRecord("r", ALICE, "s", text, kind, T0, T0))

    assert score("I'm allergic to peanuts.", MemoryType.FACT) == 10.0  # safety
    assert score("Remember that my locker code is blue.", MemoryType.INSTRUCTION) == 9.0
    assert score("My name is Ann.", MemoryType.PROFILE) == 7.0
    assert score("I went hiking with my sister.", MemoryType.FACT) == 5.0
    assert score("I ran 10 km on Sunday.", MemoryType.FACT) == 6.0  # a detail
    assert score("Did you go hiking?", MemoryType.FACT) == 1.0  # a question, not about me
    assert score("Ann: Book a table at Luigi's.", MemoryType.INSTRUCTION) == 2.0
    assert score("我昨天去爬山了", MemoryType.FACT) == 5.0


# ---------------------------------------------------------------------------- forgetting


def test_a_forget_command_erases_episodes_and_their_audit_values(make_system: MakeSystem):
    system = make_system("keep_all")
    say(system, "I like jazz music.")
    say(system, "I went hiking with my sister last weekend.")
    system.close_session(user_id=ALICE, session_id="s1")
    jazz = [f for f in episodes(system) if "jazz" in f.text]
    assert len(jazz) == 1
    result = say(system, "Forget jazz.", session="s2")
    assert result.forgotten is not None and jazz[0].fact_id in result.forgotten.ltm_erased
    assert [f.text for f in episodes(system, dead=True)] == [
        "I went hiking with my sister last weekend."
    ]
    for entry in system.ltm.audit_log(user_id=ALICE, fact_id=jazz[0].fact_id):
        assert entry.old_value in (None, REDACTED) and entry.new_value in (None, REDACTED)
    recalled = system.recall(user_id=ALICE, session_id="s3", query="jazz music")
    assert all("jazz" not in h.record.text for h in recalled.ltm_hits)


def test_an_episode_is_matched_by_its_records_topic(make_system: MakeSystem):
    system = make_system("keep_all")
    said = say(system, "I prefer window seats.")
    topic = said.stm.record.metadata["topic"]  # type: ignore[union-attr]
    system.close_session(user_id=ALICE, session_id="s1")
    (episode,) = episodes(system)
    assert episode.value["topic"] == topic == "seat" and "seat" not in episode.key
    result = say(system, "Please forget my seat preference.", session="s2")
    assert result.forgotten is not None and episode.fact_id in result.forgotten.ltm_erased


def test_forget_everything_erases_episodes(make_system: MakeSystem):
    system = make_system("keep_all")
    say(system, "I went hiking with my sister last weekend.")
    say(system, "I went hiking with my brother.", user=BOB)
    system.close_session(user_id=ALICE, session_id="s1")
    system.close_session(user_id=BOB, session_id="s1")
    say(system, "Forget everything about me.", session="s2")
    assert episodes(system, dead=True) == []
    assert len(episodes(system, BOB)) == 1


def test_events_invalidate_episodes_as_the_records_they_came_from(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system(load_strategy("event_driven"))
    say(system, "My laptop screen is broken, please fix it.", ticket_id="T1")
    say(system, "I always want gift wrapping for this order.", order_id="O1")
    say(system, "Please book a table for two at 7pm at Luigi's.", order_id="O1")
    system.close_session(user_id=ALICE, session_id="s1")
    before = {f.text for f in episodes(system)}
    assert "My laptop screen is broken, please fix it." in before
    clock.advance(60)
    system.handle_event(Event("ticket_closed", ALICE, clock.now(), {"ticket_id": "T1"}))
    after = {f.text for f in episodes(system, dead=True)}
    assert after == before - {"My laptop screen is broken, please fix it."}
    # order_completed deletes what was said for the order, whatever its type.
    system.handle_event(Event("order_completed", ALICE, clock.now(), {"order_id": "O1"}))
    assert episodes(system, dead=True) == []


def test_pii_in_an_episode_is_masked_and_its_metadata_sealed(make_system: MakeSystem):
    system = make_system("hybrid")
    said = say(system, "I'll be at 13812345678 all day, call me.", contact="alice@example.com")
    assert said.stm.record is not None
    system.close_session(user_id=ALICE, session_id="s1")
    (episode,) = episodes(system)
    assert not contains_raw_pii(episode.text)
    assert is_sealed(episode.value)  # the metadata held an e-mail address: sealed
    assert "alice@example.com" not in repr({k: v for k, v in episode.value.items() if k[0] != "_"})
    assert system.reveal(episode)["contact"] == "alice@example.com"


def test_episodes_live_under_the_strategys_episode_ttl(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("typed_ttl")
    say(system, "I went hiking with my sister last weekend.")
    system.close_session(user_id=ALICE, session_id="s1")
    (episode,) = episodes(system)
    ttl = load_strategy("typed_ttl").ttl.by_category[Category.EPISODE]  # type: ignore[union-attr]
    assert episode.expires_at == pytest.approx(clock.now() + ttl)
    clock.advance(ttl)
    system.sweep()
    assert episodes(system, dead=True) == []


# ---------------------------------------------------------------------------- settings


def test_promotion_is_a_validated_setting(tmp_path: Path):
    with pytest.raises(
        StrategyError, match=r"x\.yaml:3: promotion: 'merge' is not one of 'rules' or 'consolidate'"
    ):
        parse_strategy("name: x\ndescription: y\npromotion: merge\n", source="x.yaml")
    with pytest.raises(StrategyError, match=r"y\.yaml:4: consolidation: applies only with"):
        parse_strategy(
            "name: y\ndescription: y\npromotion: rules\nconsolidation: {min_importance: 3}\n",
            source="y.yaml",
        )
    with pytest.raises(StrategyError, match=r"consolidation\.min_importance"):
        load_strategy("keep_all").with_params({"consolidation.min_importance": 11})
    hybrid, rules = load_strategy("hybrid"), load_strategy("hybrid_rules")
    assert (hybrid.promotion, rules.promotion) == ("consolidate", "rules")
    # hybrid_rules is hybrid less consolidation, and less the episode TTLs nothing then matches
    same = rules.model_dump(exclude={"name", "description", "promotion", "consolidation"})
    mine = hybrid.model_dump(exclude={"name", "description", "promotion", "consolidation"})
    del mine["ttl"]["by_type"][MemoryType.EPISODE], mine["ttl"]["by_category"][Category.EPISODE]
    assert mine == same
    for name in ("keep_all", "oracle"):
        assert load_strategy(name).consolidates


def test_a_newer_statement_supersedes_older_episodes_under_its_key(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("keep_all")
    say(system, "I prefer window seats.", session="s0")
    say(system, "I went hiking with my sister last weekend.", session="s0")
    system.close_session(user_id=ALICE, session_id="s0")
    clock.advance(60)
    say(system, "These days I prefer aisle seats.", session="s1")
    system.close_session(user_id=ALICE, session_id="s1")
    assert sorted(f.text for f in episodes(system, dead=True)) == [
        "I went hiking with my sister last weekend.",
        "These days I prefer aisle seats.",
    ]
    # Superseded, not erased: the audit keeps the older value.
    deleted = [e for e in system.ltm.audit_log(user_id=ALICE) if e.action == "delete"]
    assert [e.old_value["topic"] for e in deleted] == ["seat"]  # type: ignore[index]
    clock.advance(60)
    say(system, "I always want an aisle seat.", session="s2")  # promoted inline
    system.close_session(user_id=ALICE, session_id="s2")
    assert [f.text for f in episodes(system)] == ["I went hiking with my sister last weekend."]


def test_a_late_sweep_consolidates_what_was_live_when_the_session_ended(
    make_system: MakeSystem, clock: VirtualClock
):
    system = make_system("typed_ttl")  # an instruction lives 1 h in STM
    say(system, "Please book a table for two at 7pm at Luigi's.")
    clock.advance(SESSION_TTL + 2 * 3600)  # the first sweep since, after its STM deadline
    stats = system.sweep()
    assert [f.text for f in stats.episodes] == ["Please book a table for two at 7pm at Luigi's."]
    assert system.stm.records(filter=StmFilter(user_id=ALICE, include_dead=True)) == []
