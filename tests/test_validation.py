import math

import pytest

from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.settings import Settings
from reference.validation import (
    check_category,
    check_embedding,
    check_id,
    check_importance,
    check_json_object,
    check_text,
)


@pytest.mark.parametrize(
    "bad", ["", "a:b", "*", "../x", "a b", "-lead", "x" * 129, "名字", "a\x00b", "a$b", 'a"b']
)
def test_ids_outside_the_alphabet_are_rejected_naming_the_field(bad: str) -> None:
    with pytest.raises(InvalidInput) as info:
        check_id("user_id", bad)
    assert info.value.field == "user_id"
    assert str(info.value).startswith("user_id: ")


@pytest.mark.parametrize("good", ["u1", "alice@example.com", "sess_2026-01-01.a", "x" * 128])
def test_ordinary_ids_pass(good: str) -> None:
    assert check_id("session_id", good) == good


def test_id_must_be_a_string() -> None:
    with pytest.raises(InvalidInput, match="must be a string, got int"):
        check_id("user_id", 42)


@pytest.mark.parametrize("bad", ["", "   ", "x" * 8001])
def test_text_must_be_non_empty_and_bounded(bad: str) -> None:
    with pytest.raises(InvalidInput, match=r"^text: "):
        check_text("text", bad)


def test_embedding_dimensions_and_values() -> None:
    assert len(check_embedding("embedding", [0.5] * 384)) == 384
    with pytest.raises(InvalidInput, match="zero vector"):
        check_embedding("embedding", [0.0] * 384)
    with pytest.raises(InvalidInput, match="383 dimensions; expected 384"):
        check_embedding("embedding", [0.5] * 383)
    with pytest.raises(InvalidInput, match="NaN"):
        check_embedding("embedding", [math.nan] + [0.0] * 383)
    with pytest.raises(InvalidInput, match="sequence of numbers"):
        check_embedding("embedding", ["a"] * 384)


def test_unknown_category_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInput, match="unknown category 'gossip'; expected one of preference"):
        check_category("category", "gossip")


def test_importance_range_and_json_values() -> None:
    with pytest.raises(InvalidInput, match="between 0 and 10"):
        check_importance("importance", 11)
    with pytest.raises(InvalidInput, match="finite"):
        check_importance("importance", math.inf)
    with pytest.raises(InvalidInput, match="JSON-serialisable"):
        check_json_object("value", {"when": object()})
    with pytest.raises(InvalidInput, match="JSON object"):
        check_json_object("value", ["not", "a", "dict"])


def test_namespace_prefix_is_safe_for_sql_and_redis() -> None:
    ns = Namespace("run_1")
    assert ns.session_key("u1", "s1") == "run_1:user:u1:session:s1"
    assert ns.facts_table == "run_1_facts"
    for bad in ["", "1abc", "Run", "a-b", "a;drop", "x" * 41]:
        with pytest.raises(InvalidInput, match=r"^prefix: "):
            Namespace(bad)


def test_settings_read_nested_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMH_SESSION__TTL_S", "60")
    monkeypatch.setenv("MEMH_PG_URL", "postgresql://u:secret@h/db")
    settings = Settings()
    assert settings.session.ttl_s == 60
    assert settings.pg_url is not None and "secret" not in repr(settings)


def test_settings_reject_unknown_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMH_BACKEND", "sqlite")
    with pytest.raises(ValueError, match="backend"):
        Settings()
