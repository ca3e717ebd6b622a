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

from reference.embedding import MiniLMEmbedder

# Turn-like texts with varied values, so no two are alike.
TEMPLATES = [
    "My address is {n} {street} Street, {city}.",
    "I always prefer {courier} for deliveries to {city}.",
    "Please remember that order {n} should go by {courier}.",
    "Where is my order {n}? It was going to {city}.",
    "I am allergic to {food}, please note it for order {n}.",
    "Book a table for {n} at {food} place in {city} tonight.",
    "Can you change the delivery of {n} to {street} Road?",
]
VALUES = {
    "street": ["Baker", "Oxford", "Elm", "Maple", "Church", "High", "Mill", "Park"],
    "city": ["London", "Berlin", "Paris", "Lyon", "Porto", "Oslo", "Graz", "Turin"],
    "courier": ["DHL", "UPS", "FedEx", "Hermes", "DPD", "GLS"],
    "food": ["peanuts", "shellfish", "gluten", "sesame", "sushi", "pasta"],
}


def utterance(rng: random.Random) -> str:
    values = {k: rng.choice(v) for k, v in VALUES.items()}
    return rng.choice(TEMPLATES).format(n=rng.randint(1, 99_999), **values)


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
