"""The facade: one turn through every layer, on the in-memory and the embedded backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.clock import SystemClock, VirtualClock
from reference.errors import InvalidInput
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.models import Category, Fact
from reference.pii import contains_raw_pii
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from reference.turns import TIMING_KEYS

HOUR = 3600.0


@pytest.fixture(params=["memory", "embedded"])
def system(
    request: pytest.FixtureRequest,
    clock: VirtualClock,
    namespace: Namespace,
    data_dir: Path,
    embedder: Embedder,
) -> Iterator[MemorySystem]:
    settings = Settings(backend=request.param, data_dir=data_dir, prefix=namespace.prefix)
    built = build_memory_system(settings, clock=clock, embedder=embedder, namespace=namespace)
    yield built
    for user in ("alice", "bob"):
        built.delete_user_data(user_id=user)
    built.dispose()


def test_chit_chat_opens_the_session_but_is_not_stored(system: MemorySystem) -> None:
    result = system.turn(user_id="alice", session_id="s1", text="Hi there!")
    assert not result.stm.accepted
    assert result.stm.reason.startswith("chit-chat")
    assert result.session.user_id == "alice"
    assert result.context_ids == [result.message_id]
    assert system.stm.count(filter=StmFilter(user_id="alice")) == 0


def test_instructions_are_recalled_within_the_session_only(system: MemorySystem) -> None:
    system.turn(
        user_id="alice", session_id="s1", text="Please book a table for two at 7pm at Luigi's."
    )
    again = system.turn(
        user_id="alice", session_id="s1", text="Which restaurant did I book a table at?"
    )
    assert any("Luigi" in hit.record.text for hit in again.stm_hits)
    other_session = system.recall(user_id="alice", session_id="s2", query="book a table at Luigi's")
    assert other_session.stm_hits == []
    other_user = system.recall(user_id="bob", session_id="s1", query="book a table at Luigi's")
    assert other_user.stm_hits == [] and other_user.ltm_hits == []


def test_pii_is_masked_before_any_layer_stores_it(system: MemorySystem) -> None:
    result = system.turn(
        user_id="alice",
        session_id="s1",
        text="Please send the invoice to alice@example.com or 13812345678.",
    )
    assert result.stm.accepted
    assert "alice@example.com" not in result.masked_text and "13812345678" not in result.masked_text
    stored = system.stm.records(filter=StmFilter(user_id="alice"))
    assert stored and not any(contains_raw_pii(record.text) for record in stored)


def test_stable_facts_are_promoted_and_a_newer_value_supersedes_the_old(
    system: MemorySystem, clock: VirtualClock
) -> None:
    def say(session_id: str, text: str) -> Fact | None:
        return system.turn(user_id="alice", session_id=session_id, text=text).promoted

    first = say("s1", "My address is 12 Oak Street, Springfield.")
    assert first is not None
    assert (first.category, first.key, first.version) == (Category.PROFILE, "address", 1)
    assert say("s1", "My address is 12 Oak Street, Springfield.") is None  # same value again
    assert say("s1", "I like jazz music.") is None  # a preference said once: not yet stable
    assert say("s1", "I like jazz music.") is not None  # said twice: stable
    assert say("s1", "Book a taxi to the airport at 6am.") is None
    assert say("s1", "Book a taxi to the airport at 6am.") is None  # an errand is no fact
    always = say("s1", "I always want deliveries by SF Express.")
    assert always is not None and always.key == "shipping"

    clock.advance(2 * HOUR)
    moved = say("s2", "My address is 5 Elm Road, Shelbyville.")
    assert moved is not None and moved.version == 2
    recalled = system.recall(
        user_id="alice", session_id="s3", query="where does alice live, address"
    )
    values = [hit.record.value["value"] for hit in recalled.ltm_hits]
    # The address is personal data: stored masked (number and street hidden, city kept).
    assert "* *** Road, Shelbyville" in values
    assert not any("Oak" in value or "Street" in value for value in values)
    facts = system.ltm.facts(
        filter=LtmFilter(user_id="alice", categories=frozenset({Category.PROFILE}))
    )
    assert [fact.version for fact in facts] == [2]


def test_session_and_short_term_memory_expire_while_long_term_stays(
    system: MemorySystem, clock: VirtualClock
) -> None:
    system.turn(user_id="alice", session_id="s1", text="I always want deliveries by SF Express.")
    system.turn(user_id="alice", session_id="s1", text="Please book a table for two at 7pm.")
    opened_at = system.session.peek(user_id="alice", session_id="s1")
    assert opened_at is not None

    clock.advance(2 * HOUR)
    assert system.session.peek(user_id="alice", session_id="s1") is None
    later = system.turn(user_id="alice", session_id="s1", text="How should my parcel be delivered?")
    assert later.session.started_at > opened_at.started_at  # a new session under the old id
    assert later.context_ids == [later.message_id]
    assert later.stm_hits == []
    assert any(hit.record.key == "shipping" for hit in later.ltm_hits)


def test_timings_cover_every_layer(system: MemorySystem) -> None:
    result = system.turn(
        user_id="alice", session_id="s1", text="Please remind me to call Bob at 5pm."
    )
    assert set(result.timings_ms) == set(TIMING_KEYS)
    assert all(value >= 0 for value in result.timings_ms.values())
    parts = sum(result.timings_ms[key] for key in TIMING_KEYS if key != "turn")
    assert parts <= result.timings_ms["turn"] + 1e-6


def test_delete_user_data_empties_every_layer(system: MemorySystem) -> None:
    system.turn(user_id="alice", session_id="s1", text="I always want deliveries by SF Express.")
    system.turn(user_id="bob", session_id="s9", text="I always want deliveries by SF Express.")
    removed = system.delete_user_data(user_id="alice")
    assert removed == {"session": 1, "stm": 1, "ltm": 1}
    assert system.recall(user_id="alice", session_id="s1", query="deliveries").ltm_hits == []
    assert system.recall(user_id="bob", session_id="s9", query="deliveries").ltm_hits != []


def test_bad_input_names_the_field(system: MemorySystem) -> None:
    with pytest.raises(InvalidInput, match=r"^user_id: "):
        system.turn(user_id="a:b", session_id="s1", text="hello")
    with pytest.raises(InvalidInput, match=r"^text: "):
        system.turn(user_id="alice", session_id="s1", text="   ")
    with pytest.raises(InvalidInput, match=r"^at: "):
        MemorySystem(
            clock=SystemClock(),
            session=system.session,
            stm=system.stm,
            ltm=system.ltm,
            embedder=system.embedder,
            pii=system.pii,
        ).turn(user_id="alice", session_id="s1", text="hello", at=0.0)


def test_recall_observes_without_changing_anything(system: MemorySystem) -> None:
    system.turn(user_id="alice", session_id="s1", text="I always want deliveries by SF Express.")
    before = system.footprint()
    recalled = system.recall(user_id="alice", session_id="s1", query="deliveries by SF Express")
    assert recalled.stm_hits and recalled.ltm_hits
    assert recalled.stm_hits[0].record.access_count == 0
    assert recalled.ltm_hits[0].record.access_count == 0
    assert system.footprint() == before
    assert len(system.session.context(user_id="alice", session_id="s1")) == 1
