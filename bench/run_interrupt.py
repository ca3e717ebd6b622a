"""Ctrl-C on `memharness run`: how long from the signal to the command's exit, and to the
last process it started (Ray's, the workers', their embedded servers) being gone.

A terminal's Ctrl-C sends SIGINT to the whole foreground process group: the run starts
here in a session of its own and the signal goes to that group, as from a terminal. The
signal is sent once the first scenario's strategies have all finished (results.json says
so) and the next scenario's replays run, so that there are results to keep and work in
flight to stop.

usage: .venv/bin/python -m bench.run_interrupt [REPEATS=3] [OUT_DIR=a fresh temp dir]

Measures the run of `make run` (embedded servers, MiniLM, two workers, one torch thread
each) on scenarios/drift.yaml then 200 generated travel users under five strategies, and
prints the seconds per attempt. tests/test_run_interrupt.py runs the same on the in-memory
stores and checks what is kept; it does not time it.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEMHARNESS = str(Path(sys.executable).with_name("memharness"))
STRATEGIES = ("keep_all", "fixed_ttl", "event_driven", "hybrid", "typed_ttl")


@dataclass
class Stopped:
    """One interrupted run: its exit code, output, and the seconds from SIGINT to the
    command's exit and to its process group being empty (None: not within the wait)."""

    returncode: int
    stdout: str
    stderr: str
    exit_s: float
    group_gone_s: float | None
    run_dir: Path


def generate(path: Path, users: int, env: dict[str, str]) -> Path:
    """A generated travel population of `users` users, written to `path`."""
    subprocess.run(
        [MEMHARNESS, "scenarios", "generate", "--domain", "travel", "--users", str(users),
         "--seed", "3", "-o", str(path)],
        env=env, check=True, capture_output=True,
    )  # fmt: skip
    return path


def results(run_dir: Path) -> dict[str, object]:
    """The run's results.json as it stands (empty while not yet written, or mid-rename)."""
    try:
        return dict(json.loads((run_dir / "results.json").read_text(encoding="utf-8")))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}


def finished(document: dict[str, object], scenario: int) -> list[str]:
    """The strategies that finished (status ok) in the run's `scenario`-th scenario."""
    scenarios = document.get("scenarios") or []
    assert isinstance(scenarios, list)
    if len(scenarios) <= scenario:
        return []
    return [s["label"] for s in scenarios[scenario].get("strategies") or [] if s["status"] == "ok"]


def interrupt_run(
    args: list[str], run_dir: Path, env: dict[str, str], *, first: int, within_s: float = 600.0
) -> Stopped:
    """Start `memharness run ARGS` in a session of its own; once its first scenario's
    `first` strategies have finished, send SIGINT to its process group (a terminal's
    Ctrl-C) and wait, at most `within_s` for each: its exit, then its group empty."""
    process = subprocess.Popen(
        [MEMHARNESS, "run", *args], env=env, start_new_session=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + within_s
        while len(finished(results(run_dir), 0)) < first:
            if process.poll() is not None:
                out, err = process.communicate()
                raise AssertionError(f"the run ended before it was interrupted:\n{out}\n{err}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no result of the first scenario in {within_s:.0f} s")
            time.sleep(0.1)
        os.killpg(process.pid, signal.SIGINT)
        sent = time.monotonic()
        out, err = process.communicate(timeout=within_s)
        exit_s = time.monotonic() - sent
        group_gone_s = None
        while time.monotonic() - sent < within_s:
            try:
                os.killpg(process.pid, 0)
            except ProcessLookupError:
                group_gone_s = time.monotonic() - sent
                break
            time.sleep(0.05)
        return Stopped(process.returncode, out, err, exit_s, group_gone_s, run_dir)
    finally:
        if process.poll() is None:
            process.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # whatever it left behind


def run_args(scenarios: list[Path], out: Path, run_id: str, *extra: str) -> list[str]:
    """`memharness run`'s arguments: the scenarios under `STRATEGIES`, no progress bar."""
    args = [arg for path in scenarios for arg in ("--scenario", str(path))]
    args += [arg for name in STRATEGIES for arg in ("--strategy", name)]
    return [*args, "--workers", "2", "--out", str(out), "--run-id", run_id, "--no-progress",
            *extra]  # fmt: skip


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path(tempfile.mkdtemp(prefix="memh-int-"))
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMH_EMBEDDER_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "MEMH_DATA_DIR": str(out / "data")}  # fmt: skip
    travel = generate(out / "travel-200.yaml", 200, env)
    print(f"load average before: {os.getloadavg()}")
    for attempt in range(repeats):
        run_id = f"int{attempt}"
        stopped = interrupt_run(
            run_args([REPO / "scenarios" / "drift.yaml", travel], out, run_id),
            out / run_id, env, first=len(STRATEGIES),
        )  # fmt: skip
        gone = "not within the wait" if stopped.group_gone_s is None else (
            f"{stopped.group_gone_s:.1f} s")  # fmt: skip
        print(
            f"attempt {attempt + 1}: exit {stopped.returncode} {stopped.exit_s:.1f} s after "
            f"SIGINT, process group empty after {gone}; load average {os.getloadavg()[0]:.2f}"
        )


if __name__ == "__main__":
    main()
