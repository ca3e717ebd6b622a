"""What one short-term write costs on the embedded Chroma, by how many records it carries:
process CPU (Chroma's own threads included), the calling thread's CPU, and wall time per
record, for upserts of 1, 4 and 16 records in the store's collection configuration and
metadata layout. Not pytest.

    python -m bench.chroma_write_batch                 # 320 records per batch size, twice
    python -m bench.chroma_write_batch --records 640 --rounds 1

Why it matters: `ChromaShortTermStore` groups the adds of concurrent turns into one
upsert (`reference.stm.group_writes`); a turn alone writes one record per call.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import uuid

import numpy as np

from reference.stm.chroma_store import HNSW_WRITES

TEXT = "Please always ship my orders to the office at {n} Harbour Street."


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=320, help="records per batch size")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--sizes", default="1,4,16")
    args = parser.parse_args(argv)

    import chromadb
    from chromadb.config import Settings as ChromaSettings

    client = chromadb.PersistentClient(
        path=tempfile.mkdtemp(prefix="memh-chroma-write-"),
        settings=ChromaSettings(anonymized_telemetry=False),
    )
    collection = client.get_or_create_collection(
        "stm-write-batch",
        configuration={"hnsw": {**HNSW_WRITES, "ef_search": 100}},  # type: ignore[arg-type]
        embedding_function=None,
    )
    rng = np.random.default_rng(0)

    def row(n: int) -> tuple[str, np.ndarray, dict[str, object], str]:
        user = f"u{n % 20}"
        metadata = {
            **{"user_id": user, "session_id": "s1", "scope": f"{user}/s1", "type": "fact"},
            **{"created_at": 1.0, "last_accessed_at": 1.0, "access_count": 0},
            **{"importance": 5.0, "expires_at": 1e300, "status": "active"},
            "m_message_id": uuid.uuid4().hex,
        }
        vector = rng.standard_normal(384).astype(np.float32)
        return uuid.uuid4().hex, vector, metadata, TEXT.format(n=n)

    def write(rows: list[tuple[str, np.ndarray, dict[str, object], str]]) -> None:
        collection.upsert(
            ids=[r[0] for r in rows],
            embeddings=[r[1] for r in rows],
            metadatas=[r[2] for r in rows],  # type: ignore[misc]
            documents=[r[3] for r in rows],
        )

    for n in range(300):  # a collection that already holds records
        write([row(n)])
    print("records per write: process CPU, calling thread CPU, wall (ms per record)")
    for _ in range(args.rounds):
        for size in (int(s) for s in args.sizes.split(",")):
            cpu, thread, wall = time.process_time(), time.thread_time(), time.perf_counter()
            for start in range(0, args.records, size):
                write([row(start + i) for i in range(size)])
            count = len(range(0, args.records, size)) * size
            print(
                f"{size:4d}: {(time.process_time() - cpu) * 1000 / count:8.2f}"
                f" {(time.thread_time() - thread) * 1000 / count:8.2f}"
                f" {(time.perf_counter() - wall) * 1000 / count:8.2f}"
            )
    idle = time.process_time()
    time.sleep(2)
    print(f"idle CPU over 2 s after the writes: {(time.process_time() - idle) * 1000:.2f} ms")


if __name__ == "__main__":
    main()
