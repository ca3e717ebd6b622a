"""STM queries to a `chroma run` server: on 127.0.0.1 over TCP, and private (a network
namespace of its own behind a Unix socket and a relay: `reference.stm.chroma_private`).

    .venv/bin/python -m bench.chroma_private_latency --queries 1500

Each server gets 2,000 records of 384 dimensions; then `--queries` top-5 queries (after
20 unmeasured) are timed one after the other: wall milliseconds per query and this
process's CPU milliseconds per query (the relay's own CPU is in its process).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

from reference.stm.chroma_client import make_chroma_client
from reference.stm.chroma_server import start_chroma_server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", type=int, default=1500)
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    vectors = rng.random((2000, 384)).astype("float32").tolist()
    queries = rng.random((args.queries + 20, 384)).astype("float32").tolist()
    with tempfile.TemporaryDirectory() as root:
        for private in (False, True):
            server = start_chroma_server(Path(root) / f"cs{int(private)}", private=private)
            try:
                client = make_chroma_client(server.url, Path(root))
                collection = client.get_or_create_collection("bench")
                collection.add(
                    ids=[str(i) for i in range(len(vectors))],
                    embeddings=vectors,
                    documents=[f"record {i}" for i in range(len(vectors))],
                )
                for query in queries[:20]:
                    collection.query(query_embeddings=[query], n_results=5)
                wall, cpu = time.perf_counter(), time.process_time()
                for query in queries[20:]:
                    collection.query(query_embeddings=[query], n_results=5)
                n = len(queries) - 20
                wall_ms = (time.perf_counter() - wall) / n * 1000
                cpu_ms = (time.process_time() - cpu) / n * 1000
                where = "private socket" if server.socket_path else "TCP 127.0.0.1"
                print(f"{where}: {wall_ms:.2f} ms per query (wall), client CPU {cpu_ms:.2f} ms")
            finally:
                server.stop()


if __name__ == "__main__":
    main()
