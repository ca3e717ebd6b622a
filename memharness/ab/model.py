"""The A/B gate's settings and results: what a run is asked to do, and what it found."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memharness.ab.arms import ArmTree
from memharness.verdict.ab import (
    FAMILY_ALPHA,
    RESAMPLES,
    Comparison,
)
from memharness.verdict.intervals import Verdict

ARMS = ("baseline", "candidate")
#: Seeded sizes: bench small's (bench/config.py).
SIZES = {
    "sessions": 1_000,
    "stm_session": 1_000,
    "stm_collection": 5_000,
    "ltm_rows": 10_000,
    "ltm_facts_per_user": 100,
}


@dataclass(slots=True)
class AbSettings:
    """The gate's options (see `memharness bench --help` and docs/latency.md)."""

    backend: str = "real"  # "real": embedded servers; "null": bench/null_backend.py
    embedder: str = "minilm"
    threads: int | None = 1  # MiniLM's torch threads
    rounds: int = 24
    extra_rounds: int = 8  # once, when an operation is inconclusive
    calls_scale: float = 1.0  # x each op's calls per round and arm (worker.OPS)
    chunk: int = 1  # calls per arm turn inside a round; 0: one whole block per arm
    restart_every: int = 8  # rounds per worker lifetime
    seed: int = 1
    t50: float = 0.10
    t95: float = 0.15
    null_delay_ms: float = 1.0
    cpu: int | None = None  # pin both workers to this CPU (None: no pinning)
    inject: tuple[str, float] | None = None  # (op, fraction of its median), candidate only
    sizes: dict[str, int] = field(default_factory=lambda: dict(SIZES))
    resamples: int = RESAMPLES
    family_alpha: float = FAMILY_ALPHA

    @property
    def thresholds(self) -> dict[float, float]:
        return {0.5: self.t50, 0.95: self.t95}


@dataclass(slots=True)
class OpResult:
    op: str
    comparisons: list[Comparison]
    verdict: Verdict
    swap_alarms: dict[str, float]  # per quantile label: share of label swaps that FAIL
    swap_spread: dict[str, float]  # per quantile label: 95th pct of swapped ratios


@dataclass(slots=True)
class AbResult:
    settings: AbSettings
    arms: dict[str, ArmTree]
    ops: list[OpResult]
    rounds: int
    extended: bool
    samples: dict[str, dict[str, list[list[float]]]]  # arm -> op -> per-round samples
    round_info: list[dict[str, Any]]
    workers: list[dict[str, Any]]  # per start: arm, pid, reference file, round
    seeding_s: dict[str, dict[str, float]]
    inject_ms: list[float]  # per candidate worker: the busy wait added to the injected op
    wall_s: float
    first_pass: dict[str, str]  # op -> verdict before the extra rounds
    #: Operations the baseline cannot run (reported NEW), with the worker's reason.
    new_ops: dict[str, str] = field(default_factory=dict)
    #: The rounds after which the gate could stop (`verdict.ab.looks`).
    looks: list[int] = field(default_factory=list)

    @property
    def verdict(self) -> Verdict:
        verdicts = {op.verdict for op in self.ops}
        for worst in (Verdict.FAIL, Verdict.WARN, Verdict.INCONCLUSIVE):
            if worst in verdicts:
                return worst
        return Verdict.PASS
