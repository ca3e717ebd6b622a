"""Which Chroma read slows under churn: one collection, before and after N x 1,000 deletes.

    .venv/bin/python -m bench.stm_churn_reads --churn 0 20

For each churn level (thousands of records added and deleted), a fresh embedded
collection configured as the reference's holds 1,000 live records (50 users); then the
mean of 300 calls each of: a query filtered by user (HNSW with an allow-list), an
unfiltered query (HNSW), a `get` by the same filter (the metadata segment only), and a
single add with its delete. Random unit vectors. Profile a level with
`py-spy record -n -- .venv/bin/python -m bench.stm_churn_reads --churn 20`.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from collections.abc import Callable
from typing import Any

import chromadb
import numpy as np
from chromadb.config import Settings

from reference.stm.chroma_store import HNSW_WRITES

LIVE = 1_000
CALLS = 300
DIM = 384


def level(thousands: int, vectors: Callable[[int], np.ndarray]) -> list[float]:
    """Mean ms of each read (and the add) after `thousands` x 1,000 adds and deletes."""
    with tempfile.TemporaryDirectory() as path:
        settings = Settings(anonymized_telemetry=False)
        client = chromadb.PersistentClient(path=path, settings=settings)
        configuration: Any = {"hnsw": HNSW_WRITES}
        collection = client.create_collection(
            "churn", configuration=configuration, embedding_function=None
        )
        collection.add(
            ids=[f"live{i}" for i in range(LIVE)],
            embeddings=vectors(LIVE),
            metadatas=[{"user_id": f"u{i % 50}"} for i in range(LIVE)],
        )
        for _ in range(thousands):
            ids = [uuid.uuid4().hex for _ in range(1000)]
            collection.add(ids=ids, embeddings=vectors(1000))
            collection.delete(ids=ids)

        def add_delete(vector: np.ndarray) -> None:
            ident = uuid.uuid4().hex
            collection.add(ids=[ident], embeddings=vector[None])
            collection.delete(ids=[ident])

        calls: list[Callable[[np.ndarray], Any]] = [
            lambda v: collection.query(
                query_embeddings=v[None], n_results=5, where={"user_id": "u3"}
            ),
            lambda v: collection.query(query_embeddings=v[None], n_results=5),
            lambda v: collection.get(where={"user_id": "u3"}, include=[]),
            add_delete,
        ]
        means = []
        for call in calls:
            mark = time.perf_counter()
            for vector in vectors(CALLS):
                call(vector)
            means.append((time.perf_counter() - mark) / CALLS * 1e3)
        return means


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--churn", type=int, nargs="+", default=[0, 20], help="thousands")
    args = parser.parse_args()
    rng = np.random.default_rng(1)

    def vectors(n: int) -> np.ndarray:
        v = rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    print("churned  filtered query  unfiltered query  get by filter  add+delete  (mean ms)")
    for thousands in args.churn:
        means = level(thousands, vectors)
        print(f"{thousands * 1000:7,d}  " + "  ".join(f"{m:14.2f}" for m in means), flush=True)


if __name__ == "__main__":
    main()
