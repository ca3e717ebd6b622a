"""The shortcuts of a turn's hot path give exactly what the plain computations give.

The in-memory stores score with per-row norms kept at write time and Python floats for
the last few operations; these tests hold them to the numpy formulas the Chroma and
PostgreSQL backends rank with, bit for bit (ties and near-ties included). The memoised
rules, the PII mask cache and the id memo answer as the uncached functions do, compute
a repeated text once (counted by fakes), stay bounded, and keep no raw PII.
"""

from __future__ import annotations

import dataclasses
import gc
import math
import sys

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
from reference.policy.intent import is_stable_preference
from reference.stm.memory_store import InMemoryShortTermStore, cosine_scores, top_k
from reference.text_interfaces import Embedder, IntentFilter, PiiMasker, PiiMatch
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
    """pgvector's cosine in float64 over float32 values, computed with numpy: what the
    in-memory LTM store's Python-float scores must equal."""
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
        archive_reason="sweep: user inactive",
    )
    # Every field apart from its default: a field the copies dropped would come back
    # as its default (or, without one, fail to construct) and differ.
    for f in dataclasses.fields(Fact):
        if f.default is not dataclasses.MISSING:
            assert getattr(fact, f.name) != f.default, f"set {f.name} in this test"
    copied = copy_fact(fact)
    assert copied == fact
    copied.value["tags"][1]["b"] = 2
    assert fact.value["tags"][1]["b"] == 1
    accessed = accessed_fact(fact, 7.5)
    assert accessed == dataclasses.replace(fact, last_accessed_at=7.5, access_count=5)
    draft = audit_draft(fact, "update", "promotion", 8.0, {"value": "x"}, fact.value)
    assert all(f.default is dataclasses.MISSING for f in dataclasses.fields(AuditEntry))
    assert numbered(draft, 41) == dataclasses.replace(draft, audit_id=41)


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


def test_memo_computes_a_text_once_and_answers_as_the_rule() -> None:
    def answer(text: str) -> tuple[str, int]:
        return text.upper(), len(text)

    calls: list[str] = []

    def rule(text: str) -> tuple[str, int]:
        calls.append(text)
        return answer(text)

    remembered = intent_module.memoised(rule)
    long = "x" * intent_module.MEMO_MAX_CHARS
    texts = ["a", "b", long + "1", long + "2", "a"]  # the long two differ only at the end
    for _ in range(2):
        assert [remembered(t) for t in texts] == [answer(t) for t in texts]
    # Each short text computed once; the long ones, not remembered, at each call.
    assert sorted(calls) == sorted(["a", "b", *[long + "1", long + "2"] * 2])


def test_memoised_rules_answer_as_the_rules_do_unremembered() -> None:
    for text in TEXTS * 2:
        assert is_stable_preference(text) == is_stable_preference(text, remember=False)
        for kind in (None, *MemoryType):
            assert promotion.extract_fact(text, kind) == promotion.extract_fact(
                text, kind, remember=False
            )


def test_extract_fact_memo_tells_a_member_from_its_string() -> None:
    text = "I like tea"
    kinds: list[MemoryType | str] = [MemoryType.PREFERENCE, "preference"]
    for kind in kinds + kinds[::-1]:
        answer = promotion.extract_fact(text, kind)  # type: ignore[arg-type]
        assert answer == promotion.extract_fact(text, kind, remember=False)  # type: ignore[arg-type]
    # Equal as strings, they take different paths: a memo that mixed them would answer wrong.
    assert promotion.extract_fact(text, MemoryType.PREFERENCE) != promotion.extract_fact(
        text,
        "preference",  # type: ignore[arg-type]
    )


class _CountingMasker(RegexPiiMasker):
    """A masker that counts the texts its detector reads."""

    def __init__(self, *, cache_size: int = 16_384) -> None:
        super().__init__(cache_size=cache_size)
        self.read: list[str] = []

    def detect(self, text: str) -> list[PiiMatch]:
        self.read.append(text)
        return super().detect(text)


def test_mask_cache_answers_as_the_masker_and_reads_a_clean_text_once() -> None:
    cached, uncached = _CountingMasker(), RegexPiiMasker(cache_size=0)
    for text in [*TEXTS, "mail a.b@example.com or call 138 1234 5678", "护照号码：EA1234567"] * 2:
        masked = cached.mask(text)
        assert masked == uncached.mask(text)
        assert cached.mask(masked) == masked
    clean = "thanks!"
    assert clean not in cached.read[-2:]  # masked before: answered without the detector
    before = len(cached.read)
    cached.mask(clean)
    assert len(cached.read) == before


def test_mask_cache_is_bounded() -> None:
    small, large = _CountingMasker(cache_size=4), _CountingMasker()
    texts = [f"note number {i}" for i in range(20)]
    for masker in (small, large):
        for text in texts:
            masker.mask(text)
        masker.read.clear()
        masker.mask(texts[0])
    assert small.read == [texts[0]]  # dropped from a full cache: read again
    assert large.read == []


def _has_nul(value: object) -> bool:
    """Whether a NUL is in any string of `value`, keys included, found by walking it (the
    independent answer `check_json_object`'s reading of the encoding must give)."""
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
def test_json_nul_check_reads_the_encoding_as_the_walk_does(value: dict) -> None:
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


def test_no_memo_keeps_raw_pii() -> None:
    masker = _CountingMasker()
    # Built here, so that nothing else holds this string: a reference a cache keeps
    # shows in its count.
    raw = " ".join(["From now on always call me at", str(13812345678)])
    held = sys.getrefcount(raw)
    masked = masker.mask(raw)
    assert masked != raw
    masker.read.clear()
    assert masker.mask(raw) == masked and masker.read  # raw: read again, not remembered
    masker.read.clear()
    assert masker.mask(masked) == masked and not masker.read  # masked: remembered
    found = promotion.extract_fact(raw, MemoryType.FACT, remember=False)
    assert found is not None and found.value == raw
    is_stable_preference(raw, remember=False)
    del found  # it holds the raw text, as it should
    gc.collect()
    assert sys.getrefcount(raw) == held, "a cache kept the raw text"
