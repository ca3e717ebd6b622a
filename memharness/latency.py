"""A quick in-process latency probe of each layer's operations on the configured backends.

Timed inside this process around each public call (no harness hop in between), on raw
per-call timings; percentiles are exact order statistics of those samples. The full SLA
suites (pytest-benchmark, Locust, CI gate) build on the same idea in `bench/`.
`verdicts` judges each layer's slowest p95 against its SLA (`memharness.verdict.limits`).
"""

from __future__ import annotations

import functools
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from memharness.progress import Progress
from memharness.verdict.limits import SLA_MS
from reference.clock import VirtualClock
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.models import Category
from reference.settings import Settings
from reference.system import MemorySystem

T0 = 1_767_225_600.0
_WORDS = (
    "ship",
    "deliver",
    "express",
    "parcel",
    "seat",
    "aisle",
    "window",
    "hotel",
    "room",
    "flight",
    "coffee",
    "tea",
    "address",
    "office",
    "meeting",
    "invoice",
    "refund",
    "order",
    "ticket",
    "repair",
    "heater",
    "printer",
    "budget",
    "report",
    "vegetarian",
    "spicy",
    "morning",
    "evening",
    "weekend",
    "airport",
    "taxi",
    "train",
    "museum",
    "doctor",
    "dentist",
)


@dataclass(frozen=True, slots=True)
class OpStats:
    """Latency of one operation over `calls` samples, in milliseconds."""

    op: str
    calls: int
    p50_ms: float
    p95_ms: float
    p99_ms: float


def measure_layers(
    settings: Settings,
    *,
    calls: int = 200,
    ltm_rows: int = 1000,
    seed: int = 7,
    progress: Progress | None = None,
) -> list[OpStats]:
    """Seed a fresh namespace, then time session get, STM add/query, LTM upsert/query."""
    rng = random.Random(seed)
    clock = VirtualClock(T0)
    namespace = Namespace(f"lat{rng.randrange(16**8):08x}")
    shown = progress or Progress(enabled=False)
    with shown.start("starting the memory (servers, embedder)"):
        system = build_memory_system(settings, clock=clock, namespace=namespace)
    try:
        return _measure(system, rng, calls=calls, ltm_rows=ltm_rows, progress=shown)
    finally:
        with shown.start("removing the probe's rows"):
            _purge(system, ltm_rows)
            system.dispose()


def verdicts(stats: list[OpStats]) -> list[tuple[str, float, float, str, bool]]:
    """Per layer with an SLA: (layer, its slowest operation's p95, the SLA, that
    operation, held)."""
    out = []
    for layer, limit in SLA_MS.items():
        mine = [s for s in stats if s.op.split(".")[0] == layer]
        if mine:
            worst = max(mine, key=lambda s: s.p95_ms)
            out.append((layer, worst.p95_ms, limit, worst.op, worst.p95_ms < limit))
    return out


def _measure(
    system: MemorySystem, rng: random.Random, *, calls: int, ltm_rows: int, progress: Progress
) -> list[OpStats]:
    users = max(1, ltm_rows // 10)
    with progress.start(
        f"seeding LTM with {ltm_rows:,} rows", total=ltm_rows, unit="rows"
    ) as phase:
        for row in range(ltm_rows):
            system.ltm.upsert(
                user_id=f"u{row % users}",
                category=Category.FACT,
                key=f"k{row}",
                value={"n": row},
                text=_sentence(rng),
            )
            if row % 50 == 0:
                phase.update(row)
        system.session.create(user_id="u0", session_id="s0")
        for _ in range(200):
            system.stm.add(
                user_id="u0", session_id="s0", text="Please " + _sentence(rng), force=True
            )
    timed = functools.partial(_time, progress=progress)

    results = [
        timed("session.get", calls, lambda: system.session.get(user_id="u0", session_id="s0")),
        timed(
            "stm.add",
            calls,
            lambda: system.stm.add(
                user_id="u0", session_id="s0", text="Please " + _sentence(rng), force=True
            ),
        ),
        timed(
            "stm.query (uncached embedding)",
            calls,
            lambda: system.stm.query(
                user_id="u0", session_id="s0", text=_sentence(rng) + f" {rng.random()}", k=5
            ),
        ),
        timed(
            "ltm.upsert",
            calls,
            lambda: system.ltm.upsert(
                user_id=f"u{rng.randrange(users)}",
                category=Category.PREFERENCE,
                key=f"p{rng.randrange(10**9)}",
                value={"v": 1},
                text=_sentence(rng),
            ),
        ),
        timed(
            "ltm.query (uncached embedding)",
            calls,
            lambda: system.ltm.query(
                user_id=f"u{rng.randrange(users)}", text=_sentence(rng) + f" {rng.random()}", k=5
            ),
        ),
        timed(
            "ltm.query+lexical (uncached emb)",
            calls,
            lambda: system.ltm.query(
                user_id=f"u{rng.randrange(users)}",
                text=_sentence(rng) + f" {rng.random()}",
                k=5,
                lexical=True,
            ),
        ),
    ]
    return results


def _time(
    op: str, calls: int, call: Callable[[], object], *, progress: Progress | None = None
) -> OpStats:
    shown = progress or Progress(enabled=False)
    with shown.start(f"timing {op}", total=calls, unit="calls") as phase:
        for _ in range(min(20, calls)):  # warm connections, statement caches and the model
            call()
        samples = np.empty(calls)
        for index in range(calls):
            start = time.perf_counter()
            call()
            samples[index] = (time.perf_counter() - start) * 1000.0
            if index % 20 == 0:
                phase.update(index)
    p50, p95, p99 = np.percentile(samples, [50, 95, 99], method="higher")
    return OpStats(op=op, calls=calls, p50_ms=float(p50), p95_ms=float(p95), p99_ms=float(p99))


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(5, 12)))


def _purge(system: MemorySystem, ltm_rows: int) -> None:
    for user in {f"u{index}" for index in range(max(1, ltm_rows // 10))}:
        system.delete_user_data(user_id=user)
