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

On the embedded default the servers are started here, once for all strategies: the
embedded Redis and PostgreSQL, and a Chroma server (the embedded Chroma client cannot be
shared by two processes); their URLs go to both processes as MEMH_REDIS_URL, MEMH_PG_URL
and MEMH_CHROMA_URL. On the in-memory backend no other process can share the stores: no
maintenance process runs (`maintenance` is null), the serving process applies events
itself, and records expire lazily on read.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memharness.sim.plan import StrategySpec

__all__ = [
    "MAINTAIN_STOP_S",
    "StrategyLoad",
    "annotate_results",
    "cpu_per_turn",
    "format_summary",
    "run_dir_name",
    "run_strategy_loads",
    "shared_servers",
]

#: How long the maintenance process may take to finish its batch after SIGTERM.
MAINTAIN_STOP_S = 60.0
#: Seconds between the maintenance process's figures files (the last one on exit).
FIGURES_EVERY_S = 5.0
_LAYERS = (
    *("session", "pii", "embed", "stm", "ltm", "promotion", "turn", "recall", "event"),
    "turn@intended",
)
_ROLES = ("load", "maintenance", "redis", "postgres", "chroma")
#: The maintenance figures repeated in load_strategies.json (the whole set is in the run's
#: load_hdr.json under "maintenance").
_MAINTENANCE_KEYS = (
    *("cpu_s", "wall_s", "cycles", "cycle_ms", "examined", "changed"),
    *("sessions_consolidated", "episodes", "events_applied", "event_lag_ms", "errors"),
)


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


def _write_json(path: Path, document: Any) -> None:
    """Write atomically: a temporary file beside `path`, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


@contextmanager
def shared_servers(settings: Any, data_dir: Path) -> Iterator[dict[str, str]]:
    """Start the embedded servers both processes share, when a layer has no URL; yields
    the MEMH_* URLs to pass on. Nothing for the in-memory backend."""
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

            chroma = start_chroma_server(data_dir / "chroma-server")
            handles.append(chroma)
            urls["MEMH_CHROMA_URL"] = chroma.url
        yield urls
    finally:
        for handle in reversed(handles):
            stop = getattr(handle, "stop", None) or getattr(handle, "close", None)
            if stop is not None:
                stop()


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
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            return process.wait(timeout=MAINTAIN_STOP_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            return None
    return process.returncode


def run_strategy_loads(
    loads: Sequence[StrategyLoad],
    *,
    summary_dir: Path,
    locust_command: Callable[[StrategyLoad], list[str]],
    env: Mapping[str, str],
    maintenance: bool,
    time_scale: float | None,
    echo: Callable[[str], None],
) -> int:
    """Each strategy's load in turn (see the module docstring); returns the first
    non-zero exit code of a strategy's run, else 0."""
    summary_dir.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    first_error = 0
    for load in loads:
        row = _run_one(load, locust_command, env, maintenance, time_scale, echo)
        rows.append(row)
        _write_json(summary_dir / "load_strategies.json", {"kind": "load_strategies", "runs": rows})
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
        code = subprocess.run(command, env=env, check=False).returncode
    except Exception as exc:  # a strategy that cannot run is a result, not the end
        status, error = "failed", f"{type(exc).__name__}: {exc}"
    finally:
        if process is not None:
            maint_code = _stop_maintenance(process)
    figures = _read_json(load.run_dir / "maintenance.json") if maintenance else None
    if maintenance and (figures is None or maint_code != 0):
        status = "failed"
        error = error or (
            f"the maintenance process exited with {maint_code} and "
            f"{'no figures' if figures is None else 'figures'}; see {load.run_dir}/maintenance.log"
        )
    report = annotate_results(load, figures=figures, time_scale=time_scale)
    if report is None:
        status = "failed"
        error = error or f"Locust exited with {code} and wrote no load_hdr.json"
    elif report.get("virtual_days"):
        from memharness.load_plot import plot_virtual_days

        plot_virtual_days(report, load.run_dir / "virtual_days.png")
    echo(f"memharness load: {load.spec.label}: exit code {code}, {status}")
    return _row(load, report, figures, code, status, error)


def annotate_results(
    load: StrategyLoad, *, figures: Mapping[str, Any] | None, time_scale: float | None
) -> dict[str, Any] | None:
    """Add the strategy, its fingerprint, the time scale, the maintenance figures and the
    CPU seconds per turn to the run's load_hdr.json (and steps.json); returns the former."""
    report = _read_json(load.run_dir / "load_hdr.json")
    if report is None:
        return None
    steps = _read_json(load.run_dir / "steps.json")
    keys = {
        "strategy": load.spec.label,
        "strategy_fingerprint": load.spec.strategy.fingerprint(),
        "time_scale": time_scale,
        "maintenance": dict(figures) if figures is not None else None,
        "cpu_s_per_turn": cpu_per_turn(report, steps, figures),
    }
    report.update(keys)
    _write_json(load.run_dir / "load_hdr.json", report)
    if steps is not None:
        steps.update(keys)
        _write_json(load.run_dir / "steps.json", steps)
    return report


def cpu_per_turn(
    report: Mapping[str, Any],
    steps: Mapping[str, Any] | None,
    figures: Mapping[str, Any] | None,
) -> dict[str, float | None]:
    """CPU seconds per served turn of each process: load, maintenance, redis, postgres,
    chroma. The probes and event publishes of a scenario are in the CPU, not in the count.

    The processes' CPU comes from the run's samples (`loadtests/procstats.py`): summed
    over the steps with `--rates`, else from the first to the last periodic sample;
    the maintenance process's from its own figures. A process that does not exist in
    this run (the in-memory backend has no servers) costs 0.0; one that exists but was
    not measured (a remote server) is None.
    """
    cpu: dict[str, float] = {}
    turns = 0
    if steps is not None and steps.get("steps"):
        for entry in steps["steps"]:
            turns += int(entry.get("completed_in_window") or 0)
            for role, figures_ in (entry.get("processes") or {}).items():
                cpu[role] = cpu.get(role, 0.0) + float(figures_.get("cpu_s") or 0.0)
    else:
        turns = int(((report.get("ops") or {}).get("turn") or {}).get("count") or 0)
        for role, figures_ in (report.get("processes") or {}).items():
            cpu[role] = float(figures_.get("cpu_s") or 0.0)
    if figures is not None:
        cpu["maintenance"] = float(figures.get("cpu_s") or 0.0)
    notes = report.get("process_notes") or {}
    memory = (report.get("backends") or {}).get("session") == "in-memory"
    out: dict[str, float | None] = {}
    for role in _ROLES:
        if role in cpu and turns:
            out[role] = round(cpu[role] / turns, 6)
        elif (role == "maintenance" and figures is None) or (memory and role != "load"):
            out[role] = 0.0  # no such process in this run
        elif role == "chroma" and "embedded" in str(notes.get("chroma", "")):
            out[role] = 0.0  # the embedded client: its CPU is in "load"
        else:
            out[role] = None
    return out


def _row(
    load: StrategyLoad,
    report: Mapping[str, Any] | None,
    figures: Mapping[str, Any] | None,
    code: int | None,
    status: str,
    error: str | None,
) -> dict[str, Any]:
    """The strategy's headline figures for load_strategies.json."""
    ops = (report or {}).get("ops") or {}
    steps = _read_json(load.run_dir / "steps.json")
    sustainable = None
    if steps is not None:
        held = [float(s["offered_rate"]) for s in steps.get("steps", []) if s.get("sla_held")]
        sustainable = max(held) if held else None
    maintenance = None
    if figures is not None:
        maintenance = {key: figures.get(key) for key in _MAINTENANCE_KEYS}
    return {
        "strategy": load.spec.label,
        "strategy_fingerprint": load.spec.strategy.fingerprint(),
        "dir": str(load.run_dir),
        "namespace": load.prefix,
        "status": status,
        "error": error,
        "exit_code": code,
        "p95_ms": {op: (ops.get(op) or {}).get("p95_ms") for op in _LAYERS if op in ops},
        "turns": (ops.get("turn") or {}).get("count", 0),
        "sustainable_rate": sustainable,
        "passed": (report or {}).get("passed"),
        "maintenance": maintenance,
        "cpu_s_per_turn": (report or {}).get("cpu_s_per_turn"),
        "time_scale": (report or {}).get("time_scale"),
    }


def format_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """One row per strategy: p95 per layer, SLAs, sustainable rate, maintenance, CPU."""
    head = (
        f"{'strategy':<22}{'turns':>7}{'session':>9}{'stm':>8}{'ltm':>8}{'recall':>8}"
        f"{'turn':>8}  {'SLAs':<6}{'max/s':>7}{'events':>8}{'lag p95':>9}{'maint cpu':>10}"
        f"  cpu ms/turn load/maint/redis/pg/chroma"
    )
    lines = ["Strategies under the same load (p95 in ms):", head, "-" * len(head)]
    for row in rows:
        p95 = row["p95_ms"]
        maint = row["maintenance"] or {}
        lag = (maint.get("event_lag_ms") or {}).get("p95")
        cpu = row["cpu_s_per_turn"] or {}
        per_turn = "/".join(
            "-" if cpu.get(role) is None else f"{1000 * cpu[role]:.2f}" for role in _ROLES
        )
        sla = "-" if row["passed"] is None else ("met" if row["passed"] else "BROKEN")
        if row["status"] != "ok":
            sla = "FAILED"
        lines.append(
            f"{row['strategy'][:21]:<22}{row['turns']:>7}{_num(p95.get('session'), 9)}"
            f"{_num(p95.get('stm'), 8)}{_num(p95.get('ltm'), 8)}{_num(p95.get('recall'), 8)}"
            f"{_num(p95.get('turn'), 8)}  {sla:<6}{_num(row['sustainable_rate'], 7)}"
            f"{maint.get('events_applied', '-')!s:>8}{_num(lag, 9)}"
            f"{_num(maint.get('cpu_s'), 10)}  {per_turn}"
        )
        if row["error"]:
            lines.append(f"  {row['strategy']}: {row['error']}")
    return "\n".join(lines)


def _num(value: Any, width: int) -> str:
    return f"{value:>{width}.1f}" if isinstance(value, int | float) else f"{'-':>{width}}"
