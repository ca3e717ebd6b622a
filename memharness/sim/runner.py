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

Lifecycle of a worker: built once per run (embedded servers start in its own data
directory, `scratch_dir()/w<i>` (RAM when it can), shared across runs and emptied by
each replay's drop);
`load` takes a scenario's shard and embeds its texts ahead in batches (the cache by text
the reference uses anyway); `replay` runs one strategy; `progress` answers while a
replay runs (a threaded actor); `__ray_terminate__` ends it so embedded servers stop.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import hashlib
import math
import os
import shutil
import signal
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray
from hdrh.histogram import HdrHistogram

from memharness.faults import (
    EmbeddedPostgresServer,
    EmbeddedRedisServer,
    ReplayFault,
    ServerProcess,
)
from memharness.progress import Phase, Progress
from memharness.sim.metrics import merge
from memharness.sim.plan import (
    COHORT_USERS,
    IDLE_SWEEP_S,
    SAMPLE_EVERY_S,
    Fault,
    ScenarioInput,
    StrategySpec,
    probe_times,
    sample_times,
    shard_of,
    sweep_ticks,
)
from memharness.sim.shard import ShardReplayer, SimUser
from memharness.sim.tally import ShardResult, new_histogram
from memharness.verbosity import quiet_ray
from reference.clock import VirtualClock
from reference.embedding import CachedEmbedder, make_embedder
from reference.factory import build_memory_system, start_embedded_servers
from reference.keys import Namespace
from reference.pii import RegexPiiMasker
from reference.policy.oracle import OracleAdvice
from reference.policy.strategy import Strategy
from reference.session.embedded_redis import stop_orphaned_redis
from reference.settings import Settings
from reference.system import MemorySystem

EMBED_BATCH = 256
#: RAM scratch for the workers' servers only with at least this much free (`scratch_dir`).
SCRATCH_MIN_FREE_BYTES = 2 * 1024**3
#: A worker that does not answer a call this long (seconds) is taken for dead.
WORKER_ANSWER_S = 60.0


@dataclass(frozen=True)
class RunOptions:
    workers: int = 2
    k: int = 5
    idle_sweep_s: float = IDLE_SWEEP_S  # sweeps in idle stretches; PII residency resolution
    sample_every_s: float = SAMPLE_EVERY_S
    #: Users a worker replays at once (a bigger shard goes in cohorts; module docstring).
    cohort_users: int = COHORT_USERS
    #: `--fault worker:kill@P%`: the first replay of worker 0 kills its process at P% of
    #: its steps (a share, 0-1), once per run.
    kill_worker_at: float | None = None
    #: `--fault pg|redis:kill|stop|restart@P%`: the same moment, worker 0's embedded
    #: server instead (`ShardWorker.replay`).
    server_fault: Fault | None = None

    def sweep_ticks(self, strategy: Strategy, step_times: list[float]) -> list[float]:
        """A replay's sweep times under `strategy` (`plan.sweep_ticks`): its interval's
        grid, and idle ticks `idle_sweep_s` apart, never closer than the interval."""
        interval = strategy.sweep_interval_s
        return sweep_ticks(step_times, interval, max(interval, self.idle_sweep_s))


class ServerFaultInjected(RuntimeError):
    """A replay that survived a `--fault` on its server: failed all the same."""


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
        """Start this worker's embedded servers, held for its life (the driver starts the
        first worker's alone: pgserver's first start on a machine creates a system user,
        which must not race; the others then start together)."""
        self.servers = start_embedded_servers(self.settings)

    def load(self, key: str, users: list[SimUser], k: int) -> int:
        """Take this worker's shard of scenario `key`; returns its number of steps."""
        with self.lock:
            # The previous cohort's users and vectors go before this one's arrive: a
            # worker's peak holds one cohort, not two.
            self.key, self.shard, self.embedder = "", None, None
            gc.unfreeze()  # what the previous load froze may be collected again
            shard = ShardReplayer(users, k=k)
            masker = RegexPiiMasker()
            texts = sorted({masker.mask(t) for t in shard.texts()})
            self.embedder = CachedEmbedder(self.inner, maxsize=len(texts) + 10_000)
            for start in range(0, len(texts), EMBED_BATCH):
                self.embedder.embed(texts[start : start + EMBED_BATCH])
            # The cohort's vectors are all in `self.embedder` now. The model's own caches
            # (the hashing embedder's features: a name or an order id is a new one) would
            # otherwise keep every cohort's, and the worker's memory would grow with the
            # users replayed, not with the cohort.
            self.inner.clear()
            # The scenario's ceiling is the same under every strategy: measured here, once.
            shard.measure_ceiling(embed=self.embedder.embed, mask=masker.mask)
            self.key, self.shard = key, shard
            # The cohort (users, steps, vectors) lives as long as its replays: a full
            # collection during a replay need not walk it. One walked a 1,000-user
            # cohort's heap for 0.13-0.16 s, 7% of the replay (gc.callbacks, in process).
            gc.collect()
            gc.freeze()
            return shard.steps_total

    def replay(
        self,
        key: str,
        strategy: Strategy,
        prefix: str,
        ticks: list[float],
        samples: list[float],
        die_at: float | None = None,
        server_fault: Fault | None = None,
        peak_samples: Sequence[float] = (),
    ) -> ShardResult:
        """Replay the shard under `strategy`; `die_at` (a share of the shard's steps, for
        `--fault`) kills this process with SIGKILL once that share is replayed, and
        `server_fault` kills, stops or restarts one of its embedded servers then. A
        replay with a server fault fails: with the layer's error if it met one, else with
        `ServerFaultInjected` (its figures are not those of an uninterrupted replay)."""
        with self.lock:
            shard, embedder = self.shard, self.embedder
            if shard is None or key != self.key:
                raise RuntimeError(f"replay of {key!r}, but this worker holds {self.key!r}")
            if die_at is not None:
                shard.steps_done = 0
                threading.Thread(target=_die_at, args=(shard, die_at), daemon=True).start()
            injected = None
            if server_fault is not None:
                shard.steps_done = 0
                injected = self._inject(server_fault, shard)

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

            try:
                result = shard.run(
                    build,
                    strategy,
                    Namespace(prefix),
                    ticks=ticks,
                    samples=samples,
                    peak_samples=peak_samples,
                )
            finally:
                if injected is not None:
                    injected.finish()  # its servers run again for the next replay
            if injected is not None and injected.fired:
                redis = server_fault is not None and server_fault.target == "redis"
                lost = " (a restarted Redis has forgotten its sessions)" if redis else ""
                raise ServerFaultInjected(
                    f"--fault {server_fault}: the replay survived it (its operations were "
                    "retried to success), but a replay with a fault is not an uninterrupted "
                    f"one{lost}: its figures are discarded; --resume replays it"
                )
            return result

    def _inject(self, fault: Fault, shard: ShardReplayer) -> ReplayFault:
        """Arm `fault` on this worker's embedded server (`memharness.faults`)."""
        from reference.ltm.embedded_pg import EmbeddedPostgres
        from reference.session.embedded_redis import start_embedded_redis

        server: ServerProcess
        if fault.target == "pg":
            handle = next(h for h in self.servers if isinstance(h, EmbeddedPostgres))
            server = EmbeddedPostgresServer(handle.data_dir, handle.url)
        else:
            server = EmbeddedRedisServer(start_embedded_redis(self.settings.data_dir / "redis"))
        hold_s = self.settings.retry.bound_s(self.settings.timeouts) + 1.0
        injected = ReplayFault(fault.action, server, hold_s=hold_s)  # type: ignore[arg-type]
        target = max(1, math.ceil(shard.steps_total * fault.share))
        injected.start(lambda: shard.steps_done, target)
        return injected

    def pid(self) -> int:
        """This actor's process id (to watch it, or to kill it in a fault test)."""
        return os.getpid()

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
        self.data_dirs: dict[int, Path] = {}  # each worker's embedded servers' directory
        self.fault_pending = options.kill_worker_at is not None or options.server_fault is not None

    def __enter__(self) -> Simulator:
        servers = "" if self.settings.backend == "memory" else ", starting its servers"
        with self.progress.start(
            f"starting Ray and {self.options.workers} worker(s), each loading its embedder{servers}"
        ):
            self._start()
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
                _stop_orphaned_servers(self.data_dirs[i])
            self.replaced += 1
            self.workers[i] = self._new_worker(i)
            ray.get(self.workers[i].start_servers.remote())
            if self.loaded is not None:
                key, cohorts = self.loaded
                ray.get(self.workers[i].load.remote(key, cohorts[i], self.options.k))
        return len(dead)

    def __exit__(self, *exc: object) -> None:
        for worker in self.workers:  # a graceful exit runs atexit: embedded servers stop
            worker.__ray_terminate__.remote()
        scratch = scratch_dir(self.settings)
        if self.settings.backend != "memory":
            with self.progress.start("stopping the workers and their servers"):
                for worker in self.workers:
                    _wait_for_exit(worker)
            # A worker that died without its exit hooks left its servers running.
            if scratch.is_dir():
                _stop_orphaned_servers(scratch)
            if scratch.parent == Path("/dev/shm"):
                # RAM is not left holding the servers' data once they have stopped.
                shutil.rmtree(scratch, ignore_errors=True)
        self.workers = []

    def _worker_settings(self, index: int) -> Settings:
        if self.settings.backend == "memory":
            return self.settings
        name = f"w{index}" + (f"r{self.replaced}" if self.replaced else "")
        return self.settings.model_copy(update={"data_dir": scratch_dir(self.settings) / name})

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
                        now = _progress([self.workers[i] for i, _ in running.values()])
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
            ray.get(
                [
                    w.load.remote(key, cohort, self.options.k)
                    for w, cohort in zip(self.workers, cohorts, strict=True)
                ]
            )
        self.loaded = (key, cohorts)
        return key

    def _wait(self, refs: list[Any], phase: Phase) -> list[ShardResult]:
        """The workers' results of `refs`, `phase` updated with their steps meanwhile."""
        pending = list(refs)
        while pending:
            _, pending = ray.wait(pending, num_returns=len(pending), timeout=0.5)
            if self.progress.drawing:  # piped: no live line, no polling
                now = _progress(self.workers)
                phase.update(sum(d[0] for d in now), f"users done: {sum(d[1] for d in now):,}")
        return list(ray.get(refs))


def scratch_dir(settings: Settings) -> Path:
    """Where the workers' embedded servers keep their data: RAM (`/dev/shm`, when it is
    there with room to spare) unless `MEMH_SIM_ON_DISK=1`, else `<data_dir>/sim`.

    A replay's data is throwaway (its namespace is dropped at the end), and on disk an STM
    write took 10-11 ms of a 15 ms embedded turn in `make run`, against ~4 ms on tmpfs
    (measured before Chroma's index sync was tuned: `reference.stm.chroma_store`). The
    servers are the same real ones either way; what changes is that the per-operation
    latencies a run reports leave out the disk's sync. The SLA suites (`memharness bench`,
    `memharness load`) measure on the data directory's disk.
    """
    shm = Path("/dev/shm")
    on_disk = os.environ.get("MEMH_SIM_ON_DISK", "") not in ("", "0")
    roomy = shm.is_dir() and os.access(shm, os.W_OK)
    if not on_disk and roomy and shutil.disk_usage(shm).free > SCRATCH_MIN_FREE_BYTES:
        digest = hashlib.sha256(str(settings.data_dir.resolve()).encode()).hexdigest()[:10]
        return shm / f"memharness-{os.getuid()}-{digest}"
    return settings.data_dir / "sim"


def _wait_for_exit(worker: Any, within_s: float = 30.0) -> None:
    """Until `worker`'s process has exited (its servers stopped), at most `within_s`."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            ray.get(worker.pid.remote(), timeout=1.0)
        except ray.exceptions.RayActorError:
            return
        except ray.exceptions.GetTimeoutError:
            continue
        time.sleep(0.1)


def _stop_orphaned_servers(data_dir: Path) -> None:
    """Stop the embedded PostgreSQL and Redis a killed worker left running in `data_dir`,
    when that directory is on this machine (both servers outlive their parent; on another
    node of a cluster they stay until that node's next reboot or a manual stop)."""
    for pid_file in data_dir.glob("**/postmaster.pid"):
        with contextlib.suppress(ValueError, IndexError, ProcessLookupError, PermissionError):
            os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)
    for registry in data_dir.glob("**/redis.db.settings"):
        stop_orphaned_redis(registry.parent)


def _progress(workers: list[Any]) -> list[tuple[int, int]]:
    """(steps, users) done by each worker's replay in flight; (0, 0) from a dead one (its
    replay's own result says what happened)."""
    out = []
    for ref in [w.progress.remote() for w in workers]:
        try:
            out.append(ray.get(ref))
        except ray.exceptions.RayActorError:
            out.append((0, 0))
    return out


def _die_at(shard: ShardReplayer, share: float) -> None:
    target = max(1, math.ceil(shard.steps_total * share))
    while shard.steps_done < target:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGKILL)


def join_cohorts(cohorts: list[ShardResult]) -> ShardResult:
    """One worker's cohorts, replayed one after another, as one shard's result: tallies,
    lists, footprints (per sample) and histograms add up, times add up, the peak RSS is
    the highest."""
    if len(cohorts) == 1:
        return cohorts[0]
    joined = ShardResult()
    for cohort in cohorts:
        for f in dataclasses.fields(ShardResult):
            mine, theirs = getattr(joined, f.name), getattr(cohort, f.name)
            if f.name == "peak_rss_mb":
                joined.peak_rss_mb = max(mine, theirs)
            elif f.name in ("footprint", "peak_footprint"):
                for at, layers in theirs.items():
                    point = mine.setdefault(at, {})
                    for layer, (records, size) in layers.items():
                        have = point.get(layer, (0, 0))
                        point[layer] = (have[0] + records, have[1] + size)
            elif f.name == "histograms":
                for op, encoded in theirs.items():
                    histogram = new_histogram()
                    for part in (mine.get(op), encoded):
                        if part is not None:
                            histogram.add(HdrHistogram.decode(part))
                    mine[op] = histogram.encode().decode()
            elif isinstance(mine, list):
                mine.extend(theirs)
            else:
                setattr(joined, f.name, mine + theirs)
    return joined


def _error_text(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)  # RayTaskError carries the worker's exception
    text = "".join(traceback.format_exception_only(type(cause or exc), cause or exc)).strip()
    detail = str(exc) if cause is not None else traceback.format_exc()
    return f"{text}\n{detail}"[:4000]


__all__ = ["RunOptions", "ScenarioInput", "ShardWorker", "Simulator", "StrategyOutcome"]
