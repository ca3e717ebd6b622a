"""Conformance of lexical + dense retrieval in the long-term layer: every backend fuses
the same rankings (`reference.lexical`), so PostgreSQL's order is the in-memory one's."""

from __future__ import annotations

import numpy as np
import pytest

from reference.clock import VirtualClock
from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.ltm.base import LongTermStore
from reference.ltm.filters import LtmFilter
from reference.ltm.memory_store import InMemoryLongTermStore
from reference.models import Category
from reference.text_interfaces import Embedder
from tests.fixtures.ltm_backends import LTM_BACKENDS, MINIMAL
from tests.test_ltm_conformance import MinimalLongTermStore

DIM = 384
WORDS = [
    *("tea", "coffee", "boston", "caroline", "painting", "violin", "camping", "lake"),
    *("adoption", "agency", "sunrise", "marathon", "北京", "乌龙茶", "海淀区", "上海"),
    *("工作", "喜欢", "音乐会", "周末"),
]


@pytest.fixture(params=[*LTM_BACKENDS, MINIMAL])
def ltm_backend(request: pytest.FixtureRequest) -> str:
    """Every long-term backend, and the minimal one (its `_lexical_matches` is the
    default, which tokenizes every fact in scope)."""
    return str(request.param)


@pytest.fixture
def minimal_ltm_store_class() -> type[LongTermStore]:
    return MinimalLongTermStore


def unit(rng: np.random.Generator) -> np.ndarray:
    v = rng.standard_normal(DIM)
    return (v / np.linalg.norm(v)).astype(np.float32)


def test_a_shared_rare_word_lifts_a_dense_stranger_into_the_top_k(ltm_store: LongTermStore):
    rng = np.random.default_rng(3)
    query = unit(rng)
    for i in range(20):  # close to the query, no shared word
        near = query + 0.3 * unit(rng)
        ltm_store.upsert(
            user_id="u1",
            category="fact",
            key=f"near{i}",
            value={},
            text=f"chat {i}",
            embedding=near,
        )
    far = ltm_store.upsert(
        user_id="u1",
        category="fact",
        key="far",
        value={},
        text="Caroline painted a sunrise",
        embedding=-query,
    )
    text = "When did Caroline paint the sunrise?"
    dense = ltm_store.query(user_id="u1", text=text, embedding=query, k=5)
    fused = ltm_store.query(user_id="u1", text=text, embedding=query, k=5, lexical=True)
    assert far.fact_id not in [h.record.fact_id for h in dense]
    assert fused[0].record.fact_id == far.fact_id  # lexical 1st, dense 21st
    assert fused[0].score == pytest.approx(1 / 61 + 1 / 81)
    assert len(fused) == 5


def test_lexical_retrieval_keeps_the_filters_and_touches_what_it_returns(
    ltm_store: LongTermStore, clock: VirtualClock
):
    rng = np.random.default_rng(5)
    kw = {"category": "fact", "value": {}, "text": "violin lesson"}
    mine = ltm_store.upsert(user_id="u1", key="mine", embedding=unit(rng), **kw)
    ltm_store.upsert(user_id="u2", key="theirs", embedding=unit(rng), **kw)
    ltm_store.upsert(user_id="u1", key="gone", embedding=unit(rng), **kw)
    ltm_store.archive(filter=LtmFilter(user_id="u1", keys=frozenset({"gone"})))
    ltm_store.upsert(
        user_id="u1", key="expired", embedding=unit(rng), expires_at=clock.now() + 1, **kw
    )
    ltm_store.upsert(
        user_id="u1",
        key="other",
        category="profile",
        value={},
        text="violin",
        embedding=unit(rng),
    )
    clock.advance(10)
    hits = ltm_store.query(
        user_id="u1", text="violin", k=5, lexical=True, categories=frozenset({Category.FACT})
    )
    assert [h.record.key for h in hits] == ["mine"]
    assert hits[0].record.access_count == 1 and hits[0].record.last_accessed_at == clock.now()
    peek = ltm_store.query(user_id="u1", text="violin", k=5, lexical=True, touch=False)
    assert sorted(h.record.key for h in peek) == ["mine", "other"]
    [fact] = ltm_store.facts(filter=LtmFilter(user_id="u1", keys=frozenset({"mine"})))
    assert fact.fact_id == mine.fact_id and fact.access_count == 1


def test_lexical_retrieval_needs_the_query_text(ltm_store: LongTermStore):
    with pytest.raises(InvalidInput) as info:
        ltm_store.query(user_id="u1", embedding=np.ones(DIM), k=5, lexical=True)
    assert info.value.field == "text"
    with pytest.raises(InvalidInput) as info:
        ltm_store.query(user_id="u1", text="tea", k=5, lexical=True, rrf_k=0)
    assert info.value.field == "rrf_k"


def test_fused_order_matches_the_in_memory_oracle(
    ltm_store: LongTermStore, clock: VirtualClock, namespace: Namespace, embedder: Embedder
):
    oracle = InMemoryLongTermStore(clock=clock, namespace=namespace, embedder=embedder)
    rng = np.random.default_rng(20261203)
    # 50 facts a user: every fact is in the dense ranking, so lexical ties go by it
    # (beyond it they go by fact_id, which differs between two stores).
    users = [f"user{i}" for i in range(8)]
    for i in range(400):
        words = rng.choice(WORDS, size=int(rng.integers(1, 5)), replace=False)
        spec = {
            "user_id": users[i % len(users)],
            "category": "episode" if i % 3 else "fact",
            "key": f"key{i}",
            "value": {"i": i},
            "text": "我 " + " and ".join(words) if i % 2 else " ".join(words).title(),
            "expires_at": clock.now() + 60 if i % 11 == 0 else None,
            "embedding": unit(rng),
        }
        for store in (ltm_store, oracle):
            store.upsert(**spec)
    clock.advance(120)
    for q in range(30):
        user = users[q % len(users)]
        text = " ".join(rng.choice(WORDS, size=int(rng.integers(1, 4)), replace=False))
        embedding = unit(rng)
        k = [1, 5, 10][q % 3]
        rrf_k = [60, 1, 20][q % 3]
        got, want = (
            s.query(user_id=user, text=text, embedding=embedding, k=k, lexical=True, rrf_k=rrf_k)
            for s in (ltm_store, oracle)
        )
        assert [h.record.key for h in got] == [h.record.key for h in want], text
        assert [h.score for h in got] == [h.score for h in want]


def test_a_word_too_long_to_search_is_no_term_and_stores_fine(ltm_store: LongTermStore):
    # PostgreSQL refuses a lexeme of 2 KB or more; no backend makes such a word a term.
    long_word = "x" * 3000
    rng = np.random.default_rng(5)
    fact = ltm_store.upsert(
        user_id="u1",
        category="profile",
        key="address",
        value={},
        text=f"My address is {long_word} lake",
        embedding=unit(rng),
    )
    for text in (long_word, f"{long_word} lake"):
        hits = ltm_store.query(user_id="u1", text=text, embedding=unit(rng), k=1, lexical=True)
        assert [h.record.fact_id for h in hits] == [fact.fact_id]
