import pytest

from reference.models import Category, MemoryType
from reference.promotion import extract_fact, should_promote


@pytest.mark.parametrize(
    ("text", "category", "key", "value"),
    [
        ("My address is 12 Oak Street.", Category.PROFILE, "address", "12 Oak Street"),
        ("my home address is 5 Elm Road", Category.PROFILE, "address", "5 Elm Road"),
        (
            "我的地址是上海市浦东新区世纪大道100号",
            Category.PROFILE,
            "address",
            "上海市浦东新区世纪大道100号",
        ),
        ("我的公司是星辰科技", Category.PROFILE, "company", "星辰科技"),
        ("My company is Acme", Category.PROFILE, "company", "Acme"),
    ],
)
def test_my_x_is_y_keys_on_x(text: str, category: Category, key: str, value: str) -> None:
    fact = extract_fact(text, MemoryType.PROFILE)
    assert fact is not None
    assert (fact.category, fact.key, fact.value) == (category, key, value)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("I always want deliveries by SF Express.", "shipping"),
        ("我默认用顺丰发货", "shipping"),
        ("I prefer aisle seats", "seat"),
        ("I prefer window seats", "seat"),
        ("以后都用支付宝付款", "payment"),
    ],
)
def test_preferences_key_on_their_topic(text: str, key: str) -> None:
    fact = extract_fact(text, MemoryType.PREFERENCE)
    assert fact is not None and fact.category is Category.PREFERENCE and fact.key == key


def test_unrelated_statements_never_share_a_key() -> None:
    a = extract_fact("I prefer to be called Sam", MemoryType.PREFERENCE)
    b = extract_fact("I prefer dark mode in every app", MemoryType.PREFERENCE)
    assert a is not None and b is not None and a.key != b.key
    same = extract_fact("I prefer to be called  Sam!", MemoryType.PREFERENCE)
    assert same is not None and same.key == a.key


def test_only_stable_repeated_or_profile_statements_are_promoted() -> None:
    pref, instruction = MemoryType.PREFERENCE, MemoryType.INSTRUCTION
    assert should_promote("I always fly economy", pref, said_before=False)
    assert should_promote("我默认用顺丰", pref, said_before=False)
    assert should_promote("My address is 5 Elm Road", MemoryType.PROFILE, said_before=False)
    assert should_promote("Book a taxi to the airport", instruction, said_before=True)
    assert not should_promote("Book a taxi to the airport", instruction, said_before=False)
    assert not should_promote("I like jazz", pref, said_before=False)
