"""What one Locust process keeps for a load run (`LoadRun`, one per Locust environment), the
run's constants, and the two load shapes (user steps, rate steps) that read it."""

from __future__ import annotations

import logging
import os
import time
import uuid
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

from gevent.lock import BoundedSemaphore
from locust import LoadTestShape
from locust.env import Environment
from locust.runners import MasterRunner

from loadtests.conversations import Conversation
from loadtests.errors import ErrorLog
from loadtests.hdr import OpHistograms
from loadtests.options import LoadOptions
from loadtests.pacing import ArrivalSchedule
from loadtests.procstats import ProcessSample
from loadtests.shape import step_at, steps_from_env, steps_requested
from loadtests.steps import StepRecorder
from loadtests.target import TargetClient
from loadtests.timelines import TimelineQueue
from loadtests.virtual_days import VirtualDays
from memharness.load_contract import RATES_ENV
from memharness.progress import Phase, Progress
from reference.clock import Clock, SystemClock
from reference.forgetting.events import EventBus
from reference.settings import Settings
from reference.system import MemorySystem

# Chroma's HTTP client (a Chroma server by URL) logs every request at INFO.
logging.getLogger("httpx").setLevel(logging.WARNING)
SLA_EXIT_CODE = 3
CONSISTENCY_EXIT_CODE = 4
EVENT_TYPES = frozenset({"layer", "turn", "wait", "op"})
#: Wall seconds between the serving process's writes of what its engine buffers (user
#: activity, access statistics, sessions touched) for the maintenance process to see.
SERVING_INTERVAL_S = 1.0
#: Rate steps: how long the backlog of the last step may take to drain before the stop.
DRAIN_S = 30.0
CALIBRATION_TURNS = 30


def rates_requested() -> bool:
    """True when `MEMH_LOAD_RATES` asks for rate steps (open loop, per-step records)."""
    return bool(os.environ.get(RATES_ENV, "").strip())


class StepShape(LoadTestShape):
    """Steps of users over time from MEMH_LOAD_STEPS; active only when it is set."""

    abstract = not steps_requested()

    def __init__(self) -> None:
        super().__init__()
        self.steps = steps_from_env()

    def tick(self) -> tuple[int, float] | None:
        step = step_at(self.steps, self.get_run_time())
        return None if step is None else (step.users, step.spawn_rate)


class RateStepShape(LoadTestShape):
    """Rate steps from MEMH_LOAD_RATES: a constant pool of users serving a stepped arrival
    timeline; stops once the timeline is over and its backlog served (or DRAIN_S later)."""

    abstract = not rates_requested()
    users = 16
    #: It reads -u itself (the pool of users serving the rates): Locust need not warn
    #: that a shape ignores -u and -r.
    use_common_options = True

    def tick(self) -> tuple[int, float] | None:
        parsed = getattr(self.runner.environment, "parsed_options", None) if self.runner else None
        users = int(getattr(parsed, "num_users", None) or self.users)
        run = run_for(self.runner.environment) if self.runner else None
        recorder = run.recorder if run else None
        if recorder is not None:
            schedule, now = recorder.schedule, time.perf_counter()
            if schedule.over(now):
                end = schedule.boundary(len(schedule.rates))
                if recorder.in_flight == 0 or now > end + DRAIN_S:
                    return None
        return users, float(users)


@dataclass
class LoadRun:
    """What one Locust process keeps for the run: the memory, the histograms, the users."""

    hists: OpHistograms = field(default_factory=OpHistograms)
    #: Failed operations: never in `hists` (a failure is not a fast success).
    errors: ErrorLog = field(default_factory=ErrorLog)
    options: LoadOptions = field(default_factory=LoadOptions)
    system: MemorySystem | None = None
    #: `memharness load --target URL`: the service under load, instead of `system`.
    target: TargetClient | None = None
    backends: dict[str, str] = field(default_factory=dict)
    conversations: tuple[Conversation, ...] = ()
    schedule: ArrivalSchedule | None = None
    #: --serial: one turn at a time in this process; otherwise a no-op context.
    turn_slot: AbstractContextManager[object] = field(default_factory=nullcontext)
    token: str = field(default_factory=lambda: uuid.uuid4().hex[:8])
    user_ids: list[str] = field(default_factory=list)
    started_at: float | None = None
    #: When the users were stopped (wall clock), before the consistency check.
    stopped_at: float | None = None
    stopped: bool = False
    #: Master only: workers heard from, and those whose last report came after their stop.
    workers: set[str] = field(default_factory=set)
    final_reports: set[str] = field(default_factory=set)
    #: Embedding cache (hits, misses): at test start here; per worker on the master.
    cache_base: tuple[int, int] = (0, 0)
    worker_cache: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Rate steps: the recorder of this test, the processes sampled, the calibration.
    recorder: StepRecorder | None = None
    rates: tuple[float, ...] | None = None
    roles: dict[str, int] = field(default_factory=dict)
    process_notes: dict[str, str] = field(default_factory=dict)
    calibration: dict[str, object] = field(default_factory=dict)
    #: Every --sample-every seconds: (seconds since the test start, each role's sample).
    process_series: list[tuple[float, dict[str, ProcessSample]]] = field(default_factory=list)
    settings: Settings | None = None
    consistency: dict[str, dict[str, Any]] | None = None
    #: The cache counts when the memory was released at the end.
    cache_final: tuple[int, int] | None = None
    #: The engine's monitoring counters (`reference.monitoring`, `state()`): when the
    #: memory was released here; per worker on the master.
    counters_final: dict[str, Any] | None = None
    worker_counters: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: The clock the memory runs on (a ScaledClock under --time-scale) and, scaled, the
    #: per-virtual-day figures.
    clock: Clock = field(default_factory=SystemClock)
    days: VirtualDays | None = None
    #: Under a strategy: its name and fingerprint; the serving side's background writer.
    strategy: dict[str, str] | None = None
    background: Any = None
    #: A scenario's timelines (MEMH_LOAD_SCENARIO) and the bus its events go to.
    timelines: TimelineQueue | None = None
    bus: EventBus | None = None
    #: Progress lines on stderr (`memharness.progress`), and the phase that the test's
    #: stop ends (the load itself, or the drain of the last rate step's backlog).
    progress: Progress = field(default_factory=Progress)
    running: Phase | None = None

    def counters_state(self) -> dict[str, Any] | None:
        """This process's monitoring counters (`MemoryCounters.state`), if it serves."""
        if self.system is not None and self.system.engine is not None:
            return self.system.engine.counters.state()
        return self.counters_final

    def cache_counts(self) -> tuple[int, int]:
        """Embedding cache hits and misses since the test started, in this process."""
        if self.system is None and self.cache_final is not None:
            return self.cache_final
        hits, misses = self._cache_totals()
        return hits - self.cache_base[0], misses - self.cache_base[1]

    def _cache_totals(self) -> tuple[int, int]:
        embedder = self.system.embedder if self.system is not None else None
        return getattr(embedder, "hits", 0), getattr(embedder, "misses", 0)

    def restart(self, options: LoadOptions) -> None:
        """Forget the previous test of this process (Locust's UI can run several)."""
        self.options = options
        self.hists.reset()
        self.errors.reset()
        self.process_series.clear()
        self.consistency = None
        self.started_at = time.time()
        self.stopped_at = None
        self.stopped = False
        self.workers.clear()
        self.final_reports.clear()
        self.worker_cache.clear()
        self.cache_base = self._cache_totals()
        self.cache_final = None
        self.turn_slot = BoundedSemaphore(1) if options.serial else nullcontext()
        self.schedule = None

    def new_user_id(self) -> str:
        user_id = f"load-{self.token}-u{len(self.user_ids)}"
        self.user_ids.append(user_id)
        return user_id


RUNS: weakref.WeakKeyDictionary[Environment, LoadRun] = weakref.WeakKeyDictionary()


def run_for(environment: Environment) -> LoadRun:
    run = RUNS.get(environment)
    if run is None:
        run = RUNS[environment] = LoadRun()
    return run


def runs_users(environment: Environment) -> bool:
    return not isinstance(environment.runner, MasterRunner)
