"""`memharness load --strategy`: the same load once per strategy, each beside its maintenance.

For each strategy in turn, on the same offered load and seed:

1. the strategy is written to `<run-id>-<strategy>/strategy.yaml` (overrides applied),
   which the Locust process (`MEMH_LOAD_STRATEGY`) and the maintenance process load;
2. `memharness maintain --strategy FILE --figures maintenance.json` starts beside the
   load as its own process on the same servers, in the strategy's own namespace
   (`MEMH_PREFIX`), on the same clock (`--time-scale` with the same origins);
3. the Locust run plays the scenario's timelines (`loadtests/timelines.py`); the serving
   side writes what its engine buffers for the maintenance process to see
   (`ServingBackground`) and never sweeps;
4. the maintenance process is stopped with SIGTERM (it finishes its batch and writes its
   figures); its figures, the strategy and the CPU seconds per turn of every process are
   added to the run's `load_hdr.json` (and `steps.json` with `--rates`);
5. `<run-id>/load_strategies.json` is rewritten (atomically) with the row of every
   strategy run so far, so a strategy that fails leaves the earlier ones intact.

On the embedded default the servers are started here, afresh for each strategy's run
(`fresh_servers`): the embedded Redis and PostgreSQL, and a Chroma server (the embedded
Chroma client cannot be shared by two processes), in a directory of their own that is
removed after the run; their URLs go to both processes as MEMH_REDIS_URL, MEMH_PG_URL
and MEMH_CHROMA_URL. So every run starts from the same empty servers: neither the
strategy run before it nor an earlier load leaves it deleted records, dead rows or a
longer log to work through (a layer given by URL is the user's, and is shared). On the
in-memory backend no other process can share the stores: no maintenance process runs
(`maintenance` is null), the serving process applies events itself, and records expire
lazily on read.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memharness.child_process import stop_process
from memharness.load_contract import MAINTENANCE_PID_ENV
from memharness.load_results import (
    annotate_results,
    format_summary,
    read_json,
    summary_row,
    write_json,
)
from memharness.sim.plan import StrategySpec

__all__ = [
    "MAINTAIN_STOP_S",
    "StrategyLoad",
    "fresh_servers",
    "run_dir_name",
    "run_strategy_loads",
    "shared_servers",
]

#: How long the maintenance process may take to finish its batch after SIGTERM.
MAINTAIN_STOP_S = 60.0
#: Seconds between the maintenance process's figures files (the last one on exit).
FIGURES_EVERY_S = 5.0


def run_dir_name(run_id: str, label: str) -> str:
    """`<run-id>-<strategy>`, the label's characters outside [A-Za-z0-9_.-] as '_'."""
    return f"{run_id}-{re.sub(r'[^A-Za-z0-9_.-]+', '_', label).strip('_')}"


@dataclass(frozen=True)
class StrategyLoad:
    """What one strategy's load run needs besides the Locust command."""

    spec: StrategySpec
    run_id: str
    run_dir: Path
    prefix: str


@contextmanager
def shared_servers(
    settings: Any, data_dir: Path, *, private_chroma: bool = False
) -> Iterator[dict[str, str]]:
    """Start the embedded servers both processes share, when a layer has no URL; yields
    the MEMH_* URLs to pass on. Nothing for the in-memory backend. `private_chroma`: the
    Chroma server behind a Unix socket only its owner reaches
    (`reference.stm.chroma_private`)."""
    if settings.backend == "memory":
        yield {}
        return
    urls: dict[str, str] = {}
    handles: list[Any] = []
    try:
        if settings.redis_url is None:
            from reference.session.embedded_redis import start_embedded_redis

            urls["MEMH_REDIS_URL"] = start_embedded_redis(data_dir / "redis").url
        if settings.pg_url is None:
            from reference.ltm.embedded_pg import start_embedded_postgres

            pg = start_embedded_postgres(data_dir / "pg")
            handles.append(pg)
            urls["MEMH_PG_URL"] = str(pg.url)
        if settings.chroma_url is None:
            from reference.stm.chroma_server import start_chroma_server

            chroma = start_chroma_server(data_dir / "chroma-server", private=private_chroma)
            handles.append(chroma)
            urls["MEMH_CHROMA_URL"] = chroma.url
        yield urls
    finally:
        for handle in reversed(handles):
            stop = getattr(handle, "stop", None) or getattr(handle, "close", None)
            if stop is not None:
                stop()


@contextmanager
def fresh_servers(settings: Any, data_dir: Path) -> Iterator[dict[str, str]]:
    """`shared_servers` in `data_dir`, a directory of their own, empty at the start and
    removed at the end."""
    shutil.rmtree(data_dir, ignore_errors=True)  # a run killed before it cleaned up
    data_dir.mkdir(parents=True)
    try:
        with shared_servers(settings, data_dir) as urls:
            yield urls
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def _start_maintenance(
    load: StrategyLoad,
    strategy_file: Path,
    env: Mapping[str, str],
    clock: Mapping[str, float] | None,
) -> subprocess.Popen[bytes]:
    command = [
        sys.executable,
        "-m",
        "memharness.cli",
        "maintain",
        "--strategy",
        str(strategy_file),
        "--figures",
        str(load.run_dir / "maintenance.json"),
        "--figures-every",
        f"{FIGURES_EVERY_S:g}",
        "--replica",
        f"{load.run_id}-m0",
    ]
    if clock is not None:
        command += [
            "--time-scale",
            repr(clock["scale"]),
            "--clock-origin",
            repr(clock["origin"]),
            "--wall-origin",
            repr(clock["wall_origin"]),
        ]
    log = (load.run_dir / "maintenance.log").open("wb")
    try:
        return subprocess.Popen(command, env=dict(env), stdout=log, stderr=subprocess.STDOUT)
    finally:
        log.close()  # the child holds its own descriptor


def _stop_maintenance(process: subprocess.Popen[bytes]) -> int | None:
    """SIGTERM, then wait for the batch in hand and the figures; SIGKILL after the
    wait. Returns the exit code (None: it had to be killed)."""
    return stop_process(process, MAINTAIN_STOP_S)


def run_strategy_loads(
    loads: Sequence[StrategyLoad],
    *,
    summary_dir: Path,
    locust_command: Callable[[StrategyLoad], list[str]],
    env: Mapping[str, str],
    servers: Callable[[StrategyLoad], AbstractContextManager[dict[str, str]]],
    maintenance: bool,
    time_scale: float | None,
    echo: Callable[[str], None],
    apart: bool = False,
) -> int:
    """Each strategy's load in turn (see the module docstring); returns the first
    non-zero exit code of a strategy's run, else 0. `servers`: the servers of one run,
    their MEMH_* URLs yielded. `apart`: the memory runs as `memharness serve` (its
    maintenance beside it) in a process of its own, driven over HTTP by the Locust
    process (`memharness.load_apart`)."""
    summary_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    first_error = 0
    for load in loads:
        with servers(load) as urls:
            run_env = {**env, **urls}
            if apart:
                row = _run_apart(load, locust_command, run_env, echo)
            else:
                row = _run_one(load, locust_command, run_env, maintenance, time_scale, echo)
        rows.append(row)
        write_json(summary_dir / "load_strategies.json", {"kind": "load_strategies", "runs": rows})
        if not first_error:
            first_error = int(row["exit_code"] or 0) or (0 if row["status"] == "ok" else 1)
    echo(format_summary(rows))
    echo(f"memharness load: {summary_dir / 'load_strategies.json'}")
    return first_error


def _run_one(
    load: StrategyLoad,
    locust_command: Callable[[StrategyLoad], list[str]],
    base_env: Mapping[str, str],
    maintenance: bool,
    time_scale: float | None,
    echo: Callable[[str], None],
) -> dict[str, Any]:
    load.run_dir.mkdir(parents=True, exist_ok=True)
    strategy_file = load.run_dir / "strategy.yaml"
    strategy_file.write_text(load.spec.strategy.to_yaml(), encoding="utf-8")
    env = {**base_env, "MEMH_PREFIX": load.prefix, "MEMH_LOAD_STRATEGY": str(strategy_file)}
    clock = None
    if time_scale is not None:
        now = time.time()  # wall-clock ok: both processes' scaled clocks start here
        clock = {"scale": time_scale, "origin": now, "wall_origin": now}
        env.update(
            MEMH_LOAD_TIME_SCALE=repr(time_scale),
            MEMH_LOAD_CLOCK_ORIGIN=repr(now),
            MEMH_LOAD_WALL_ORIGIN=repr(now),
        )
    command = locust_command(load)
    echo(f"memharness load: {load.spec.label} -> {load.run_dir}/ ({' '.join(command[2:])})")
    process = None
    status, error, code, maint_code = "ok", None, None, None
    try:
        if maintenance:
            process = _start_maintenance(load, strategy_file, env, clock)
            env = {**env, MAINTENANCE_PID_ENV: str(process.pid)}  # sampled per rate step
        code = subprocess.run(command, env=env, check=False).returncode
    except Exception as exc:  # a strategy that cannot run is a result, not the end
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if process is not None:
            maint_code = _stop_maintenance(process)
    figures = read_json(load.run_dir / "maintenance.json") if maintenance else None
    if maintenance and (figures is None or maint_code != 0):
        status = "failed"
        error = error or (
            f"the maintenance process exited with {maint_code} and "
            f"{'no figures' if figures is None else 'figures'}; see {load.run_dir}/maintenance.log"
        )
    report = annotate_results(load.run_dir, load.spec, figures=figures, time_scale=time_scale)
    if report is None:
        status = "failed"
        error = error or f"Locust exited with {code} and wrote no load_hdr.json"
    elif report.get("virtual_days"):
        from memharness.load_plot import plot_virtual_days

        plot_virtual_days(report, load.run_dir / "virtual_days.png")
    echo(f"memharness load: {load.spec.label}: exit code {code}, {status}")
    return summary_row(load.run_dir, load.spec, load.prefix, report, figures, code, status, error)


def _run_apart(
    load: StrategyLoad,
    locust_command: Callable[[StrategyLoad], list[str]],
    base_env: Mapping[str, str],
    echo: Callable[[str], None],
) -> dict[str, Any]:
    """One strategy's load with the memory in `memharness serve` and the generator apart."""
    from memharness.load_apart import service_apart

    load.run_dir.mkdir(parents=True, exist_ok=True)
    strategy_file = load.run_dir / "strategy.yaml"
    strategy_file.write_text(load.spec.strategy.to_yaml(), encoding="utf-8")
    env = {**base_env, "MEMH_PREFIX": load.prefix}
    status, error, code = "ok", None, None
    try:
        with service_apart(load.run_dir, strategy_file, env) as service:
            command = [*locust_command(load), "--host", service.url]
            echo(
                f"memharness load: {load.spec.label} -> {load.run_dir}/ (service pid "
                f"{service.pid} at {service.url}; generator: {' '.join(command[2:])})"
            )
            code = subprocess.run(command, env=service.environment(env), check=False).returncode
    except Exception as exc:  # a strategy that cannot run is a result, not the end
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    report = annotate_results(load.run_dir, load.spec, figures=None, time_scale=None)
    if report is None:
        status = "failed"
        error = error or f"Locust exited with {code} and wrote no load_hdr.json"
    echo(f"memharness load: {load.spec.label}: exit code {code}, {status}")
    return summary_row(load.run_dir, load.spec, load.prefix, report, None, code, status, error)
