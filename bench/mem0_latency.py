"""Latency of the mem0 adapter's `add` and `search` with MiniLM, and mem0's share of it.

    PYTHONPATH=$PWD nice -n 19 .venv/bin/python -m bench.mem0_latency --n 300 --threads 1

Texts are distinct (no embedding cache hit), spread over 20 users; each search follows
the adds. "embed" is MiniLM alone on the same texts, so `add - embed` is mem0's own cost
(Qdrant local upsert, SQLite history row, payload building).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

from memharness.systems.mem0_adapter import Mem0Adapter
from reference.embedding import HashingEmbedder, MiniLMEmbedder
from reference.settings import Settings
from reference.text_interfaces import Embedder

T0 = 1_767_225_600.0
TOPICS = ("parcel", "invoice", "refund", "address", "phone", "order", "size", "colour")


def _timed(calls: list[Callable[[], object]]) -> list[float]:
    out = []
    for call in calls:
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _summary(name: str, ms: list[float]) -> str:
    q = statistics.quantiles(ms, n=100)
    mean = statistics.fmean(ms)
    return (
        f"{name:<7} n={len(ms):4d}  p50 {q[49]:6.2f} ms  p95 {q[94]:6.2f} ms  mean {mean:6.2f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="adds, and as many searches")
    parser.add_argument("--threads", type=int, default=None, help="torch threads for MiniLM")
    parser.add_argument(
        "--embedder", choices=("minilm", "hashing"), default="minilm", help="hashing: mem0 alone"
    )
    args = parser.parse_args()
    embedder: Embedder = (
        MiniLMEmbedder(threads=args.threads) if args.embedder == "minilm" else HashingEmbedder()
    )
    texts = [
        f"note {i}: my {TOPICS[i % len(TOPICS)]} number {i * 7919 % 10007} is for user {i % 20}"
        for i in range(args.n)
    ]
    queries = [f"what is my {TOPICS[i % len(TOPICS)]} {i}" for i in range(args.n)]
    embedder.embed_one("warm up")
    embed_ms = _timed([partial(embedder.embed_one, t) for t in texts])
    with tempfile.TemporaryDirectory() as data_dir:
        adapter = Mem0Adapter.open(
            namespace="latency", embedder=embedder, settings=Settings(data_dir=Path(data_dir))
        )
        try:
            add_ms = _timed(
                [
                    partial(
                        adapter.add,
                        user_id=f"u{i % 20}",
                        session_id="s",
                        text=t,
                        at=T0 + i,
                        metadata={"kind": "fact"},
                        ttl_s=30 * 86_400.0,
                    )
                    for i, t in enumerate(texts)
                ]
            )
            search_ms = _timed(
                [
                    partial(adapter.search, user_id=f"u{i % 20}", query=q, k=5, at=T0 + args.n)
                    for i, q in enumerate(queries)
                ]
            )
        finally:
            adapter.close()
    print(f"{args.embedder}, torch threads={args.threads or 'default'}")
    for name, ms in (("embed", embed_ms), ("add", add_ms), ("search", search_ms)):
        print(_summary(name, ms))


if __name__ == "__main__":
    main()
