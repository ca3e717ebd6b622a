"""The end of a load run: the servers' consistency check and the erasure of the run's
users, then the HDR report, the SLA verdicts and the process's exit code."""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

from locust.env import Environment

from loadtests.consistency import ConsistencyReport, check_consistency, check_erased
from loadtests.procstats import pg_url, summarize_series
from loadtests.report import (
    build_report,
    format_consistency,
    format_errors,
    format_processes,
    format_table,
    ordered_ops,
    write_report,
)
from loadtests.run import CONSISTENCY_EXIT_CODE, SLA_EXIT_CODE, LoadRun
from loadtests.service_split import format_split, split_document
from loadtests.shape import STEPS_ENV, steps_requested
from loadtests.steps import StepRecorder, format_steps, step_verdicts
from loadtests.target_run import NOT_REACHABLE
from loadtests.timelines import SCENARIO_ENV
from loadtests.virtual_days import format_days
from memharness.verdict.histograms import check_slas, failed
from reference.factory import build_memory_system
from reference.monitoring import MemoryCounters, exposition
from reference.settings import Settings
from reference.system import MemorySystem

log = logging.getLogger("memharness.load")


def _pg_url_of(settings: Settings | None) -> str | None:
    """The PostgreSQL server the LTM layer uses, if any (none on the memory backend)."""
    if settings is None or settings.backend == "memory":
        return None
    return pg_url(settings)


def check_and_erase(run: LoadRun, system: MemorySystem) -> None:
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


def report_run(environment: Environment, run: LoadRun) -> None:
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
        "run_s": round(run.stopped_at - run.started_at, 3)
        if run.stopped_at and run.started_at is not None
        else None,
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
    target = run.backends.get("target")  # on a master: as its workers reported it
    if target is not None:
        meta["target"] = target
        meta["service_split"] = split_document(run.hists)
        meta["consistency_note"] = NOT_REACHABLE
    report = build_report(run.hists, verdicts, failed=broken, meta=meta, errors=run.errors)
    path = write_report(report, Path(options.out_dir) / options.run_id)
    summaries = run.hists.summaries(ordered_ops(run.hists.ops))
    print(f"\nHDR latency per operation (run {options.run_id}, {meta['mode']}):", flush=True)
    print(format_table(summaries, verdicts, errors), flush=True)
    for verdict in verdicts:
        print("  " + verdict.message, flush=True)
    if run.recorder is not None:
        print("  (rate steps: these verdicts mix all steps; each step is judged below)", flush=True)
    if target is not None:
        print("", flush=True)
        for line in format_split(meta["service_split"], verdicts, target):  # type: ignore[arg-type]
            print(line, flush=True)
    for line in format_errors(report):
        print("  " + line, flush=True)
    if hits + misses:
        print(f"  embedding cache: {hits} hits, {misses} misses", flush=True)
    for line in format_processes(meta["processes"]):
        print("  " + line, flush=True)
    for line in format_consistency(run.consistency):
        print("  " + line, flush=True)
    if target is not None:
        print(f"  servers' consistency: not checked ({NOT_REACHABLE})", flush=True)
    if run.days is not None:
        print(format_days(meta["virtual_days"]), flush=True)  # type: ignore[arg-type]
    print(f"HDR report: {path}", flush=True)
    prom = write_counters(run, path.parent)
    if prom is not None:
        print(f"monitoring counters (Prometheus text): {prom}", flush=True)
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


def write_counters(run: LoadRun, run_dir: Path) -> Path | None:
    """`metrics.prom`: the serving processes' monitoring counters (`reference.
    monitoring`), added up over the workers, in Prometheus' text format; None when no
    process sent any."""
    states = list(run.worker_counters.values()) if run.workers else [run.counters_final]
    states = [s for s in states if s]
    if not states:
        return None
    counters = MemoryCounters(run.clock)
    for state in states:
        counters.add_state(state)
    labels = {"strategy": run.strategy["name"]} if run.strategy else {}
    path = run_dir / "metrics.prom"
    path.write_text(exposition(counters, labels), encoding="utf-8")
    return path


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
