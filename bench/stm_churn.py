"""Short-term memory under churn: what adding and deleting records costs Chroma over time.

    .venv/bin/python -m bench.stm_churn --rounds 41

A strategy with TTLs turns STM over: records are added, expire, and a sweep deletes them.
Chroma's HNSW index only marks a deleted record (hnswlib's `mark_deleted`; Chroma does not
reuse or prune the slots), so the index keeps growing while the live records stay few.
This keeps 1,000 live records in an embedded collection configured as the reference's
(`reference.stm.chroma_store.HNSW_WRITES`) and, each round, adds and deletes a batch of
1,000 (one sweep's worth), then times 50 single adds (each deleted again) and 50 queries
filtered by user, as a turn makes them. Random unit vectors; nothing else runs.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from typing import Any

import chromadb
import numpy as np

from reference.stm.chroma_store import HNSW_WRITES

LIVE = 1_000
BATCH = 1_000
CALLS = 50
DIM = 384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41, help="churn rounds (1,000 each)")
    parser.add_argument("--every", type=int, default=5, help="print every N rounds")
    args = parser.parse_args()
    rng = np.random.default_rng(1)

    def vectors(n: int) -> np.ndarray:
        v = rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    with tempfile.TemporaryDirectory() as path:
        client = chromadb.PersistentClient(path=path)
        configuration: Any = {"hnsw": HNSW_WRITES}
        collection = client.create_collection(
            "churn", configuration=configuration, embedding_function=None
        )
        collection.add(
            ids=[f"live{i}" for i in range(LIVE)],
            embeddings=vectors(LIVE),
            metadatas=[{"user_id": f"u{i % 50}"} for i in range(LIVE)],
        )
        print("round  churned  batch add+delete (s)  add p50 (ms)  query p50 (ms)  live")
        for round_ in range(args.rounds):
            ids = [uuid.uuid4().hex for _ in range(BATCH)]
            mark = time.perf_counter()
            collection.add(ids=ids, embeddings=vectors(BATCH))
            collection.delete(ids=ids)
            churn_s = time.perf_counter() - mark
            adds, queries = [], []
            for vector in vectors(CALLS):
                ident = uuid.uuid4().hex
                mark = time.perf_counter()
                collection.add(ids=[ident], embeddings=vector[None])
                adds.append(time.perf_counter() - mark)
                collection.delete(ids=[ident])
            for vector in vectors(CALLS):
                mark = time.perf_counter()
                collection.query(
                    query_embeddings=vector[None], n_results=5, where={"user_id": "u3"}
                )
                queries.append(time.perf_counter() - mark)
            if round_ % args.every == 0 or round_ == args.rounds - 1:
                churned = (round_ + 1) * (BATCH + CALLS)
                print(
                    f"{round_:5d}  {churned:7,d}  {churn_s:20.2f}  {np.median(adds) * 1e3:12.1f}"
                    f"  {np.median(queries) * 1e3:14.1f}  {collection.count():4d}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
