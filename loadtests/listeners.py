"""The load test's Locust event listeners: build and warm the memory at init, start the
samplers at the test's start, record every request into the run's HDR histograms or its
error log, ship and merge histograms between workers and master, check and erase at the
stop, and write the reports when Locust quits. Importing this module registers them."""

from __future__ import annotations

import logging
import os
import random
import sys
import time
from typing import Any

import gevent
from locust import events
from locust.env import Environment
from locust.runners import MasterRunner, WorkerRunner

from loadtests.conversations import load_conversations, render
from loadtests.end_of_run import check_and_erase, report_run
from loadtests.errors import describe
from loadtests.options import STRATEGY_ENV, LoadOptions, add_arguments
from loadtests.pacing import ArrivalSchedule
from loadtests.procstats import discover_processes, generator_apart_roles, sample_processes
from loadtests.run import (
    CALIBRATION_TURNS,
    DRAIN_S,
    EVENT_TYPES,
    RUNS,
    SERVING_INTERVAL_S,
    LoadRun,
    rates_requested,
    run_for,
    runs_users,
)
from loadtests.shape import STEPS_ENV, steps_requested
from loadtests.steps import SteppedSchedule, StepRecorder, interleave, parse_rates
from loadtests.target_run import erase_target_users, is_target, prepare_target
from loadtests.timelines import SCENARIO_ENV, TimelineQueue, load_timelines, scenario_requested
from loadtests.virtual_days import VirtualDays, clock_from_env, sample_interval_s
from memharness.load_contract import (
    RATES_ENV,
    REPEATS_ENV,
    SINGLE_CORE,
    STEP_S_ENV,
    auto_rates,
)
from reference.factory import (
    build_event_bus,
    build_memory_system,
    describe_backends,
    stop_embedded_servers,
)
from reference.settings import Settings

log = logging.getLogger("memharness.load")


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
    if not runs_users(environment):
        gevent.get_hub().loop.update_now()  # see below
        return
    if is_target(environment):
        _init_target(run, environment)
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
        _prepare_rate_steps(run)
    # gevent's loop has not run since Locust's import created it, so its clock is as old
    # as the imports and this build; Locust's -t timer, started next, would fire that
    # much early (measured: a 4 s run stopped after 2.8 s on the memory backend).
    gevent.get_hub().loop.update_now()


def _init_target(run: LoadRun, environment: Environment) -> None:
    """A --target run: check and warm the service instead of building a memory."""
    try:
        prepare_target(run, environment)
    except ValueError as exc:
        log.error("the service under load: %s", exc)
        sys.exit(2)
    run.roles, run.process_notes = generator_apart_roles()
    if rates_requested():
        _prepare_rate_steps(run)
    gevent.get_hub().loop.update_now()  # as after building a memory (see above)


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


def _prepare_rate_steps(run: LoadRun) -> None:
    """Rate steps: for `auto`, calibrate the rates on the memory or the service: X_max =
    cores / D from the CPU the calibration turns cost every sampled process (1 / median
    turn time when no process can be sampled); then each rate `MEMH_LOAD_REPEATS` times."""
    memory = run.target or run.system
    assert memory is not None
    rates = parse_rates(os.environ[RATES_ENV])
    if rates is None:
        phase = run.progress.start(
            f"calibrating: {CALIBRATION_TURNS} turns one at a time for the rate steps"
        )
        user = f"load-{run.token}-calibration"
        rng = random.Random(1)
        times: list[float] = []
        before = sample_processes(run.roles)
        while len(times) < CALIBRATION_TURNS:
            for text in render(rng.choice(run.conversations), rng):
                started = time.perf_counter()
                memory.turn(user_id=user, session_id=f"{user}-c{len(times)}", text=text)
                times.append(time.perf_counter() - started)
        after = sample_processes(run.roles)
        memory.delete_user_data(user_id=user)
        median = sorted(times)[len(times) // 2]
        per_turn = {
            r: (after[r].cpu_s - before[r].cpu_s) / len(times) for r in after if r in before
        }
        per_turn.pop("generator", None)  # the load generator is not the system under test
        cores = len(os.sched_getaffinity(0))
        demand = sum(per_turn.values())
        # The utilisation law: X <= cores / D, and X <= 1 / D_k for a one-core process.
        bounds = [cores / demand] if demand > 0 else [1.0 / max(median, 1e-4)]
        bounds += [1.0 / d for r, d in per_turn.items() if r in SINGLE_CORE and d > 0]
        x_max = min(bounds)
        rates = auto_rates(x_max)
        run.calibration = {
            "turns": len(times),
            "median_turn_ms": round(median * 1000, 3),
            "cpu_ms_per_turn": round(demand * 1000, 3),
            "cores": cores,
            "x_max": round(x_max, 3),
            "cpu_ms_per_turn_by_process": {r: round(d * 1000, 3) for r, d in per_turn.items()},
            "from": "min(cores / D, 1 / D of a one-core process)"
            if demand > 0
            else "1 / median turn (no process sampled)",
        }
        phase.end(
            f"D {demand * 1000:.1f} ms CPU per turn, X_max {x_max:.1f}/s on {cores} cores; "
            f"rate steps {', '.join(f'{r:g}' for r in rates)} turns/s"
        )
    repeats = int(os.environ.get(REPEATS_ENV) or 1)
    run.rates = interleave(rates, repeats)


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
    if run.roles and run.options.sample_every > 0 and runs_users(environment):
        gevent.spawn(_sample_periodically, run, run.options.sample_every)
    if run.days is not None and runs_users(environment):
        run.days.restart()
        gevent.spawn(_sample_days, run, run.days)
    if run.rates is not None and runs_users(environment):
        if isinstance(environment.runner, WorkerRunner):
            log.error("rate steps run on a local runner only; this worker offers nothing")
        else:
            step_s = float(os.environ.get(STEP_S_ENV, "20"))
            run.recorder = StepRecorder(SteppedSchedule(run.rates, step_s))
            gevent.spawn(_sample_steps, run, run.recorder)
    if run.options.open_loop and runs_users(environment):
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
    if request_type in EVENT_TYPES and env is not None:
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
    if run.target is not None:
        with run.progress.start("erasing the load's users through the service"):
            erase_target_users(run)
    if run.system is not None and (run.options.check_consistency or not run.options.keep_data):
        with run.progress.start("checking the servers' consistency, erasing the load's users"):
            check_and_erase(run, run.system)


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
    for env, run in list(RUNS.items()):
        if isinstance(env.runner, WorkerRunner):
            data["memh_hdr"] = run.hists.take_encoded()
            data["memh_errors"] = run.errors.take_encoded()
            data["memh_final"] = run.stopped
            data["memh_backends"] = run.backends
            data["memh_cache"] = list(run.cache_counts())
            data["memh_counters"] = run.counters_state()


@events.worker_report.add_listener
def _on_worker_report(client_id: str, data: dict[str, Any], **_: Any) -> None:
    """Master: add a worker's histogram deltas into the run's histograms."""
    for env, run in list(RUNS.items()):
        if isinstance(env.runner, MasterRunner) and "memh_hdr" in data:
            run.hists.merge_encoded(data["memh_hdr"])
            run.errors.merge_encoded(data.get("memh_errors") or {})
            run.workers.add(client_id)
            run.backends = data.get("memh_backends") or run.backends
            run.worker_cache[client_id] = tuple(data.get("memh_cache") or (0, 0))
            run.worker_counters[client_id] = data.get("memh_counters") or {}
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
        run.counters_final = run.counters_state()
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
            report_run(environment, run)


def _stop_background(run: LoadRun) -> None:
    """Write what the engine buffers one last time and stop the serving side's writer."""
    if run.background is not None:
        try:
            run.background.stop()
        except Exception as exc:  # a dead server: the report still has to be written
            log.warning("could not stop the serving background writer: %s", exc)
        run.background = None
