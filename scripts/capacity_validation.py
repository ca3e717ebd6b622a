"""The capacity plan's held-out validation over repeated load runs: does it hold from run
to run?

    .venv/bin/python scripts/capacity_validation.py reports/LOAD_1 reports/LOAD_2 reports/LOAD_3
        [--percentile 95] [--out validation.md]

Each argument is a step-load run (`memharness load --rates ...`, its directory or its
steps.json), made with the same code and command on the same machine. For each run, the
step below the knee and the step past it are held out, the USL is fitted on the others,
and each held-out step's throughput and p95 are predicted with their intervals
(`memharness.capacity.validate`). A run holds when every measured value is inside its
predicted interval, and the errors are within the targets (throughput ±15 %, p95 ±25 %).
Prints one row per run and held-out step, then the verdict over the runs; `--out` writes
the same as Markdown (and JSON beside it).

The procedure, three times on a quiet machine:

    MEMH_EMBEDDER_THREADS=1 .venv/bin/memharness load --strategy hybrid --rates auto \\
        --step-duration 10s --run-id val-1      # then val-2, val-3
    .venv/bin/python scripts/capacity_validation.py reports/val-1 reports/val-2 reports/val-3
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from memharness.capacity.inputs import RunError, read_load
from memharness.capacity.runs import run_strategy
from memharness.capacity.validate import holdouts

#: The targets: |error| within these, and the measured value inside the interval.
TARGET_ERROR = {"throughput": 0.15, "p": 0.25}


def _row(run: str, strategy: str, held: dict[str, Any], p_key: str) -> dict[str, Any]:
    x, p = held["throughput"], held[p_key]
    row = {
        "run": run,
        "strategy": strategy,
        "step": f"{held['held_out_step']} ({held['position']}, {held['offered']:g}/s)",
        "x_pred": x["predicted"],
        "x_interval": x["interval"],
        "x_meas": x["measured"],
        "x_err": x["error"],
        "x_inside": x["inside"],
        "p_pred": p["predicted_ms"],
        "p_interval": p["interval_ms"],
        "p_meas": p["measured_ms"],
        "p_err": p["error"],
        "p_inside": p["inside"],
    }
    row["holds"] = bool(
        x["inside"]
        and p["inside"]
        and x["error"] is not None
        and abs(x["error"]) <= TARGET_ERROR["throughput"]
        and p["error"] is not None
        and abs(p["error"]) <= TARGET_ERROR["p"]
    )
    return row


def _pct(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def _span(values: list[float]) -> str:
    return " – ".join(f"{v:.4g}" for v in values)


def table(rows: list[dict[str, Any]], p_key: str) -> str:
    head = (
        f"| run | strategy | held-out step | throughput predicted [interval] | measured | error "
        f"| inside | {p_key} ms predicted [interval] | measured | error | inside | holds |"
    )
    lines = [head, "|" + "---|" * 12]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['strategy']} | {r['step']} | {r['x_pred']:.4g} "
            f"[{_span(r['x_interval'])}] | {r['x_meas']:.4g} | {_pct(r['x_err'])} "
            f"| {'yes' if r['x_inside'] else 'no'} | {r['p_pred']:.4g} [{_span(r['p_interval'])}] "
            f"| {r['p_meas']:.4g} | {_pct(r['p_err'])} | {'yes' if r['p_inside'] else 'no'} "
            f"| {'yes' if r['holds'] else 'no'} |"
        )
    return "\n".join(lines)


def _step_runs(given: Path) -> list[Path]:
    """A step-load run's directory; for a run of several strategies (`memharness load
    --strategy ...`: load_strategies.json), the directory of each."""
    directory = given.parent if given.is_file() else given
    listing = directory / "load_strategies.json"
    if (directory / "steps.json").is_file() or not listing.is_file():
        return [directory]
    rows = json.loads(listing.read_text(encoding="utf-8")).get("runs", [])
    return [Path(row["dir"]) for row in rows if row.get("dir")]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", type=Path, help="step-load run directories (or a multi-strategy load's)"
    )
    parser.add_argument("--percentile", type=float, default=95.0)
    parser.add_argument("--out", type=Path, default=None, help="write Markdown (+ .json) here")
    args = parser.parse_args(argv)
    p_key = f"p{args.percentile:g}"
    rows = []
    runs = [run for given in args.runs for run in _step_runs(given)]
    for directory in runs:
        try:
            load = read_load(directory)
            strategy = run_strategy(directory, "load")
        except RunError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        label = strategy.strategy + ("" if strategy.recorded else " (not recorded)")
        rows += [
            _row(str(directory), label, h, p_key) for h in holdouts(load, None, args.percentile)
        ]
    runs_holding = {r["run"] for r in rows} - {r["run"] for r in rows if not r["holds"]}
    verdict = (
        f"{len(runs_holding)} of {len(runs)} runs hold: every held-out value inside its "
        f"predicted interval, throughput within ±{TARGET_ERROR['throughput']:.0%} and "
        f"{p_key} within ±{TARGET_ERROR['p']:.0%}"
    )
    text = table(rows, p_key) + "\n\n" + verdict + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(
            json.dumps({"rows": rows, "verdict": verdict}, indent=2, allow_nan=False) + "\n"
        )
    return 0 if len(runs_holding) == len(runs) else 1


if __name__ == "__main__":
    sys.exit(main())
