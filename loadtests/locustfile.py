"""Locust load test of the reference memory, in-process: scripted conversations, per layer.

Each Locust process that runs users (a local run, or each worker) builds one
`MemorySystem` from `Settings()` (MEMH_* variables: embedded real servers by default,
external ones by URL) on a `SystemClock`, warms it up, and shares it among its users.
Every turn fires one Locust request event per layer ("layer": session, pii, embed, stm,
ltm, promotion) and one for the whole turn ("turn"), timed inside `MemorySystem.turn`;
in open-loop mode also "turn@intended", the response time from the turn's intended start.
Every event also goes into an HDR histogram (microseconds), which workers ship to the
master; the master (or the local runner) prints the HDR table, writes
reports/<run-id>/load_hdr.json and checks the SLAs at exit: exit code 3 names each
broken SLA. See docs/load.md.

    locust -f loadtests/locustfile.py --headless -u 20 -r 20 -t 60s
    locust -f loadtests/locustfile.py --headless -u 20 -r 20 -t 60s --open-loop --rate 50
    MEMH_LOAD_STEPS=10x30s,50x30s locust -f loadtests/locustfile.py --headless
    MEMH_LOAD_RATES=auto MEMH_LOAD_STEP_S=20 locust -f loadtests/locustfile.py --headless \
        -u 16 -r 16 --open-loop --rate 1

With MEMH_LOAD_RATES (rate steps, `loadtests/steps.py`), arrivals are open loop at each
offered rate in turn, and the run also writes reports/<run-id>/steps.json: per step the
offered and achieved rate, per-operation HDR histograms and each process's CPU and RSS.
"""

from __future__ import annotations

import logging
import os
import random
import sys
import time
import uuid
import weakref
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_REPO = Path(__file__).resolve().parent.parent
if str(_REPO) not in sys.path:  # Locust puts only this file's directory on sys.path
    sys.path.insert(0, str(_REPO))

import gevent  # noqa: E402
from gevent.lock import BoundedSemaphore  # noqa: E402
from locust import LoadTestShape, User, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.runners import MasterRunner, WorkerRunner  # noqa: E402

from loadtests.consistency import (  # noqa: E402
    ConsistencyReport,
    check_consistency,
    check_erased,
)
from loadtests.conversations import Conversation, load_conversations, render  # noqa: E402
from loadtests.errors import ErrorLog, describe  # noqa: E402
from loadtests.hdr import OpHistograms  # noqa: E402
from loadtests.options import STRATEGY_ENV, LoadOptions, add_arguments  # noqa: E402
from loadtests.pacing import ArrivalSchedule, run_paced  # noqa: E402
from loadtests.procstats import (  # noqa: E402
    ProcessSample,
    discover_processes,
    pg_url,
    sample_processes,
    summarize_series,
)
from loadtests.report import (  # noqa: E402
    build_report,
    format_consistency,
    format_errors,
    format_processes,
    format_table,
    ordered_ops,
    write_report,
)
from loadtests.shape import STEPS_ENV, step_at, steps_from_env, steps_requested  # noqa: E402
from loadtests.sla import (  # noqa: E402
    QUEUE,
    QUEUE_INTENDED,
    TURN_INTENDED,
    TURN_QUEUED,
    check_slas,
    failed,
)
from loadtests.steps import (  # noqa: E402
    RATES_ENV,
    STEP_S_ENV,
    SteppedSchedule,
    StepRecorder,
    auto_rates,
    format_steps,
    parse_rates,
    step_verdicts,
)
from loadtests.timelines import (  # noqa: E402
    SCENARIO_ENV,
    Play,
    TimelineQueue,
    is_turn,
    load_timelines,
    scenario_requested,
    session_of,
)
from loadtests.virtual_days import (  # noqa: E402
    VirtualDays,
    clock_from_env,
    format_days,
    sample_interval_s,
)
from memharness.progress import Phase, Progress  # noqa: E402
from memharness.scenarios.model import (  # noqa: E402
    EventStep,
    ForgetStep,
    ProbeStep,
    SayStep,
    Step,
)
from reference.clock import Clock, SystemClock  # noqa: E402
from reference.errors import layer_failure  # noqa: E402
from reference.factory import (  # noqa: E402
    build_event_bus,
    build_memory_system,
    describe_backends,
    stop_embedded_servers,
)
from reference.forgetting.events import EventBus  # noqa: E402
from reference.models import Event  # noqa: E402
from reference.settings import Settings  # noqa: E402
from reference.system import TIMING_KEYS, MemorySystem  # noqa: E402

log = logging.getLogger("memharness.load")
# Chroma's HTTP client (a Chroma server by URL) logs every request at INFO.
logging.getLogger("httpx").setLevel(logging.WARNING)
SLA_EXIT_CODE = 3
CONSISTENCY_EXIT_CODE = 4
_EVENT_TYPES = frozenset({"layer", "turn", "wait", "op"})
#: Wall seconds between the serving process's writes of what its engine buffers (user
#: activity, access statistics, sessions touched) for the maintenance process to see.
SERVING_INTERVAL_S = 1.0
#: Rate steps: how long the backlog of the last step may take to drain before the stop.
DRAIN_S = 30.0
CALIBRATION_TURNS = 12


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
    consistency: dict[str, object] | None = None
    #: The cache counts when the memory was released at the end.
    cache_final: tuple[int, int] | None = None
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


_RUNS: weakref.WeakKeyDictionary[Environment, LoadRun] = weakref.WeakKeyDictionary()


def run_for(environment: Environment) -> LoadRun:
    run = _RUNS.get(environment)
    if run is None:
        run = _RUNS[environment] = LoadRun()
    return run


def _runs_users(environment: Environment) -> bool:
    return not isinstance(environment.runner, MasterRunner)


# --------------------------------------------------------------------------- events
@events.init_command_line_parser.add_listener
def _on_parser(parser: Any, **_: Any) -> None:
    add_arguments(parser)


@events.init.add_listener
def _on_init(environment: Environment, **_: Any) -> None:
    """Build and warm the memory where users run, before any turn is timed."""
    run = run_for(environment)
    run.conversations = load_conversations()
    # Locust prints its own statistics table at INFO whatever --loglevel says; the HDR
    # table holds the same figures unrounded, so the table follows --loglevel.
    stats_table = logging.getLogger("locust.stats_logger")
    stats_table.setLevel(max(logging.INFO, logging.getLogger().getEffectiveLevel()))
    if not isinstance(environment.runner, WorkerRunner):  # workers get options at start
        try:
            run.options = LoadOptions.from_parsed(environment.parsed_options)
        except ValueError as exc:
            log.error("invalid option: %s", exc)
            sys.exit(2)
    if not _runs_users(environment):
        gevent.get_hub().loop.update_now()  # see below
        return
    settings = run.settings = Settings()
    run.backends = {**describe_backends(settings), "embedder": settings.embedder}
    with run.progress.start("building and warming the memory") as phase:
        _build_memory(run, settings)
        assert run.system is not None
        warm_user = f"load-{run.token}-warmup"
        for text in render(run.conversations[0], random.Random(0)):
            run.system.turn(user_id=warm_user, session_id=f"{warm_user}-c0", text=text)
        run.system.delete_user_data(user_id=warm_user)
        phase.end(", ".join(f"{k}={v}" for k, v in run.backends.items()))
    if rates_requested() or run.options.sample_every > 0:
        run.roles, run.process_notes = discover_processes(settings)
    if rates_requested():
        _prepare_rate_steps(run, settings)
    # gevent's loop has not run since Locust's import created it, so its clock is as old
    # as the imports and this build; Locust's -t timer, started next, would fire that
    # much early (measured: a 4 s run stopped after 2.8 s on the memory backend).
    gevent.get_hub().loop.update_now()


def _build_memory(run: LoadRun, settings: Settings) -> None:
    """The memory under the run's strategy and clock; the serving side's background
    writer beside a maintenance process; the scenario's timelines and event bus."""
    run.clock, origin = clock_from_env()
    if origin is not None:
        run.days = VirtualDays(run.clock, origin)
    strategy_file = os.environ.get(STRATEGY_ENV, "").strip() or None
    run.system = build_memory_system(settings, clock=run.clock, strategy=strategy_file)
    if strategy_file is not None and run.system.engine is not None:
        chosen = run.system.engine.strategy
        run.strategy = {"name": chosen.name, "fingerprint": chosen.fingerprint()}
        if settings.backend != "memory":  # a maintenance process shares the servers
            from reference.maintenance.serving import ServingBackground

            run.background = ServingBackground(run.system, interval_s=SERVING_INTERVAL_S)
            run.background.start()
    if scenario_requested():
        users = load_timelines(os.environ[SCENARIO_ENV])
        run.timelines = TimelineQueue(users, seed=run.options.seed)
        if settings.backend != "memory":
            run.bus = build_event_bus(settings, clock=run.clock)


def _sample_days(run: LoadRun, days: VirtualDays) -> None:
    """Greenlet: each layer's live records a few times per virtual day (a read)."""
    every = sample_interval_s(getattr(run.clock, "scale", 1.0))
    while not run.stopped and run.system is not None:
        try:
            days.sample(run.system)
        except Exception as exc:  # a sample that fails is a gap, not a failed run
            log.warning("could not sample the record counts: %s", exc)
        gevent.sleep(every)


def _prepare_rate_steps(run: LoadRun, settings: Settings) -> None:
    """Rate steps: find the processes to sample and, for `auto`, calibrate the rates."""
    assert run.system is not None
    rates = parse_rates(os.environ[RATES_ENV])
    if rates is None:  # auto: time turns one at a time, capacity ~ 1 / median turn
        phase = run.progress.start(
            f"calibrating: {CALIBRATION_TURNS} turns one at a time for the rate steps"
        )
        user = f"load-{run.token}-calibration"
        rng = random.Random(1)
        times = []
        while len(times) < CALIBRATION_TURNS:
            for text in render(rng.choice(run.conversations), rng):
                started = time.perf_counter()
                run.system.turn(user_id=user, session_id=f"{user}-c{len(times)}", text=text)
                times.append(time.perf_counter() - started)
        run.system.delete_user_data(user_id=user)
        median = sorted(times)[len(times) // 2]
        rates = auto_rates(median)
        run.calibration = {"turns": len(times), "median_turn_ms": round(median * 1000, 3)}
        phase.end(
            f"median turn {median * 1000:.1f} ms; rate steps "
            f"{', '.join(f'{r:g}' for r in rates)} turns/s"
        )
    run.rates = rates


def _sample_steps(run: LoadRun, recorder: StepRecorder) -> None:
    """Greenlet: sample every process at the timeline's start and at each step boundary."""
    schedule = recorder.schedule
    while schedule.start is None and not run.stopped:
        gevent.sleep(0.01)
    if schedule.start is None:
        return
    recorder.sample(time.perf_counter(), sample_processes(run.roles), run.cache_counts())
    for k in range(len(schedule.rates)):
        phase = run.progress.start(recorder.step_title(k))
        ahead = schedule.boundary(k + 1) - time.perf_counter()
        if ahead > 0:
            gevent.sleep(ahead)
        recorder.sample(time.perf_counter(), sample_processes(run.roles), run.cache_counts())
        phase.end(recorder.step_so_far(k))
    if not run.stopped:  # the shape stops the test once the backlog is served
        run.running = run.progress.start(
            f"serving the last steps' backlog: {recorder.in_flight} turns in flight "
            f"(at most {DRAIN_S:g} s)"
        )


def _sample_periodically(run: LoadRun, every_s: float) -> None:
    """Greenlet: every `every_s` seconds, each process's CPU and RSS (memory bounded?)."""
    started = time.perf_counter()
    while not run.stopped:
        at = time.perf_counter() - started
        run.process_series.append((at, sample_processes(run.roles)))
        gevent.sleep(every_s)
    run.process_series.append((time.perf_counter() - started, sample_processes(run.roles)))


@events.test_start.add_listener
def _on_test_start(environment: Environment, **_: Any) -> None:
    run = run_for(environment)
    run.restart(LoadOptions.from_parsed(environment.parsed_options))
    run.recorder = None
    if run.rates is None and not isinstance(environment.runner, WorkerRunner):
        run.running = run.progress.start(_describe_load(environment, run.options))
    if run.roles and run.options.sample_every > 0 and _runs_users(environment):
        gevent.spawn(_sample_periodically, run, run.options.sample_every)
    if run.days is not None and _runs_users(environment):
        run.days.restart()
        gevent.spawn(_sample_days, run, run.days)
    if run.rates is not None and _runs_users(environment):
        if isinstance(environment.runner, WorkerRunner):
            log.error("rate steps run on a local runner only; this worker offers nothing")
        else:
            step_s = float(os.environ.get(STEP_S_ENV, "20"))
            run.recorder = StepRecorder(SteppedSchedule(run.rates, step_s))
            gevent.spawn(_sample_steps, run, run.recorder)
    if run.options.open_loop and _runs_users(environment):
        index = getattr(environment.runner, "worker_index", 0)
        run.schedule = ArrivalSchedule(
            run.options.rate / run.options.workers,
            arrivals=run.options.arrivals,
            seed=run.options.seed * 1_000_003 + index,
        )
    if isinstance(environment.runner, MasterRunner):
        connected = len(environment.runner.clients)
        if run.options.open_loop and connected != run.options.workers:
            log.warning(
                "open loop: %d workers connected but --expect-workers is %d; each worker "
                "offers --rate/%d, so the total offered rate is off",
                connected,
                run.options.workers,
                run.options.workers,
            )


@events.request.add_listener
def _on_request(
    request_type: str,
    name: str,
    response_time: float,
    context: Any = None,
    exception: BaseException | None = None,
    **_: Any,
) -> None:
    env = context.get("memh_env") if isinstance(context, dict) else None
    if request_type in _EVENT_TYPES and env is not None:
        run = run_for(env)
        step = context.get("memh_step")
        recorder = run.recorder if step is not None else None
        if exception is not None:  # an error, not a fast success: kept apart
            run.errors.record(name, response_time, describe(exception))
            if recorder is not None:
                recorder.record_error(step, name)
            return
        run.hists.record_ms(name, response_time)
        if run.days is not None:
            run.days.record_ms(name, response_time)
        if recorder is not None:
            recorder.record_ms(step, name, response_time)


@events.test_stop.add_listener
def _on_test_stop(environment: Environment, **_: Any) -> None:
    """The users are stopped: check the servers' consistency and erase the run's users
    here, while Locust's own greenlets (CSV writer) still run, not at `quitting`."""
    run = run_for(environment)
    run.stopped = True
    run.stopped_at = time.time()
    if run.running is not None:
        run.running.end()
        run.running = None
    _stop_background(run)  # its last write comes before the erasure, not after it
    if run.system is not None and (run.options.check_consistency or not run.options.keep_data):
        with run.progress.start("checking the servers' consistency, erasing the load's users"):
            _check_and_erase(run, run.system)


def _describe_load(environment: Environment, options: LoadOptions) -> str:
    """The progress title of a load without rate steps: its users, mode and run time."""
    parsed = environment.parsed_options
    if steps_requested():
        shape = f"steps {os.environ.get(STEPS_ENV)}"
    else:
        shape = f"{getattr(parsed, 'num_users', None) or 1} users"
    rate = f" at {options.rate:g} turns/s" if options.rate else ""
    run_time = getattr(parsed, "run_time", None)
    until = f" for {run_time} s" if run_time and not steps_requested() else ""
    return f"load: {shape}, {options.mode}{rate}{until}"


@events.report_to_master.add_listener
def _on_report_to_master(client_id: str, data: dict[str, Any], **_: Any) -> None:
    """Worker: ship the histograms recorded since the last report, then start afresh."""
    for env, run in list(_RUNS.items()):
        if isinstance(env.runner, WorkerRunner):
            data["memh_hdr"] = run.hists.take_encoded()
            data["memh_errors"] = run.errors.take_encoded()
            data["memh_final"] = run.stopped
            data["memh_backends"] = run.backends
            data["memh_cache"] = list(run.cache_counts())


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    """Master: add a worker's histogram deltas into the run's histograms."""
    for env, run in list(_RUNS.items()):
        if isinstance(env.runner, MasterRunner) and "memh_hdr" in data:
            run.hists.merge_encoded(data["memh_hdr"])
            run.errors.merge_encoded(data.get("memh_errors") or {})
            run.workers.add(client_id)
            run.backends = data.get("memh_backends") or run.backends
            run.worker_cache[client_id] = tuple(data.get("memh_cache") or (0, 0))
            if data.get("memh_final"):
                run.final_reports.add(client_id)


@events.quitting.add_listener
def _on_quitting(environment: Environment, **_: Any) -> None:
    run = run_for(environment)
    _stop_background(run)
    if run.bus is not None:
        run.bus.dispose()
        run.bus = None
    if run.system is not None:
        run.cache_final = run.cache_counts()
        try:
            run.system.dispose()
        except Exception as exc:  # a dead server: the report still has to be written
            log.warning("could not release the memory's connections: %s", exc)
        run.system = None
    if run.settings is not None:
        # Now, not at the interpreter's exit: by then Locust has closed its CSV files but
        # not stopped their writer greenlet, which wakes as soon as a server's stop
        # yields to gevent (a subprocess, a sleep) and writes to the closed files.
        stop_embedded_servers(run.settings)
    if not isinstance(environment.runner, WorkerRunner) and run.started_at is not None:
        with run.progress.start("writing the reports"):
            _report(environment, run)


def _stop_background(run: LoadRun) -> None:
    """Write what the engine buffers one last time and stop the serving side's writer."""
    if run.background is not None:
        try:
            run.background.stop()
        except Exception as exc:  # a dead server: the report still has to be written
            log.warning("could not stop the serving background writer: %s", exc)
        run.background = None


def _pg_url_of(settings: Settings | None) -> str | None:
    """The PostgreSQL server the LTM layer uses, if any (none on the memory backend)."""
    if settings is None or settings.backend == "memory":
        return None
    return pg_url(settings)


def _check_and_erase(run: LoadRun, system: MemorySystem) -> None:
    """The servers' consistency after the run, the erasure of its users, and that erasure's
    completeness (`loadtests/consistency.py`); logged, and kept for the report.

    On real servers the check and the erasure go through a memory of their own, on new
    connections: Locust stops its users by killing their greenlets, and a turn killed in
    the middle of a query can leave the run's connection pool without a usable connection
    for seconds. The servers' state is what is checked, as another client would see it.
    """
    settings = run.settings
    checker: MemorySystem | None = system
    reports: list[ConsistencyReport] = []
    if settings is not None and settings.backend != "memory":
        connect = ConsistencyReport("consistency")
        fresh: list[MemorySystem] = []
        connect.run(
            "connect",
            lambda: fresh.append(
                build_memory_system(settings, clock=run.clock, embedder=system.embedder)
            ),
        )
        checker = fresh[0] if fresh else None
        if checker is None:
            reports.append(connect)
    try:
        if checker is not None:
            _check_and_erase_with(run, checker, reports)
    finally:
        if checker is not None and checker is not system:
            try:
                checker.dispose()
            except Exception as exc:  # a dead server: the report still has to be written
                log.warning("could not release the checker's connections: %s", exc)
    if reports:
        run.consistency = {report.name: report.as_dict() for report in reports}
    for report in reports:
        (log.info if report.ok else log.error)("%s", report.summary())


def _check_and_erase_with(
    run: LoadRun, system: MemorySystem, reports: list[ConsistencyReport]
) -> None:
    if run.options.check_consistency:
        reports.append(
            check_consistency(
                system,
                user_ids=run.user_ids,
                marker=f"load-{run.token}-",
                pg_url=_pg_url_of(run.settings),
                sessions_outlived=run.days is not None,
            )
        )
    if not run.options.keep_data:
        try:
            for user_id in run.user_ids:
                system.delete_user_data(user_id=user_id)
        except Exception as exc:  # a dead server or a connection broken by the stop
            log.warning("could not erase the load users' records: %s", exc)
        else:
            if run.options.check_consistency:
                reports.append(check_erased(system, user_ids=run.user_ids))


def _report(environment: Environment, run: LoadRun) -> None:
    """Master or local runner: the HDR table, errors, load_hdr.json, and the exit code."""
    options = run.options
    errors = run.errors.counts()
    verdicts = check_slas(
        run.hists, options.slas, measure_as={"turn": options.turn_measure}, errors=errors
    )
    broken = failed(verdicts, gate=options.sla_gate)
    missing = sorted(run.workers - run.final_reports)
    steps = os.environ.get(STEPS_ENV) if steps_requested() else None
    counts = list(run.worker_cache.values()) if run.workers else [run.cache_counts()]
    hits, misses = sum(c[0] for c in counts), sum(c[1] for c in counts)
    meta: dict[str, object] = {
        "run_id": options.run_id,
        "mode": options.mode,
        "rate_per_s": options.rate or None,
        "arrivals": options.arrivals if options.open_loop else None,
        "seed": options.seed,
        "users": None if steps else getattr(environment.parsed_options, "num_users", None),
        "steps": steps,
        "think_time_s": None if options.open_loop or options.rate else list(options.think_time),
        "started_at": run.started_at,
        "finished_at": time.time(),
        "stopped_at": run.stopped_at,
        "run_s": round(run.stopped_at - run.started_at, 3) if run.stopped_at else None,
        "runner": type(environment.runner).__name__,
        "workers": sorted(run.workers),
        "workers_without_final_report": missing,
        "backends": run.backends,
        "embedding_cache": {
            "hits": hits,
            "misses": misses,
            "hit_ratio": round(hits / (hits + misses), 4) if hits + misses else None,
        },
        "sla_gate": options.sla_gate,
        "processes": summarize_series(run.process_series) if run.process_series else None,
        "process_notes": run.process_notes or None,
        "consistency": run.consistency,
        "strategy": run.strategy["name"] if run.strategy else None,
        "strategy_fingerprint": run.strategy["fingerprint"] if run.strategy else None,
        "time_scale": getattr(run.clock, "scale", None),
        "scenario": None
        if run.timelines is None
        else run.timelines.document(os.environ.get(SCENARIO_ENV)),
        "virtual_days": run.days.document() if run.days is not None else None,
    }
    report = build_report(run.hists, verdicts, failed=broken, meta=meta, errors=run.errors)
    path = write_report(report, Path(options.out_dir) / options.run_id)
    summaries = run.hists.summaries(ordered_ops(run.hists.ops))
    print(f"\nHDR latency per operation (run {options.run_id}, {meta['mode']}):", flush=True)
    print(format_table(summaries, verdicts, errors), flush=True)
    for verdict in verdicts:
        print("  " + verdict.message, flush=True)
    if run.recorder is not None:
        print("  (rate steps: these verdicts mix all steps; each step is judged below)", flush=True)
    for line in format_errors(report):
        print("  " + line, flush=True)
    if hits + misses:
        print(f"  embedding cache: {hits} hits, {misses} misses", flush=True)
    for line in format_processes(meta["processes"]):
        print("  " + line, flush=True)
    for line in format_consistency(run.consistency):
        print("  " + line, flush=True)
    if run.days is not None:
        print(format_days(meta["virtual_days"]), flush=True)  # type: ignore[arg-type]
    print(f"HDR report: {path}", flush=True)
    # Rate steps are judged step by step: the verdicts above mix light and overloaded steps.
    steps_held = True if run.recorder is None else _report_steps(run, run.recorder, meta)
    if missing:
        log.warning("no final HDR report from workers %s: their last seconds are missing", missing)
    if not steps_held:
        environment.process_exit_code = SLA_EXIT_CODE
    elif broken and run.recorder is None:
        for verdict in broken:
            log.error("SLA failed: %s", verdict.message)
        environment.process_exit_code = SLA_EXIT_CODE
    if run.consistency and any(part["problem_count"] for part in run.consistency.values()):
        environment.process_exit_code = CONSISTENCY_EXIT_CODE


def _report_steps(run: LoadRun, recorder: StepRecorder, meta: dict[str, object]) -> bool:
    """Rate steps: steps.json, a table of offered vs achieved rate and turn latency, and a
    note per step that broke an SLA; False when no step held them (not even the lightest:
    the capacity is below every rate offered)."""
    extra = {
        "processes": run.roles,
        "process_notes": run.process_notes,
        "calibration": run.calibration or None,
    }
    options = run.options
    document = recorder.document(
        {**meta, **extra}, slas=options.slas, measure_as={"turn": options.turn_measure}
    )
    path = recorder.write(Path(run.options.out_dir) / run.options.run_id, document)
    print("\n" + format_steps(document), flush=True)
    notes, held = step_verdicts(document)
    for note in notes:
        print("  " + note, flush=True)
    print(f"steps report: {path}", flush=True)
    if not held:
        log.error(
            "SLA failed at every rate step, even %g turns/s: the capacity is below the rates "
            "offered (steps.json: each step's verdicts)",
            min(recorder.schedule.rates),
        )
    return held


# --------------------------------------------------------------------------- the user
class ConversationUser(User):
    """A user who plays scripted conversations, one turn per task, one session each; or,
    with a scenario (`loadtests/timelines.py`), scenario users' timelines, each play as
    a new memory user, its probes and events played right before the turn after them.

    Closed loop: a think time between turns, or pacing to its share of --rate. Open loop
    (--open-loop): no wait; each turn claims the next intended start from the process's
    arrival schedule, so users are the concurrency that serves a fixed arrival rate.
    """

    def on_start(self) -> None:
        self.load = run_for(self.environment)
        self.user_id = self.load.new_user_id()
        self.rng = random.Random(f"{self.load.options.seed}/{self.user_id}")
        self.pending: list[str | Step] = []
        self.session_id = ""
        self.conversations_played = 0
        self.task_started = time.perf_counter()
        self.step: int | None = None
        self.play: Play | None = None

    def wait_time(self) -> float:
        options = self.load.options
        if options.open_loop:
            return 0.0
        if options.rate > 0:  # closed-loop pacing: this user's share of the rate
            users = max(1, self.environment.runner.user_count if self.environment.runner else 1)
            interval = users * options.workers / options.rate
            return max(0.0, interval - (time.perf_counter() - self.task_started))
        return self.rng.uniform(*options.think_time)

    @task
    def say(self) -> None:
        self.task_started = time.perf_counter()
        if not self.pending:
            self._next_conversation()
        while self.pending and not is_turn(self.pending[0]):
            self._call(self.pending.pop(0))
        if not self.pending:
            return
        if self.load.recorder is not None:
            self._stepped_turn(self.load.recorder)
            return
        item = self.pending.pop(0)
        if self.load.schedule is None:
            self._play(item)
            return
        error, paced = run_paced(self.load.schedule, lambda: self._play(item))
        self._fire("wait", QUEUE_INTENDED, paced.lag_ms)
        self._fire("turn", TURN_INTENDED, paced.response_ms, error)

    def _stepped_turn(self, recorder: StepRecorder) -> None:
        """Rate steps: claim the next intended start (None: the timeline is over, idle)."""
        claim = recorder.schedule.claim(time.perf_counter())
        if claim is None:
            gevent.sleep(0.1)
            return
        intended, self.step = claim
        recorder.in_flight += 1
        try:
            ahead = intended - time.perf_counter()
            if ahead > 0:
                gevent.sleep(ahead)
            started = time.perf_counter()
            error = self._play(self.pending.pop(0))
            finished = time.perf_counter()
            self._fire("wait", QUEUE_INTENDED, max(0.0, started - intended) * 1000.0)
            self._fire("turn", TURN_INTENDED, (finished - intended) * 1000.0, error)
            recorder.finished(finished, ok=error is None, step=self.step)
        finally:
            recorder.in_flight -= 1

    def _next_conversation(self) -> None:
        """The next conversation: a built-in one in a new session, or the next scenario
        user's timeline as a new memory user."""
        timelines = self.load.timelines
        if timelines is not None:
            if self.conversations_played:
                self.user_id = self.load.new_user_id()
            self.play = timelines.take(self.user_id)
            self.pending = list(self.play.steps)
        else:
            conversation = self.rng.choice(self.load.conversations)
            self.pending = list(render(conversation, self.rng))
            self.session_id = f"{self.user_id}-c{self.conversations_played}"
        self.conversations_played += 1

    def _play(self, item: str | Step) -> Exception | None:
        """One turn: a built-in utterance, a scenario's say or forget command."""
        if isinstance(item, str):
            return self._turn(item, self.session_id)
        assert isinstance(item, SayStep | ForgetStep)
        assert self.load.timelines is not None and self.play is not None
        session = session_of(self.user_id, item)
        if isinstance(item, ForgetStep):
            error = self._turn(item.forget, session)
        else:
            error = self._turn(item.say, session, dict(item.metadata) or None)
        self.load.timelines.count(self.play, item)  # not reached when the stop kills it
        return error

    def _call(self, step: str | Step) -> None:
        """A scenario's probe (a recall) or business event (published), timed as an op."""
        system, load = self.load.system, self.load
        assert system is not None and load.timelines is not None
        assert isinstance(step, ProbeStep | EventStep) and self.play is not None
        name = "recall" if isinstance(step, ProbeStep) else "event"
        if isinstance(step, EventStep):
            # Counted as it is sent: the stop can kill this user after Redis took the
            # event and before the reply, and the maintenance process then applies it.
            load.timelines.count(self.play, step)
        with load.turn_slot:  # --serial: one call at a time, as for turns
            self._timed_call(name, step, system)
        if isinstance(step, ProbeStep):
            load.timelines.count(self.play, step)

    def _timed_call(self, name: str, step: ProbeStep | EventStep, system: MemorySystem) -> None:
        load = self.load
        started = time.perf_counter()
        try:
            if isinstance(step, ProbeStep):
                system.recall(
                    user_id=self.user_id,
                    session_id=session_of(self.user_id, step),
                    query=step.probe,
                    k=step.k,
                )
            else:
                event = Event(
                    name=step.event,
                    user_id=self.user_id,
                    at=system.clock.now(),
                    payload=dict(step.payload),
                )
                if load.bus is not None:
                    load.bus.publish(event)
                else:  # the in-memory backend: no other process sees these stores
                    system.handle_event(event)
        except Exception as exc:
            self._fire("op", name, (time.perf_counter() - started) * 1000.0, exc)
        else:
            self._fire("op", name, (time.perf_counter() - started) * 1000.0)

    def _turn(
        self, text: str, session_id: str, metadata: dict[str, Any] | None = None
    ) -> Exception | None:
        """One turn; fires its events. On failure, returns the error after firing it as a
        failure of the layer that raised and of the turn (the layers that finished before
        it are fired as the successes they were)."""
        system = self.load.system
        assert system is not None, "the memory is built at init in every process with users"
        ready = time.perf_counter()
        with self.load.turn_slot:
            started = time.perf_counter()
            try:
                result = system.turn(
                    user_id=self.user_id, session_id=session_id, text=text, metadata=metadata
                )
            except Exception as exc:
                finished = time.perf_counter()
                where = layer_failure(exc)
                if where is not None:
                    for key, ms in where.finished_ms.items():
                        self._fire("layer", key, ms)
                    self._fire("layer", where.layer, where.layer_ms, exc)
                self._fire("turn", "turn", (finished - started) * 1000.0, exc)
                if self.load.options.serial:
                    self._fire("wait", QUEUE, (started - ready) * 1000.0)
                    self._fire("turn", TURN_QUEUED, (finished - ready) * 1000.0, exc)
                return exc
        finished = time.perf_counter()
        for key in TIMING_KEYS:
            self._fire("turn" if key == "turn" else "layer", key, result.timings_ms[key])
        if self.load.options.serial:
            self._fire("wait", QUEUE, (started - ready) * 1000.0)
            self._fire("turn", TURN_QUEUED, (finished - ready) * 1000.0)
        return None

    def _fire(
        self, request_type: str, name: str, ms: float, exception: BaseException | None = None
    ) -> None:
        self.environment.events.request.fire(
            request_type=request_type,
            name=name,
            response_time=ms,
            response_length=0,
            exception=exception,
            context={"memh_env": self.environment, "memh_step": self.step},
        )
