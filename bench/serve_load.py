"""Closed-loop turns against a running `memharness serve`: throughput, service and round-trip
time, and each layer's p95 against the default SLAs.

    python -m bench.serve_load --url http://127.0.0.1:8765 --key KEY --clients 16 --seconds 20

Each client is a thread with its own user, sending turns back to back (a new utterance
each time, from templates with varied values, so the embedding cache rarely hits).
Printed: turns/s, p50/p95/p99 of the round trip and of the service time (the
`Server-Timing` header), and the p95 of each layer's timing inside the turn
(`timings_ms`), with the default SLAs (session 5 ms, stm 50, ltm 200, turn 300 on the
round trip). For `memharness load --target` with scenarios and reports, see docs/load.md.
"""

from __future__ import annotations

import argparse
import json
import random
import threading
import time
from collections import defaultdict

import httpx
import numpy as np

from memharness.verdict.limits import SLA_MS

TEMPLATES = [
    "My address is {n} {street} Street, {city}.",
    "I always prefer {courier} for deliveries to {city}.",
    "Please remember that order {n} should go by {courier}.",
    "Where is my order {n}? It was going to {city}.",
    "I am allergic to {food}, please note it for order {n}.",
    "Book a table for {n} at {food} place in {city} tonight.",
    "Can you change the delivery of {n} to {street} Road?",
]
VALUES = {
    "street": ["Baker", "Oxford", "Elm", "Maple", "Church", "High", "Mill", "Park"],
    "city": ["London", "Berlin", "Paris", "Lyon", "Porto", "Oslo", "Graz", "Turin"],
    "courier": ["DHL", "UPS", "FedEx", "Hermes", "DPD", "GLS"],
    "food": ["peanuts", "shellfish", "gluten", "sesame", "sushi", "pasta"],
}


def utterance(rng: random.Random) -> str:
    values = {k: rng.choice(v) for k, v in VALUES.items()}
    return rng.choice(TEMPLATES).format(n=rng.randint(1, 99_999), **values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default="http://127.0.0.1:8765")
    parser.add_argument("--key", required=True)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--warmup", type=float, default=3.0)
    parser.add_argument("--json", default=None, help="also write the figures to this file")
    args = parser.parse_args()

    stop_at = time.monotonic() + args.warmup + args.seconds
    measure_from = time.monotonic() + args.warmup
    lock = threading.Lock()
    rtt: list[float] = []
    service: list[float] = []
    layers: dict[str, list[float]] = defaultdict(list)
    errors: list[str] = []
    run = f"{int(time.time())}"

    def client(number: int) -> None:
        rng = random.Random(f"{run}-{number}")  # new texts each run: the cache must not hit
        headers = {"Authorization": f"Bearer {args.key}"}
        with httpx.Client(base_url=args.url, headers=headers, timeout=30) as http:
            turn = 0
            while (now := time.monotonic()) < stop_at:
                body = {
                    "user_id": f"u{run}-{number}",
                    "session_id": f"s{turn // 20}",
                    "text": utterance(rng),
                }
                started = time.perf_counter()
                reply = http.post("/v1/turn", json=body)
                took = (time.perf_counter() - started) * 1000
                turn += 1
                if now < measure_from:
                    continue
                with lock:
                    if reply.status_code != 200:
                        errors.append(f"{reply.status_code} {reply.text[:200]}")
                        continue
                    rtt.append(took)
                    timing = reply.headers["server-timing"]
                    service.append(float(timing.split("dur=")[1]))
                    for name, ms in reply.json()["timings_ms"].items():
                        layers[name].append(ms)

    threads = [threading.Thread(target=client, args=(i,)) for i in range(args.clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    def pct(values: list[float], q: float) -> float:
        return float(np.percentile(values, q)) if values else float("nan")

    figures = {
        "clients": args.clients,
        "seconds": args.seconds,
        "turns": len(rtt),
        "turns_per_s": len(rtt) / args.seconds,
        "errors": len(errors),
        "round_trip_ms": {f"p{q}": pct(rtt, q) for q in (50, 95, 99)},
        "service_ms": {f"p{q}": pct(service, q) for q in (50, 95, 99)},
        "layer_p95_ms": {name: pct(v, 95) for name, v in sorted(layers.items())},
        "layer_mean_ms": {name: float(np.mean(v)) for name, v in sorted(layers.items())},
    }
    checks = {op: figures["layer_p95_ms"].get(op, float("nan")) for op in SLA_MS if op != "turn"}
    checks["turn"] = figures["round_trip_ms"]["p95"]
    figures["sla"] = {
        op: {"p95": v, "limit": SLA_MS[op], "ok": v <= SLA_MS[op]} for op, v in checks.items()
    }
    print(json.dumps(figures, indent=1))
    if errors:
        print("first errors:", errors[:3])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=1)


if __name__ == "__main__":
    main()
