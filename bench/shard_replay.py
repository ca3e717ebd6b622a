"""One worker's shard, replayed in this process: the unit to profile and to compare commits.

`bench.sim_throughput` measures the simulator as users run it (Ray actors, one shard
each); this replays the shard of worker 0 of `--workers` the same way (`ShardWorker.load`
then `.replay`, the same ticks and samples as `Simulator`), without Ray, `--reps` times
in one process, and prints each replay's wall and CPU time. A profiler or a counter can
then wrap the whole process:

  .venv/bin/py-spy record --rate 500 --format raw -o raw.txt -- \\
      .venv/bin/python -m bench.shard_replay --users 2000 --reps 1
  PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \\
      .venv/bin/python -m bench.shard_replay --users 400 --reps N

This machine's wall clock drifts more between runs than a change of a few percent moves
it; instruction counts do not. The instructions of one replay: a process with `--reps N`
less one with `--reps N-1` (loading varies by ~1% of a 200-user shard's replay between
processes, so count a few). `--dump FILE` writes the last replay's figures but its
timings as JSON, to show that a change left them as they were (`cmp` two dumps).
`--backend embedded` replays on the real servers (Redis, Chroma, PostgreSQL), started
in this process before the first replay, their files in RAM as a run's workers keep
them.
"""

from __future__ import annotations

import argparse
import json
import secrets
import tempfile
import time
from dataclasses import fields, is_dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from memharness.run_inputs import population
from memharness.sim.plan import StrategySpec, sample_times, shard_of
from memharness.sim.replay import SimUser
from memharness.sim.runner import RunOptions, ShardWorker
from reference.crypto import generate_key
from reference.factory import start_embedded_servers
from reference.settings import Settings

#: What differs between two replays of the same shard by nothing but the machine.
TIMINGS = ("wall_s", "inside_s", "peak_rss_mb", "histograms")
#: The same, in the monitoring tally: how long the sweeps' cleanups took.
MONITOR_TIMINGS = ("cleanup_s", "cleanup_max_s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=2000, help="users in the population")
    parser.add_argument("--workers", type=int, default=2, help="the shard is worker 0's of these")
    parser.add_argument("--domain", default="ecommerce")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--reps", type=int, default=3, help="replays, one after another")
    parser.add_argument("--dump", type=Path, default=None, help="the last replay's figures")
    parser.add_argument(
        "--backend",
        choices=["memory", "embedded"],
        default="memory",
        help="embedded: the real servers, started in this process, their files in RAM "
        "(/dev/shm) as a run's workers keep them",
    )
    args = parser.parse_args()
    if args.workers < 1 or args.reps < 0:
        parser.error("--workers must be at least 1 and --reps at least 0")

    scenario = population(args.domain, args.users, args.seed)
    ram = Path("/dev/shm")
    settings = Settings(
        backend=args.backend,
        embedder="hashing",
        data_dir=Path(tempfile.mkdtemp(prefix="memh-shard-", dir=ram if ram.is_dir() else None)),
        encryption_key=SecretStr(generate_key()),
    )
    spec = StrategySpec.parse(args.strategy)
    options = RunOptions()
    users = [
        SimUser(i, user) for i, user in enumerate(scenario.users) if shard_of(i, args.workers) == 0
    ]
    times = [step.at for user in scenario.users for step in user.timeline]
    ticks = options.sweep_ticks(spec.strategy, times)
    samples = sample_times(times, options.sample_every_s)
    servers = start_embedded_servers(settings)  # none in memory; started before timing
    worker = ShardWorker(settings)
    worker.load("shard", users, options.k)
    print(
        f"{scenario.name}: worker 0 of {args.workers}, {len(users)} users, {spec.label}, "
        f"{args.backend} backend, {len(ticks)} sweep ticks"
    )
    result = None
    for rep in range(args.reps):
        wall, cpu = time.perf_counter(), time.process_time()
        prefix = f"replay{rep}_{secrets.token_hex(2)}"
        result = worker.replay("shard", spec.strategy, prefix, ticks, samples)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        print(
            f"replay {rep}: {wall:.3f} s wall, {cpu:.3f} s CPU, {result.turns} turns, "
            f"{result.probes} probes, {result.inside_s:.3f} s inside the reference",
            flush=True,
        )
    del servers
    if args.dump is not None and result is not None:
        figures = {k: v for k, v in _plain(result).items() if k not in TIMINGS}
        for key in MONITOR_TIMINGS:
            figures["monitor"].pop(key, None)
        args.dump.write_text(json.dumps(figures, sort_keys=True, default=str))


def _plain(value: Any) -> Any:
    """JSON-ready figures: dataclasses and mappings (Counters, defaultdicts: `asdict`
    rebuilds them with their own type and miscounts or fails) as plain dicts."""
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


if __name__ == "__main__":
    main()
