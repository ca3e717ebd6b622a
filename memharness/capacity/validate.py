"""How well the plan's models predict what they were not fitted on.

1. Load: fit on every step but the highest offered rate, predict that step's throughput
   (min(offered, the USL's peak X)) and its p95 response time: below the peak, Erlang C /
   Allen–Cunneen with one server (one process) of service time 1/X_max; past it, the
   fluid backlog of an overloaded open loop (arrivals at λ, departures at X_max: an
   arrival t into the step waits for the backlog B0 + (λ − X)·t), plus the light-load
   latency.
2. Footprint: byte-seconds per turn from a small simulated population predict the mean
   bytes of a larger one (Little's law), per layer and strategy; the peak per user beside.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.inputs import BenchRun, LoadRun, SimRun
from memharness.capacity.plan import measure
from memharness.capacity.queueing import response_quantile

__all__ = ["ERROR_LIMIT", "footprint_extrapolation", "holdout"]

#: A plan whose held-out error is over this says so at the top of the report.
ERROR_LIMIT = 0.20


def _err(predicted: float, measured: float) -> float | None:
    if not (math.isfinite(predicted) and measured):
        return None
    return (predicted - measured) / measured


def holdout(load: LoadRun, bench: BenchRun | None, percentile: float = 95.0) -> dict[str, Any]:
    """Fit without the highest offered rate; predict its throughput and p-tile response."""
    steps = load.steps.sort_values("offered")
    held = steps.iloc[-1]
    fitted_on = [int(s) for s in steps["step"].iloc[:-1]]
    measured = measure(load, bench, steps=fitted_on)
    x_max = measured.usl.x_max
    lam = float(held["offered"])
    x_pred = min(lam, x_max)
    latency = measured.samples["turn"]
    q = percentile / 100.0

    def p_at(x: float) -> float:
        if lam < x:
            return response_quantile(q, c=1, lam=lam, occupancy_s=1.0 / x, latency_s=latency)
        backlog = 0.0  # fluid backlog carried in from the earlier (fitted) steps
        for _, step in steps.iloc[:-1].iterrows():
            backlog = max(0.0, backlog + (float(step["offered"]) - x) * float(step["duration_s"]))
        t = q * float(held["duration_s"])
        return (backlog + (lam - x) * t) / x + float(np.quantile(latency, q))

    p_pred = p_at(x_max)
    # The spread the fit's own uncertainty gives: p at the ends of X_max's interval.
    low_x, high_x = measured.usl.x_max_ci
    p_range = sorted(p_at(x) * 1000.0 for x in (low_x, high_x) if math.isfinite(x) and x > 0)
    model = (
        "Erlang C / Allen–Cunneen, one process, service 1/X_max"
        if lam < x_max
        else "fluid backlog of an overloaded open loop (λ > X_max)"
    )
    op = "turn@intended"
    p_meas = held.get(f"{op}.p{percentile:g}_ms")
    p_meas_s = float(p_meas) / 1000.0 if p_meas is not None and not pd.isna(p_meas) else math.nan
    return {
        "held_out_step": int(held["step"]),
        "offered": lam,
        "fitted_on_steps": fitted_on,
        "usl": measured.usl.as_dict(),
        "throughput": {
            "predicted": x_pred,
            "measured": float(held["achieved"]),
            "error": _err(x_pred, float(held["achieved"])),
        },
        f"p{percentile:g}": {
            "predicted_ms": p_pred * 1000.0,
            "predicted_range_ms": p_range,
            "measured_ms": p_meas_s * 1000.0,
            "error": _err(p_pred, p_meas_s),
            "model": model,
        },
        "concurrency": float(held["concurrency"]),
    }


def footprint_extrapolation(small: SimRun, large: SimRun) -> pd.DataFrame:
    """Per strategy and layer: the large run's mean bytes predicted from the small run's
    byte-seconds per turn, and its peak predicted from the small run's peak per user."""
    keys = ["strategy", "layer"]
    s = small.layers.groupby(keys, as_index=False).agg(
        users=("users", "sum"), turns=("turns", "sum"), byte_s=("byte_s_per_turn", "mean"),
        peak=("peak_bytes", "sum"),
    )  # fmt: skip
    g = large.layers.groupby(keys, as_index=False).agg(
        users=("users", "sum"), turns=("turns", "sum"), span=("span_s", "max"),
        mean=("mean_bytes", "sum"), peak=("peak_bytes", "sum"),
    )  # fmt: skip
    df = s.merge(g, on=keys, suffixes=("_small", "_large"))
    df["mean_predicted"] = df["byte_s"] * df["turns_large"] / df["span"]
    df["mean_measured"] = df["mean"]
    df["mean_error"] = (df["mean_predicted"] - df["mean"]) / df["mean"].where(df["mean"] > 0)
    df["peak_predicted"] = df["peak_small"] / df["users_small"] * df["users_large"]
    df["peak_measured"] = df["peak_large"]
    df["peak_error"] = (df["peak_predicted"] - df["peak_large"]) / df["peak_large"].where(
        df["peak_large"] > 0
    )
    return df[
        [*keys, "users_small", "users_large", "mean_predicted", "mean_measured", "mean_error",
         "peak_predicted", "peak_measured", "peak_error"]
    ]  # fmt: skip
