"""What a simulator worker runs: `ShardWorker`, one Ray actor holding one shard of each
scenario's users, its own embedder, its own backend connections and embedded servers;
the options of a run (`RunOptions`) and what one strategy produced (`StrategyOutcome`).

Lifecycle of a worker: built once per run (embedded servers start in its own data
directory, `scratch_dir()/w<i>`: in RAM when it can, one directory per run, removed at
its end; else under the data directory, shared across runs and emptied by each replay's
drop);
`load` takes a scenario's shard and embeds its texts ahead in batches (the cache by text
the reference uses anyway); `replay` runs one strategy; `progress` answers while a
replay runs (a threaded actor); `__ray_terminate__` ends it so embedded servers stop.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import math
import os
import secrets
import shutil
import signal
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ray

from memharness.faults import (
    EmbeddedPostgresServer,
    EmbeddedRedisServer,
    ReplayFault,
    ServerProcess,
)
from memharness.sim.masking import ScenarioMasker
from memharness.sim.plan import (
    COHORT_USERS,
    IDLE_SWEEP_S,
    SAMPLE_EVERY_S,
    Fault,
    StrategySpec,
    sweep_ticks,
)
from memharness.sim.replay import SimUser
from memharness.sim.shard import ShardReplayer
from memharness.sim.tally import ShardResult
from memharness.systems import adapter_class
from memharness.systems.base import MemoryAdapter
from reference.clock import VirtualClock
from reference.embedding import CachedEmbedder, make_embedder
from reference.factory import build_memory_system, start_embedded_servers
from reference.keys import Namespace
from reference.policy.oracle import OracleAdvice
from reference.policy.strategy import Strategy
from reference.session.embedded_redis import stop_orphaned_redis
from reference.settings import Settings
from reference.system import MemorySystem

EMBED_BATCH = 256
#: RAM scratch for the workers' servers only with at least this much free (`scratch_dir`).
SCRATCH_MIN_FREE_BYTES = 2 * 1024**3


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


@dataclass
class StrategyOutcome:
    """What one strategy produced on one scenario: figures, or the error that stopped it."""

    spec: StrategySpec
    status: str  # ok | failed | interrupted
    error: str | None = None
    figures: dict[str, Any] | None = None


class ServerFaultInjected(RuntimeError):
    """A replay that survived a `--fault` on its server: failed all the same."""


class ShardWorker:
    """One Ray actor: one shard of each scenario (see the module docstring)."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        # The model is loaded once; each scenario gets a cache big enough for its texts.
        self.inner = make_embedder(
            settings.embedder,
            cache_size=0,
            threads=settings.embedder_threads,
            runtime=settings.embedder_runtime,
        )
        self.embedder: CachedEmbedder | None = None
        #: The PII masker of this worker's replays: a text masked or detected once (at
        #: `load`, or by an earlier replay) is not detected again (`memharness.sim.masking`).
        self.masker = ScenarioMasker()
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
            said = shard.texts()
            masker = self.masker
            masker.clear()  # the previous cohort's texts
            # Masked: what the reference embeds; raw: what a system under test is given
            # (`peer_replay.py`), so neither's turn waits on the model for a known text.
            texts = sorted({masker.mask(t) for t in said} | set(said))
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
        system: str = "reference",
    ) -> ShardResult:
        """Replay the shard under `strategy` on `system` (the reference, or an adapter
        opened here in the worker: only its name crosses from the driver); `die_at` (a
        share of the shard's steps, for `--fault`) kills this process with SIGKILL once
        that share is replayed, and `server_fault` kills, stops or restarts one of its
        embedded servers then. A
        replay with a server fault fails: with the layer's error if it met one, else with
        `ServerFaultInjected` (its figures are not those of an uninterrupted replay)."""
        with self.lock:
            shard, embedder = self.shard, self.embedder
            if shard is None or key != self.key:
                raise RuntimeError(f"replay of {key!r}, but this worker holds {self.key!r}")
            if system != "reference":
                if embedder is None:
                    raise RuntimeError(f"replay of {key!r} before its load")
                return self._replay_peer(
                    system, shard, strategy, prefix, ticks, samples, peak_samples, embedder
                )
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
                    pii=self.masker,
                    sole_writer=True,  # the namespace is this replay's alone
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

    def _replay_peer(
        self,
        system: str,
        shard: ShardReplayer,
        strategy: Strategy,
        prefix: str,
        ticks: list[float],
        samples: list[float],
        peak_samples: Sequence[float],
        embedder: CachedEmbedder,
    ) -> ShardResult:
        """`replay` against a system under test (`ShardReplayer.run_peer`)."""
        adapter = adapter_class(system)
        settings = self.settings

        def open_adapter(namespace: str) -> MemoryAdapter:
            return adapter.open(namespace=namespace, embedder=embedder, settings=settings)

        return shard.run_peer(
            open_adapter,
            strategy,
            Namespace(prefix),
            settings=settings,
            embedder=embedder,
            ticks=ticks,
            samples=samples,
            peak_samples=peak_samples,
        )

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


def _die_at(shard: ShardReplayer, share: float) -> None:
    target = max(1, math.ceil(shard.steps_total * share))
    while shard.steps_done < target:
        time.sleep(0.001)
    os.kill(os.getpid(), signal.SIGKILL)


def scratch_dir(settings: Settings) -> Path:
    """Where a run's workers keep their embedded servers' data (called once per run): RAM
    (`/dev/shm`, when it is there with room to spare) unless `MEMH_SIM_ON_DISK=1`, else
    `<data_dir>/sim`.

    A replay's data is throwaway (its namespace is dropped at the end), and on disk the
    embedded servers' syncs would weigh on every write of a replay that keeps nothing.
    The servers are the same real ones either way; what changes is that the per-operation
    latencies a run reports leave out the disk's sync. The SLA suites (`memharness bench`,
    `memharness load`) measure on the data directory's disk.
    """
    shm = Path("/dev/shm")
    on_disk = os.environ.get("MEMH_SIM_ON_DISK", "") not in ("", "0")
    roomy = shm.is_dir() and os.access(shm, os.W_OK)
    if not on_disk and roomy and shutil.disk_usage(shm).free > SCRATCH_MIN_FREE_BYTES:
        # One directory per run: a worker of the previous run can still be in its exit
        # hooks (pgserver rewrites a file in its data directory) after Ray reports it
        # dead, and must not write into the next run's fresh PostgreSQL directory.
        digest = hashlib.sha256(str(settings.data_dir.resolve()).encode()).hexdigest()[:10]
        return shm / f"memharness-{os.getuid()}-{digest}-{secrets.token_hex(4)}"
    return settings.data_dir / "sim"


def wait_for_exit(worker: Any, within_s: float = 30.0) -> None:
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


def stop_orphaned_servers(data_dir: Path) -> None:
    """Stop the embedded PostgreSQL and Redis a killed worker left running in `data_dir`,
    when that directory is on this machine (both servers outlive their parent; on another
    node of a cluster they stay until that node's next reboot or a manual stop)."""
    for pid_file in data_dir.glob("**/postmaster.pid"):
        with contextlib.suppress(ValueError, IndexError, ProcessLookupError, PermissionError):
            os.kill(int(pid_file.read_text().splitlines()[0]), signal.SIGTERM)
    for registry in data_dir.glob("**/redis.db.settings"):
        stop_orphaned_redis(registry.parent)


def replay_progress(workers: list[Any]) -> list[tuple[int, int]]:
    """(steps, users) done by each worker's replay in flight; (0, 0) from a dead one (its
    replay's own result says what happened)."""
    out = []
    for ref in [w.progress.remote() for w in workers]:
        try:
            out.append(ray.get(ref))
        except ray.exceptions.RayActorError:
            out.append((0, 0))
    return out


__all__ = ["RunOptions", "ShardWorker", "StrategyOutcome"]
