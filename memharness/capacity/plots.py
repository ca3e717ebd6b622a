"""The report's plots, as base64 PNG (inline in one HTML file: no network, no files)."""

from __future__ import annotations

import base64
import io
import math
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.inputs import LoadRun, SimRun
from memharness.capacity.plan import Measured
from memharness.capacity.target import Target

__all__ = ["demand_plot", "footprint_plot", "latency_plot", "scaling_plot", "throughput_plot"]


def _figure(width: float = 6.4, height: float = 4.0) -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display: reports run in CI and on servers
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(width, height), dpi=90)
    return fig, ax


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def throughput_plot(load: LoadRun, measured: Measured, holdouts: list[dict[str, Any]]) -> str:
    """Throughput against offered rate: the steps, X_max = cores / D with its interval, the
    safe rate, the held-out steps; the USL (a cross-check) against concurrency inset when
    it was fitted."""
    fig, ax = _figure()
    steps = load.steps
    held = [h["held_out_step"] for h in holdouts]
    fit_rows = steps[~steps["step"].isin(held)]
    held_rows = steps[steps["step"].isin(held)]
    ax.scatter(fit_rows["offered"], fit_rows["achieved"], label="steps (fitting)", zorder=3)
    ax.scatter(held_rows["offered"], held_rows["achieved"], marker="*", s=160, color="red",
               label="held-out steps", zorder=4)  # fmt: skip
    demand = measured.demand
    top = float(steps["offered"].max()) * 1.1
    ax.plot([0, top], [0, top], color="grey", lw=0.8, ls=":", label="achieved = offered")
    ax.axhline(
        demand.x_max, color="black", lw=1, label=f"X_max {demand.x_max:.3g}/s ({demand.bound_by})"
    )
    if demand.x_max_ci is not None:
        low, high = demand.x_max_ci
        ax.axhspan(low, min(high, top), color="black", alpha=0.08, label="X_max 95% interval")
    ax.axvline(demand.safe_rate, color="orange", lw=1, ls="--",
               label=f"safe rate {demand.safe_rate:.3g}/s (0.8 × lower bound)")  # fmt: skip
    ax.set_xlabel("offered rate (turns/s)")
    ax.set_ylabel("achieved rate X (turns/s)")
    ax.legend(fontsize=8)
    return _png(fig)


def latency_plot(load: LoadRun, measured: Measured, slo_ms: float, percentile: float) -> str:
    """p50/p95/p99 of the response time against throughput, the model's p95 up to the
    safe rate (none above: saturated), the SLO."""
    fig, ax = _figure()
    steps = load.steps
    op = "turn@intended"
    for stat, marker in (("p50", "o"), ("p95", "s"), ("p99", "^")):
        col = f"{op}.{stat}_ms"
        if col in steps:
            ax.scatter(steps["achieved"], steps[col], marker=marker, label=f"measured {stat}")
    demand = measured.demand
    lams = np.linspace(0.05 * demand.safe_rate, demand.safe_rate, 30)
    q = percentile / 100.0
    model = [
        (demand.predict_quantile(q, lam, measured.samples["turn"]) or math.nan) * 1000.0
        for lam in lams
    ]
    ax.plot(lams, model, "k--", label=f"model p{percentile:g} (M/G/c, up to the safe rate)")
    ax.axvline(demand.safe_rate, color="orange", lw=1, ls="--", label="saturated beyond")
    ax.axhline(slo_ms, color="red", lw=1, label=f"SLO p{percentile:g} {slo_ms:g} ms")
    ax.set_yscale("log")
    ax.set_xlabel("throughput (turns/s)")
    ax.set_ylabel("turn response time, from intended start (ms)")
    ax.legend(fontsize=8)
    return _png(fig)


def demand_plot(measured: Measured) -> str:
    """Service demand per layer (core-ms per turn), the bench's mean beside."""
    fig, ax = _figure()
    layers = list(measured.demand_s)
    x = np.arange(len(layers))
    ax.bar(
        x - 0.2,
        [measured.demand_s[k] * 1000 for k in layers],
        0.4,
        label="service demand (load run)",
    )
    bench = [measured.bench_ms.get(k, {}).get("mean_ms", np.nan) for k in layers]
    ax.bar(x + 0.2, bench, 0.4, label="bench mean latency, concurrency 1")
    ax.set_xticks(x, layers)
    ax.set_ylabel("ms per turn")
    bottleneck = max(measured.demand_s, key=lambda k: measured.demand_s[k])
    ax.set_title(f"bottleneck (largest D): {bottleneck}", fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def footprint_plot(sim: SimRun, target: Target, planned_gb: dict[str, float]) -> str:
    """Bytes per layer over virtual time per strategy, scaled by the target's turn rate over
    the simulation's mean rate; the dashed line is the payload the plan uses (Little)."""
    import matplotlib.pyplot as plt

    layers = ("session", "stm", "ltm")
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.6), dpi=90)
    turns = sim.layers.groupby("strategy")["turns"].first()
    span = sim.layers.groupby("strategy")["span_s"].first()
    for ax, layer in zip(axes, layers, strict=True):
        lam = target.mean_turns_per_s if layer == "ltm" else target.peak_turns_per_s
        for strategy, group in sim.series[sim.series["layer"] == layer].groupby("strategy"):
            rate = turns[strategy] / span[strategy] if span[strategy] else 1.0
            scale = lam / rate / 1e9
            bold = strategy == target.strategy
            ax.plot(group["day"], group["bytes"] * scale, lw=2.2 if bold else 0.8,
                    label=str(strategy), zorder=3 if bold else 2)  # fmt: skip
        if layer in planned_gb:
            ax.axhline(planned_gb[layer], color="k", ls="--", lw=1, label="planned (time-mean)")
        ax.set_title(f"{layer} payload, GB (sim × target rate / sim rate)", fontsize=9)
        ax.set_xlabel("virtual day")
        ax.set_yscale("symlog", linthresh=1e-3)
    axes[0].legend(fontsize=7)
    return _png(fig)


def scaling_plot(curve: pd.DataFrame) -> str:
    """Instances per layer from 0.5× to 10× the target's users; bottleneck moves marked."""
    fig, ax = _figure(7.0, 4.2)
    for layer, group in curve.groupby("layer"):
        ax.plot(group["users"], group["instances"], marker=".", label=str(layer))
    for _, row in curve[curve["moved"]].iterrows():
        ax.axvline(row["users"], color="grey", lw=0.6, ls=":")
        ax.annotate(f"{row['layer']}: {row['bound_by']}", (row["users"], row["instances"]),
                    fontsize=7, rotation=30)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("users")
    ax.set_ylabel("instances")
    ax.legend(fontsize=8)
    return _png(fig)
