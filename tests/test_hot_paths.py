"""The shortcuts of a turn's hot path give exactly what the plain computations give.

The in-memory stores score with per-row norms kept at write time and Python floats for
the last few operations; these tests hold them to the numpy formulas the Chroma and
PostgreSQL backends rank with, bit for bit (ties and near-ties included). The memoised
rules, the PII mask cache and the id memo answer as the uncached functions do.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from reference import promotion
from reference.clock import VirtualClock
from reference.errors import InvalidInput
from reference.keys import Namespace
from reference.ltm.common import accessed_fact, audit_draft, copy_fact, numbered
from reference.ltm.memory_store import InMemoryLongTermStore
from reference.models import AuditEntry, Category, Fact, MemoryType, Status
from reference.pii import RegexPiiMasker
from reference.policy import intent as intent_module
from reference.policy.intent import RuleIntentFilter, is_stable_preference
from reference.stm.memory_store import InMemoryShortTermStore, cosine_scores, top_k
from reference.text import Embedder, IntentFilter, PiiMasker
from reference.validation import EMBEDDING_DIM, check_embedding, check_id


def _vectors(rng: np.random.Generator, n: int) -> np.ndarray:
    """Sparse-ish float32 rows with duplicates and near-duplicates (ties, near-ties)."""
    rows = rng.standard_normal((n, EMBEDDING_DIM)) * (rng.random((n, EMBEDDING_DIM)) < 0.1)
    rows[:, 0] += 0.01
    rows = rows.astype(np.float32)
    rows[1::5] = rows[0]
    rows[2::7] = rows[0] + np.float32(1e-7)
    return rows


def _pgvector_scores(matrix: np.ndarray, query: np.ndarray) -> np.ndarray:
    """pgvector's cosine in float64 over float32 values, as the in-memory LTM store did it
    with numpy before its Python-float shortcut."""
    m = matrix.astype(np.float64)
    q = query.astype(np.float32).astype(np.float64)
    dots = (m * q).sum(axis=1)
    norms = (m * m).sum(axis=1) * float((q * q).sum())
    distances = 1.0 - np.clip(dots / np.sqrt(norms), -1.0, 1.0)
    scores: np.ndarray = 1.0 - distances
    return scores


@pytest.mark.parametrize("seed", range(5))
def test_stm_scores_are_cosine_scores_bit_for_bit(
    seed: int,
    clock: VirtualClock,
    namespace: Namespace,
    embedder: Embedder,
    intent: IntentFilter,
    pii: PiiMasker,
) -> None:
    rng = np.random.default_rng(seed)
    store = InMemoryShortTermStore(
        clock=clock, namespace=namespace, embedder=embedder, intent_filter=intent, pii=pii
    )
    rows = _vectors(rng, 40)
    by_text = {}
    for i, row in enumerate(rows):
        added = store.add(
            user_id="u1", session_id="s1", text=f"note {i}", embedding=row, force=True
        )
        assert added.record is not None
        by_text[added.record.text] = (row, added.record.record_id)
    for query in (rng.standard_normal(EMBEDDING_DIM), rows[0], rows[3].astype(np.float64)):
        hits = store.query(user_id="u1", session_id="s1", embedding=query, k=40, touch=False)
        texts = list(by_text)
        expected = cosine_scores(np.stack([by_text[t][0] for t in texts]), list(query))
        best = top_k(
            ((float(s), by_text[t][1], t) for s, t in zip(expected, texts, strict=True)), 40
        )
        assert [(h.record.text, h.score) for h in hits] == [(t, s) for s, _, t in best]


@pytest.mark.parametrize("seed", range(5))
def test_ltm_scores_are_pgvector_scores_bit_for_bit(
    seed: int, clock: VirtualClock, namespace: Namespace, embedder: Embedder
) -> None:
    rng = np.random.default_rng(seed)
    store = InMemoryLongTermStore(clock=clock, namespace=namespace, embedder=embedder)
    rows = _vectors(rng, 30)
    ids = []
    for i, row in enumerate(rows):
        fact = store.upsert(
            user_id="u1", category="fact", key=f"k{i}", value={"v": i}, text="t", embedding=row
        )
        ids.append(fact.fact_id)
    for query in (rng.standard_normal(EMBEDDING_DIM), rows[0], list(rows[2].astype(float))):
        hits = store.query(user_id="u1", embedding=query, k=30, touch=False)
        scores = _pgvector_scores(rows, np.asarray(query))
        expected = sorted((1.0 - s, fid) for s, fid in zip(scores.tolist(), ids, strict=True))
        assert [(h.record.fact_id, h.score) for h in hits] == [(f, 1.0 - d) for d, f in expected]


def test_stores_keep_a_copy_of_the_callers_vector(
    clock: VirtualClock,
    namespace: Namespace,
    embedder: Embedder,
    intent: IntentFilter,
    pii: PiiMasker,
) -> None:
    stm = InMemoryShortTermStore(
        clock=clock, namespace=namespace, embedder=embedder, intent_filter=intent, pii=pii
    )
    ltm = InMemoryLongTermStore(clock=clock, namespace=namespace, embedder=embedder)
    vector = embedder.embed_one("my address is 1 Main Street")
    probe = vector.copy()
    stm.add(user_id="u1", session_id="s1", text="x", embedding=vector, force=True)
    ltm.upsert(user_id="u1", category="fact", key="k", value={}, text="x", embedding=vector)
    vector[:] = -vector  # the caller reuses its array
    assert stm.query(user_id="u1", session_id="s1", embedding=probe, k=1)[0].score == 1.0
    assert ltm.query(user_id="u1", embedding=probe, k=1)[0].score == pytest.approx(1.0)


def test_check_embedding_passes_float32_through_and_refuses_alike() -> None:
    good = np.full(EMBEDDING_DIM, 0.5, dtype=np.float32)
    assert check_embedding("embedding", good) is good
    bad = {
        "NaN": [math.nan] + [0.5] * (EMBEDDING_DIM - 1),
        "NaN or infinite": [math.inf] + [0.5] * (EMBEDDING_DIM - 1),
        "zero vector": [0.0] * EMBEDDING_DIM,
        "383 dimensions": [0.5] * (EMBEDDING_DIM - 1),
        "sequence of numbers": [[0.5] * EMBEDDING_DIM],
    }
    for message, value in bad.items():
        for form in (value, np.asarray(value, dtype=np.float32)):
            with pytest.raises(InvalidInput, match=message) as info:
                check_embedding("embedding", form)
            assert info.value.field == "embedding"
    tiny = np.full(EMBEDDING_DIM, 1e-45, dtype=np.float32)  # subnormal, not zero
    assert check_embedding("embedding", tiny) is tiny
    huge = np.full(EMBEDDING_DIM, 3e38, dtype=np.float32)  # finite, squares overflow float32
    assert check_embedding("embedding", huge) is huge


def test_id_memo_remembers_only_valid_ids() -> None:
    assert check_id("user_id", "memo-u1") == "memo-u1"
    assert check_id("user_id", "memo-u1") == "memo-u1"
    for _ in range(2):
        with pytest.raises(InvalidInput, match=r"^user_id: "):
            check_id("user_id", "a:b")


def test_copy_fact_copies_every_field() -> None:
    fact = Fact(
        fact_id="f1",
        user_id="u1",
        category=Category.PROFILE,
        key="address",
        value={"value": "1 Main St", "tags": ["a", {"b": 1}]},
        text="my address is 1 Main St",
        version=3,
        created_at=1.0,
        updated_at=2.0,
        last_accessed_at=3.0,
        access_count=4,
        importance=6.5,
        expires_at=9.0,
        status=Status.ARCHIVED,
    )
    copied = copy_fact(fact)
    assert copied == fact
    assert {f.name for f in dataclasses.fields(Fact)} <= set(copy_fact.__code__.co_names)
    copied.value["tags"][1]["b"] = 2
    assert fact.value["tags"][1]["b"] == 1
    accessed = accessed_fact(fact, 7.5)
    assert accessed == dataclasses.replace(fact, last_accessed_at=7.5, access_count=5)
    kept = {f.name for f in dataclasses.fields(Fact)} - {"last_accessed_at"}  # it is `now`
    assert kept <= set(accessed_fact.__code__.co_names)
    draft = audit_draft(fact, "update", "promotion", 8.0, {"value": "x"}, fact.value)
    assert numbered(draft, 41) == dataclasses.replace(draft, audit_id=41)
    assert {f.name for f in dataclasses.fields(AuditEntry)} - {"audit_id"} <= set(
        numbered.__code__.co_names
    )


TEXTS = [
    "I always prefer a window seat",
    "我的地址是北京市朝阳区",
    "my phone is 13812345678",
    "thanks!",
    "What is my address?",
    "默认用顺丰发货",
    "forget my address",
    "x" * 1500 + " my name is Bob",
]


def test_memoised_rules_answer_as_the_rules() -> None:
    rules = RuleIntentFilter()
    for text in TEXTS * 2:
        assert rules.classify(text) == intent_module._classify.__wrapped__(text)
        assert is_stable_preference(text) == intent_module._is_stable_preference.__wrapped__(text)
        for kind in (None, *MemoryType):
            assert promotion.extract_fact(text, kind) == promotion._extract(text, kind)


def test_extract_fact_memo_tells_a_member_from_its_string() -> None:
    text = "I like tea"
    as_member = promotion.extract_fact(text, MemoryType.PREFERENCE)
    as_string = promotion.extract_fact(text, "preference")
    assert as_member == promotion._extract(text, MemoryType.PREFERENCE)
    assert as_string == promotion._extract(text, "preference")


def test_mask_cache_answers_as_the_masker() -> None:
    cached, uncached = RegexPiiMasker(), RegexPiiMasker(cache_size=0)
    for text in [*TEXTS, "mail a.b@example.com or call 138 1234 5678", "护照号码：EA1234567"] * 2:
        masked = cached.mask(text)
        assert masked == uncached.mask(text)
        assert cached.mask(masked) == masked
    small = RegexPiiMasker(cache_size=4)
    for i in range(20):
        assert small.mask(f"call 1381234{i:04d}") == uncached.mask(f"call 1381234{i:04d}")
    assert len(small._masked) <= 4


def _has_nul(value: object) -> bool:
    """The walk `check_json_object` did before it read NULs off the encoding."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(_has_nul(k) or _has_nul(v) for k, v in value.items())
    if isinstance(value, list | tuple):
        return any(_has_nul(v) for v in value)
    return False


@pytest.mark.parametrize(
    "value",
    [
        {"a": "x\x00"},
        {"a\x00": 1},
        {"a": "\\u0000"},  # the text backslash-u0000, no NUL
        {"a": "\\\x00"},  # a backslash, then a NUL
        {"a": "\\\\u0000"},
        {"a": ["ok", ("t", "\x00")]},
        {"a": {"b": ["\\", "\x00\\"]}},
        {1: "x", "n": None, "f": 1.5, "b": True},
        {"a": "plain", "b": ["\\\\", "u0000"]},
    ],
)
def test_json_nul_check_reads_the_encoding_as_the_walk_did(value: dict) -> None:
    from reference.validation import check_json_object

    if _has_nul(value):
        with pytest.raises(InvalidInput, match="NUL"):
            check_json_object("value", value)
    else:
        assert check_json_object("value", value) is value


def test_upsert_audits_json_round_trips(
    clock: VirtualClock, namespace: Namespace, embedder: Embedder
) -> None:
    import json

    from reference.ltm.common import copy_json, copy_plain

    store = InMemoryLongTermStore(clock=clock, namespace=namespace, embedder=embedder)
    first = {"v": (1, 2.5, -0.0), "n": {"k": [None, True, "s"]}, 3: "int key"}
    second = {"v": "new"}
    store.upsert(user_id="u1", category="fact", key="k", value=first, text="t")
    store.upsert(user_id="u1", category="fact", key="k", value=second, text="t")
    insert, update = store.audit_log(user_id="u1")
    normal = json.loads(json.dumps(first))
    assert insert.new_value == normal and update.old_value == normal
    assert repr(update.old_value) == repr(normal)  # -0.0 and types too
    assert update.new_value == second
    assert copy_plain(normal) == copy_json(normal) and copy_plain(normal) is not normal


def test_no_memo_keeps_raw_pii(monkeypatch: pytest.MonkeyPatch) -> None:
    masker = RegexPiiMasker()
    raw = "From now on always call me at 13812345678"
    masked = masker.mask(raw)
    assert masked != raw and masker.mask(raw) == masked
    assert raw not in masker._masked and masker._masked[masked] == masked
    expected = promotion._extract(raw, MemoryType.FACT)
    remembered: list[str] = []

    def spy(text: str) -> bool:
        remembered.append(text)
        return False

    monkeypatch.setattr(intent_module, "_is_stable_preference", spy)
    size = promotion._extract_remembered.cache_info().currsize
    found = promotion.extract_fact(raw, MemoryType.FACT, remember=False)
    assert found == expected
    assert promotion._extract_remembered.cache_info().currsize == size and not remembered
