"""The Locust process of `memharness load`: its command line and its environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from memharness.load_contract import MAINTENANCE_PID_ENV, REPEATS_ENV
from memharness.verbosity import locust_loglevel

#: Variables the parent sets for the Locust process per run (never inherited).
RUN_ENV = (
    "MEMH_LOAD_SCENARIO",
    "MEMH_LOAD_STRATEGY",
    "MEMH_LOAD_TIME_SCALE",
    "MEMH_LOAD_CLOCK_ORIGIN",
    "MEMH_LOAD_WALL_ORIGIN",
    MAINTENANCE_PID_ENV,
    REPEATS_ENV,
)


def default_locustfile(*, target: bool = False) -> Path:
    """loadtests/locustfile.py of the checkout this package runs from; with `target`,
    loadtests/target_locustfile.py (HTTP users driving a service)."""
    name = "target_locustfile.py" if target else "locustfile.py"
    return Path(__file__).resolve().parent.parent / "loadtests" / name


def build_locust_command(
    *,
    locustfile: Path,
    run_dir: Path,
    run_id: str,
    users: int,
    spawn_rate: float,
    duration: str,
    rate: float | None,
    open_loop: bool,
    arrivals: str,
    serial: bool,
    steps: str | None,
    sla: str | None,
    extra: tuple[str, ...] = (),
    rate_steps: bool = False,
) -> list[str]:
    """The Locust command line for these options (a shape replaces -u, -r and -t; rate
    steps keep -u and -r for the pool of users and end by themselves). Locust logs at
    INFO only under `memharness -v`."""
    command = [sys.executable, "-m", "locust", "-f", str(locustfile), "--headless"]
    if rate_steps:
        command += ["-u", str(users), "-r", f"{spawn_rate:g}"]
    elif steps is None:
        command += ["-u", str(users), "-r", f"{spawn_rate:g}", "-t", duration]
    command += [
        "--only-summary",
        "--csv",
        str(run_dir / "load"),
        "--html",
        str(run_dir / "load.html"),
        "--run-id",
        run_id,
        "--out-dir",
        str(run_dir.parent),
        "--loglevel",
        locust_loglevel(),
    ]
    if rate is not None:
        command += ["--rate", f"{rate:g}"]
    if open_loop:
        command += ["--open-loop", "--arrivals", arrivals]
    if serial:
        command.append("--serial")
    if sla is not None:
        command += ["--sla", sla]
    return command + list(extra)


def locust_environment(
    *, backend: str | None, embedder: str | None, steps: str | None
) -> dict[str, str]:
    """The Locust process's environment: this one, offline, with the backend, embedder
    and user steps chosen (a stray MEMH_LOAD_STEPS would silently replace -u/-t)."""
    env = dict(os.environ)
    env.setdefault("HF_HUB_OFFLINE", "1")  # the model comes from a package, never a hub
    env.setdefault("TRANSFORMERS_OFFLINE", "1")
    if backend is not None:
        env["MEMH_BACKEND"] = backend
    if embedder is not None:
        env["MEMH_EMBEDDER"] = embedder
    if steps is not None:
        env["MEMH_LOAD_STEPS"] = steps
    else:
        env.pop("MEMH_LOAD_STEPS", None)  # a stray variable would silently replace -u/-t
    return env
