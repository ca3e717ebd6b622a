"""Fixtures, options and the SLA gate of the bench suites (`pytest bench`); the measured
systems' fixtures are in bench/cases.py.

Options: `--bench-strategy NAME|FILE` (the forgetting strategy of the measured system,
default hybrid: the deployed configuration), `--bench-size small|full`,
`--bench-embedder minilm|hashing` (the embedder of the measured calls; seeds always use
hashing), `--bench-rounds N`, `--ltm-1m` (adds a 1,000,000-row LTM table),
`--bench-run-id`, `--bench-report-dir`, `--bench-min-samples`,
`--bench-torch-threads N` (MiniLM's torch threads), `--bench-null-delay-ms MS` (slows the
null backend, to watch the gate fail). See docs/latency.md.

Real backends are the embedded servers under a temporary directory (or `MEMH_DATA_DIR`),
or external ones when `MEMH_REDIS_URL` / `MEMH_PG_URL` / `MEMH_CHROMA_URL` are set. Each
bench session uses a fresh prefix, seeds once (session-scoped fixtures), and drops what
it created at the end.

The gate runs in `pytest_sessionfinish`, after every benchmark: it checks each
operation's raw timings (memharness/verdict/samples.py), writes
`<report-dir>/<run-id>/bench.json`, and turns the exit status into a failure on a breach.
"""

from __future__ import annotations

import os
import random
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr

from bench import cases
from bench.cases import RUN, record_seeding
from bench.config import (
    DEFAULT_STRATEGY,
    LTM_1M,
    SIZES,
    BenchCase,
    BenchConfig,
    size_label,
)
from bench.machine import MachineProbe, load_reference, probe_key
from bench.measure import (
    Measure,
    OpSamples,
    Recorder,
    Setup,
    report,
    run_pedantic,
    table,
    write_report,
)
from bench.null_backend import slowed
from bench.seed import (
    Texts,
    scratch_dir,
)
from memharness.verdict.intervals import CONFIDENCE, RESAMPLES, SEED
from memharness.verdict.limits import SLA_MS
from memharness.verdict.samples import GateOutcome
from reference.crypto import generate_key
from reference.embedding import CachedEmbedder, HashingEmbedder, make_minilm
from reference.factory import describe_backends
from reference.policy.loading import load_strategy
from reference.policy.strategy import Strategy, StrategyError
from reference.settings import Settings
from reference.stm.chroma_client import describe_chroma
from reference.text_interfaces import Embedder

RECORDER = pytest.StashKey[Recorder]()
OUTCOME = pytest.StashKey[tuple[GateOutcome, Path]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memharness bench")
    group.addoption(
        "--bench-strategy",
        default=DEFAULT_STRATEGY,
        help="the measured system's forgetting strategy: a built-in name or a YAML file",
    )
    group.addoption("--bench-size", choices=sorted(SIZES), default="small")
    group.addoption("--bench-embedder", choices=["minilm", "hashing"], default="minilm")
    group.addoption("--bench-rounds", type=int, default=None, help="calls per operation")
    group.addoption("--ltm-1m", action="store_true", help="also measure a 1M-row LTM table")
    group.addoption("--bench-run-id", default=None, help="default: bench-<utc time>-<hex>")
    group.addoption("--bench-report-dir", default="reports")
    group.addoption("--bench-min-samples", type=int, default=200)
    group.addoption(
        "--bench-torch-threads",
        type=int,
        default=None,
        help="torch threads of MiniLM (default: MEMH_EMBEDDER_THREADS, else torch's own)",
    )
    group.addoption(
        "--bench-slow",
        metavar="OP=MS",
        action="append",
        default=[],
        help="busy-wait MS inside every timed call of operation OP on the real backend "
        "(repeatable): a regression on purpose, to measure what the SLA gate catches",
    )
    group.addoption(
        "--bench-null-delay-ms",
        type=float,
        default=0.0,
        help="slow every null-backend operation by this much (to see the gate fail)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(cases)  # the measured systems' fixtures
    # The project's addopts skip benchmarks (they must not run with tests/); here they
    # are the point. This runs before pytest-benchmark reads its options (trylast).
    config.option.benchmark_skip = False
    config.option.benchmark_disable = False
    run_id = config.getoption("--bench-run-id") or (
        f"bench-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:6]}"
    )
    config.stash[RECORDER] = Recorder(reference=load_reference())
    config.stash[RUN] = {
        "run_id": run_id,
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "started_perf": time.perf_counter(),
        "seeding_s": {},
        # A noisy machine widens the intervals; the load says how noisy it was.
        "loadavg_start": [round(x, 2) for x in os.getloadavg()],
        "cpu_count": os.cpu_count(),
    }


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    # Session scope groups the tests by parameter, so each seeded store is built once.
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", ["null", "real"], scope="session")
    if "ltm_size" in metafunc.fixturenames:
        rows = _config(metafunc.config).ltm_rows
        sizes: list[str | int] = ["null", *rows]
        ids = ["null", *(size_label(r) for r in rows)]
        metafunc.parametrize("ltm_size", sizes, ids=ids, scope="session")


@pytest.hookimpl(trylast=True)  # after pytest's own grouping by fixture parameters
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The background operations last: a sweep sample writes and removes a batch of STM
    # records, churn that must not be in the index while the turn's operations are timed.
    items.sort(key=lambda item: item.path.name == "test_background_bench.py")


def _config(config: pytest.Config) -> BenchConfig:
    size = str(config.getoption("--bench-size"))
    sizes = SIZES[size]
    rows = sizes.ltm_rows + ((LTM_1M,) if config.getoption("--ltm-1m") else ())
    return BenchConfig(
        strategy=_strategy(str(config.getoption("--bench-strategy"))),
        size=size,
        sizes=sizes,
        embedder=str(config.getoption("--bench-embedder")),
        rounds=int(config.getoption("--bench-rounds") or sizes.rounds),
        warmup=sizes.warmup,
        ltm_rows=rows,
        min_samples=int(config.getoption("--bench-min-samples")),
        slow_ms=_slow_ms(config.getoption("--bench-slow")),
    )


def _strategy(value: str) -> Strategy:
    try:
        return load_strategy(value)
    except StrategyError as exc:
        raise pytest.UsageError(f"--bench-strategy: {exc}") from None


def _slow_ms(specs: list[str]) -> dict[str, float]:
    """`--bench-slow OP=MS` options as {op: ms}; a malformed one is a usage error."""
    slow: dict[str, float] = {}
    for spec in specs:
        op, sep, ms = spec.rpartition("=")
        try:
            delay = float(ms)
        except ValueError:
            delay = -1.0
        if not sep or not op or not delay >= 0:
            raise pytest.UsageError(f"--bench-slow: expected OP=MS with MS >= 0, got {spec!r}")
        slow[op] = delay
    return slow


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="session")
def bench_config(pytestconfig: pytest.Config) -> BenchConfig:
    return _config(pytestconfig)


@pytest.fixture(scope="session")
def bench_settings(pytestconfig: pytest.Config, bench_config: BenchConfig) -> Settings:
    """Settings from MEMH_* (URLs, data dir), forced to real backends and a fresh prefix."""
    overrides: dict[str, Any] = {
        "backend": "embedded",
        "embedder": bench_config.embedder,
        "prefix": f"b{uuid.uuid4().hex[:10]}",
    }
    if "MEMH_DATA_DIR" not in os.environ:
        overrides["data_dir"] = scratch_dir()
    strategy = bench_config.strategy
    if strategy.pii is not None and strategy.pii.encrypt_ltm:
        # A key of this run only: the bench's data is thrown away with its prefix.
        overrides["encryption_key"] = SecretStr(generate_key())
    settings = Settings(**overrides)
    # Long lifetimes for the stores' own defaults (a strategy's TTLs replace them): a full
    # run with --ltm-1m outlasts the default 30 min session and 1 h STM TTLs.
    day = 86_400.0
    settings = settings.model_copy(
        update={
            "session": settings.session.model_copy(update={"ttl_s": day}),
            "stm": settings.stm.model_copy(update={"ttl_s": day}),
        }
    )
    pytestconfig.stash[RUN]["backends"] = describe_backends(settings)
    return settings


@pytest.fixture(scope="session")
def query_embedder(
    pytestconfig: pytest.Config, bench_config: BenchConfig, bench_settings: Settings
) -> CachedEmbedder:
    """The embedder of measured calls, with the LRU cache a real deployment runs.

    Torch threads: `--bench-torch-threads`, else MEMH_EMBEDDER_THREADS, else torch's own.
    """
    started = time.perf_counter()
    threads = pytestconfig.getoption("--bench-torch-threads") or bench_settings.embedder_threads
    pytestconfig.stash[RUN]["torch_threads"] = threads
    inner: Embedder = (
        make_minilm(bench_settings.embedder_runtime, threads=threads)
        if bench_config.embedder == "minilm"
        else HashingEmbedder()
    )
    record_seeding(pytestconfig, "load_embedder", time.perf_counter() - started)
    return CachedEmbedder(inner, maxsize=max(bench_settings.embedding_cache_size, 1_000))


@pytest.fixture(scope="session")
def texts() -> Texts:
    return Texts(seed=7)


@pytest.fixture(scope="session")
def recorder(pytestconfig: pytest.Config) -> Recorder:
    """Where measured samples go; the gate reads it at the end of the session."""
    return pytestconfig.stash[RECORDER]


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> random.Random:
    """Per-test, seeded by the test's id: the same picks on every run."""
    return random.Random(request.node.nodeid)


@pytest.fixture(scope="session")
def machine_probe(
    pytestconfig: pytest.Config,
    bench_config: BenchConfig,
    real_case: BenchCase,
    query_embedder: CachedEmbedder,
    recorder: Recorder,
) -> Iterator[MachineProbe]:
    """The machine probe (`bench.machine`) on the real case's Chroma client and the
    measured calls' model (past its cache), in a collection of its own."""
    stm = real_case.system.stm
    client = getattr(stm, "client", None)
    if client is None:
        raise pytest.UsageError("the bench's machine probe needs the STM layer on Chroma")
    probe = MachineProbe(
        query_embedder.inner, client, f"{real_case.system.session.namespace.stm_collection}-probe"
    )
    recorder.machine_key = probe_key(
        embedder=bench_config.embedder,
        torch_threads=pytestconfig.stash[RUN]["torch_threads"],
        chroma=describe_chroma(client),
    )
    probe.sample()  # warm: its first calls pay for the collection's first writes
    try:
        yield probe
    finally:
        probe.close()


@pytest.fixture
def measure(
    request: pytest.FixtureRequest, benchmark: Any, recorder: Recorder, bench_config: BenchConfig
) -> Measure:
    """`measure(op, layer, target, setup=..., case=..., params=...)`: time `target` once
    per round under pytest-benchmark and record the raw samples for the gate; on the real
    backends, between two runs of the machine probe (`bench.machine`)."""

    def run(
        op: str,
        layer: str,
        target: Callable[..., object],
        *,
        case: BenchCase,
        setup: Setup | None = None,
        params: dict[str, Any] | None = None,
        rounds: int | None = None,
        warmup: int | None = None,
    ) -> OpSamples:
        info = {"size": bench_config.size, "embedder": bench_config.embedder, **(params or {})}
        slow_ms = bench_config.slow_ms.get(op) if case.backend == "real" else None
        if slow_ms is not None:
            target = slowed(target, slow_ms)
            info["injected_delay_ms"] = slow_ms
        benchmark.group = op
        benchmark.extra_info.update(info, backend=case.backend, sla_ms=SLA_MS.get(layer))
        probe: MachineProbe | None = None
        if case.backend == "real":
            probe = request.getfixturevalue("machine_probe")
        probes = probe.sample() if probe is not None else []
        samples = run_pedantic(
            benchmark,
            target,
            rounds=bench_config.rounds if rounds is None else rounds,
            warmup=bench_config.warmup if warmup is None else warmup,
            setup=setup,
        )
        probes += probe.sample() if probe is not None else []
        recorded = OpSamples(
            op=op,
            layer=layer,
            backend=case.backend,
            samples_ms=samples,
            params=info,
            probe_ms=probes,
        )
        recorder.add(recorded)
        return recorded

    return run


# --------------------------------------------------------------------------- the gate


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    recorder = config.stash.get(RECORDER, None)
    if recorder is None or not recorder.ops:
        return
    bench = _config(config)
    gate_params = {
        "rule": "FAIL when the lower bound of the p95's bootstrap CI exceeds the SLA; "
        "INSUFFICIENT (a failure) below min_samples",
        "slas_ms": SLA_MS,
        "min_samples": bench.min_samples,
        "resamples": RESAMPLES,
        "confidence": CONFIDENCE,
        "seed": SEED,
    }
    outcome = recorder.evaluate(min_samples=bench.min_samples)
    started: dict[str, Any] = config.stash[RUN]
    run = dict(started)
    run["wall_s"] = round(time.perf_counter() - run.pop("started_perf"), 1)
    run.update(
        finished_at=datetime.now(UTC).isoformat(timespec="seconds"),
        loadavg_end=[round(x, 2) for x in os.getloadavg()],
        size=bench.size,
        sizes=bench.sizes.describe() | {"ltm_rows": list(bench.ltm_rows)},
        rounds=bench.rounds,
        embedder=bench.embedder,
        strategy=bench.strategy.name,
        strategy_fingerprint=bench.strategy.fingerprint(),
        pytest_exitstatus=int(exitstatus),
    )
    document = report(outcome, recorder, run=run, gate_params=gate_params)
    path = Path(str(config.getoption("--bench-report-dir"))) / run["run_id"] / "bench.json"
    config.stash[OUTCOME] = (outcome, write_report(path, document))
    if not outcome.passed and session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    found = config.stash.get(OUTCOME, None)
    if found is None:
        return
    outcome, path = found
    terminalreporter.section("SLA gate (p95, bootstrap CI)")
    for line in table(outcome.checks):
        terminalreporter.write_line(line)
    terminalreporter.write_line("")
    terminalreporter.write_line(outcome.summary(), red=not outcome.passed, green=outcome.passed)
    terminalreporter.write_line(f"report: {path}")
