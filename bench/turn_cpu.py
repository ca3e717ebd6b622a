"""CPU time per turn of the reference memory, in every process that does its work: this
one (the layers' code, MiniLM, the embedded Chroma) and the embedded Redis and PostgreSQL
servers it starts under a fresh data directory. CPU, not wall time: a shared machine
stretches the second, not much the first.

    python -m bench.turn_cpu --turns 300                        # MiniLM on ONNX (the default)
    MEMH_EMBEDDER_RUNTIME=torch python -m bench.turn_cpu        # on torch
    python -m bench.turn_cpu --profile /tmp/turn.prof           # and cProfile the turns
    python -m bench.turn_cpu --compare torch,onnx,onnx-int8     # runtimes side by side

Users say fresh utterances (instructions, preferences, facts, chit-chat: a cache miss
each) under a strategy (`--strategy`, default hybrid), a few turns per session; the first
`--warmup` turns are not counted. Prints CPU ms per turn per process and in all, the
turn's wall p50/p95, and with `--profile` the top functions by cumulative time.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
from pydantic import SecretStr

from reference.crypto import generate_key
from reference.factory import build_memory_system, start_embedded_servers
from reference.settings import Settings

SAYINGS = [
    "Please always ship my orders to the office at {n} Harbour Street.",
    "I prefer aisle seats, and vegetarian meals on flight {n}.",
    "My daughter's birthday is on the {n}th, remind me a week before.",
    "Thanks, that's great!",
    "Remember that my new phone number ends in {n}.",
    "What did I say about the hotel in Lisbon? ({n})",
    "I'm allergic to peanuts; order {n} must not contain any.",
    "ok",
    "Use SF Express for delivery from now on, order {n}.",
    "My manager is called Dana and the project is codenamed Falcon-{n}.",
]


def _servers(data_dir: Path) -> list[psutil.Process]:
    """The server processes of this run: PostgreSQL's (its command line names `data_dir`)
    with their backends, and Redis's (its command line names its socket)."""
    from reference.session.embedded_redis import start_embedded_redis

    marks = (str(data_dir), str(start_embedded_redis(data_dir / "redis").socket_path))
    found = []
    for proc in psutil.process_iter(["cmdline", "pid"]):
        try:
            line = " ".join(proc.info["cmdline"] or ())
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        if any(mark in line for mark in marks) and proc.pid != psutil.Process().pid:
            found.append(proc)
            found += proc.children(recursive=True)  # PostgreSQL's backends
    return list({p.pid: p for p in found}.values())


def _cpu(procs: list[psutil.Process]) -> dict[str, float]:
    out: dict[str, float] = {}
    for proc in procs:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        name = proc.name()
        out[name] = out.get(name, 0.0) + times.user + times.system
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--warmup", type=int, default=30)
    parser.add_argument("--users", type=int, default=20)
    parser.add_argument("--turns-per-session", type=int, default=10)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the counted turns")
    parser.add_argument(
        "--compare",
        metavar="RUNTIMES",
        help="e.g. torch,onnx: one system per MiniLM runtime, each turn said to all in turn",
    )
    args = parser.parse_args(argv)
    if args.compare:
        compare(args, args.compare.split(","))
        return

    data_dir = Path(tempfile.mkdtemp(prefix="memh-turncpu-"))
    settings = Settings(
        data_dir=data_dir,
        prefix=f"turncpu{int(time.time())}",
        encryption_key=SecretStr(generate_key()),  # a fresh one per run, for sealing
    )
    handles = start_embedded_servers(settings)
    system = build_memory_system(settings, strategy=args.strategy)
    print(f"embedder {system.embedder.identity}, strategy {args.strategy}, data {data_dir}")
    me = psutil.Process()

    def turn(i: int) -> float:
        user = f"u{i % args.users}"
        session = f"{user}.s{i // (args.users * args.turns_per_session)}"
        text = SAYINGS[(i // args.users) % len(SAYINGS)].format(n=i)
        started = time.perf_counter()
        system.turn(user_id=user, session_id=session, text=text)
        return (time.perf_counter() - started) * 1000.0

    for i in range(args.warmup):
        turn(i)
    servers = _servers(data_dir)  # after the warm-up: the pools' connections are open
    before_self = time.process_time()
    before = _cpu(servers)
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    wall = [turn(args.warmup + i) for i in range(args.turns)]
    if profiler:
        profiler.disable()
    spent_self = time.process_time() - before_self
    after = _cpu(servers)
    n = args.turns
    print(f"{n} turns; CPU ms per turn:")
    print(f"  this process (layers, MiniLM, Chroma): {spent_self * 1000 / n:.2f}")
    total = spent_self
    for name in sorted(after):
        spent = after[name] - before.get(name, 0.0)
        total += spent
        print(
            f"  {name} ({sum(p.name() == name for p in servers)} processes): {spent * 1000 / n:.2f}"
        )
    print(f"  all: {total * 1000 / n:.2f}")
    print(
        f"wall ms per turn: p50 {np.percentile(wall, 50):.1f}, p95 {np.percentile(wall, 95):.1f}"
        f" (threads of this process: {me.num_threads()})"
    )
    if profiler and args.profile:
        profiler.dump_stats(args.profile)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(35)
    system.dispose()
    del handles


def compare(args: argparse.Namespace, runtimes: list[str]) -> None:
    """Each turn said to one system per runtime (same servers, own namespaces), the order
    rotating; this process's CPU time of each turn is charged to its runtime, so all see
    the same machine. The servers' CPU is the same work for each and is shown per turn."""
    from reference.embedding import make_embedder
    from reference.keys import Namespace

    data_dir = Path(tempfile.mkdtemp(prefix="memh-turncpu-"))
    settings = Settings(
        data_dir=data_dir,
        prefix=f"turncpu{int(time.time())}",
        encryption_key=SecretStr(generate_key()),
    )
    handles = start_embedded_servers(settings)
    systems = {
        name: build_memory_system(
            settings,
            strategy=args.strategy,
            namespace=Namespace(f"{settings.prefix}{n}"),
            embedder=make_embedder(
                "minilm",
                cache_size=settings.embedding_cache_size,
                threads=settings.embedder_threads,
                runtime=name,
            ),
        )
        for n, name in enumerate(runtimes)
    }
    cpu: dict[str, list[float]] = {name: [] for name in runtimes}

    def turn(i: int, count: bool) -> None:
        user = f"u{i % args.users}"
        session = f"{user}.s{i // (args.users * args.turns_per_session)}"
        text = SAYINGS[(i // args.users) % len(SAYINGS)].format(n=i)
        order = runtimes[i % len(runtimes) :] + runtimes[: i % len(runtimes)]
        for name in order:
            started = time.process_time()
            systems[name].turn(user_id=user, session_id=session, text=text)
            if count:
                cpu[name].append((time.process_time() - started) * 1000.0)

    for i in range(args.warmup):
        turn(i, False)
    servers = _servers(data_dir)
    before = _cpu(servers)
    for i in range(args.turns):
        turn(args.warmup + i, True)
    after = _cpu(servers)
    server_ms = (
        sum(after[k] - before.get(k, 0.0) for k in after) * 1000 / (args.turns * len(runtimes))
    )
    print(f"{args.turns} turns to each of {', '.join(runtimes)} ({args.strategy}), interleaved")
    print(f"{'runtime':<10} {'this process: mean':>19} {'p50':>7} {'p95':>7}  (CPU ms per turn)")
    for name in runtimes:
        values = cpu[name]
        print(
            f"{name:<10} {np.mean(values):19.2f} {np.percentile(values, 50):7.2f} "
            f"{np.percentile(values, 95):7.2f}"
        )
    print(f"servers (PostgreSQL, Redis), per turn of either: {server_ms:.2f}")
    for system in systems.values():
        system.dispose()
    del handles


if __name__ == "__main__":
    main()
