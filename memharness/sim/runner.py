"""The simulator: shards of users on Ray actors, strategies side by side, results to files.

`ray.init()` starts a local Ray, or joins the cluster `RAY_ADDRESS` names. Each actor
(`ShardWorker`) owns one shard of every scenario's users (round robin by user index), its
own embedder, its own backend connections and, per replay, its own virtual clock and a
fresh namespace that it drops afterwards. Strategies run one after another; the shards of
one strategy run in parallel, and its result is written as soon as all its shards are in,
so Ctrl-C or a failure loses only the strategy in flight. A strategy that raises is
recorded as failed with its error; the others complete.

Lifecycle of a worker: built once per run (embedded servers start in its own data
directory, `<data_dir>/sim/w<i>`, shared across runs and emptied by each replay's drop);
`load` takes a scenario's shard and embeds its texts ahead in batches (the cache by text
the reference uses anyway); `replay` runs one strategy; `progress` answers while a
replay runs (a threaded actor); `__ray_terminate__` ends it so embedded servers stop.
"""

from __future__ import annotations

import os
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import ray

from memharness.sim.metrics import merge
from memharness.sim.plan import (
    IDLE_SWEEP_S,
    SAMPLE_EVERY_S,
    ScenarioInput,
    StrategySpec,
    sample_times,
    shard_of,
    sweep_ticks,
)
from memharness.sim.shard import ShardReplayer, ShardResult, SimUser
from reference.clock import VirtualClock
from reference.embedding import CachedEmbedder, make_embedder
from reference.factory import build_memory_system, start_embedded_servers
from reference.forgetting.policy import OracleAdvice
from reference.forgetting.strategy import Strategy
from reference.keys import Namespace
from reference.pii import RegexPiiMasker
from reference.settings import Settings
from reference.system import MemorySystem

EMBED_BATCH = 256


@dataclass(frozen=True)
class RunOptions:
    workers: int = 2
    k: int = 5
    idle_sweep_s: float = IDLE_SWEEP_S  # sweeps in idle stretches; PII residency resolution
    sample_every_s: float = SAMPLE_EVERY_S


class ShardWorker:
    """One Ray actor: one shard of each scenario (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # The model is loaded once; each scenario gets a cache big enough for its texts.
        self.inner = make_embedder(
            settings.embedder, cache_size=0, threads=settings.embedder_threads
        )
        self.embedder: CachedEmbedder | None = None
        self.key = ""
        self.shard: ShardReplayer | None = None  # of scenario `key`
        self.lock = threading.Lock()
        self.servers: list[object] = []

    def start_servers(self) -> None:
        """Start this worker's embedded servers, held for its life (the driver calls
        workers one at a time: pgserver's first start creates a system user, which must
        not race)."""
        self.servers = start_embedded_servers(self.settings)

    def load(self, key: str, users: list[SimUser], k: int) -> int:
        """Take this worker's shard of scenario `key`; returns its number of steps."""
        with self.lock:
            shard = ShardReplayer(users, k=k)
            masker = RegexPiiMasker()
            texts = sorted({masker.mask(t) for t in shard.texts()})
            self.embedder = CachedEmbedder(self.inner, maxsize=len(texts) + 10_000)
            for start in range(0, len(texts), EMBED_BATCH):
                self.embedder.embed(texts[start : start + EMBED_BATCH])
            self.key, self.shard = key, shard
            return shard.steps_total

    def replay(
        self, key: str, strategy: Strategy, prefix: str, ticks: list[float], samples: list[float]
    ) -> ShardResult:
        with self.lock:
            shard, embedder = self.shard, self.embedder
            if shard is None or key != self.key:
                raise RuntimeError(f"replay of {key!r}, but this worker holds {self.key!r}")

            def build(
                clock: VirtualClock, namespace: Namespace, oracle: OracleAdvice | None
            ) -> MemorySystem:
                return build_memory_system(
                    self.settings,
                    clock=clock,
                    embedder=embedder,
                    namespace=namespace,
                    strategy=strategy,
                    oracle=oracle,
                )

            return shard.run(build, strategy, Namespace(prefix), ticks=ticks, samples=samples)

    def progress(self) -> tuple[int, int]:
        """(steps done, users done) of the replay in flight."""
        shard = self.shard
        return (shard.steps_done, shard.users_done) if shard is not None else (0, 0)


@dataclass
class StrategyOutcome:
    """What one strategy produced on one scenario: figures, or the error that stopped it."""

    spec: StrategySpec
    status: str  # ok | failed | interrupted
    error: str | None = None
    figures: dict[str, Any] | None = None


Progress = Callable[[str, int, int, int, float], None]  # label, steps, total, users, elapsed


class Simulator:
    """Runs scenarios x strategies on Ray actors; see the module docstring."""

    def __init__(self, settings: Settings, options: RunOptions, *, run_tag: str) -> None:
        self.settings = settings
        self.options = options
        self.run_tag = run_tag
        self.workers: list[Any] = []

    def __enter__(self) -> Simulator:
        if not ray.is_initialized():
            ray.init(
                address=os.environ.get("RAY_ADDRESS") or None,
                include_dashboard=False,
                log_to_driver=False,
                configure_logging=False,
            )
        # A core each, or a share when there are more workers than cores (else the extra
        # actors would wait for a core forever). Threaded (2): `progress` answers while
        # `replay` runs; a lock keeps replays serial.
        share = min(1.0, float(ray.cluster_resources().get("CPU", 1.0)) / self.options.workers)
        actor: Any = ray.remote(ShardWorker).options(num_cpus=share, max_concurrency=2)
        self.workers = [actor.remote(self._worker_settings(i)) for i in range(self.options.workers)]
        for worker in self.workers:
            ray.get(worker.start_servers.remote())
        return self

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:  # a graceful exit runs atexit: embedded servers stop
            worker.__ray_terminate__.remote()
        self.workers = []

    def _worker_settings(self, index: int) -> Settings:
        if self.settings.backend == "memory":
            return self.settings
        return self.settings.model_copy(
            update={"data_dir": self.settings.data_dir / "sim" / f"w{index}"}
        )

    def run_scenario(
        self,
        position: int,
        scenario: ScenarioInput,
        specs: Sequence[StrategySpec],
        *,
        on_result: Callable[[StrategyOutcome], None],
        progress: Progress | None = None,
    ) -> None:
        """Replay `scenario` under each spec in turn, calling `on_result` after each."""
        n = len(self.workers)
        shards: list[list[SimUser]] = [[] for _ in range(n)]
        for index, user in enumerate(scenario.users):
            shards[shard_of(index, n)].append(SimUser(index, user))
        key = f"{position}-{scenario.hash}"
        total = sum(
            ray.get(
                [
                    w.load.remote(key, s, self.options.k)
                    for w, s in zip(self.workers, shards, strict=True)
                ]
            )
        )
        times = [step.at for user in scenario.users for step in user.timeline]
        samples = sample_times(times, self.options.sample_every_s)
        for j, spec in enumerate(specs):
            interval = spec.strategy.sweep_interval_s
            ticks = sweep_ticks(times, interval, max(interval, self.options.idle_sweep_s))
            prefix = f"{self.settings.prefix}_{self.run_tag}_{position}_{j}"[:36]
            refs = [
                w.replay.remote(key, spec.strategy, f"{prefix}_w{i}", ticks, samples)
                for i, w in enumerate(self.workers)
            ]
            try:
                results = self._wait(refs, spec.label, total, progress)
            except KeyboardInterrupt:
                on_result(StrategyOutcome(spec, "interrupted", "interrupted by the user"))
                raise
            except Exception as exc:  # a failing strategy is a result; the others go on
                on_result(StrategyOutcome(spec, "failed", _error_text(exc)))
                continue
            on_result(StrategyOutcome(spec, "ok", figures=merge(results)))

    def _wait(
        self, refs: list[Any], label: str, total: int, progress: Progress | None
    ) -> list[ShardResult]:
        began = time.perf_counter()
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            if progress is not None:
                done = ray.get([w.progress.remote() for w in self.workers])
                steps = sum(d[0] for d in done) if pending else total
                progress(label, steps, total, sum(d[1] for d in done), time.perf_counter() - began)
        return list(ray.get(refs))


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError carries the worker's exception
    text = "".join(traceback.format_exception_only(type(cause or exc), cause or exc)).strip()
    detail = str(exc) if cause is not None else traceback.format_exc()
    return f"{text}\n{detail}"[:4000]


__all__ = ["RunOptions", "ScenarioInput", "ShardWorker", "Simulator", "StrategyOutcome"]
