"""The capacity plan's held-out validation over repeated load runs: does it hold from run
to run, and how far do X_max and the highest sustained rate spread?

    .venv/bin/python scripts/capacity_validation.py reports/LOAD_1 reports/LOAD_2 reports/LOAD_3
        [--percentile 95] [--out validation.md]

Each argument is a step-load run (`memharness load --rates ...`, its directory or its
steps.json), made with the same code and command on the same machine. For each run, the
held-out steps (`memharness.capacity.validate`: interleaved with the fitting ones) are
predicted from the fitting steps' service demand (throughput min(offered, X_max); p95 by
M/G/c up to the safe rate, "saturated" above) and judged: throughput within ±15 %, p95
within ±25 %. Prints one row per run and held-out step, each run's X_max and highest
sustained rate, then the verdict over the runs and the spread (max / min) of both;
`--out` writes the same as Markdown (and JSON beside it).

The procedure, four times on a quiet machine:

    MEMH_EMBEDDER_THREADS=1 .venv/bin/memharness load --strategy hybrid --rates auto \\
        --repeats 3 --step-duration 30s --run-id val-1      # then val-2, val-3, val-4
    .venv/bin/python scripts/capacity_validation.py reports/val-1 reports/val-2 \\
        reports/val-3 reports/val-4
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from memharness.capacity.demand import service_demand
from memharness.capacity.inputs import RunError, read_load
from memharness.capacity.runs import run_strategy
from memharness.capacity.validate import holdouts

#: The issue's bar for the spread of the highest sustained rate over runs (max / min).
SPREAD_LIMIT = 1.3


def _row(run: str, strategy: str, held: dict[str, Any], p_key: str) -> dict[str, Any]:
    x, p = held["throughput"], held[p_key]
    return {
        "run": run,
        "strategy": strategy,
        "step": f"{held['held_out_step']} ({held['offered']:g}/s, {held['position']})",
        "x_pred": x["predicted"],
        "x_meas": x["measured"],
        "x_err": x["error"],
        "p_pred": p["predicted_ms"],
        "p_meas": p["measured_ms"],
        "p_err": p["error"],
        "holds": x["holds"] is not False and p["holds"] is not False,
    }


def _pct(value: float | None) -> str:
    return "–" if value is None or not math.isfinite(value) else f"{value:+.1%}"


def _num(value: float | None) -> str:
    return "saturated" if value is None else f"{value:.4g}"


def table(rows: list[dict[str, Any]], p_key: str) -> str:
    head = (
        f"| run | strategy | held-out step | throughput predicted | measured | error "
        f"| {p_key} ms predicted | measured | error | holds |"
    )
    lines = [head, "|" + "---|" * 10]
    for r in rows:
        lines.append(
            f"| {r['run']} | {r['strategy']} | {r['step']} | {r['x_pred']:.4g} "
            f"| {r['x_meas']:.4g} | {_pct(r['x_err'])} | {_num(r['p_pred'])} "
            f"| {r['p_meas']:.4g} | {_pct(r['p_err'])} | {'yes' if r['holds'] else 'no'} |"
        )
    return "\n".join(lines)


def _spread(values: list[float]) -> str:
    values = [v for v in values if v is not None and v > 0]
    if len(values) < 2:
        return "–"
    ratio = max(values) / min(values)
    return f"{ratio:.2f}x ({'within' if ratio <= SPREAD_LIMIT else 'OVER'} {SPREAD_LIMIT:g}x)"


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
    rows: list[dict[str, Any]] = []
    per_run: list[dict[str, Any]] = []
    runs = [run for given in args.runs for run in _step_runs(given)]
    for directory in runs:
        try:
            load = read_load(directory)
            strategy = run_strategy(directory, "load")
            demand = service_demand(load.steps, load.cores)
        except (RunError, ValueError) as exc:
            print(f"error: {directory}: {exc}", file=sys.stderr)
            return 2
        label = strategy.strategy + ("" if strategy.recorded else " (not recorded)")
        validation = holdouts(load, None, args.percentile)
        rows += [_row(str(directory), label, h, p_key) for h in validation["holdout"]]
        per_run.append(
            {
                "run": str(directory),
                "headline": demand.headline(),
                "x_max": demand.x_max,
                "x_sustained": demand.x_sustained,
                "validation": validation["line"],
                "holds": validation["holds"],
            }
        )
    holding = sum(1 for r in per_run if r["holds"])
    verdict = (
        f"{holding} of {len(per_run)} runs hold (throughput within ±15%, {p_key} within "
        f"±25%); X_max spread {_spread([r['x_max'] for r in per_run])}; highest sustained "
        f"rate spread {_spread([r['x_sustained'] for r in per_run])}"
    )
    lines = [f"- {r['run']}: {r['headline']}; {r['validation']}" for r in per_run]
    text = table(rows, p_key) + "\n\n" + "\n".join(lines) + "\n\n" + verdict + "\n"
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text, encoding="utf-8")
        args.out.with_suffix(".json").write_text(
            json.dumps({"rows": rows, "runs": per_run, "verdict": verdict}, indent=2) + "\n"
        )
    return 0 if holding == len(per_run) else 1


if __name__ == "__main__":
    sys.exit(main())
