"""`memharness bench`: run the pytest-benchmark SLA suites of bench/ and print the verdict.

Runs `pytest bench` in a subprocess (its own embedded servers, its own output captured to
`reports/<run-id>/pytest.log`), then reads `reports/<run-id>/bench.json`, which the
suites' gate wrote, and prints per operation p50, p95, p99, the SLA, the headroom
(SLA / p95), the p95's confidence interval and PASS/FAIL, then the null backend's
figures (the harness's own overhead). Exits non-zero when an SLA is broken or the suites
failed.

pytest runs the suites from the checkout's bench/ directory: run from a checkout.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memharness.bench_report import format_report

ROOT = Path(__file__).resolve().parents[1]
BENCH_DIR = ROOT / "bench"
#: What `memharness bench` measures without `--strategy`: the most complete policy (hybrid).
DEFAULT_STRATEGY = "hybrid"
_SUMMARY = re.compile(r"\b\d+ (passed|failed|errors?|skipped|deselected)\b")


@click.command(
    context_settings={"help_option_names": ["-h", "--help"], "ignore_unknown_options": True}
)
@click.option(
    "--size",
    type=click.Choice(["small", "full"]),
    default="small",
    show_default=True,
    help="small: the CI gate's sizes; full: STM 100k records, LTM 10k and 100k rows.",
)
@click.option(
    "--embedder",
    type=click.Choice(["minilm", "hashing"]),
    default="minilm",
    show_default=True,
    help="Embedder of the measured calls (seeds always use hashing).",
)
@click.option(
    "--torch-threads",
    type=click.IntRange(min=1),
    default=None,
    help="Threads of MiniLM's torch (default: MEMH_EMBEDDER_THREADS, else torch's own; "
    "with --ab, else 1).",
)
@click.option(
    "--strategy",
    metavar="NAME|FILE",
    default=None,
    help="The forgetting strategy the measured system runs (a built-in name or a YAML "
    f"file; default {DEFAULT_STRATEGY}, the deployed configuration): its work (expiry on "
    "write, access statistics, decay re-ranking, sealing) is inside the measured calls. "
    f"The A/B gate runs {DEFAULT_STRATEGY}.",
)
@click.option("--rounds", type=click.IntRange(min=1), default=None, help="Calls per operation.")
@click.option("--ltm-1m", is_flag=True, help="Also measure a 1,000,000-row LTM table (slow).")
@click.option("--run-id", default=None, help="Default: bench-<utc time>-<hex>.")
@click.option(
    "--report-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("reports"),
    show_default=True,
)
@click.option("-v", "--verbose", is_flag=True, help="Show pytest's output as it runs.")
@click.option(
    "--ab",
    "ab_ref",
    is_flag=False,
    flag_value="auto",
    default=None,
    metavar="[REF|PATH]",
    help="A/B regression gate instead of the SLA suites: this checkout (uncommitted changes "
    "included) against commit REF, interleaved. Without a value: the merge base with main, "
    "or HEAD~1 on main. A PATH (with a '/' or starting with '.') is a directory tree.",
)
@click.option(
    "--backend",
    type=click.Choice(["embedded", "null"]),
    default="embedded",
    show_default=True,
    help="A/B: the embedded servers, or the null backend (bench/null_backend.py; seconds).",
)
@click.option(
    "--ab-rounds", type=click.IntRange(min=2), default=24, show_default=True,
    help="A/B: most rounds (it stops at the first look, every --restart-every rounds, where "
    "every gated operation is decided).",
)  # fmt: skip
@click.option(
    "--ab-extra-rounds",
    type=click.IntRange(min=0),
    default=8,
    show_default=True,
    help="A/B: rounds added once when a slowdown is suspected but not proven (then WARN).",
)
@click.option(
    "--ab-calls-scale",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="A/B: multiplies each operation's calls per round (10-30, about equal time).",
)
@click.option(
    "--ab-chunk",
    type=click.IntRange(min=0),
    default=1,
    show_default=True,
    help="A/B: calls per arm turn; the arms alternate (random order) every CHUNK calls "
    "of an operation. 0: one whole block per arm per round.",
)
@click.option(
    "--restart-every",
    type=click.IntRange(min=1),
    default=8,
    show_default=True,
    help="A/B: restart the worker processes every N rounds.",
)
@click.option(
    "--t50", type=click.FloatRange(min=0), default=0.10, show_default=True,
    help="A/B: tolerated slowdown at p50 (FAIL when the ratio's CI is all above 1+T).",
)  # fmt: skip
@click.option(
    "--t95", type=click.FloatRange(min=0), default=0.15, show_default=True,
    help="A/B: tolerated slowdown at p95.",
)  # fmt: skip
@click.option(
    "--inject",
    metavar="OP=FRACTION",
    default=None,
    help="A/B: slow the candidate's OP by FRACTION x its median (busy wait): proves power.",
)
@click.option(
    "--null-delay-ms",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="A/B with --backend null: busy-wait per backend primitive.",
)
@click.option("--seed", type=int, default=1, show_default=True, help="A/B: round order seed.")
@click.option(
    "--ab-cpu",
    type=int,
    default=None,
    help="A/B: pin both workers to this CPU (-1: no pinning). Default: the last CPU.",
)
@click.argument("pytest_args", nargs=-1, type=click.UNPROCESSED)
def bench(
    size: str,
    embedder: str,
    torch_threads: int | None,
    strategy: str | None,
    rounds: int | None,
    ltm_1m: bool,
    run_id: str | None,
    report_dir: Path,
    verbose: bool,
    ab_ref: str | None,
    backend: str,
    ab_rounds: int,
    ab_extra_rounds: int,
    ab_calls_scale: float,
    ab_chunk: int,
    restart_every: int,
    t50: float,
    t95: float,
    inject: str | None,
    null_delay_ms: float,
    seed: int,
    ab_cpu: int | None,
    pytest_args: tuple[str, ...],
) -> None:
    """Run the SLA benchmarks in bench/ and print p50/p95/p99, SLA and headroom per operation.

    Extra PYTEST_ARGS (after --) go to pytest, e.g. `memharness bench -- -k session`.
    With --ab, run the A/B regression gate instead (docs/latency.md, "The A/B gate").
    """
    if not (BENCH_DIR / "conftest.py").is_file():
        raise click.UsageError(f"no bench suites at {BENCH_DIR}: run from a source checkout")
    if ab_ref is None and (inject is not None or backend != "embedded"):
        raise click.UsageError("--inject and --backend belong to the A/B gate: add --ab")
    if ab_ref is not None and (pytest_args or ltm_1m):
        raise click.UsageError("--ab runs its own workers: no --ltm-1m or pytest arguments")
    if ab_ref is not None and strategy not in (None, DEFAULT_STRATEGY):
        raise click.BadParameter(
            f"the A/B gate runs {DEFAULT_STRATEGY}; {strategy!r} is for the SLA suites (drop --ab)",
            param_hint="'--strategy'",
        )
    if ab_ref is not None:
        from memharness.ab.command import parse_inject, run_ab_command
        from memharness.ab.model import AbSettings

        threads = torch_threads or _env_threads()
        settings = AbSettings(
            backend="real" if backend == "embedded" else backend,  # the workers' name for it
            embedder=embedder,
            threads=threads,
            rounds=ab_rounds,
            extra_rounds=ab_extra_rounds,
            calls_scale=ab_calls_scale,
            chunk=ab_chunk,
            restart_every=restart_every,
            seed=seed,
            t50=t50,
            t95=t95,
            null_delay_ms=null_delay_ms,
            inject=parse_inject(inject),
            cpu=_ab_cpu(ab_cpu),
        )
        run_ab_command(ROOT, ab_ref, settings, run_id=run_id, report_dir=report_dir)
        return
    # A run id names a report directory after the real date: the wall clock is right here.
    stamp = datetime.now(UTC)  # wall-clock ok
    run_id = run_id or f"bench-{stamp:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    report_dir = report_dir.resolve()
    strategy_arg = resolve_strategy_option(strategy or DEFAULT_STRATEGY)
    command = [
        *(sys.executable, "-m", "pytest", str(BENCH_DIR), "-p", "no:cacheprovider"),
        *("--bench-strategy", strategy_arg),
        *("--bench-size", size, "--bench-embedder", embedder),
        *("--bench-run-id", run_id, "--bench-report-dir", str(report_dir)),
    ]
    if rounds is not None:
        command += ["--bench-rounds", str(rounds)]
    if torch_threads is not None:
        command += ["--bench-torch-threads", str(torch_threads)]
    if ltm_1m:
        command.append("--ltm-1m")
    command += pytest_args

    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    log_path = report_dir / run_id / "pytest.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    click.echo(
        f"memharness bench: size={size} embedder={embedder} strategy={strategy_arg} run={run_id}"
    )
    click.echo(f"pytest log: {log_path}")
    started = time.perf_counter()
    returncode = _run(command, env, log_path, verbose=verbose)
    wall = time.perf_counter() - started

    report_path = report_dir / run_id / "bench.json"
    if not report_path.is_file():
        click.echo(_tail(log_path), err=True)
        click.echo(f"error: pytest exited {returncode} and wrote no {report_path}", err=True)
        sys.exit(returncode or 2)
    document = json.loads(report_path.read_text(encoding="utf-8"))
    for line in format_report(document):
        click.echo(line)
    click.echo(f"wall time {wall:.0f} s; report: {report_path}")
    outcome, problems = _pytest_outcome(log_path)
    broken = [line for line in problems if line.startswith(("FAILED ", "ERROR "))]
    if not broken:  # a run whose tests failed measured only part of what it should
        history = _append_sla_history(report_dir, document)
        click.echo(f"history: {history}")
    click.echo(f"pytest: {outcome} (exit code {returncode})")
    for line in problems:
        click.echo(f"  {line}", err=True)
    if returncode != 0:
        cause = _server_failure(log_path)
        if cause is not None:  # a server died, paused or dropped us mid-run
            click.echo(f"error: a server failed during the run: {cause}", err=True)
        if broken or cause is not None:  # else every test passed and an SLA was breached
            click.echo(
                "error: the suites did not all pass; the SLA verdict above covers only the "
                "operations that completed",
                err=True,
            )
        sys.exit(returncode)


def resolve_strategy_option(value: str) -> str:
    """`--strategy`'s value as the suites get it: a built-in's name, or a YAML file's
    absolute path (the suites run in another directory). A name that is none of the
    built-ins, or a file that does not load, is a usage error naming `--strategy`, with
    the choices and the nearest name."""
    from reference.policy.loading import BUILTINS, load_strategy
    from reference.policy.strategy import StrategyError

    is_file = value.endswith((".yaml", ".yml")) or "/" in value
    if not is_file and value not in BUILTINS:
        names = list(BUILTINS)
        near = difflib.get_close_matches(value, names, n=1, cutoff=0.5)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise click.BadParameter(
            f"no strategy named {value!r}{hint}; choices: {', '.join(names)}, or a YAML file",
            param_hint="'--strategy'",
        )
    try:
        load_strategy(value)
    except StrategyError as exc:
        raise click.BadParameter(str(exc), param_hint="'--strategy'") from None
    return str(Path(value).resolve()) if is_file else value


def _ab_cpu(value: int | None) -> int | None:
    """The CPU both A/B workers share: given, none for -1, else the last one we may use."""
    if value is not None:
        return None if value < 0 else value
    return max(os.sched_getaffinity(0))


def _env_threads() -> int:
    """MiniLM's torch threads for the A/B gate: MEMH_EMBEDDER_THREADS, else 1 (2 shared
    cores: more threads stall single embeddings under load)."""
    value = os.environ.get("MEMH_EMBEDDER_THREADS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else 1


def _append_sla_history(report_dir: Path, document: dict[str, Any]) -> Path:
    """One line per SLA gate run in `<report-dir>/history.jsonl` (beside the A/B gate's)."""
    from memharness.ab.arms import candidate_tree
    from memharness.ab.report import append_history, sla_history_line

    tree = candidate_tree(ROOT)
    line = sla_history_line(document, commit=tree.sha, dirty=tree.dirty)
    return append_history(report_dir / "history.jsonl", line)


def _run(command: list[str], env: dict[str, str], log_path: Path, *, verbose: bool) -> int:
    with log_path.open("w", encoding="utf-8") as log:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        assert process.stdout is not None
        for line in process.stdout:
            log.write(line)
            if verbose:
                click.echo(line, nl=False)
        return process.wait()


def _pytest_outcome(path: Path) -> tuple[str, list[str]]:
    """pytest's closing summary line, and its FAILED/ERROR lines."""
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    summary = next(
        (line.strip("= ") for line in reversed(lines) if _SUMMARY.search(line)), "no summary"
    )
    problems = [line.strip() for line in lines if line.startswith(("FAILED ", "ERROR "))]
    return summary, problems


def _server_failure(path: Path) -> str | None:
    """The first `BackendUnavailable` of the log (it names the layer and the server)."""
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        head, sep, message = line.partition("BackendUnavailable: ")
        if sep and head.lstrip().startswith("E "):
            return message.strip()
    return None


def _tail(path: Path, lines: int = 40) -> str:
    text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    return "\n".join(text[-lines:])
