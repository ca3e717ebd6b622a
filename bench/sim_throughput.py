"""Simulator throughput: turns per second, the speed-up per added worker, peak RSS.

Generates a population (reproducible: domain, users, seed), replays it under one
strategy through `memharness run`'s own Simulator (Ray actors, one shard each) once per
worker count, and prints per run: turns/s (turns over the slowest shard's wall time),
the wall time, the time spent inside the reference memory (turns, events, probes,
sweeps) of that shard, the harness's share, and the peak RSS of each worker. Nothing is
written under reports/.

Turns/s depend on the machine as much as on the code: the header prints the machine's
speed as the time of a fixed pure-Python loop (`python_loop_ns`, ns per iteration; the
same commit replays about as many turns/s faster as this figure is smaller), so figures
taken on two machines can be compared, or said not to be comparable.

usage:
  .venv/bin/python -m bench.sim_throughput [--users 2000] [--domain ecommerce] [--seed 1]
      [--strategy hybrid] [--backend memory] [--embedder hashing] [--workers 1,2]
      [--cohort-users 5000] [--repeat 1]

With `--repeat N` the worker counts run in turn, N rounds (1, 2, 1, 2, ...): this machine's
speed drifts over minutes, so a speed-up is read within a round (each round's rate over
the same round's first), and the summary gives the median of the rounds.

A worker replays at most `--cohort-users` users at once (the rest in later cohorts), so
its peak RSS follows the cohort, not the population.

`--command` measures the whole `memharness run` command instead: for each population
size (`--sizes 2000,8000`) and strategy (`--strategies hybrid,keep_all`) it generates the
scenario file once, runs the command `--repeat` times (default 3) with 2 workers on the
memory backend and the hashing embedder, and prints the median of the replay's turns/s
(results.json), the command's wall seconds and its fixed costs (`setup_s`); then the top
entries of a profile (cProfile, CPU time) of one worker's replay of the smallest size,
in process:

  .venv/bin/python -m bench.sim_throughput --command [--sizes 2000,8000]
      [--strategies hybrid,keep_all] [--repeat 3] [--top 15]

The CPU time of one worker's replay without a profiler, to compare commits on a loaded
machine: `bench.shard_replay`.

The embedded stack with MiniLM: `--backend embedded --embedder minilm` (set
MEMH_EMBEDDER_THREADS=1 with two workers on two cores).
"""

from __future__ import annotations

import argparse
import json
import secrets
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from memharness.run_inputs import population
from memharness.sim.plan import COHORT_USERS, ScenarioInput, StrategySpec
from memharness.sim.runner import RunOptions, StrategyOutcome
from memharness.sim.simulator import Simulator
from reference.crypto import generate_key
from reference.settings import Settings


def python_loop_ns(iterations: int = 5_000_000, repeats: int = 3) -> float:
    """Nanoseconds per iteration of a fixed pure-Python loop, the best of `repeats`: the
    machine's single-core interpreter speed, printed beside the turns/s."""
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        total = 0
        for i in range(iterations):
            total += i * i
        best = min(best, time.perf_counter() - started)
    return best / iterations * 1e9


def replay(
    settings: Settings, scenario: ScenarioInput, spec: StrategySpec, options: RunOptions
) -> dict[str, Any]:
    """The metrics of one replay of `scenario` under `spec`."""
    found: list[StrategyOutcome] = []
    with Simulator(settings, options, run_tag=secrets.token_hex(2)) as sim:
        sim.run_scenario(0, scenario, [spec], on_result=found.append)
    (outcome,) = found
    if outcome.status != "ok" or outcome.figures is None:
        raise SystemExit(f"{spec.label} {outcome.status}: {outcome.error}")
    metrics: dict[str, Any] = outcome.figures["metrics"]
    return metrics


def command_runs(args: argparse.Namespace) -> None:
    """`--command`: the whole `memharness run`, median of `--repeat` (module docstring)."""
    scratch = Path(tempfile.mkdtemp(prefix="memh-simcmd-"))
    memharness = str(Path(sys.executable).with_name("memharness"))
    print(f"machine: python_loop_ns {python_loop_ns():.0f}")
    print(f"{'users':>6} {'strategy':<10} {'turns/s':>9} {'command s':>10}  fixed costs (s)")
    for users in (int(n) for n in args.sizes.split(",")):
        path = scratch / f"{args.domain}-{users}.yaml"
        generate = ["scenarios", "generate", "--domain", args.domain, "--users", str(users)]
        subprocess.run(
            [memharness, *generate, "--seed", str(args.seed), "-o", str(path)],
            check=True,
            capture_output=True,
        )
        for strategy in args.strategies.split(","):
            rates, walls, setups = [], [], []
            for n in range(args.repeat):
                run_id = f"{users}-{strategy}-{n}"
                started = time.perf_counter()
                command = [memharness, "run", "--scenario", str(path), "--strategy", strategy]
                command += ["--backend", "memory", "--embedder", "hashing", "--workers", "2"]
                command += ["--no-progress", "--out", str(scratch), "--run-id", run_id]
                subprocess.run(command, check=True, capture_output=True)
                walls.append(time.perf_counter() - started)
                doc = json.loads((scratch / run_id / "results.json").read_text())
                (entry,) = doc["scenarios"][0]["strategies"]
                rates.append(entry["metrics"]["turns_per_s"])
                setups.append(doc["setup_s"])
            fixed = {k: statistics.median(s[k] for s in setups) for k in setups[0]}
            print(
                f"{users:>6} {strategy:<10} {statistics.median(rates):>9,.0f} "
                f"{statistics.median(walls):>10.1f}  "
                + ", ".join(f"{k} {v:.1f}" for k, v in fixed.items()),
                flush=True,
            )
    smallest = min(int(n) for n in args.sizes.split(","))
    profile_top(args.domain, smallest, args.seed, args.strategies.split(",")[0], args.top)


def profile_top(domain: str, users: int, seed: int, strategy: str, top: int) -> None:
    """The top entries (own CPU time) of one worker's replay, half the users, in process."""
    import cProfile
    import pstats

    from memharness.sim.plan import probe_times, sample_times
    from memharness.sim.replay import SimUser
    from memharness.sim.runner import ShardWorker

    scenario = population(domain, users, seed)
    settings = Settings(
        backend="memory",
        embedder="hashing",
        data_dir=Path(tempfile.mkdtemp(prefix="memh-simprof-")),
        encryption_key=SecretStr(generate_key()),
    )
    worker = ShardWorker(settings)
    worker.load("p", [SimUser(i, u) for i, u in enumerate(scenario.users) if i % 2 == 0], 5)
    spec = StrategySpec.parse(strategy)
    times = [step.at for user in scenario.users for step in user.timeline]
    options = RunOptions()
    profile = cProfile.Profile(time.process_time)
    began = time.process_time()
    result = profile.runcall(
        worker.replay,
        "p",
        spec.strategy,
        "simprof",
        options.sweep_ticks(spec.strategy, times),
        sample_times(times, options.sample_every_s),
        peak_samples=probe_times(scenario.users),
    )
    cpu = time.process_time() - began
    print(
        f"\nreplay of worker 0 of 2: {strategy}, {users} users, {result.turns} turns, "
        f"{cpu:.2f} CPU s under cProfile: {cpu / result.turns * 1e6:,.0f} CPU us a turn"
    )
    pstats.Stats(profile).sort_stats("tottime").print_stats(top)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=2000)
    parser.add_argument("--domain", default="ecommerce")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--backend", choices=["memory", "embedded"], default="memory")
    parser.add_argument("--embedder", choices=["hashing", "minilm"], default="hashing")
    parser.add_argument("--workers", default="1,2", help="worker counts, comma-separated")
    parser.add_argument(
        "--cohort-users", type=int, default=COHORT_USERS, help="users a worker replays at once"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="rounds of the worker counts, run in turn"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the rows here")
    parser.add_argument("--command", action="store_true", help="time the whole run command")
    parser.add_argument("--sizes", default="2000,8000", help="--command: users, comma-separated")
    parser.add_argument("--strategies", default="hybrid,keep_all", help="--command: strategies")
    parser.add_argument("--top", type=int, default=15, help="--command: profile entries shown")
    args = parser.parse_args()
    if args.command:
        args.repeat = max(args.repeat, 3) if args.repeat == 1 else args.repeat
        command_runs(args)
        return
    if args.repeat < 1:
        parser.error(f"--repeat must be at least 1, got {args.repeat}")

    started = time.perf_counter()
    scenario = population(args.domain, args.users, args.seed)
    built_s = time.perf_counter() - started
    settings = Settings(
        backend=args.backend,
        embedder=args.embedder,
        data_dir=Path(tempfile.mkdtemp(prefix="memh-simbench-")),
        encryption_key=SecretStr(generate_key()),
    )
    spec = StrategySpec.parse(args.strategy)
    loop_ns = python_loop_ns()
    print(
        f"{scenario.name}: {len(scenario.users)} users generated in {built_s:.1f}s; "
        f"strategy {spec.label}, backend {args.backend}, embedder {args.embedder}; "
        f"machine: python_loop_ns {loop_ns:.0f}"
    )
    header = (
        f"{'workers':>7} {'turns/s':>9} {'speed-up':>8} {'wall s':>8} {'inside s':>9} "
        f"{'wall/inside':>11}  peak RSS MB per worker"
    )
    print(header)
    rows = []
    counts = [int(w) for w in args.workers.split(",")]
    for round_ in range(args.repeat):
        first: float | None = None
        for workers in counts:
            options = RunOptions(workers=workers, cohort_users=args.cohort_users)
            m = replay(settings, scenario, spec, options)
            rate = float(m["turns_per_s"])
            first = first or rate
            ratio = m["wall_s"] / m["inside_s"] if m["inside_s"] else float("nan")
            rss = m["peak_rss_mb_by_shard"]
            print(
                f"{workers:>7} {rate:>9,.0f} {rate / first:>7.2f}x {m['wall_s']:>8.2f} "
                f"{m['inside_s']:>9.2f} {ratio:>11.2f}  {', '.join(f'{r:,.0f}' for r in rss)}",
                flush=True,
            )
            kept = ("turns", "probes", "wall_s", "inside_s", "turns_per_s", "peak_rss_mb_by_shard")
            rows.append(
                {
                    "round": round_,
                    "workers": workers,
                    "speed_up": rate / first,
                    **{k: m[k] for k in (*kept, "recall_at_k")},
                }
            )
    if args.repeat > 1:
        print(f"median of {args.repeat} rounds:")
        for workers in counts:
            mine = [r for r in rows if r["workers"] == workers]
            rate = statistics.median(r["turns_per_s"] for r in mine)
            speed_up = statistics.median(r["speed_up"] for r in mine)
            low, high = min(r["speed_up"] for r in mine), max(r["speed_up"] for r in mine)
            print(
                f"{workers:>7} {rate:>9,.0f} {speed_up:>7.2f}x  "
                f"(speed-up within a round: {low:.2f}-{high:.2f}x)"
            )
    if args.json is not None:
        args.json.write_text(
            json.dumps(
                {
                    "args": vars(args) | {"json": str(args.json)},
                    "python_loop_ns": loop_ns,
                    "rows": rows,
                },
                indent=2,
            )
        )


if __name__ == "__main__":
    main()
