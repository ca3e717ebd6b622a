"""The maintenance process beside a small stream of turns: its CPU share and event lag.

A quick, one-machine look (the full measurement is `memharness load --strategy S`): this
process serves turns at `--rate` turns/s over `--users` users (with `ServingBackground`),
publishes `--events-per-s` business events on the Redis Stream, and runs
`memharness maintain` as its own process on the same embedded servers (Redis, pgserver)
and a `chroma run` server. After `--duration` it stops the maintenance process with
SIGTERM and prints its figures: CPU seconds per wall second (share of one core), sweep
cycles, changes, and event lag p50/p95 (published -> applied).

  .venv/bin/python -m bench.maintenance_beside_turns --duration 60 --rate 10 \\
      --strategy hybrid --time-scale 60

`--time-scale N` runs both processes on one `ScaledClock` (same origins), so sweeps come
`N` times as often as `sweep_interval_s` says. The hashing embedder keeps the turns cheap
(MiniLM: `--embedder minilm`).
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from reference.clock import Clock, ScaledClock, SystemClock
from reference.factory import build_event_bus, build_memory_system
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.maintenance import ServingBackground
from reference.models import Event
from reference.session.embedded_redis import start_embedded_redis
from reference.settings import Settings
from reference.stm.chroma_server import start_chroma_server

UTTERANCES = [
    "I always want my receipts by e-mail",
    "My new address is 12 Oak Street",
    "Please ship order o{n} to my office",
    "what is the status of ticket t{n}?",
    "I prefer window seats on long flights",
    "thanks, that is all for now",
]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--duration", type=float, default=60.0, help="wall seconds")
    parser.add_argument("--rate", type=float, default=10.0, help="turns per second")
    parser.add_argument("--users", type=int, default=10)
    parser.add_argument("--events-per-s", type=float, default=2.0)
    parser.add_argument("--strategy", default="hybrid")
    parser.add_argument("--time-scale", type=float, default=None)
    parser.add_argument("--embedder", default="hashing", choices=["hashing", "minilm"])
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--out", type=Path, default=None, help="write the figures JSON here")
    args = parser.parse_args(argv)

    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="maint-bench-"))
    key = os.environ.get("MEMH_ENCRYPTION_KEY") or base64.b64encode(os.urandom(32)).decode()
    redis_server = start_embedded_redis(data_dir / "redis")
    pg = start_embedded_postgres(data_dir / "pg")
    chroma = start_chroma_server(data_dir / "chroma")
    prefix = f"mb{os.getpid()}"
    settings = Settings(
        backend="embedded",
        redis_url=redis_server.url,
        pg_url=pg.url,
        chroma_url=chroma.url,
        prefix=prefix,
        embedder=args.embedder,
        data_dir=data_dir,
        encryption_key=key,
    )
    wall = SystemClock().now()
    clock: Clock = SystemClock()
    clock_args: list[str] = []
    if args.time_scale is not None:
        clock = ScaledClock(args.time_scale, origin=wall, wall_origin=wall)
        clock_args = ["--time-scale", str(args.time_scale), "--clock-origin", repr(wall),
                      "--wall-origin", repr(wall)]  # fmt: skip
    figures_path = data_dir / "maintenance.json"
    env = dict(os.environ)
    env.update(
        MEMH_BACKEND="embedded",
        MEMH_REDIS_URL=redis_server.url,
        MEMH_PG_URL=pg.url,
        MEMH_CHROMA_URL=chroma.url,
        MEMH_PREFIX=prefix,
        MEMH_EMBEDDER=args.embedder,
        MEMH_DATA_DIR=str(data_dir),
        MEMH_ENCRYPTION_KEY=key,
    )
    system = build_memory_system(settings, strategy=args.strategy, clock=clock)
    bus = build_event_bus(settings)
    maint = subprocess.Popen(
        [sys.executable, "-m", "memharness.cli", "maintain", "--strategy", args.strategy,
         "--replica", "bench", "--figures", str(figures_path), "--figures-every", "1",
         *clock_args],
        env=env,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not figures_path.exists():  # wait for the process to be up (bounded)
            if maint.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the maintenance process did not start")
            time.sleep(0.1)
        turn_ms = drive(system, bus, args, clock)
    finally:
        maint.send_signal(signal.SIGTERM)
        maint.wait(timeout=120)
        system.dispose()
        bus.dispose()
        chroma.stop()
    figures = json.loads(figures_path.read_text())
    figures["driver"] = {
        "turns": len(turn_ms),
        "turn_ms_p95": float(np.percentile(turn_ms, 95)) if turn_ms else None,
        "rate": args.rate,
        "events_per_s": args.events_per_s,
        "embedder": args.embedder,
    }
    print(
        f"maintenance beside {len(turn_ms)} turns in {args.duration:g} s "
        f"({args.strategy}, time scale {args.time_scale or 1:g}): "
        f"CPU {figures['cpu_s'] / figures['wall_s']:.1%} of one core, "
        f"{figures['cycles']} sweeps (p95 {figures['cycle_ms']['p95']:.1f} ms), "
        f"{figures['changed']} changed, {figures['sessions_consolidated']} sessions "
        f"consolidated, {figures['events_applied']} events, lag p50 "
        f"{figures['event_lag_ms']['p50']:.1f} ms p95 {figures['event_lag_ms']['p95']:.1f} ms, "
        f"{figures['errors']} errors"
    )
    if args.out is not None:
        args.out.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")
    return 0


def drive(system: object, bus: object, args: argparse.Namespace, clock: Clock) -> list[float]:
    """Turns at `args.rate` (open loop) and events at `args.events_per_s` for the duration."""
    from reference.forgetting.events import EventBus
    from reference.system import MemorySystem

    assert isinstance(system, MemorySystem) and isinstance(bus, EventBus)
    rng = random.Random(7)
    turn_ms: list[float] = []
    start = time.monotonic()
    next_turn = next_event = start
    n = 0
    with ServingBackground(system, interval_s=1.0):
        while (now := time.monotonic()) < start + args.duration:
            if now >= next_event and args.events_per_s > 0:
                buyer = f"u{rng.randrange(args.users)}"
                bus.publish(Event("order_completed", buyer, clock.now(), {"order_id": f"o{n}"}))
                next_event += 1 / args.events_per_s
            if now >= next_turn:
                n += 1
                user = rng.randrange(args.users)
                text = rng.choice(UTTERANCES).format(n=n)
                began = time.perf_counter()
                system.turn(user_id=f"u{user}", session_id=f"s{user}-{n // 50}", text=text)
                turn_ms.append((time.perf_counter() - began) * 1000)
                next_turn += 1 / args.rate
            time.sleep(max(0.0, min(next_turn, next_event) - time.monotonic()))
    return turn_ms


if __name__ == "__main__":
    sys.exit(main())
