"""The simulator: shards of users on Ray actors, strategies side by side, results to files.

`ray.init()` starts a local Ray, or joins the cluster `RAY_ADDRESS` names. Each actor
(`ShardWorker`) owns one shard of every scenario's users (round robin by user index), its
own embedder, its own backend connections and, per replay, its own virtual clock and a
fresh namespace that it drops afterwards. Strategies run one after another; the shards of
one strategy run in parallel, and its result is written as soon as all its shards are in,
so Ctrl-C or a failure loses only the strategy in flight. A strategy that raises is
recorded as failed with its error; the others complete.

How the work is split: when there are at least as many strategies as workers and the
scenario fits in one cohort, each worker replays the whole scenario under a strategy of
its own, taking the next one when it finishes (results are still reported in the order
given); otherwise the strategies run one after another and the workers share each
strategy's users. Every shard runs every sweep tick of the scenario, so sharding repeats
the ticks on each worker; whole strategies do not (a scenario of a few users spanning
months is mostly ticks).

A worker holds at most `RunOptions.cohort_users` users at a time: a larger shard is
replayed in cohorts, one after another, each in its own namespace under the same sweep
ticks and footprint samples, and the cohorts' tallies add up as shards do. Users never
see each other (each user's records are scoped to that user, and the ticks come from the
whole scenario), so the figures are those of one replay of the whole shard, while a
worker's memory follows the cohort, not the population.

A worker's lifecycle: `memharness/sim/runner.py`.
"""

from __future__ import annotations

import os
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import ray

from memharness.progress import Phase, Progress
from memharness.sim.metrics import merge
from memharness.sim.plan import (
    Fault,
    ScenarioInput,
    StrategySpec,
    probe_times,
    sample_times,
    shard_of,
)
from memharness.sim.replay import SimUser
from memharness.sim.runner import (
    RunOptions,
    ShardWorker,
    StrategyOutcome,
    replay_progress,
    scratch_dir,
    stop_orphaned_servers,
    wait_for_exit,
)
from memharness.sim.tally import ShardResult, join_cohorts
from memharness.verbosity import quiet_ray
from reference.settings import Settings

#: A worker that does not answer a call this long (seconds) is taken for dead.
WORKER_ANSWER_S = 60.0


class Simulator:
    """Runs scenarios x strategies on Ray actors; see the module docstring."""

    def __init__(
        self,
        settings: Settings,
        options: RunOptions,
        *,
        run_tag: str,
        progress: Progress | None = None,
    ) -> None:
        self.settings = settings
        self.options = options
        self.run_tag = run_tag
        #: Its phases (starting workers, embedding ahead, replays): none shown by default.
        self.progress = progress or Progress(enabled=False)
        self.workers: list[Any] = []
        self.actor: Any = None
        self.loaded: tuple[str, list[list[SimUser]]] | None = None  # key, a cohort each
        self.replaced = 0  # workers that died and were replaced
        self.scratch = scratch_dir(settings)
        self.data_dirs: dict[int, Path] = {}  # each worker's embedded servers' directory
        self.fault_pending = options.kill_worker_at is not None or options.server_fault is not None
        #: Wall seconds of the fixed costs, apart from the replays (whose turns/s count
        #: only the replay): starting Ray and the workers, and loading (embedding ahead).
        self.setup_s = {"workers": 0.0, "load": 0.0}

    def __enter__(self) -> Simulator:
        servers = "" if self.settings.backend == "memory" else ", starting its servers"
        with self.progress.start(
            f"starting Ray and {self.options.workers} worker(s), each loading its embedder{servers}"
        ):
            began = time.perf_counter()
            self._start()
            self.setup_s["workers"] += time.perf_counter() - began
        return self

    def _start(self) -> None:
        if not ray.is_initialized():
            quiet_ray()
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
        self.actor = ray.remote(ShardWorker).options(num_cpus=share, max_concurrency=2)
        # Every worker loads its model at once; the first starts its servers alone.
        self.workers = [self._new_worker(i) for i in range(self.options.workers)]
        ray.get(self.workers[0].start_servers.remote())
        ray.get([worker.start_servers.remote() for worker in self.workers[1:]])

    def _new_worker(self, index: int) -> Any:
        """A new worker (its constructor loads the embedding model), servers not started."""
        settings = self._worker_settings(index)
        self.data_dirs[index] = settings.data_dir
        return self.actor.remote(settings)

    def replace_dead_workers(self) -> int:
        """Replace every worker whose process died (killed, out of memory, its node lost)
        by a new one holding the same users, so the strategies after a failed one run;
        returns how many. A replacement starts its embedded servers in a data directory of
        its own: the dead worker's servers may still hold the old one."""
        dead = []
        for i, worker in enumerate(self.workers):
            try:
                ray.get(worker.pid.remote(), timeout=WORKER_ANSWER_S)
            except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError):
                dead.append(i)
        for i in dead:
            ray.kill(self.workers[i])  # a hung one too
            if self.settings.backend != "memory":  # its servers' directory is its own
                stop_orphaned_servers(self.data_dirs[i])
            self.replaced += 1
            self.workers[i] = self._new_worker(i)
            ray.get(self.workers[i].start_servers.remote())
            if self.loaded is not None:
                key, cohorts = self.loaded
                ray.get(self.workers[i].load.remote(key, cohorts[i], self.options.k))
        return len(dead)

    def __exit__(self, kind: type[BaseException] | None, *exc: object) -> None:
        interrupted = kind is not None and issubclass(kind, KeyboardInterrupt)
        for worker in self.workers:
            if interrupted:  # a graceful exit would wait for the replay in flight to end
                ray.kill(worker)  # its servers are stopped below (stop_orphaned_servers)
            else:  # a graceful exit runs atexit: embedded servers stop
                worker.__ray_terminate__.remote()
        scratch = self.scratch
        if self.settings.backend != "memory":
            with self.progress.start("stopping the workers and their servers"):
                for worker in self.workers:
                    wait_for_exit(worker)
            # A worker that died without its exit hooks left its servers running.
            if scratch.is_dir():
                stop_orphaned_servers(scratch)
            if scratch.parent == Path("/dev/shm"):
                # RAM is not left holding the servers' data once they have stopped.
                shutil.rmtree(scratch, ignore_errors=True)
        self.workers = []

    def _worker_settings(self, index: int) -> Settings:
        if self.settings.backend == "memory":
            return self.settings
        name = f"w{index}" + (f"r{self.replaced}" if self.replaced else "")
        return self.settings.model_copy(update={"data_dir": self.scratch / name})

    def run_scenario(
        self,
        position: int,
        scenario: ScenarioInput,
        specs: Sequence[StrategySpec],
        *,
        on_result: Callable[[StrategyOutcome], None],
    ) -> None:
        """Replay `scenario` under each spec, calling `on_result` for each in order."""
        n, size = len(self.workers), self.options.cohort_users
        if len(specs) >= n > 1 and len(scenario.users) <= size:
            self._run_whole(position, scenario, specs, on_result=on_result)
            return
        shards: list[list[SimUser]] = [[] for _ in range(n)]
        for index, user in enumerate(scenario.users):
            shards[shard_of(index, n)].append(SimUser(index, user))
        rounds = [
            [shard[start : start + size] for shard in shards]
            for start in range(0, max(len(s) for s in shards), size)
        ] or [shards]
        times = [step.at for user in scenario.users for step in user.timeline]
        samples = sample_times(times, self.options.sample_every_s)
        peak_samples = probe_times(scenario.users)
        loaded = ""
        if len(rounds) == 1:
            loaded = self._load(f"{position}-{scenario.hash}", rounds[0], scenario.name)
        for j, spec in enumerate(specs):
            ticks = self.options.sweep_ticks(spec.strategy, times)
            prefix = self._prefix(position, j)
            results: list[list[ShardResult]] = []  # per round, a result per worker
            try:
                for c, cohorts in enumerate(rounds):
                    part = scenario.name
                    if len(rounds) > 1:
                        part += f", cohort {c + 1}/{len(rounds)}"
                    key = loaded or self._load(f"{position}-{scenario.hash}-c{c}", cohorts, part)
                    steps = sum(len(u.user.timeline) for cohort in cohorts for u in cohort)
                    with self.progress.start(
                        f"{spec.label}: replaying {part}", total=steps, unit="steps"
                    ) as phase:
                        # A namespace is dropped after its replay: the next cohort starts empty.
                        refs = [
                            w.replay.remote(
                                key,
                                spec.strategy,
                                f"{prefix}_w{i}",
                                ticks,
                                samples,
                                *self._faults(i),
                                peak_samples=peak_samples,
                                system=spec.system,
                            )
                            for i, w in enumerate(self.workers)
                        ]
                        results.append(self._wait(refs, phase))
            except KeyboardInterrupt:
                on_result(StrategyOutcome(spec, "interrupted", "interrupted by the user"))
                raise
            except Exception as exc:  # a failing strategy is a result; the others go on
                on_result(StrategyOutcome(spec, "failed", _error_text(exc)))
                self.replace_dead_workers()
                continue
            by_worker = [join_cohorts(list(worker)) for worker in zip(*results, strict=True)]
            on_result(StrategyOutcome(spec, "ok", figures=merge(by_worker)))

    def _run_whole(
        self,
        position: int,
        scenario: ScenarioInput,
        specs: Sequence[StrategySpec],
        *,
        on_result: Callable[[StrategyOutcome], None],
    ) -> None:
        """Each worker replays the whole scenario under one strategy at a time."""
        users = [SimUser(index, user) for index, user in enumerate(scenario.users)]
        key = self._load(f"{position}-{scenario.hash}", [users] * len(self.workers), scenario.name)
        times = [step.at for user in scenario.users for step in user.timeline]
        samples = sample_times(times, self.options.sample_every_s)
        peak_samples = probe_times(scenario.users)
        total = sum(len(user.timeline) for user in scenario.users)
        queue = list(enumerate(specs))
        running: dict[Any, tuple[int, int]] = {}  # ref -> (worker, spec index)
        outcomes: dict[int, StrategyOutcome] = {}
        reported = 0
        title = f"replaying {scenario.name} under {len(specs)} strategies"
        with self.progress.start(
            f"{title}, {len(self.workers)} at a time", total=total * len(specs), unit="steps"
        ) as phase:
            try:
                while queue or running:
                    idle = set(range(len(self.workers))) - {w for w, _ in running.values()}
                    for i in sorted(idle):
                        if queue:
                            j, spec = queue.pop(0)
                            ref = self.workers[i].replay.remote(
                                key,
                                spec.strategy,
                                self._prefix(position, j),
                                self.options.sweep_ticks(spec.strategy, times),
                                samples,
                                *self._faults(i),
                                peak_samples=peak_samples,
                                system=spec.system,
                            )
                            running[ref] = (i, j)
                    done, _ = ray.wait(list(running), num_returns=1, timeout=0.5)
                    for ref in done:
                        _, j = running.pop(ref)
                        spec = specs[j]
                        try:
                            figures = merge([ray.get(ref)])
                        except Exception as exc:  # a failing strategy is a result
                            outcomes[j] = StrategyOutcome(spec, "failed", _error_text(exc))
                            self.replace_dead_workers()
                        else:
                            outcomes[j] = StrategyOutcome(spec, "ok", figures=figures)
                    while reported in outcomes:  # in the order given
                        on_result(outcomes.pop(reported))
                        reported += 1
                    if running and self.progress.drawing:
                        now = replay_progress([self.workers[i] for i, _ in running.values()])
                        finished = len(specs) - len(queue) - len(running)
                        label = ", ".join(specs[j].label for _, j in running.values())
                        phase.update(finished * total + sum(d[0] for d in now), f"now: {label}")
            except KeyboardInterrupt:
                phase.end(outcome="interrupted after")
                for j in sorted(outcomes):  # finished, waiting for an earlier one: kept
                    on_result(outcomes[j])
                for _, j in running.values():
                    on_result(StrategyOutcome(specs[j], "interrupted", "interrupted by the user"))
                raise

    def _faults(self, worker: int) -> tuple[float | None, Fault | None]:
        """`replay`'s `die_at` and `server_fault` for this call on `worker`: the `--fault`
        on worker 0's first replay, once per run."""
        if worker != 0 or not self.fault_pending:
            return None, None
        self.fault_pending = False
        return self.options.kill_worker_at, self.options.server_fault

    def _prefix(self, position: int, j: int) -> str:
        return f"{self.settings.prefix}_{self.run_tag}_{position}_{j}"[:36]

    def _load(self, key: str, cohorts: list[list[SimUser]], what: str) -> str:
        """Give each worker its cohort of users under `key` (embedded ahead); `key`.
        `what` names the users in the progress line (a scenario, a cohort of it)."""
        users = len({u.index for cohort in cohorts for u in cohort})  # whole: on every worker
        with self.progress.start(
            f"embedding ahead: {what}, {users:,} users on {len(self.workers)} worker(s)"
        ):
            began = time.perf_counter()
            ray.get(
                [
                    w.load.remote(key, cohort, self.options.k)
                    for w, cohort in zip(self.workers, cohorts, strict=True)
                ]
            )
            self.setup_s["load"] += time.perf_counter() - began
        self.loaded = (key, cohorts)
        return key

    def _wait(self, refs: list[Any], phase: Phase) -> list[ShardResult]:
        """The workers' results of `refs`, `phase` updated with their steps meanwhile."""
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            if self.progress.drawing:  # piped: no live line, no polling
                now = replay_progress(self.workers)
                phase.update(sum(d[0] for d in now), f"users done: {sum(d[1] for d in now):,}")
        return list(ray.get(refs))


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError carries the worker's exception
    text = "".join(traceback.format_exception_only(type(cause or exc), cause or exc)).strip()
    detail = str(exc) if cause is not None else traceback.format_exc()
    return f"{text}\n{detail}"[:4000]


__all__ = ["Simulator"]
