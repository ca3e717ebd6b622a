"""`memharness bench --ab [REF|PATH]`: the A/B regression gate, from options to exit status.

Exit status: 0 when every operation PASSes or WARNs (or FAILs where the change declares
it slower on purpose: `memharness.ab.accepted`), 1 when another FAILs, 2 when the gate
could not run (unknown ref, a baseline lacking what the worker needs, a worker crash).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import sys
import tempfile
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

import click

from memharness.ab.accepted import TRAILER, accepted_slowdowns
from memharness.ab.arms import AbError, candidate_tree, resolve_baseline
from memharness.ab.looks import run_ab
from memharness.ab.model import AbSettings
from memharness.ab.report import (
    ab_history_line,
    append_history,
    document,
    summary,
    table,
    write_json,
)
from memharness.ab.worker import OPS
from memharness.verdict.intervals import Verdict


def parse_inject(value: str | None) -> tuple[str, float] | None:
    """`OP=FRACTION` (e.g. `stm.query[cached]=0.2`) -> (op, fraction)."""
    if value is None:
        return None
    op, sep, fraction = value.rpartition("=")
    if not sep or op not in OPS:
        known = ", ".join(OPS)
        raise click.BadParameter(f"{value!r}: expected OP=FRACTION with OP one of {known}")
    try:
        share = float(fraction)
    except ValueError:
        raise click.BadParameter(f"{value!r}: FRACTION must be a number") from None
    if not 0 < share <= 10:
        raise click.BadParameter(f"{value!r}: FRACTION must be in (0, 10]")
    return op, share


@contextlib.contextmanager
def _terminate_as_exit() -> Iterator[None]:
    """SIGTERM runs the cleanups (workers, servers, the worktree) like Ctrl-C does."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def run_ab_command(
    root: Path, ref: str, settings: AbSettings, *, run_id: str | None, report_dir: Path
) -> None:
    """Run the gate against `ref` and exit with its status (see the module docstring)."""
    stamp = datetime.now(UTC)  # wall-clock ok: names the report after the real date
    run_id = run_id or f"ab-{stamp:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    out_dir = report_dir.resolve() / run_id
    out_dir.mkdir(parents=True, exist_ok=True)
    load_start = [round(x, 2) for x in os.getloadavg()]
    workdir = Path(tempfile.mkdtemp(prefix="memh-ab-"))
    try:
        with _terminate_as_exit(), contextlib.ExitStack() as stack:
            stack.callback(shutil.rmtree, workdir, ignore_errors=True)
            candidate = candidate_tree(root)
            baseline, remove = resolve_baseline(root, ref, workdir)
            stack.callback(remove)
            backend = "embedded" if settings.backend == "real" else settings.backend
            click.echo(f"memharness bench --ab: run {run_id}, backend {backend}")
            click.echo(f"  {baseline.describe()}")
            click.echo(f"  {candidate.describe()}")
            if settings.inject is not None:
                op, share = settings.inject
                click.echo(f"  injected: candidate {op} + {share:g} x its warm-up median")
            result = run_ab(
                settings,
                {"baseline": baseline, "candidate": candidate},
                workdir=workdir,
                log_dir=out_dir,
                echo=click.echo,
            )
            accepted = accepted_slowdowns(root, baseline, candidate)
    except AbError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
    load = {"start": load_start, "end": [round(x, 2) for x in os.getloadavg()]}
    doc = document(
        result, run_id=run_id, started_at=stamp.isoformat(timespec="seconds"), loadavg=load
    )
    doc["accepted_slowdowns"] = accepted
    path = write_json(out_dir / "ab.json", doc)
    history = append_history(report_dir.resolve() / "history.jsonl", ab_history_line(result, doc))
    click.echo("")
    for line in table(result):
        click.echo(line)
    click.echo("")
    for line in summary(result):
        click.echo(line, err=result.verdict is Verdict.FAIL)
    if result.inject_ms and settings.inject is not None:
        each = ", ".join(f"{ms:.3f}" for ms in result.inject_ms)
        click.echo(f"injected per call of {settings.inject[0]}, per worker lifetime: {each} ms")
    click.echo(
        f"load average {load['start']} -> {load['end']} on {os.cpu_count()} cpus; "
        f"wall time {result.wall_s:.0f} s"
    )
    click.echo(f"report: {path}; history: {history}")
    failing = [op.op for op in result.ops if op.verdict is Verdict.FAIL]
    for op, why in accepted.items():
        if op in failing:
            click.echo(f"ACCEPTED {op}: slower on purpose ({TRAILER}: {why})")
        else:
            click.echo(f"note: {op} is declared slower on purpose ({why}) but did not FAIL")
    if any(op not in accepted for op in failing):
        sys.exit(1)
