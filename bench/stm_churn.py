"""Short-term memory under churn: what adding and deleting records costs Chroma over time.

    .venv/bin/python -m bench.stm_churn --rounds 41

A strategy with TTLs turns STM over: records are added, expire, and a sweep deletes them.
Chroma's HNSW index only marks a deleted record (hnswlib's `mark_deleted`; Chroma does not
reuse or prune the slots), so the index keeps growing while the live records stay few.
Two embedded collections configured as the reference's (`HNSW_WRITES`) go through the same
churn side by side: "plain" as Chroma leaves it, and "compacted" under the store's
copy-and-swap compaction (`reference.stm.chroma_generations`). Each keeps 1,000 live
records and, each round, adds and deletes a batch of 1,000 (one sweep's worth), then
times 50 single adds (each deleted again) and 50 queries filtered by user, as a turn
makes them; the two are measured in turn within each round. At the end every live record
is queried with its own vector: the share found first is printed. Random unit vectors.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid
from typing import Any

import chromadb
import numpy as np
from chromadb.config import Settings

from reference.stm.chroma_generations import Generations, JournaledCollection
from reference.stm.chroma_store import HNSW_WRITES

LIVE = 1_000
BATCH = 1_000
CALLS = 50
DIM = 384


class Variant:
    """One collection under churn, with or without compaction, and its timings."""

    def __init__(self, client: Any, name: str, compacted: bool, live: np.ndarray) -> None:
        configuration: Any = {"hnsw": HNSW_WRITES}
        raw = client.create_collection(name, configuration=configuration, embedding_function=None)
        self.name = name
        self.collection = JournaledCollection(raw)
        self.generations = Generations(client, name, self.collection) if compacted else None
        self.collection.add(
            ids=[f"live{i}" for i in range(LIVE)],
            embeddings=live,
            metadatas=[{"user_id": f"u{i % 50}"} for i in range(LIVE)],
        )
        self.adds: list[float] = []
        self.queries: list[float] = []
        self.compact_s = 0.0

    def deleted(self, n: int) -> None:
        if self.generations is not None:
            self.generations.deleted += n
            mark = time.perf_counter()
            if self.generations.compact_if_due():
                self.compact_s += time.perf_counter() - mark

    def churn(self, batch: np.ndarray) -> float:
        ids = [uuid.uuid4().hex for _ in range(len(batch))]
        mark = time.perf_counter()
        self.collection.add(ids=ids, embeddings=batch)
        self.collection.delete(ids=ids)
        self.deleted(len(ids))
        return time.perf_counter() - mark

    def measure(self, adds: np.ndarray, queries: np.ndarray) -> None:
        self.adds, self.queries = [], []
        for vector in adds:
            ident = uuid.uuid4().hex
            mark = time.perf_counter()
            self.collection.add(ids=[ident], embeddings=vector[None])
            self.adds.append(time.perf_counter() - mark)
            self.collection.delete(ids=[ident])
            self.deleted(1)
        for vector in queries:
            mark = time.perf_counter()
            self.collection.query(
                query_embeddings=vector[None], n_results=5, where={"user_id": "u3"}
            )
            self.queries.append(time.perf_counter() - mark)

    def figures(self) -> str:
        add = np.percentile(self.adds, [50, 95]) * 1e3
        query = np.percentile(self.queries, [50, 95]) * 1e3
        compactions = self.generations.compactions if self.generations else 0
        return (
            f"{add[0]:6.1f} {add[1]:6.1f}  {query[0]:6.1f} {query[1]:6.1f}"
            f"  {self.collection.count():4d} {compactions:3d} {self.compact_s:6.1f}"
        )

    def self_found(self, live: np.ndarray) -> float:
        """Share of the live records that a query with their own vector finds first."""
        found = 0
        for i in range(0, LIVE, 100):
            result = self.collection.query(query_embeddings=live[i : i + 100], n_results=1)
            found += sum(ids[:1] == [f"live{i + j}"] for j, ids in enumerate(result["ids"]))
        return found / LIVE


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=41, help="churn rounds (1,050 each)")
    parser.add_argument("--every", type=int, default=5, help="print every N rounds")
    args = parser.parse_args()
    rng = np.random.default_rng(1)

    def vectors(n: int) -> np.ndarray:
        v = rng.standard_normal((n, DIM)).astype(np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    with tempfile.TemporaryDirectory() as path:
        client = chromadb.PersistentClient(path=path, settings=Settings(anonymized_telemetry=False))
        live = vectors(LIVE)
        variants = [Variant(client, "churn_plain", False, live)]
        variants.append(Variant(client, "churn_compacted", True, live))
        print("each variant: add p50 p95 (ms), filtered query p50 p95 (ms), live records,")
        print("compactions, seconds spent compacting (in the churn, outside the timed calls)")
        print(f"round  churned  {'plain':>42}  {'compacted':>42}")
        for round_ in range(args.rounds):
            batch, adds, queries = vectors(BATCH), vectors(CALLS), vectors(CALLS)
            for variant in variants:
                variant.churn(batch)
                variant.measure(adds, queries)
            if round_ % args.every == 0 or round_ == args.rounds - 1:
                churned = (round_ + 1) * (BATCH + CALLS)
                columns = "  ".join(v.figures() for v in variants)
                print(f"{round_:5d}  {churned:7,d}  {columns}", flush=True)
        for variant in variants:
            share = variant.self_found(live)
            print(f"{variant.name}: live records found first by their own vector {share:.1%}")


if __name__ == "__main__":
    main()
