"""Embedders: the hashing embedder, the LRU cache around any embedder, and MiniLM offline."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from reference.embedding import (
    CachedEmbedder,
    HashingEmbedder,
    MiniLMEmbedder,
    make_embedder,
    make_minilm,
)
from reference.errors import InvalidInput
from reference.text_interfaces import Embedder

SIMILAR_EN = ("I want to ship with SF Express", "use SF express for delivery")
UNRELATED_EN = "the weather is nice"
SIMILAR_ZH = ("默认用顺丰发货", "我要用顺丰快递寄")
UNRELATED_ZH = "今天天气真好"


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def check_shape(vectors: np.ndarray, n: int, dim: int = 384) -> None:
    assert vectors.shape == (n, dim)
    assert vectors.dtype == np.float32
    assert np.all(np.isfinite(vectors))
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


# --- hashing ---------------------------------------------------------------------


def test_hashing_shape_and_normalisation(embedder: Embedder) -> None:
    texts = [
        "hello world",
        "帮我订明天的机票",
        "!!!",
        "😀",
        " ",
        "",
        "a" * 5000,
        "Mixed 中英 text 123",
    ]
    vectors = embedder.embed(texts)
    check_shape(vectors, len(texts))
    assert embedder.dim == 384
    assert embedder.embed([]).shape == (0, 384)
    one = embedder.embed_one("hello world")
    assert one.shape == (384,) and one.dtype == np.float32
    np.testing.assert_array_equal(one, vectors[0])


def test_hashing_is_deterministic_across_instances_and_processes() -> None:
    text = "默认用顺丰发货 ship with SF Express"
    first = HashingEmbedder().embed_one(text)
    np.testing.assert_array_equal(first, HashingEmbedder().embed_one(text))
    # Another interpreter with another hash seed must give the same vector: a sweep's
    # results cannot depend on PYTHONHASHSEED.
    code = (
        "import sys; from reference.embedding import HashingEmbedder; "
        "sys.stdout.write(HashingEmbedder().embed_one(sys.argv[1]).tobytes().hex())"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, text], capture_output=True, text=True, check=True, env=env
    ).stdout
    np.testing.assert_array_equal(np.frombuffer(bytes.fromhex(out), dtype=np.float32), first)


@pytest.mark.parametrize(
    ("a", "b", "unrelated"),
    [
        (*SIMILAR_EN, UNRELATED_EN),
        ("My address is 12 Baker Street", "what is my address", "I like green tea"),
        ("I prefer aisle seats", "book me an aisle seat", "the capital of France is Paris"),
        (*SIMILAR_ZH, UNRELATED_ZH),
        ("我的地址是北京市海淀区", "我住在北京海淀", "我喜欢喝咖啡"),
        ("帮我查一下订单物流", "订单的物流到哪了", "明天下午开会"),
    ],
)
def test_hashing_similar_beats_unrelated(
    embedder: Embedder, a: str, b: str, unrelated: str
) -> None:
    va, vb, vu = embedder.embed([a, b, unrelated])
    assert cos(va, vb) > 0.3
    assert cos(va, vb) > cos(va, vu) + 0.25
    assert abs(cos(va, vu)) < 0.15


def test_hashing_identical_text_is_similarity_one(embedder: Embedder) -> None:
    va, vb = embedder.embed(["Ship with SF Express!", "ship with sf express"])
    assert cos(va, vb) == pytest.approx(1.0, abs=1e-6)


def test_hashing_clear_drops_its_caches_and_changes_no_vector() -> None:
    texts = ["Order 4417 ships to Lena Park", "混合 text 我的订单 4417", "ship it express"]
    embedder = HashingEmbedder()
    before = embedder.embed(texts)
    cached = (embedder._words, embedder._pairs, embedder._chars, embedder._runs)
    assert all(cached)  # each kind of feature was cached
    embedder.clear()
    assert not any(cached)
    np.testing.assert_array_equal(embedder.embed(texts), before)


def test_hashing_rejects_tiny_dim() -> None:
    with pytest.raises(InvalidInput):
        HashingEmbedder(dim=4)


# --- cache -----------------------------------------------------------------------


class CountingEmbedder(Embedder):
    """Records what reaches it, to show that only cache misses do."""

    name = "counting"

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.calls: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_cache_counts_hits_and_misses_and_batches_only_misses() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, maxsize=10)
    assert cached.name == "counting" and cached.dim == 384
    first = cached.embed(["a", "b", "a"])
    assert (cached.hits, cached.misses) == (0, 3)
    assert inner.calls == [["a", "b"]]  # a repeated text within one call is embedded once
    second = cached.embed(["b", "c", "a"])
    assert (cached.hits, cached.misses) == (2, 4)
    assert inner.calls[-1] == ["c"]
    np.testing.assert_array_equal(second[0], first[1])
    np.testing.assert_array_equal(second[2], first[0])
    np.testing.assert_array_equal(cached.embed_one("c"), inner.inner.embed_one("c"))
    assert cached.embed([]).shape == (0, 384)


def test_cache_evicts_least_recently_used() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, maxsize=2)
    cached.embed(["a", "b"])
    cached.embed(["a"])  # a is now more recent than b
    cached.embed(["c"])  # evicts b
    inner.calls.clear()
    cached.embed(["a", "b", "c"])
    assert inner.calls == [["b"]]


def test_cache_size_zero_disables_caching() -> None:
    inner = CountingEmbedder()
    cached = CachedEmbedder(inner, maxsize=0)
    cached.embed(["a"])
    cached.embed(["a"])
    assert (cached.hits, cached.misses) == (0, 2)
    assert inner.calls == [["a"], ["a"]]


def test_cache_returns_copies() -> None:
    cached = CachedEmbedder(HashingEmbedder(), maxsize=10)
    original = cached.embed_one("hello").copy()
    returned = cached.embed(["hello"])
    returned[0] *= -1  # a caller scribbling on its result must not reach the cache
    np.testing.assert_array_equal(cached.embed_one("hello"), original)


def test_cache_is_thread_safe() -> None:
    inner = HashingEmbedder()
    cached = CachedEmbedder(inner, maxsize=50)
    texts = [f"text number {i % 80}" for i in range(400)]
    expected = inner.embed(texts)
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for i in range(offset, len(texts), 7):
                np.testing.assert_array_equal(cached.embed_one(texts[i]), expected[i])
        except BaseException as exc:  # collected, so a failure in a thread fails the test
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(7)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert cached.hits + cached.misses == len(texts)
    assert len(cached._cache) <= 50


def test_make_embedder() -> None:
    cached = make_embedder("hashing", cache_size=100)
    assert isinstance(cached, CachedEmbedder) and isinstance(cached.inner, HashingEmbedder)
    assert isinstance(make_embedder("hashing", cache_size=0), HashingEmbedder)
    with pytest.raises(InvalidInput) as info:
        make_embedder("word2vec", cache_size=10)
    assert info.value.field == "embedder"
    with pytest.raises(InvalidInput):
        CachedEmbedder(HashingEmbedder(), maxsize=-1)


# --- MiniLM ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


def test_minilm_loads_offline_from_the_package(minilm: MiniLMEmbedder) -> None:
    assert "HF_HUB_OFFLINE" in os.environ  # set before sentence-transformers was imported
    vectors = minilm.embed(["hello", "帮我订明天的机票", "😀"])
    check_shape(vectors, 3)
    assert minilm.embed([]).shape == (0, 384)
    np.testing.assert_allclose(minilm.embed_one("hello"), vectors[0], atol=1e-5)


def test_minilm_one_text_is_encode_bit_for_bit(minilm: MiniLMEmbedder) -> None:
    # A single text skips `encode`'s batching, not any of its arithmetic.
    for text in ("hello", "Where is my order 12345?", "帮我订明天的机票", ""):
        expected = minilm._model.encode(
            [text], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
        )
        got = minilm.embed([text])
        assert got.dtype == np.float32 and got.flags.c_contiguous
        np.testing.assert_array_equal(got, expected)


def test_minilm_similarity_is_semantic(minilm: MiniLMEmbedder) -> None:
    va, vb, vu = minilm.embed([*SIMILAR_EN, UNRELATED_EN])
    assert cos(va, vb) > cos(va, vu) + 0.3
    za, zb, zu = minilm.embed([*SIMILAR_ZH, UNRELATED_ZH])
    assert cos(za, zb) > cos(za, zu)


def test_minilm_through_the_cache(minilm: MiniLMEmbedder) -> None:
    cached = CachedEmbedder(minilm, maxsize=8)
    assert cached.name == "minilm"
    first = cached.embed([SIMILAR_EN[0]])
    again = cached.embed([SIMILAR_EN[0]])
    assert (cached.hits, cached.misses) == (1, 1)
    np.testing.assert_array_equal(first, again)


# --- MiniLM on ONNX Runtime --------------------------------------------------------

ONNX_TEXTS = [
    "hello",
    "Where is my order 12345?",
    "帮我订明天的机票",
    "",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "Please ship my order to the office address from now on, not to my home in Lisbon.",
]


@pytest.fixture(scope="module")
def onnx_fp32() -> Embedder:
    return make_minilm("onnx")


def test_onnx_fp32_matches_torch(minilm: MiniLMEmbedder, onnx_fp32: Embedder) -> None:
    expected = minilm.embed(ONNX_TEXTS)
    got = onnx_fp32.embed(ONNX_TEXTS)
    check_shape(got, len(ONNX_TEXTS))
    assert got.dtype == np.float32 and got.flags.c_contiguous
    assert np.sum(expected * got, axis=1).min() >= 0.9999
    # one text at a time (no padding) gives the batch's vectors
    for i, text in enumerate(ONNX_TEXTS):
        np.testing.assert_allclose(onnx_fp32.embed_one(text), got[i], atol=1e-5)
    assert onnx_fp32.embed([]).shape == (0, 384)


def test_onnx_int8_is_close_to_torch(minilm: MiniLMEmbedder) -> None:
    int8 = make_minilm("onnx-int8")
    got = int8.embed(ONNX_TEXTS)
    check_shape(got, len(ONNX_TEXTS))
    # quantised weights move vectors a little (lowest 0.974 here, on "")
    assert np.sum(minilm.embed(ONNX_TEXTS) * got, axis=1).min() >= 0.95
    va, vb, vu = int8.embed([*SIMILAR_EN, UNRELATED_EN])
    assert cos(va, vb) > cos(va, vu) + 0.3


def test_runtimes_have_their_own_identity(minilm: MiniLMEmbedder, onnx_fp32: Embedder) -> None:
    identities = {minilm.identity, onnx_fp32.identity, HashingEmbedder().identity}
    assert len(identities) == 3
    assert CachedEmbedder(onnx_fp32).identity == onnx_fp32.identity
    assert HashingEmbedder(dim=64).identity != HashingEmbedder().identity
    with pytest.raises(InvalidInput) as info:
        make_minilm("tensorflow")
    assert info.value.field == "embedder_runtime"


def test_onnx_export_is_keyed_and_never_silently_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from reference.errors import ConfigurationError
    from reference.minilm_onnx import EXPORT_VERSION, export_dir, onnx_model_path

    monkeypatch.setenv("MEMH_ONNX_CACHE", str(tmp_path))
    assert export_dir().parent == tmp_path
    assert f"-x{EXPORT_VERSION}-" in export_dir().name
    with pytest.raises(ConfigurationError, match=r"python -m reference\.minilm_onnx"):
        onnx_model_path("fp32", export=False)
    with pytest.raises(InvalidInput):
        onnx_model_path("fp16")  # type: ignore[arg-type]
