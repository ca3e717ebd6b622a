"""How well the plan's models predict what they were not fitted on, and why not.

1. Load: held-out steps interleaved with the fitting steps (with `--repeats`, the last
   repeat of each rate; without, every other rate). The demand D and the light-load
   latency are read on the fitting steps only; each held-out step's throughput is
   predicted as min(offered, X_max) and, up to the safe rate (0.8 × X_max's lower bound),
   its p95 by M/G/c on the binding resource (`Demand.predict_quantile`); above the safe
   rate the plan says "saturated, p95 unbounded" and the p95 is not judged. A prediction
   holds within ±15 % (throughput) and ±25 % (p95) of the measurement. When it does not,
   `diagnose` names the likely causes: a noisy machine, a generator that fell behind, no
   step below the knee, utilisation over 0.8, drift.
2. Footprint: byte-seconds per turn from a small simulated population predict the mean
   bytes of a larger one (Little's law), per layer and strategy; the peak per user beside.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.demand import (
    KEPT_UP,
    MIN_STEPS,
    SAFE_UTILISATION,
    bootstrap_median_ci,
    suggest_rates,
    valid_steps,
)
from memharness.capacity.inputs import BenchRun, LoadRun, SimRun
from memharness.capacity.plan import Measured, measure
from memharness.load_contract import DROP_LIMIT, LATE_LIMIT

__all__ = [
    "ERROR_LIMIT",
    "LIMITS",
    "NOISY_CV",
    "diagnose",
    "footprint_extrapolation",
    "held_out_steps",
    "holdouts",
    "repeat_table",
]

#: A footprint extrapolation whose error is over this says so at the top of the report.
ERROR_LIMIT = 0.20
#: A held-out prediction holds when its error is within these.
LIMITS = {"throughput": 0.15, "p": 0.25}
#: Run-to-run coefficient of variation of a rate's repeats over which the machine is noisy.
NOISY_CV = 0.10


def _err(predicted: float | None, measured: float) -> float | None:
    if predicted is None or not (math.isfinite(predicted) and measured and math.isfinite(measured)):
        return None
    return (predicted - measured) / measured


def held_out_steps(load: LoadRun) -> list[int]:
    """The steps to hold out, interleaved with the fitting ones: with repeats, the last
    repeat of every rate; without, every other rate from the second lowest (none when
    fewer than `MIN_STEPS` valid steps)."""
    steps, _ = valid_steps(load.steps)
    if len(steps) < MIN_STEPS:
        return []
    repeated = steps.groupby("offered")["step"].agg(list)
    if int(repeated.map(len).max()) >= 2:
        return sorted(int(max(group)) for group in repeated if len(group) >= 2)
    ordered = steps.sort_values(["offered", "step"])["step"].tolist()
    return [int(s) for s in ordered[1::2]]


def holdouts(load: LoadRun, bench: BenchRun | None, percentile: float = 95.0) -> dict[str, Any]:
    """The held-out validation: each held-out step's predictions beside its measurement,
    whether they held, and if not, why."""
    held = held_out_steps(load)
    fitted_on = [int(s) for s in load.steps["step"] if int(s) not in held]
    p_key = f"p{percentile:g}"
    if not held:
        return _verdict(
            load,
            [],
            [],
            fitted_on,
            [f"fewer than {MIN_STEPS} valid steps: nothing to hold out"],
            p_key,
        )
    try:
        measured = measure(load, bench, steps=fitted_on)
    except ValueError as exc:
        return _verdict(load, [], [], fitted_on, [f"the fitting steps give no model: {exc}"], p_key)
    rows = [_predict(load, measured, step, percentile) for step in held]
    return _verdict(load, rows, held, fitted_on, [], p_key, measured)


def _predict(load: LoadRun, measured: Measured, step: int, percentile: float) -> dict[str, Any]:
    held = load.steps[load.steps["step"] == step].iloc[0]
    demand = measured.demand
    lam = float(held["offered"])
    x_pred = min(lam, demand.x_max)
    x_meas = float(held["achieved"])
    p_pred = demand.predict_quantile(percentile / 100.0, lam, measured.samples["turn"])
    p_meas = held.get(f"turn@intended.p{percentile:g}_ms")
    p_meas = float(p_meas) if p_meas is not None and not pd.isna(p_meas) else math.nan
    utilisation = lam / demand.x_low
    position = (
        f"below the safe rate (utilisation {utilisation:.2f} of X_max's lower bound)"
        if p_pred is not None
        else f"saturated (utilisation {utilisation:.2f} > {SAFE_UTILISATION:g})"
    )
    c, service = demand.servers()
    return {
        "held_out_step": step,
        "position": position,
        "offered": lam,
        "utilisation": utilisation,
        "concurrency": float(held["concurrency"]),
        "throughput": _judged(x_pred, x_meas, LIMITS["throughput"]),
        f"p{percentile:g}": {
            **_judged(p_pred * 1000.0 if p_pred is not None else None, p_meas, LIMITS["p"], "_ms"),
            "model": (
                f"M/G/c (Erlang C, Allen–Cunneen) on {demand.bound_by}: c = {c}, "
                f"service {service * 1000:.3g} ms, plus the light-load latency"
                if p_pred is not None
                else "saturated, p95 unbounded (no number above the safe rate)"
            ),
        },
    }


def _judged(
    predicted: float | None, measured: float, limit: float, unit: str = ""
) -> dict[str, Any]:
    """A prediction beside its measurement: the error, and whether it is within `limit`
    (None: not judged, the prediction is "saturated")."""
    error = _err(predicted, measured)
    return {
        f"predicted{unit}": predicted,
        f"measured{unit}": measured,
        "error": error,
        "limit": limit,
        "holds": None if predicted is None else bool(error is not None and abs(error) <= limit),
    }


def repeat_table(steps: pd.DataFrame, percentile: float = 95.0) -> list[dict[str, Any]]:
    """Per offered rate over its valid repeats: the median achieved rate and p95 with
    bootstrap 95% intervals, and the run-to-run coefficient of variation of each."""
    valid, _ = valid_steps(steps)
    column = f"turn@intended.p{percentile:g}_ms"
    rows = []
    for rate, group in valid.groupby("offered"):
        row: dict[str, Any] = {"offered": float(rate), "repeats": len(group)}
        for name, values in (
            ("achieved", group["achieved"]),
            (f"p{percentile:g}_ms", group.get(column)),
        ):
            if values is None:
                continue
            v = values.dropna().astype(float).to_numpy()
            if len(v) == 0:
                continue
            row[name] = float(np.median(v))
            row[f"{name}_ci"] = list(bootstrap_median_ci(v)) if len(v) >= 3 else None
            row[f"{name}_cv"] = (
                float(v.std(ddof=1) / v.mean()) if len(v) >= 2 and v.mean() else None
            )
        rows.append(row)
    return rows


def diagnose(
    load: LoadRun, rows: list[dict[str, Any]], measured: Measured | None, p_key: str
) -> list[str]:
    """Why a validation may not hold, from what the run recorded."""
    reasons = []
    steps = load.steps
    _, excluded = valid_steps(steps)
    # A step past the safe rate drops turns because the system saturated (every user
    # busy): expected. Below it, the generator itself fell behind.
    safe = measured.demand.safe_rate if measured is not None else math.inf
    offered = steps.set_index("step")["offered"]
    dropped = [k for k, why in excluded.items() if "generator" in why and offered[k] <= safe]
    if dropped:
        reasons.append(
            f"generator-bound: steps {sorted(dropped)} dropped more than {DROP_LIMIT:.0%} of "
            f"their intended turns or sent more than {LATE_LIMIT:.0%} late (set apart)"
        )
    noisy = [
        f"{r['offered']:g}/s (CV {r['achieved_cv']:.0%})"
        for r in repeat_table(steps)
        if (r.get("achieved_cv") or 0) > NOISY_CV
    ]
    if noisy:
        reasons.append(
            f"noisy machine: repeats of a rate differ by more than {NOISY_CV:.0%}: "
            + ", ".join(noisy)
        )
    if measured is not None:
        d, ci = measured.demand.d_s, measured.demand.d_ci
        half = (ci[1] - ci[0]) / 2 / d if ci is not None else 0.0
        if half > 0.15:
            reasons.append(f"noisy machine: D = {d * 1000:.3g} ms is known to ±{half:.0%} only")
        kept = steps[
            (steps["achieved"] >= KEPT_UP * steps["offered"])
            & (steps["offered"] <= measured.demand.safe_rate)
        ]
        if len(kept) < 3:
            safe = measured.demand.safe_rate
            add = [r for r in suggest_rates(measured.demand.x_max) if r <= safe]
            reasons.append(
                f"no steps below the knee: {len(kept)} step(s) at or below the safe rate "
                f"{safe:.3g}/s kept up; add rates {','.join(f'{r:g}' for r in add)}"
            )
        sustained, low = measured.demand.x_sustained, measured.demand.x_low
        failed_above = bool(len(steps[steps["offered"] > (sustained or 0) * 1.05]))
        if sustained is not None and failed_above and sustained < SAFE_UTILISATION * low:
            reasons.append(
                f"X_max not reached: the highest rate sustained ({sustained:.3g}/s) is "
                f"{sustained / low:.0%} of X_max's lower bound ({low:.3g}/s) although higher "
                "rates were offered: the cores were shared with other processes, or a "
                "resource the CPU accounting does not see binds"
            )
    judged_p = [r for r in rows if r[p_key]["holds"] is not None]
    if rows and not judged_p:
        reasons.append("no held-out step below the safe rate: the p95 model was not tested")
    high = [
        r["held_out_step"]
        for r in rows
        if r["utilisation"] > SAFE_UTILISATION and r["throughput"]["holds"] is False
    ]
    if high:
        reasons.append(
            f"utilisation over {SAFE_UTILISATION:g}: held-out steps {high} missed their throughput"
        )
    drifting = steps[steps["drifts"]] if "drifts" in steps else steps.iloc[0:0]
    if len(drifting):
        worst = drifting.sort_values("drift_ratio").iloc[-1]
        reasons.append(
            f"drift: {len(drifting)} step(s) slowed within the step, up to "
            f"x{worst['drift_ratio']:.2f} (step {int(worst['step'])}, {worst['offered']:g}/s: "
            "last third's p50 over the first's)"
        )
    return reasons


def _verdict(
    load: LoadRun,
    rows: list[dict[str, Any]],
    held: list[int],
    fitted_on: list[int],
    reasons: list[str],
    p_key: str,
    measured: Measured | None = None,
) -> dict[str, Any]:
    judged = [
        r[k]["holds"] for r in rows for k in ("throughput", p_key) if r[k]["holds"] is not None
    ]
    holds = bool(judged) and all(judged) and not reasons
    passed = sum(1 for r in rows if r["throughput"]["holds"] and r[p_key]["holds"] is not False)
    causes = reasons + diagnose(load, rows, measured, p_key)
    if holds:
        line = (
            f"validation held: {passed} of {len(rows)} held-out steps within "
            f"±{LIMITS['throughput']:.0%} throughput and ±{LIMITS['p']:.0%} {p_key}"
        )
    else:
        line = (
            f"validation did NOT hold: {passed} of {len(rows)} held-out steps within "
            f"±{LIMITS['throughput']:.0%} throughput and ±{LIMITS['p']:.0%} {p_key}"
            + (f"; why: {'; '.join(causes)}" if causes else "")
        )
    return {
        "holds": holds,
        "line": line,
        "reasons": causes,
        "held_out_steps": held,
        "fitted_on_steps": fitted_on,
        "holdout": rows,
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
