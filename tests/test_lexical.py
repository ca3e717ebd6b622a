"""Lexical retrieval, pure parts: the tokenizer, the lexical ranking, reciprocal rank
fusion, and the strategy setting that turns it on."""

from __future__ import annotations

import math

import pytest

from reference.lexical import (
    MAX_TERM_CHARS,
    fuse,
    idf,
    lexical_ranking,
    lexical_terms,
    query_terms,
)
from reference.policy.loading import load_strategy, parse_strategy
from reference.policy.strategy import StrategyError


# ---------------------------------------------------------------------- tokenizer
def test_english_is_lower_cased_split_stripped_of_stop_words_and_stemmed() -> None:
    text = "Caroline went to the LGBTQ support-group in Boston on 8 May 2023; it's great!"
    assert lexical_terms(text) == [
        *("carolin", "went", "lgbtq", "support", "group", "boston", "8", "may", "2023"),
        "great",
    ]


def test_forms_of_one_english_word_are_one_term() -> None:
    # Snowball's English (Porter2) stems, as PostgreSQL's `english` configuration has them.
    assert lexical_terms("She paints; painting is what she painted") == ["paint"]
    assert lexical_terms("adopted adoption adopting") == ["adopt"]
    assert query_terms("Which camps did they go to?")[0] == lexical_terms("camping")[0] == "camp"


def test_terms_are_distinct_in_order_of_first_appearance() -> None:
    assert lexical_terms("Tea, TEA and tea; then coffee") == ["tea", "coffe"]
    assert lexical_terms("") == [] and lexical_terms("the of and") == []


def test_chinese_is_segmented_for_search_and_stop_words_dropped() -> None:
    terms = lexical_terms("我住在北京市海淀区，喜欢喝乌龙茶")
    # Search mode: the long word and the words inside it.
    for word in ("北京市", "北京", "海淀区", "海淀", "乌龙茶", "乌龙", "喜欢"):
        assert word in terms
    assert "我" not in terms and "在" not in terms and "，" not in terms


def test_mixed_text_keeps_each_script_and_the_order() -> None:
    assert lexical_terms("我在Shanghai工作, phone 13800138000") == [
        "shanghai",
        "工作",
        "phone",
        "13800138000",
    ]


def test_a_query_searches_at_most_its_first_32_terms() -> None:
    words = " ".join(f"w{i}" for i in range(40))
    assert query_terms(words) == [f"w{i}" for i in range(32)]


# ---------------------------------------------------------------------- ranking
def test_rare_terms_outrank_common_ones() -> None:
    # 10 facts; "caroline" in 4 of them, "boston" in 1.
    matches = [("a", ["caroline"]), ("b", ["caroline"]), ("c", ["caroline"])]
    matches += [("d", ["caroline", "boston"])]
    assert idf(10, 1) > idf(10, 4) > 0
    ranked = lexical_ranking(["caroline", "boston"], matches, total=10, limit=10)
    assert ranked[0] == "d"
    # Equal scores: the dense order decides, a fact absent from it last, then by id.
    assert ranked[1:] == ["a", "b", "c"]
    assert lexical_ranking(
        ["caroline", "boston"], matches, total=10, limit=3, dense=["c", "x", "b"]
    ) == ["d", "c", "b"]


def test_fusion_order_on_a_hand_computed_case() -> None:
    # k = 60: a = 1/61 + 1/63 and c = 1/63 + 1/61 tie (a ranks 1st in the dense ranking,
    # where both first appear, c 3rd); b = 1/62 (dense only) ties d = 1/62 (lexical
    # only): b first, by the first ranking.
    fused = fuse([["a", "b", "c"], ["c", "d", "a"]], rrf_k=60)
    assert [fid for fid, _ in fused] == ["a", "c", "b", "d"]
    scores = dict(fused)
    assert scores["a"] == pytest.approx(1 / 61 + 1 / 63)
    assert scores["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert scores["b"] == scores["d"] == pytest.approx(1 / 62)
    # k = 1: y, second in both, scores 1/3 + 1/3 and beats x and z, first in one each.
    fused = fuse([["x", "y"], ["z", "y"]], rrf_k=1)
    assert [fid for fid, _ in fused] == ["y", "x", "z"]
    assert math.isclose(dict(fused)["y"], 1 / 3 + 1 / 3)


# ---------------------------------------------------------------------- strategy
def test_retrieval_setting_loads_and_changes_the_fingerprint() -> None:
    dense = parse_strategy("name: a\ndescription: d\n")
    lexical = parse_strategy("name: a\ndescription: d\nretrieval: {lexical: true, rrf_k: 20}\n")
    assert dense.lexical_retrieval is None
    assert lexical.lexical_retrieval is not None and lexical.lexical_retrieval.rrf_k == 20
    assert dense.fingerprint() != lexical.fingerprint()
    off = parse_strategy("name: a\ndescription: d\nretrieval: {lexical: false}\n")
    assert off.lexical_retrieval is None
    assert parse_strategy(lexical.to_yaml(), source="round-trip") == lexical


@pytest.mark.parametrize(
    ("block", "field", "words"),
    [
        ("retrieval: {lexical: maybe}", "retrieval.lexical", "bool"),
        ("retrieval: {rrf_k: 0}", "retrieval.rrf_k", "greater than or equal to 1"),
        ("retrieval: {rrf_k: 1.5}", "retrieval.rrf_k", "integer"),
        ("retrieval: {lexicon: true}", "retrieval.lexicon", "did you mean 'lexical'"),
        ("retrieval: dense", "retrieval", "valid dictionary"),
    ],
)
def test_bad_retrieval_values_name_file_line_and_field(block: str, field: str, words: str) -> None:
    with pytest.raises(StrategyError) as info:
        parse_strategy(f"name: a\ndescription: d\n\n{block}\n", source="mine.yaml")
    problem = info.value.problems[0]
    assert (problem.file, problem.line, problem.field) == ("mine.yaml", 4, field)
    assert words in problem.message


def test_builtins_state_their_retrieval() -> None:
    assert load_strategy("keep_all").lexical_retrieval is not None
    assert load_strategy("hybrid").lexical_retrieval is not None


def test_a_word_over_the_length_limit_is_no_term() -> None:
    longest = "x" * MAX_TERM_CHARS
    assert lexical_terms(f"{longest} {longest}y lake 长") == [longest, "lake", "长"]
