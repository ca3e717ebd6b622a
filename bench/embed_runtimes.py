"""MiniLM on torch, ONNX fp32 and ONNX int8, side by side in one process: CPU time per
text (one text per call, and in batches), idle CPU between calls, and how close each
ONNX runtime's vectors are to torch's (lowest cosine; top-10 neighbours of probe texts
among a corpus).

    python -m bench.embed_runtimes                                  # built-in texts
    python -m bench.embed_runtimes --locomo /work/shared/data/locomo/locomo.json

The runtimes take turns on each text (rotating which goes first), so all three see the
same machine; each call's CPU time is the process's (`time.process_time`), so a busy
machine stretches wall time but not these figures much. One intra-op thread each.
With `--locomo`, the corpus is the LoCoMo turns (speaker-prefixed, as the importer says
them) and the probes its questions: for each question, the top-10 turns by each runtime
are compared with torch's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from reference.embedding import make_minilm
from reference.text_interfaces import Embedder

RUNTIMES = ("torch", "onnx", "onnx-int8")

TEXTS = [
    "Please ship my order to the office address from now on.",
    "I'm allergic to peanuts, keep that in mind when suggesting snacks.",
    "What was the name of the hotel we booked in Lisbon last spring?",
    "My daughter starts school next Monday and I need a new lunch box.",
    "Could you remind me to call the bank about the card on Friday?",
    "I prefer window seats on long flights.",
    "The meeting moved to Thursday at 3pm, same room.",
    "Caroline: I went to a LGBTQ support group yesterday and it was so powerful.",
    "hi",
    "Thanks, that's all for today!",
    "我想把收货地址改成公司的地址。",
    "Melanie: Painting has been my way to relax since the kids were born; "
    "I finished a sunset landscape last week and hung it in the hall.",
]


def _locomo(path: Path, limit: int) -> tuple[list[str], list[str]]:
    data = json.loads(path.read_text())
    turns: list[str] = []
    questions: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        for key, value in conv.items():
            if key.startswith("session_") and isinstance(value, list):
                turns += [f"{t['speaker']}: {t['text']}" for t in value if t.get("text")]
        questions += [q["question"] for q in sample.get("qa", []) if q.get("question")]
    return turns[:limit], questions[:limit]


def _cpu_ms(model: Embedder, texts: list[str]) -> float:
    start = time.process_time()
    model.embed(texts)
    return (time.process_time() - start) * 1000.0


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300, help="one-text calls per runtime")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--locomo", type=Path, help="LoCoMo JSON: top-10 agreement on it")
    parser.add_argument("--corpus", type=int, default=3000, help="LoCoMo turns/questions used")
    parser.add_argument("--idle-s", type=float, default=2.0)
    args = parser.parse_args(argv)

    models = {name: make_minilm(name, threads=1) for name in RUNTIMES}
    texts = [f"{TEXTS[i % len(TEXTS)]} ({i})" for i in range(args.calls)]
    for model in models.values():  # warm up
        model.embed(texts[:10])
        model.embed(texts[:10])
    single: dict[str, list[float]] = {name: [] for name in RUNTIMES}
    for i, text in enumerate(texts):
        order = RUNTIMES[i % 3 :] + RUNTIMES[: i % 3]
        for name in order:
            single[name].append(_cpu_ms(models[name], [text]))
    batched: dict[str, list[float]] = {name: [] for name in RUNTIMES}
    for b in range(args.batches):
        chunk = [f"{TEXTS[(b + j) % len(TEXTS)]} [{b}.{j}]" for j in range(args.batch)]
        for name in RUNTIMES:
            batched[name].append(_cpu_ms(models[name], chunk) / args.batch)

    torch_p50 = float(np.percentile(single["torch"], 50))
    print(f"one text per call, CPU ms ({args.calls} calls each, interleaved; 1 intra-op thread)")
    print(f"{'runtime':<10} {'p50':>7} {'p95':>7} {'x torch p50':>12} {'batched/text':>13}")
    for name in RUNTIMES:
        p50 = float(np.percentile(single[name], 50))
        p95 = float(np.percentile(single[name], 95))
        per_text = float(np.median(batched[name]))
        print(f"{name:<10} {p50:7.2f} {p95:7.2f} {p50 / torch_p50:12.3f} {per_text:13.2f}")

    print(f"idle CPU over {args.idle_s:.1f} s after the calls (all threads of the process):")
    start = time.process_time()
    time.sleep(args.idle_s)
    print(f"  {(time.process_time() - start) * 1000.0:.2f} ms")

    probe_texts = TEXTS + texts[:50]
    reference = models["torch"].embed(probe_texts)
    for name in ("onnx", "onnx-int8"):
        cos = np.sum(reference * models[name].embed(probe_texts), axis=1)
        print(
            f"cosine {name} vs torch over {len(probe_texts)} texts: min {cos.min():.6f} "
            f"mean {cos.mean():.6f}"
        )

    if args.locomo:
        corpus, questions = _locomo(args.locomo, args.corpus)
        vectors = {n: m.embed(corpus) for n, m in models.items()}
        queries = {n: m.embed(questions) for n, m in models.items()}
        top = {n: np.argsort(-(queries[n] @ vectors[n].T), axis=1)[:, :10] for n in RUNTIMES}
        for name in ("onnx", "onnx-int8"):
            same = sum(list(a) == list(b) for a, b in zip(top[name], top["torch"], strict=True))
            sets = sum(set(a) == set(b) for a, b in zip(top[name], top["torch"], strict=True))
            cos = np.sum(vectors[name] * vectors["torch"], axis=1)
            print(
                f"LoCoMo {len(questions)} questions over {len(corpus)} turns, {name} vs torch:"
                f" top-10 identical in order {same}/{len(questions)}, as a set {sets}/"
                f"{len(questions)}; turn cosine min {cos.min():.6f}"
            )


if __name__ == "__main__":
    main()
