"""How well the plan's models predict what they were not fitted on.

1. Load: two steps are held out, the highest step below the knee (the last whose
   achieved rate kept up with the offered one) and the highest step past it; the USL is
   fitted on the others and predicts each held-out step's throughput (min(offered, the
   USL's peak X)) and its p95 response time: below the peak, Erlang C / Allen–Cunneen
   with one server (one process) of service time 1/X_max; past it, the fluid backlog of
   an overloaded open loop (arrivals at λ, departures at X_max: an arrival t into the
   step waits for the backlog B0 + (λ − X)·t), plus the light-load latency.
   A prediction is judged by its interval, not its point: the interval spans the fit's
   95% interval of X_max and the measurement's own noise (the step's completions are a
   count: ±1.96·√(X·T)/T; its p95 is an order statistic of n turns: the quantiles
   q ± 1.96·√(q(1−q)/n)). It holds when the measured value is inside the interval and the
   interval is narrow enough to plan with (half-width ≤ `NARROW` of the prediction).
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

__all__ = ["ERROR_LIMIT", "NARROW", "footprint_extrapolation", "held_out_steps", "holdouts"]

#: A footprint extrapolation whose error is over this says so at the top of the report.
ERROR_LIMIT = 0.20
#: An interval narrow enough to plan with: half-width over the prediction at most this.
NARROW = {"throughput": 0.15, "p": 0.25}
#: A step kept up with its offered rate when it achieved at least this share of it.
KEPT_UP = 0.9
_Z = 1.96


def _err(predicted: float, measured: float) -> float | None:
    if not (math.isfinite(predicted) and measured and math.isfinite(measured)):
        return None
    return (predicted - measured) / measured


def held_out_steps(load: LoadRun) -> list[tuple[int, str]]:
    """The steps to hold out, with where each is: the highest below the knee and the
    highest past it (only the highest when fewer than 5 steps leave < 3 to fit on)."""
    steps = load.steps.sort_values("offered")
    kept = steps["achieved"] >= KEPT_UP * steps["offered"]
    top = int(steps["step"].iloc[-1])
    if not bool(kept.iloc[-1]):
        chosen = [(top, "above the knee")]
    else:
        chosen = [(top, "highest step (no step past the knee)")]
    below = steps[kept & (steps["step"] != top)]
    if len(steps) >= 5 and len(below):
        chosen.insert(0, (int(below["step"].iloc[-1]), "below the knee"))
    return chosen


def holdouts(
    load: LoadRun, bench: BenchRun | None, percentile: float = 95.0
) -> list[dict[str, Any]]:
    """Each held-out step's predictions with their intervals, beside what was measured."""
    held = held_out_steps(load)
    fitted_on = [int(s) for s in load.steps["step"] if int(s) not in {h for h, _ in held}]
    measured = measure(load, bench, steps=fitted_on)
    return [
        _predict(load, measured, step, position, fitted_on, percentile) for step, position in held
    ]


def _predict(
    load: LoadRun,
    measured: Any,
    step: int,
    position: str,
    fitted_on: list[int],
    percentile: float,
) -> dict[str, Any]:
    steps = load.steps.sort_values("offered")
    held = steps[steps["step"] == step].iloc[0]
    earlier = steps[steps["offered"] < float(held["offered"])]
    x_max = measured.usl.x_max
    low_x, high_x = measured.usl.x_max_ci
    xs = [x for x in (low_x, x_max, high_x) if math.isfinite(x) and x > 0]
    lam = float(held["offered"])
    duration = float(held["duration_s"])
    latency = measured.samples["turn"]
    q = percentile / 100.0
    n = max(int(held["completed"]), 1)

    def p_at(x: float, quantile: float) -> float:
        if lam < x:
            return response_quantile(quantile, c=1, lam=lam, occupancy_s=1.0 / x, latency_s=latency)
        backlog = 0.0  # fluid backlog carried in from the earlier steps
        for _, before in earlier.iterrows():
            offered = float(before["offered"])
            backlog = max(0.0, backlog + (offered - x) * float(before["duration_s"]))
        return (backlog + (lam - x) * quantile * duration) / x + float(
            np.quantile(latency, quantile)
        )

    x_pred = min(lam, x_max) if math.isfinite(x_max) else lam
    count_noise = _Z * math.sqrt(max(x_pred, 0.0) * duration) / duration
    x_interval = [
        max(0.0, min(lam, min(xs, default=lam)) - count_noise),
        min(lam, max(xs, default=lam)) + count_noise,
    ]
    spread = _Z * math.sqrt(q * (1 - q) / n)
    q_lo, q_hi = max(q - spread, 0.5), min(q + spread, 0.999)
    p_pred = p_at(x_max, q) * 1000.0 if math.isfinite(x_max) else math.inf
    ends = [p_at(x, qq) * 1000.0 for x in xs for qq in (q_lo, q_hi)]
    p_interval = [min(ends), max(ends)] if ends else [math.inf, math.inf]
    p_meas = held.get(f"turn@intended.p{percentile:g}_ms")
    p_meas = float(p_meas) if p_meas is not None and not pd.isna(p_meas) else math.nan
    x_meas = float(held["achieved"])
    model = (
        "Erlang C / Allen–Cunneen, one process, service 1/X_max"
        if lam < x_max
        else "fluid backlog of an overloaded open loop (λ > X_max)"
    )
    return {
        "held_out_step": step,
        "position": position,
        "offered": lam,
        "fitted_on_steps": fitted_on,
        "usl": measured.usl.as_dict(),
        "throughput": _judged(x_pred, x_interval, x_meas, NARROW["throughput"]),
        f"p{percentile:g}": {
            **_judged(p_pred, p_interval, p_meas, NARROW["p"], unit="_ms"),
            "model": model,
        },
        "concurrency": float(held["concurrency"]),
    }


def _judged(
    predicted: float, interval: list[float], measured: float, narrow: float, unit: str = ""
) -> dict[str, Any]:
    """A prediction, its interval and the measurement: inside? narrow enough? error."""
    low, high = interval
    half = (high - low) / 2.0 / predicted if predicted and math.isfinite(predicted) else math.inf
    inside = bool(math.isfinite(measured) and low <= measured <= high)
    is_narrow = bool(math.isfinite(half) and half <= narrow)
    return {
        f"predicted{unit}": predicted,
        f"interval{unit}": [low, high],
        f"measured{unit}": measured,
        "error": _err(predicted, measured),
        "inside": inside,
        "half_width": half if math.isfinite(half) else None,
        "narrow": is_narrow,
        "narrow_limit": narrow,
        "holds": inside and is_narrow,
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
