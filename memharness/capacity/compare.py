"""`memharness compare RUN_A RUN_B`: what changed between two runs of the same kind.

Runs are recognised by their files: `results.json` (simulator: strategy metrics and
footprint), `steps.json` (step-load: per-step rate and latency), `load_hdr.json` (load:
latency per operation), `bench.json` (bench: latency per operation), `capacity.json`
(a plan: sizes per strategy and layer). The two are joined with pandas on their keys (strategy,
operation, step, layer); each figure gets A, B, B − A and B / A − 1.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = ["CompareError", "compare_runs"]

#: File of each kind, most specific first (a step-load run also has load_hdr.json).
_FILES = ("capacity.json", "steps.json", "results.json", "bench.json", "load_hdr.json")


class CompareError(ValueError):
    """Runs that cannot be compared."""


def _kind(path: Path) -> tuple[str, Path]:
    if path.is_file():
        return path.name, path
    for name in _FILES:
        if (path / name).is_file():
            return name, path / name
    raise CompareError(f"{path}: none of {', '.join(_FILES)} there")


def _read(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CompareError(f"{path}: cannot be read: {exc}") from None


def _frame(kind: str, data: Any) -> tuple[pd.DataFrame, list[str]]:
    """The comparable figures of one run, long-form: keys, then `figure`, `value`."""
    rows: list[dict[str, Any]] = []
    if kind == "results.json":
        for scenario in data.get("scenarios") or []:
            ceiling = (scenario.get("ceiling") or {}).get("recall_at_k")
            if ceiling is not None:  # the dense retrieval ceiling, beside the strategies
                rows.append({"scenario": scenario.get("name"), "strategy": "(dense ceiling)",
                             "figure": "recall_at_k", "value": ceiling})  # fmt: skip
            for s in scenario.get("strategies") or []:
                base = {"scenario": scenario.get("name"), "strategy": s.get("label")}
                for name, value in (s.get("metrics") or {}).items():
                    rows.append({**base, "figure": name, "value": value})
                for layer, figures in ((s.get("footprint") or {}).get("peak") or {}).items():
                    rows.append(
                        {**base, "figure": f"peak_bytes.{layer}", "value": figures.get("bytes")}
                    )
                for op, figures in (s.get("latency_ms") or {}).items():
                    for stat in ("p50", "p95", "p99"):
                        rows.append(
                            {**base, "figure": f"{op}.{stat}_ms", "value": figures.get(stat)}
                        )
        return pd.DataFrame(rows), ["scenario", "strategy"]
    if kind == "steps.json":
        for step in data.get("steps") or []:
            base = {"step": step["step"]}
            rows.append({**base, "figure": "offered_rate", "value": step.get("offered_rate")})
            rows.append({**base, "figure": "achieved_rate", "value": step.get("achieved_rate")})
            for op, figures in (step.get("ops") or {}).items():
                for stat in ("p50_ms", "p95_ms", "p99_ms"):
                    rows.append({**base, "figure": f"{op}.{stat}", "value": figures.get(stat)})
        return pd.DataFrame(rows), ["step"]
    if kind in ("load_hdr.json", "bench.json"):
        ops = data.get("ops") or {}
        items = ops.items() if isinstance(ops, dict) else ((o.get("name"), o) for o in ops)
        for op, figures in items:
            for stat in ("count", "n", "p50_ms", "p95_ms", "p99_ms"):
                if stat in figures:
                    rows.append({"op": op, "figure": stat, "value": figures[stat]})
        return pd.DataFrame(rows), ["op"]
    if kind == "capacity.json":
        for plan in data.get("plans") or []:
            base = {"strategy": plan.get("strategy")}
            for row in plan.get("sizing") or []:
                for figure in (
                    "cores",
                    "ram_gb",
                    "disk_gb",
                    "instances",
                    "monthly_cost",
                    "predicted_p_ms",
                    "bound_by",
                ):
                    rows.append(
                        {**base, "layer": row["layer"], "figure": figure, "value": row.get(figure)}
                    )
        return pd.DataFrame(rows), ["strategy", "layer"]
    raise CompareError(f"cannot compare {kind}")


def compare_runs(a: Path, b: Path) -> tuple[str, pd.DataFrame]:
    """The kind of the two runs and their differences, one row per key and figure."""
    kind_a, file_a = _kind(a)
    kind_b, file_b = _kind(b)
    if kind_a != kind_b:
        raise CompareError(f"different kinds of run: {file_a} and {file_b}")
    frame_a, keys = _frame(kind_a, _read(file_a))
    frame_b, _ = _frame(kind_b, _read(file_b))
    if frame_a.empty and frame_b.empty:
        raise CompareError(f"nothing to compare in {file_a} and {file_b}")
    if "scenario" in keys and not set(frame_a["scenario"]) & set(frame_b["scenario"]):
        # Different populations (e.g. 1,000 and 10,000 generated users): match by strategy.
        frame_a["scenario"] = frame_b["scenario"] = "(each run's)"
    on = [*keys, "figure"]
    joined = frame_a.merge(frame_b, on=on, how="outer", suffixes=("_a", "_b"))
    numeric_a = pd.to_numeric(joined["value_a"], errors="coerce")
    numeric_b = pd.to_numeric(joined["value_b"], errors="coerce")
    joined["delta"] = numeric_b - numeric_a
    joined["change"] = (numeric_b / numeric_a - 1).where(numeric_a.abs() > 0)
    joined = joined.rename(columns={"value_a": "A", "value_b": "B"})
    return kind_a.removesuffix(".json"), joined[[*on, "A", "B", "delta", "change"]].reset_index(
        drop=True
    )
