"""The process's memory under STM churn: a plain collection against a compacted one.

    .venv/bin/python -m bench.stm_churn_memory plain --rounds 40
    .venv/bin/python -m bench.stm_churn_memory compacted --rounds 40

One embedded collection configured as the reference's holds 1,000 live records; each
round adds and deletes 1,000 ("plain"), or compacts the collection once
(`reference.stm.chroma_generations`, "compacted": what the store does about once per
1,000 deletes at 1,000 live). Prints the process's resident memory every 10 rounds.
Run each variant in its own process.
"""

from __future__ import annotations

import argparse
import tempfile
import uuid
from typing import Any

import chromadb
import numpy as np
import psutil
from chromadb.config import Settings

from reference.stm.chroma_generations import Generations, JournaledCollection
from reference.stm.chroma_store import HNSW_WRITES

LIVE = 1_000
DIM = 384


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("variant", choices=["plain", "compacted"])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    vectors = np.random.default_rng(0).standard_normal((LIVE, DIM)).astype(np.float32)
    process = psutil.Process()
    with tempfile.TemporaryDirectory() as path:
        settings = Settings(anonymized_telemetry=False)
        client = chromadb.PersistentClient(path=path, settings=settings)
        configuration: Any = {"hnsw": HNSW_WRITES}
        collection = JournaledCollection(
            client.create_collection("memory", configuration=configuration, embedding_function=None)
        )
        generations = Generations(client, "memory", collection)
        collection.add(
            ids=[f"live{i}" for i in range(LIVE)], embeddings=vectors, documents=["x" * 200] * LIVE
        )
        for round_ in range(args.rounds + 1):
            if round_ % 10 == 0:
                rss = process.memory_info().rss / 2**20
                print(f"{args.variant} round {round_:3d}: resident {rss:6.0f} MiB", flush=True)
            if round_ == args.rounds:
                break
            if args.variant == "compacted":
                generations.compact()
            else:
                ids = [uuid.uuid4().hex for _ in range(LIVE)]
                collection.add(ids=ids, embeddings=vectors, documents=["y" * 200] * LIVE)
                collection.delete(ids=ids)


if __name__ == "__main__":
    main()
