"""CPU seconds to load a generated scenario file, whole and by part.

Generates `--users` users of `--domain` into a temporary file (as `memharness scenarios
generate` does), then, `--reps` times, loads it with `load_scenario` and prints the CPU
seconds of each load, and of its parts: reading the writer's form without YAML
(`written_form.read_written_form`), composing the same text with YAML
(`yamldoc.compose_mapping`, what a hand-written file costs), and validating the data.
CPU time, not wall: comparable on a machine other jobs load.

  .venv/bin/python -m bench.scenario_load --users 8000 --reps 3
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from memharness.scenarios import generate_scenario, load_scenario
from memharness.scenarios.loader import validate_scenario
from memharness.scenarios.written_form import read_written_form
from reference.yamldoc import compose_mapping

T = TypeVar("T")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=8000)
    parser.add_argument("--domain", default="ecommerce")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "scenario.yaml"
        with path.open("w", encoding="utf-8") as out:
            generate_scenario(out, domain=args.domain, users=args.users, seed=args.seed)
        text = path.read_text(encoding="utf-8")
        parts: dict[str, list[float]] = {}

        def timed(name: str, call: Callable[[], T]) -> T:
            began = time.process_time()
            value = call()
            parts.setdefault(name, []).append(time.process_time() - began)
            return value

        for _ in range(args.reps):
            timed("load_scenario", lambda: load_scenario(path))
            data = timed("written form (no YAML)", lambda: read_written_form(text))
            timed(
                "YAML compose + checks + build",
                lambda: compose_mapping(text, source=None, what="-"),
            )
            assert data is not None, "a generated file is in the writer's form"
            timed("validation", functools.partial(validate_scenario, data))
        size = path.stat().st_size
    print(f"{args.domain}, {args.users:,} users, {size / 1e6:.1f} MB")
    for name, seconds in parts.items():
        shown = ", ".join(f"{s:.2f}" for s in seconds)
        print(f"  {name:<32} median {statistics.median(seconds):6.2f} CPU s  ({shown})")


if __name__ == "__main__":
    main()
