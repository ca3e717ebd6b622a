"""The sensitive, entity and knowledge types (`reference.policy.memory_types`): which
utterances get them, in both languages, their precedence over the intent's kinds, and
what the strategies' rules for them then do (the `sensitive` TTL, `knowledge_updated`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.models import Category, Event, MemoryType, Status
from reference.policy.entities import named_entity, stated_knowledge
from reference.policy.intent import RuleIntentFilter
from reference.policy.memory_types import memory_type, sensitive_kind
from reference.promotion import extract_fact, should_promote
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder

HOUR = 3_600.0
DAY = 86_400.0
FILTER = RuleIntentFilter()


def typed(text: str, disclosed: frozenset[str] = frozenset()) -> MemoryType | None:
    """The STM type `MemorySystem.turn` gives the utterance (None: not kept)."""
    decision = FILTER.classify(text)
    if not decision.keep or decision.kind is None:
        return None
    candidate = extract_fact(text, decision.kind)
    category = None if candidate is None else candidate.category
    return memory_type(text, decision.kind, category=category, disclosed=disclosed)


# ---------------------------------------------------------------------- sensitive
@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ("I'm allergic to penicillin.", "health"),
        ("我对花生过敏。", "health"),
        ("I take insulin every morning.", "health"),
        ("我在吃降压药。", "health"),
        ("I was diagnosed with high blood pressure last month.", "health"),
        ("我生病了，明天不能来。", "health"),
        ("My passport number is E12345678.", "identity"),
        ("我的身份证号是11010519491231002X。", "identity"),
        ("The office wifi password is tiger123.", "identity"),
        ("My salary is 8000 dollars a month.", "financial"),
        ("我的工资是每月两万。", "financial"),
        ("我欠了银行五万贷款。", "financial"),
        ("My bank card number is 6222 0202 0000 1234.", "financial"),
    ],
)
def test_disclosures_are_sensitive(text: str, kind: str) -> None:
    assert sensitive_kind(text) == kind
    assert typed(text) is MemoryType.SENSITIVE


@pytest.mark.parametrize(
    "text",
    [
        "I'd like to pay by bank card.",
        "我想用银行卡付款。",
        "空调有毛病了，帮我报修。",  # 毛病: a fault, not an illness
        "帮我找一家药店。",
        "My phone number is 07700 900123.",  # contact data, not sensitive
        "I prefer window seats.",
    ],
)
def test_mentions_that_disclose_nothing_are_not_sensitive(text: str) -> None:
    assert sensitive_kind(text) is None
    assert typed(text) is not MemoryType.SENSITIVE


def test_the_pii_detector_kinds_type_a_disclosure() -> None:
    # The masked text hides the number; the detector's kind on the raw text tells.
    text = "Please use 1101**********231X for the booking."
    assert typed(text) is MemoryType.INSTRUCTION
    assert typed(text, frozenset({"cn_id"})) is MemoryType.SENSITIVE
    assert typed(text, frozenset({"bank_card"})) is MemoryType.SENSITIVE
    assert typed(text, frozenset({"mobile", "email"})) is MemoryType.INSTRUCTION


# ---------------------------------------------------------------------- entities
@pytest.mark.parametrize(
    ("text", "role", "name"),
    [
        ("My dentist is Dr. Lee.", "dentist", "Dr. Lee"),
        ("My manager is 王伟.", "manager", "王伟"),
        ("My dog Max loves long walks.", "dog", "Max"),
        ("My boss is called John Smith.", "manager", "John Smith"),
        ("我的经理叫王伟。", "manager", "王伟"),
        ("我的牙医是李医生。", "dentist", "李医生"),
        ("我家的狗叫旺财。", "dog", "旺财"),
    ],
)
def test_named_entities(text: str, role: str, name: str) -> None:
    assert named_entity(text) == (role, name)
    candidate = extract_fact(text, None)
    assert candidate is not None and candidate.category is Category.ENTITY
    assert candidate.key == role
    assert typed(text) is MemoryType.ENTITY
    assert should_promote(text, FILTER.classify(text).kind, said_before=False, candidate=candidate)


@pytest.mark.parametrize(
    "text",
    ["My manager is nice.", "我的老板是个好人。", "My dog is sleeping.", "Who is my dentist?"],
)
def test_a_role_without_a_name_is_no_entity(text: str) -> None:
    assert named_entity(text) is None or FILTER.classify(text).kind is MemoryType.INSTRUCTION
    assert typed(text) is not MemoryType.ENTITY


# ---------------------------------------------------------------------- knowledge
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Our return policy is 30 days.", "return_policy"),
        ("The API rate limit is 100 requests per minute.", "api_rate_limit"),
        ("Our company's refund process is two steps.", "refund_process"),
        ("公司的退货政策是30天。", "退货政策"),
        ("我们的报销流程是先填单再审批。", "报销流程"),
    ],
)
def test_stated_knowledge(text: str, key: str) -> None:
    assert stated_knowledge(text) is not None
    candidate = extract_fact(text, None)
    assert candidate is not None and candidate.category is Category.KNOWLEDGE
    assert candidate.key == key
    assert typed(text) is MemoryType.KNOWLEDGE


@pytest.mark.parametrize(
    "text", ["The weather is nice today.", "The deadline is Friday.", "What is our return policy?"]
)
def test_other_statements_are_no_knowledge(text: str) -> None:
    assert typed(text) is not MemoryType.KNOWLEDGE


# ---------------------------------------------------------------------- precedence
@pytest.mark.parametrize(
    ("text", "expected", "because"),
    [
        # sensitive over a preference, a profile fact, a request
        ("I'm allergic to peanuts.", MemoryType.SENSITIVE, "preference"),
        ("My passport number is E12345678.", MemoryType.SENSITIVE, "profile"),
        ("Please note my salary is 8000 a month.", MemoryType.SENSITIVE, "instruction"),
        # sensitive over knowledge: a credential is no knowledge to keep
        ("The office wifi password is tiger123.", MemoryType.SENSITIVE, "knowledge"),
        # sensitive over an entity: "my doctor is Dr. Chen" names a doctor (no health data)
        ("My doctor is Dr. Chen.", MemoryType.ENTITY, "no health data"),
        ("My doctor says I have cancer.", MemoryType.SENSITIVE, "entity word"),
        # a question discloses nothing
        ("Am I allergic to penicillin?", MemoryType.INSTRUCTION, "question"),
        ("我的工资是多少？", MemoryType.INSTRUCTION, "question"),
        # a forget command stays one
        ("Forget my salary.", MemoryType.INSTRUCTION, "forget command"),
        # entity over profile
        ("我的经理叫王伟。", MemoryType.ENTITY, "profile"),
        # the intent's kind otherwise
        ("My address is 12 Elm Street.", MemoryType.PROFILE, "profile"),
        ("I prefer aisle seats.", MemoryType.PREFERENCE, "preference"),
    ],
)
def test_precedence(text: str, expected: MemoryType, because: str) -> None:
    assert typed(text) is expected, because


def test_an_allergy_stays_a_long_term_fact_while_its_utterance_is_sensitive() -> None:
    candidate = extract_fact("I'm allergic to penicillin.", None)
    assert candidate is not None
    assert (candidate.category, candidate.key) == (Category.FACT, "allergy:penicillin")


# ---------------------------------------------------------------------- the rules fire
@pytest.fixture
def make(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[Callable[[str], MemorySystem]]:
    built: list[MemorySystem] = []

    def factory(strategy: str) -> MemorySystem:
        settings = Settings(
            backend="memory",
            data_dir=data_dir,
            prefix=namespace.prefix,
            encryption_key=generate_key(),
        )
        system = build_memory_system(
            settings, clock=clock, embedder=embedder, namespace=namespace, strategy=strategy
        )
        built.append(system)
        return system

    yield factory
    for system in built:
        system.drop()


@pytest.mark.parametrize(
    "text", ["I was diagnosed with high blood pressure.", "我的工资是每月两万。"]
)
def test_a_sensitive_utterance_expires_by_the_sensitive_ttl(
    make: Callable[[str], MemorySystem], clock: VirtualClock, text: str
) -> None:
    for name, ttl in (("hybrid", HOUR), ("typed_ttl", HOUR), ("keep_all", None)):
        system = make(name)
        result = system.turn(user_id=f"u-{name}", session_id="s1", text=text)
        record = result.stm.record
        assert record is not None and record.type is MemoryType.SENSITIVE
        expected = None if ttl is None else record.created_at + ttl
        assert record.expires_at == expected, name


def test_a_sensitive_episode_expires_by_the_sensitive_ttl(
    make: Callable[[str], MemorySystem], clock: VirtualClock
) -> None:
    system = make("hybrid")
    said = system.turn(
        user_id="ann", session_id="s1", text="I was diagnosed with high blood pressure."
    )
    assert said.stm.record is not None and said.stm.record.type is MemoryType.SENSITIVE
    plain = system.turn(user_id="ann", session_id="s1", text="I went to Paris last week.")
    assert plain.stm.record is not None
    done = system.close_session(user_id="ann", session_id="s1")
    episodes = {e.text: e.expires_at for e in done.episodes}
    assert (
        episodes["I was diagnosed with high blood pressure."] == said.stm.record.created_at + HOUR
    )
    assert episodes["I went to Paris last week."] is None  # hybrid keeps episodes


def test_knowledge_updated_archives_knowledge_under_its_keys(
    make: Callable[[str], MemorySystem], clock: VirtualClock
) -> None:
    system = make("hybrid")
    for text in (
        "Our return policy is 30 days.",
        "公司的退货政策是30天。",
        "My dentist is Dr. Lee.",
    ):
        result = system.turn(user_id="ann", session_id="s1", text=text)
        assert result.promoted is not None, text
    clock.advance(DAY)
    system.handle_event(Event("knowledge_updated", "ann", clock.now(), {"keys": ["return_policy"]}))
    facts = system.ltm.facts(filter=LtmFilter(user_id="ann", include_dead=True))
    status = {(f.category, f.key): f.status for f in facts if f.category is not Category.EPISODE}
    assert status == {
        (Category.KNOWLEDGE, "return_policy"): Status.ARCHIVED,
        (Category.KNOWLEDGE, "退货政策"): Status.ACTIVE,
        (Category.ENTITY, "dentist"): Status.ACTIVE,
    }


def test_a_new_name_for_a_role_supersedes_the_old_one(
    make: Callable[[str], MemorySystem], clock: VirtualClock
) -> None:
    system = make("hybrid")
    system.turn(user_id="ann", session_id="s1", text="My manager is John Smith.")
    clock.advance(DAY)
    system.turn(user_id="ann", session_id="s2", text="我的新经理叫王伟。")
    facts = system.ltm.facts(
        filter=LtmFilter(user_id="ann", categories=frozenset({Category.ENTITY}))
    )
    assert [(f.key, f.version, system.reveal(f)["value"]) for f in facts] == [
        ("manager", 2, "王伟")
    ]
