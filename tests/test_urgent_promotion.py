"""Through whole turns: what is said once and must last (an explicit "remember that", an
allergy) reaches long-term memory with a high importance and is recalled in a later
session; a restated address supersedes the old one; two speakers keep their own facts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.models import Category
from reference.policy.lexicon import key_family
from reference.promotion import DEFAULT_IMPORTANCE, IMPORTANCE_EXPLICIT, IMPORTANCE_SAFETY
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder

DAY = 86_400.0


def _system(
    strategy: str, clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> MemorySystem:
    settings = Settings(
        backend="memory",
        data_dir=data_dir,
        prefix=namespace.prefix,
        encryption_key=generate_key(),  # type: ignore[arg-type]
    )
    return build_memory_system(
        settings, clock=clock, embedder=embedder, namespace=namespace, strategy=strategy
    )


@pytest.fixture
def make(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[object]:
    built: list[MemorySystem] = []

    def factory(strategy: str = "keep_all") -> MemorySystem:
        system = _system(strategy, clock, namespace, data_dir, embedder)
        built.append(system)
        return system

    yield factory
    for system in built:
        system.drop()


@pytest.mark.parametrize("strategy", ["keep_all", "typed_ttl", "importance", "hybrid"])
@pytest.mark.parametrize(
    ("said", "query", "family", "importance"),
    [
        (
            "Remember that I'm allergic to penicillin.",
            "Am I allergic to penicillin?",
            "allergy",
            IMPORTANCE_SAFETY,
        ),
        ("我对花生过敏", "我对什么过敏？", "allergy", IMPORTANCE_SAFETY),
        (
            "I take insulin every morning.",
            "Which medication do I take?",
            "medication",
            IMPORTANCE_SAFETY,
        ),
        (
            "Please note: my gate code is 4321.",
            "What is my gate code?",
            "gate_code",
            IMPORTANCE_EXPLICIT,
        ),
        ("记住，我的门禁密码是4321", "我的门禁密码是多少？", "门禁密码", IMPORTANCE_EXPLICIT),
    ],
)
def test_said_once_recalled_in_a_later_session(
    make,
    clock: VirtualClock,
    strategy: str,
    said: str,
    query: str,
    family: str,
    importance: float,
) -> None:
    system = make(strategy)
    result = system.turn(user_id="ann", session_id="s1", text=said)
    assert result.promoted is not None, result.stm
    assert key_family(result.promoted.key) == family
    assert result.promoted.importance == importance
    assert result.stm.record is not None and result.stm.record.importance == importance
    clock.advance(10 * DAY)
    system.sweep()
    recalled = system.recall(user_id="ann", session_id="s2", query=query)
    assert [key_family(h.record.key) for h in recalled.ltm_hits] == [family]


def test_plain_statements_keep_the_default_importance(make) -> None:
    system = make()
    result = system.turn(user_id="ann", session_id="s1", text="I always prefer aisle seats.")
    assert result.promoted is not None and result.promoted.importance == DEFAULT_IMPORTANCE


@pytest.mark.parametrize(
    ("first", "restated", "value"),
    [
        ("My address is 12 Elm Street.", "My new address is 48 Oak Avenue.", "48 Oak Avenue"),
        (
            "My address is 12 Elm Street.",
            "I moved to 7 Harbour Lane, Brighton.",
            "7 Harbour Lane, Brighton",
        ),
        (
            "我的地址是北京市海淀区中关村大街1号",
            "我的新地址是杭州市西湖区文三路8号",
            "杭州市西湖区文三路8号",
        ),
        ("我的地址是北京市海淀区中关村大街1号", "我搬到了上海市浦东新区", "上海市浦东新区"),
    ],
)
def test_a_restated_address_supersedes_the_old_one(
    make, clock: VirtualClock, first: str, restated: str, value: str
) -> None:
    system = make()
    system.turn(user_id="ann", session_id="s1", text=first)
    clock.advance(3 * DAY)
    system.turn(user_id="ann", session_id="s2", text=restated)
    facts = system.ltm.facts(
        filter=LtmFilter(user_id="ann", categories=frozenset({Category.PROFILE}))
    )
    stored = system.pii.mask(value)  # an address is personal data: stored masked
    assert [(f.key, f.version, f.value["value"]) for f in facts] == [("address", 2, stored)]


def test_two_speakers_never_supersede_each_other(make) -> None:
    system = make()
    for speaker, text in (
        ("Caroline", "My address is 12 Elm Street."),
        ("Melanie", "My address is 4 Pine Road."),
    ):
        system.turn(
            user_id="conv",
            session_id="s1",
            text=f"{speaker}: {text}",
            metadata={"speaker": speaker},
        )
    facts = system.ltm.facts(filter=LtmFilter(user_id="conv"))
    assert sorted((f.key, f.version) for f in facts) == [
        ("address@caroline", 1),
        ("address@melanie", 1),
    ]
    # A forget command names the family: both speakers' addresses go.
    system.turn(user_id="conv", session_id="s1", text="forget my address")
    assert system.ltm.facts(filter=LtmFilter(user_id="conv")) == []
