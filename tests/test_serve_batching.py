"""`BatchingEmbedder`: concurrent callers share one inner call, bounded, failures shared."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import numpy as np
import pytest

from memharness.serve.batching import BatchingEmbedder, wrap_batching
from reference.embedding import CachedEmbedder, HashingEmbedder
from reference.text_interfaces import Embedder


class RecordingEmbedder(Embedder):
    """The hashing embedder, recording each call's texts; optionally slow or failing."""

    name = "recording"
    dim = 384

    def __init__(self, *, delay_s: float = 0.0, fail: bool = False) -> None:
        self.inner = HashingEmbedder()
        self.calls: list[list[str]] = []
        self.delay_s = delay_s
        self.fail = fail
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.calls.append(list(texts))
        if self.delay_s:
            time.sleep(self.delay_s)  # a model's forward pass, so callers pile up
        if self.fail:
            raise RuntimeError("model exploded")
        return self.inner.embed(texts)


def run_concurrently(embedder: Embedder, texts: list[str]) -> list[np.ndarray | BaseException]:
    """Each text embedded by its own thread, all released at once."""
    results: list[np.ndarray | BaseException] = [np.empty(0)] * len(texts)
    barrier = threading.Barrier(len(texts))

    def call(i: int) -> None:
        barrier.wait()
        try:
            results[i] = embedder.embed_one(texts[i])
        except RuntimeError as exc:
            results[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(texts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    return results


def test_concurrent_callers_share_batches_and_get_their_own_vectors() -> None:
    inner = RecordingEmbedder(delay_s=0.01)
    batcher = BatchingEmbedder(inner, window_s=0.02, max_batch=32)
    texts = [f"order {i} shipped to berlin" for i in range(24)]
    results = run_concurrently(batcher, texts)
    batcher.close()
    reference = HashingEmbedder()
    for text, got in zip(texts, results, strict=True):
        assert isinstance(got, np.ndarray)
        np.testing.assert_allclose(got, reference.embed_one(text), atol=1e-6)
    # 24 callers, far fewer model calls: most texts rode in a shared batch.
    assert len(inner.calls) <= 6, [len(c) for c in inner.calls]
    assert max(len(c) for c in inner.calls) >= 4
    assert sum(len(c) for c in inner.calls) == 24


def test_a_batch_never_exceeds_max_batch() -> None:
    inner = RecordingEmbedder(delay_s=0.005)
    batcher = BatchingEmbedder(inner, window_s=0.05, max_batch=4)
    results = run_concurrently(batcher, [f"text number {i}" for i in range(20)])
    big = batcher.embed([f"one call of many {i}" for i in range(11)])  # split: 4 + 4 + 3
    batcher.close()
    assert all(isinstance(r, np.ndarray) for r in results)
    assert big.shape == (11, 384)
    assert max(len(c) for c in inner.calls) <= 4
    assert sum(len(c) for c in inner.calls) == 31


def test_a_lone_caller_waits_no_longer_than_the_window() -> None:
    inner = RecordingEmbedder()
    window = 0.02
    batcher = BatchingEmbedder(inner, window_s=window, max_batch=32)
    batcher.embed_one("warm the worker up")
    waits = []
    for i in range(5):
        started = time.perf_counter()
        batcher.embed_one(f"alone {i}")
        waits.append(time.perf_counter() - started)
    batcher.close()
    # The window plus a thread hand-off (generous: the machine is shared).
    assert min(waits) < window + 0.015, waits
    assert [len(c) for c in inner.calls] == [1] * 6


def test_a_full_batch_does_not_wait_for_the_window() -> None:
    inner = RecordingEmbedder()
    batcher = BatchingEmbedder(inner, window_s=0.5, max_batch=4)
    started = time.perf_counter()
    out = batcher.embed([f"four at once {i}" for i in range(4)])
    elapsed = time.perf_counter() - started
    batcher.close()
    assert out.shape == (4, 384)
    assert elapsed < 0.25, elapsed


def test_an_inner_failure_reaches_every_waiting_caller() -> None:
    inner = RecordingEmbedder(fail=True)
    batcher = BatchingEmbedder(inner, window_s=0.05, max_batch=32)
    results = run_concurrently(batcher, [f"doomed {i}" for i in range(8)])
    assert all(isinstance(r, RuntimeError) and "exploded" in str(r) for r in results), results
    inner.fail = False  # the worker survived it
    assert batcher.embed_one("after the failure").shape == (384,)
    batcher.close()


def test_identical_texts_in_a_batch_are_embedded_once() -> None:
    inner = RecordingEmbedder(delay_s=0.01)
    batcher = BatchingEmbedder(inner, window_s=0.05, max_batch=32)
    results = run_concurrently(batcher, ["same words"] * 6)
    batcher.close()
    assert sum(len(c) for c in inner.calls) < 6
    first = results[0]
    assert isinstance(first, np.ndarray)
    for got in results[1:]:
        assert isinstance(got, np.ndarray)
        assert not np.shares_memory(got, first)  # each caller owns its rows
        np.testing.assert_array_equal(got, first)


def test_the_cache_stays_in_front_and_hits_never_reach_the_batcher() -> None:
    inner = RecordingEmbedder()
    cached = wrap_batching(CachedEmbedder(inner, maxsize=100), window_ms=1, max_batch=8)
    assert isinstance(cached, CachedEmbedder) and isinstance(cached.inner, BatchingEmbedder)
    first = cached.embed_one("remember me")
    first[0] = 99.0  # a caller's copy: the cache is unharmed
    again = cached.embed_one("remember me")
    assert again[0] != 99.0
    assert cached.hits == 1 and len(inner.calls) == 1
    cached.inner.close()


def test_window_zero_means_no_batcher_and_bad_settings_are_refused() -> None:
    inner = RecordingEmbedder()
    assert wrap_batching(inner, window_ms=0, max_batch=8) is inner
    with pytest.raises(ValueError, match="window_s"):
        BatchingEmbedder(inner, window_s=0)
    with pytest.raises(ValueError, match="max_batch"):
        BatchingEmbedder(inner, max_batch=0)
