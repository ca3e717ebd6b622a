"""The results of a load under a strategy: the contract's keys, CPU per turn, the summary.

`annotate_results` adds to a strategy's `load_hdr.json` (and `steps.json`) the keys
other commands read (`memharness capacity`, `memharness report`): the strategy, its
fingerprint, the time scale, the maintenance figures and the CPU seconds per turn of
every process; `summary_row` and `format_summary` make `load_strategies.json`'s rows and
the terminal table. Everything here reads result files only.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from memharness.sim.plan import StrategySpec

__all__ = [
    "annotate_results",
    "cpu_per_turn",
    "format_summary",
    "read_json",
    "summary_row",
    "sustainable_rate",
    "write_json",
]


def sustainable_rate(steps: Mapping[str, Any]) -> float | None:
    """The highest offered rate of `steps.json` whose step held every SLA, or None."""
    held = [float(step["offered_rate"]) for step in steps.get("steps", []) if step.get("sla_held")]
    return max(held) if held else None


_LAYERS = (
    *("session", "pii", "embed", "stm", "ltm", "promotion", "turn", "recall", "event"),
    *("turn@intended", "turn+queue"),
)
_ROLES = ("load", "maintenance", "redis", "postgres", "chroma")
#: The maintenance figures repeated in load_strategies.json (the whole set is in the run's
#: load_hdr.json under "maintenance").
_MAINTENANCE_KEYS = (
    *("cpu_s", "wall_s", "cycles", "cycle_ms", "examined", "changed"),
    *("sessions_consolidated", "episodes", "events_applied", "event_lag_ms", "errors"),
)


def write_json(path: Path, document: Any) -> None:
    """Write atomically: a temporary file beside `path`, then a rename."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """A JSON object from `path`, or None when it is missing or not one."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return document if isinstance(document, dict) else None


def annotate_results(
    run_dir: Path,
    spec: StrategySpec,
    *,
    figures: Mapping[str, Any] | None,
    time_scale: float | None,
) -> dict[str, Any] | None:
    """Add the strategy, its fingerprint, the time scale, the maintenance figures and the
    CPU seconds per turn to the run's load_hdr.json (and steps.json); returns the former."""
    report = read_json(run_dir / "load_hdr.json")
    if report is None:
        return None
    steps = read_json(run_dir / "steps.json")
    keys = {
        "strategy": spec.label,
        "strategy_fingerprint": spec.strategy.fingerprint(),
        "time_scale": time_scale,
        "maintenance": dict(figures) if figures is not None else None,
        "cpu_s_per_turn": cpu_per_turn(report, steps, figures),
    }
    report.update(keys)
    write_json(run_dir / "load_hdr.json", report)
    if steps is not None:
        steps.update(keys)
        write_json(run_dir / "steps.json", steps)
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
            for role, used in (entry.get("processes") or {}).items():
                cpu[role] = cpu.get(role, 0.0) + float(used.get("cpu_s") or 0.0)
    else:
        turns = int(((report.get("ops") or {}).get("turn") or {}).get("count") or 0)
        for role, used in (report.get("processes") or {}).items():
            cpu[role] = float(used.get("cpu_s") or 0.0)
    if figures is not None:
        cpu["maintenance"] = float(figures.get("cpu_s") or 0.0)
    notes = report.get("process_notes") or {}
    memory = (report.get("backends") or {}).get("session") == "in-memory"
    out: dict[str, float | None] = {}
    for role in _ROLES:
        if role in cpu and turns:
            out[role] = round(cpu[role] / turns, 6)
        elif role == "maintenance" and "service" in cpu:
            out[role] = None  # --apart: the maintenance child is in "service"
        elif (role == "maintenance" and figures is None) or (memory and role != "load"):
            out[role] = 0.0  # no such process in this run
        elif role == "chroma" and "embedded" in str(notes.get("chroma", "")):
            out[role] = 0.0  # the embedded client: its CPU is in "load"
        else:
            out[role] = None
    for role in ("service", "generator"):  # `memharness load --apart`
        if role in cpu and turns:
            out[role] = round(cpu[role] / turns, 6)
    return out


def summary_row(
    run_dir: Path,
    spec: StrategySpec,
    namespace: str,
    report: Mapping[str, Any] | None,
    figures: Mapping[str, Any] | None,
    code: int | None,
    status: str,
    error: str | None,
) -> dict[str, Any]:
    """The strategy's headline figures for load_strategies.json."""
    ops = (report or {}).get("ops") or {}
    steps = read_json(run_dir / "steps.json")
    sustainable = sustainable_rate(steps) if steps is not None else None
    maintenance = None
    if figures is not None:
        maintenance = {key: figures.get(key) for key in _MAINTENANCE_KEYS}
    return {
        "strategy": spec.label,
        "strategy_fingerprint": spec.strategy.fingerprint(),
        "dir": str(run_dir),
        "namespace": namespace,
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
        "virtual_days": [
            {
                "day": entry["day"],
                "p95_ms": {op: summary["p95_ms"] for op, summary in entry["ops"].items()},
                "records": entry["records"],
            }
            for entry in (report or {}).get("virtual_days") or []
        ]
        or None,
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
