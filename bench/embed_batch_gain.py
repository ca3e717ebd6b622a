"""What one MiniLM call costs per text, one text at a time or in batches (the reason for
micro-batching in `memharness serve`).

    OMP_NUM_THREADS=1 python -m bench.embed_batch_gain --texts 128 --threads 1

Prints milliseconds per text for batch sizes 1, 2, 4, 8, 16 and 32 (turn-like texts of
6 to 14 words, the best of three passes each).
"""

from __future__ import annotations

import argparse
import random
import time

from bench.serve_load import utterance
from reference.embedding import MiniLMEmbedder


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--texts", type=int, default=128)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    rng = random.Random(7)
    texts = [utterance(rng) for _ in range(args.texts)]
    model = MiniLMEmbedder(threads=args.threads)
    model.embed(texts[:8])  # warm up
    for size in (1, 2, 4, 8, 16, 32):
        best = float("inf")
        for _ in range(3):
            started = time.perf_counter()
            for i in range(0, len(texts), size):
                model.embed(texts[i : i + size])
            best = min(best, time.perf_counter() - started)
        print(f"batch {size:>2}: {best * 1000 / len(texts):6.2f} ms per text")


if __name__ == "__main__":
    main()
