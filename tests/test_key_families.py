"""The key vocabulary of qualified fields (`reference.policy.field_keys`): the keys
promotion gives qualified statements in both languages, supersession by qualified key,
and event invalidation by family."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.models import Category, Event, Status
from reference.policy.field_keys import KeySelector, canonical_key, field_of, parse_field
from reference.policy.forget_topics import topic_keys
from reference.policy.invalidation import invalidations_for
from reference.policy.loading import load_strategy
from reference.promotion import extract_fact
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0
from tests.test_policy import acts, fact, record

DAY = 86_400.0


# ---------------------------------------------------------------------- the vocabulary
@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("address", "address"),
        ("home address", "address"),
        ("Home_Address", "address"),
        ("地址", "address"),
        ("住址", "address"),
        ("家庭住址", "address"),
        ("家里的地址", "address"),
        ("delivery address", "delivery_address"),
        ("shipping address", "delivery_address"),
        ("delivery_address", "delivery_address"),
        ("收货地址", "delivery_address"),
        ("送货地址", "delivery_address"),
        ("billing address", "billing_address"),
        ("发票地址", "billing_address"),
        ("work address", "work_address"),
        ("公司地址", "work_address"),
        ("phone number", "phone"),
        ("mobile number", "phone"),
        ("mobile", "phone"),
        ("手机", "phone"),
        ("手机号", "phone"),
        ("home phone", "home_phone"),
        ("landline", "home_phone"),
        ("座机", "home_phone"),
        ("work phone number", "work_phone"),
        ("工作电话", "work_phone"),
        ("办公电话", "work_phone"),
        ("email", "email"),
        ("work email address", "work_email"),
        ("公司邮箱", "work_email"),
        # not a field of the vocabulary: the name itself, as before
        ("order number", "order_number"),
        ("seat", "seat"),
        ("old address", "old_address"),
    ],
)
def test_canonical_keys(name: str, key: str) -> None:
    assert canonical_key(name) == key


def test_a_bare_field_names_no_qualifier_and_a_qualified_one_does() -> None:
    bare, home = parse_field("地址"), parse_field("家庭住址")
    assert bare is not None and bare.qualifier is None and bare.key == "address"
    assert home is not None and home.qualifier == "home" and home.key == "address"
    assert parse_field("order number") is None


@pytest.mark.parametrize(
    ("key", "field"),
    [
        ("address", "address"),
        ("delivery_address", "address"),
        ("old_address", "address"),
        ("work_phone", "phone"),
        ("phone", "phone"),
        ("work_email", "email"),
        ("seat", None),
        ("order_number", None),
        ("allergy:peanut", None),
    ],
)
def test_field_of_a_key(key: str, field: str | None) -> None:
    assert field_of(key) == field


def test_a_bare_field_selects_its_family_a_qualified_one_its_key() -> None:
    family = KeySelector.of(["address"])
    assert [
        k
        for k in ("address", "delivery_address", "work_address", "phone", "seat")
        if family.matches(k)
    ] == ["address", "delivery_address", "work_address"]
    delivery = KeySelector.of(["收货地址"])
    assert [k for k in ("address", "delivery_address", "work_address") if delivery.matches(k)] == [
        "delivery_address"
    ]
    home = KeySelector.of(["home_address"])
    assert [k for k in ("address", "delivery_address") if home.matches(k)] == ["address"]
    assert KeySelector.of(["电话"]).matches("work_phone")
    assert not KeySelector.of(["手机"]).matches("work_phone")
    # a speaker's key is that speaker's: only its own name selects it
    assert not family.matches("address@caroline")
    assert KeySelector.of(["address@caroline"]).matches("address@caroline")
    assert not KeySelector.of([])


@pytest.mark.parametrize(
    ("topic", "keys"),
    [("my home address", {"address"}), ("收货地址", {"delivery_address"}), ("地址", {"address"})],
)
def test_forget_topics_use_the_same_vocabulary(topic: str, keys: set[str]) -> None:
    assert topic_keys(topic) == keys


# ---------------------------------------------------------------------- promotion keys
@pytest.mark.parametrize(
    ("said", "key"),
    [
        ("My address is 12 Elm Street.", "address"),
        ("My home address is 12 Elm Street.", "address"),
        ("My delivery address is 4 Dock Road.", "delivery_address"),
        ("My shipping address is 4 Dock Road.", "delivery_address"),
        ("My billing address is 1 Main Street.", "billing_address"),
        ("My office address is 2 Quay Street.", "work_address"),
        ("My phone number is 07700 900123.", "phone"),
        ("My work phone number is 020 7946 0018.", "work_phone"),
        ("My home phone is 020 7946 0000.", "home_phone"),
        ("我的地址是北京市海淀区1号", "address"),
        ("我的家庭住址是北京市朝阳区5号", "address"),
        ("我的收货地址是北京市海淀区知春路8号", "delivery_address"),
        ("我的公司地址是深圳市南山区3号", "work_address"),
        ("我的工作电话是010-88886666", "work_phone"),
        ("我的座机是010-62751234", "home_phone"),
        ("我的工作邮箱是a@example.com", "work_email"),
    ],
)
def test_promotion_keys_qualified_fields(said: str, key: str) -> None:
    candidate = extract_fact(said, None)
    assert candidate is not None and candidate.category is Category.PROFILE
    assert candidate.key == key


# ---------------------------------------------------------------------- invalidation
def _profile_event(*fields: str) -> Event:
    return Event("profile_updated", "alice", T0 + DAY, {"fields": list(fields)})


FACTS = [
    fact("home", key="address"),
    fact("delivery", key="delivery_address"),
    fact("work", key="work_address"),
    fact("mobile", key="phone"),
]


@pytest.mark.parametrize(
    ("fields", "archived"),
    [
        (["address"], ["home", "delivery", "work"]),
        (["地址"], ["home", "delivery", "work"]),
        (["delivery_address"], ["delivery"]),
        (["收货地址"], ["delivery"]),
        (["Shipping Address"], ["delivery"]),
        (["home_address"], ["home"]),
        (["家庭住址"], ["home"]),
        (["phone"], ["mobile"]),
        (["work_phone"], []),
    ],
)
def test_profile_updated_invalidates_by_family(fields: list[str], archived: list[str]) -> None:
    for name in ("event_driven", "hybrid"):
        decisions = invalidations_for(
            _profile_event(*fields), [], FACTS, strategy=load_strategy(name)
        )
        assert acts(decisions) == [(f, "archive") for f in archived], (name, fields)


def test_stm_notes_on_a_qualified_topic_go_with_their_family() -> None:
    records = [
        record("home-note", topic="address"),
        record("delivery-note", topic="delivery_address"),
        record("seat-note", topic="seat"),
    ]
    decisions = invalidations_for(
        _profile_event("地址"), records, [], strategy=load_strategy("hybrid")
    )
    assert acts(decisions) == [("home-note", "archive"), ("delivery-note", "archive")]


# ---------------------------------------------------------------------- end to end
@pytest.fixture
def system(
    clock: VirtualClock, namespace: Namespace, data_dir: Path, embedder: Embedder
) -> Iterator[MemorySystem]:
    settings = Settings(
        backend="memory",
        data_dir=data_dir,
        prefix=namespace.prefix,
        encryption_key=generate_key(),
    )
    built = build_memory_system(
        settings, clock=clock, embedder=embedder, namespace=namespace, strategy="hybrid"
    )
    yield built
    built.drop()


def _profile(system: MemorySystem) -> dict[str, tuple[int, str, Status]]:
    facts = system.ltm.facts(
        filter=LtmFilter(user_id="ann", categories=frozenset({Category.PROFILE}), include_dead=True)
    )
    return {f.key: (f.version, system.reveal(f)["value"], f.status) for f in facts}


@pytest.mark.parametrize(
    ("home", "delivery", "restated", "new_home"),
    [
        (
            "My home address is 12 Elm Street.",
            "My delivery address is 4 Dock Road.",
            "My address is 30 Hill Lane.",  # unqualified: the home address
            "30 Hill Lane",
        ),
        (
            "我的家庭住址是北京市朝阳区光华路5号",
            "我的收货地址是北京市海淀区知春路8号",
            "我的地址是上海市徐汇区漕溪路1号",
            "上海市徐汇区漕溪路1号",
        ),
    ],
)
def test_a_restated_value_supersedes_its_own_qualified_key(
    system: MemorySystem,
    clock: VirtualClock,
    home: str,
    delivery: str,
    restated: str,
    new_home: str,
) -> None:
    system.turn(user_id="ann", session_id="s1", text=home)
    system.turn(user_id="ann", session_id="s1", text=delivery)
    clock.advance(DAY)
    system.turn(user_id="ann", session_id="s2", text=restated)
    profile = _profile(system)
    assert profile["address"][:2] == (2, new_home)
    assert profile["delivery_address"][0] == 1  # untouched by the home address


def test_an_event_on_the_bare_field_archives_every_address(
    system: MemorySystem, clock: VirtualClock
) -> None:
    system.turn(user_id="ann", session_id="s1", text="My home address is 12 Elm Street.")
    system.turn(user_id="ann", session_id="s1", text="我的收货地址是北京市海淀区知春路8号")
    system.turn(user_id="ann", session_id="s1", text="My work phone number is 020 7946 0018.")
    clock.advance(DAY)
    system.handle_event(Event("profile_updated", "ann", clock.now(), {"fields": ["收货地址"]}))
    statuses = {k: v[2] for k, v in _profile(system).items()}
    assert statuses == {
        "address": Status.ACTIVE,
        "delivery_address": Status.ARCHIVED,
        "work_phone": Status.ACTIVE,
    }
    system.handle_event(Event("profile_updated", "ann", clock.now(), {"fields": ["address"]}))
    statuses = {k: v[2] for k, v in _profile(system).items()}
    assert statuses["address"] is Status.ARCHIVED
    assert statuses["work_phone"] is Status.ACTIVE
