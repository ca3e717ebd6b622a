"""`memharness load --overload`: the sustainable rate (given, read from a rate-step run's
steps.json, or searched by one), then twice that rate (`--overload-factor`) offered open
loop, and its verdict (`memharness/overload_verdict.py`): overload.json and the exit code.

Progress goes to stderr, the verdict to stdout."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from memharness.load_contract import RATES_ENV, STEP_S_ENV
from memharness.load_locust import build_locust_command
from memharness.load_results import sustainable_rate as sustainable_rate_of
from memharness.overload_verdict import format_overload, judge_overload
from reference.durations import parse_duration

OVERLOAD_FAILED_EXIT_CODE = 5


def _note(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def run_overload(
    *,
    locustfile: Path,
    out: Path,
    run_id: str,
    users: int,
    duration: str,
    step_s: float,
    factor: float,
    sustainable_rate: float | None,
    sustainable_from: Path | None,
    arrivals: str,
    sla: str | None,
    extra: tuple[str, ...],
    env: dict[str, str],
) -> int:
    """The sustainable rate (given, read or searched), then the overload run and its verdict."""
    common: dict[str, Any] = {
        "locustfile": locustfile,
        "users": users,
        "spawn_rate": float(users),
        "arrivals": arrivals,
        "serial": False,
        "steps": None,
        "sla": sla,
        "extra": extra,
    }
    if sustainable_rate is not None:
        source = "--sustainable-rate"
    else:
        if sustainable_from is None:  # search: a rate-step run, its steps judged on the SLAs
            search_id = f"{run_id}-steps"[:100]
            search_dir = out / search_id
            search_dir.mkdir(parents=True, exist_ok=True)
            command = build_locust_command(
                run_dir=search_dir,
                run_id=search_id,
                duration="0s",
                rate=1.0,
                open_loop=True,
                rate_steps=True,
                **common,
            )
            search_env = {**env, RATES_ENV: "auto", STEP_S_ENV: f"{step_s:g}"}
            _note(f"memharness load --overload: searching, {' '.join(command[2:])}")
            subprocess.run(command, env=search_env, check=False)
            sustainable_from = search_dir / "steps.json"
            if not sustainable_from.is_file():
                _note(f"memharness load --overload: no {sustainable_from}")
                return OVERLOAD_FAILED_EXIT_CODE
        steps = json.loads(sustainable_from.read_text(encoding="utf-8"))
        sustainable_rate = sustainable_rate_of(steps)
        source = str(sustainable_from)
        if sustainable_rate is None:
            _note(
                f"memharness load --overload: no step of {sustainable_from} held the SLAs; "
                "give --sustainable-rate"
            )
            return OVERLOAD_FAILED_EXIT_CODE
    offered = sustainable_rate * factor
    run_dir = out / run_id
    run_dir.mkdir(parents=True, exist_ok=True)
    command = build_locust_command(
        run_dir=run_dir,
        run_id=run_id,
        duration=duration,
        rate=offered,
        open_loop=True,
        **common,
    )
    env = {k: v for k, v in env.items() if k not in (RATES_ENV, STEP_S_ENV)}
    _note(
        f"memharness load --overload: {factor:g} x {sustainable_rate:g}/s ({source}) = "
        f"{offered:g}/s for {duration}: {' '.join(command[2:])}"
    )
    code = subprocess.run(command, env=env, check=False).returncode
    report_path = run_dir / "load_hdr.json"
    if not report_path.is_file():
        _note(f"memharness load --overload: exit code {code} and no {report_path}")
        return OVERLOAD_FAILED_EXIT_CODE
    summary = judge_overload(
        json.loads(report_path.read_text(encoding="utf-8")),
        exit_code=code,
        sustainable=sustainable_rate,
        factor=factor,
        duration_s=parse_duration(duration),
        source=source,
    )
    path = run_dir / "overload.json"
    path.write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    print(format_overload(summary), flush=True)
    _note(f"memharness load --overload: {path}")
    return 0 if summary["survived"] else OVERLOAD_FAILED_EXIT_CODE
