"""A capacity plan from runs and a target: `build_plan` computes one strategy's plan (pure,
from the runs read by `inputs`), `combine` puts the strategies side by side with the
answer first and the warnings grouped by cause; `render.write_plan` writes the files."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity import plots
from memharness.capacity.demand import check_rates
from memharness.capacity.findings import (
    Finding,
    drift_findings,
    group_findings,
    validation_findings,
)
from memharness.capacity.inputs import BenchRun, LoadRun, SimRun
from memharness.capacity.plan import Measured, measure, size_layers
from memharness.capacity.target import Target
from memharness.capacity.validate import (
    ERROR_LIMIT,
    footprint_extrapolation,
    holdouts,
    repeat_table,
)

__all__ = [
    "SIZING_COLUMNS",
    "Plan",
    "Plans",
    "RunRef",
    "build_plan",
    "clean",
    "combine",
]

SCALE_FACTORS = (0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0, 7.5, 10.0)
SIZING_COLUMNS = [
    "layer",
    "lambda_peak_per_s",
    "demand_ms",
    "offered_cores",
    "cores",
    "cores_unit",
    "cores_by",
    "utilisation",
    "predicted_p_ms",
    "slo_ms",
    "ram_gb",
    "disk_gb",
    "instances_by_cpu",
    "instances_by_memory",
    "instances_by_disk",
    "instances",
    "bound_by",
    "monthly_cost",
]


@dataclass(frozen=True)
class RunRef:
    """A run the plan read, and how it was chosen."""

    kind: str
    path: Path
    chosen: str  # "given" or "newest under reports/ with strategy S"


@dataclass
class Plan:
    """One strategy's plan."""

    strategy: str
    document: dict[str, Any]
    sizing: pd.DataFrame
    inputs: pd.DataFrame
    curve: pd.DataFrame
    footprint_validation: pd.DataFrame | None
    images: dict[str, str]
    findings: list[Finding] = field(default_factory=list)


@dataclass
class Plans:
    """The strategies side by side: the document of capacity.json and its plans."""

    document: dict[str, Any]
    plans: list[Plan]
    answer: pd.DataFrame
    by_layer: pd.DataFrame


def _inputs_table(
    target: Target, measured: Measured, load: LoadRun, bench: BenchRun | None
) -> pd.DataFrame:
    rows: list[tuple[str, Any, str, str]] = [
        ("users", target.users, "target", "assumed"),
        ("turns per user per day", target.turns_per_user_per_day, "target", "assumed"),
        ("peak factor", target.peak_factor, "target", "assumed"),
        (
            "peak turns/s",
            round(target.peak_turns_per_s, 3),
            "users × turns/day × peak / 86,400",
            "assumed",
        ),
        ("retention (days)", target.retention_days, "target", "assumed"),
        ("strategy", target.strategy, "target or --strategy", "assumed"),
        ("utilisation ceiling", target.utilisation_ceiling, "target", "assumed"),
        ("memory ceiling", target.memory_ceiling, "target", "assumed"),
        ("calls per turn, each layer", 1, "MemorySystem.turn: one of each", "assumed"),
        ("arrivals c_a²", 1.0, "Poisson arrivals", "assumed"),
        ("embedding cache hit ratio", measured.cache_hit_ratio, f"load {load.run_id}", "measured"),
        (
            "X_max (turns/s, this machine)",
            round(measured.demand.x_max, 3),
            f"load {load.run_id}: {measured.demand.bound_by}",
            "measured",
        ),
        ("cores", measured.demand.cores, measured.demand.cores_source, "measured"),
    ]
    for layer, d in measured.demand_s.items():
        source = measured.demand_source[layer]
        kind = "assumed" if "assumed" in source else "measured"
        rows.append((f"service demand {layer} (ms/turn)", round(d * 1000, 4), source, kind))
        lat = measured.samples.get(layer)
        if lat is None:
            continue
        rows.append(
            (
                f"latency {layer} mean/p95 (ms, light load)",
                f"{lat.mean() * 1000:.3f} / {np.quantile(lat, 0.95) * 1000:.3f}",
                f"load {load.run_id}, steps {measured.light_steps}",
                "measured",
            )
        )
    if measured.maintenance is not None:
        m = measured.maintenance
        kind = "assumed" if m["rss_source"].startswith("measured constant") else "measured"
        rows.append(("maintenance RSS (MB)", m["rss_mb"], m["rss_source"], kind))
        if m.get("event_lag_p95_ms") is not None:
            rows.append(
                ("maintenance event lag p95 (ms)", m["event_lag_p95_ms"], "load run", "measured")
            )
    for layer, figures in measured.bench_ms.items():
        rows.append(
            (
                f"bench {layer} mean/p95 (ms, concurrency 1)",
                f"{figures['mean_ms']:.3f} / {figures['p95_ms']:.3f}",
                f"bench {bench.run_id if bench else ''}",
                "measured",
            )
        )
    for role, mb in measured.rss_mb.items():
        rows.append((f"peak RSS {role} (MB)", mb, f"load {load.run_id}", "measured"))
    for layer in ("session", "stm", "ltm", "embedder", "turn", "maintenance"):
        if layer == "maintenance" and measured.maintenance is None:
            continue
        node, given = target.node(layer)
        rows.append(
            (f"node {layer}", node.model_dump(), "target" if given else "default node", "assumed")
        )
    return pd.DataFrame(rows, columns=["input", "value", "source", "kind"])


def _curve(target: Target, measured: Measured, sim: SimRun | None) -> pd.DataFrame:
    frames = []
    for factor in SCALE_FACTORS:
        sized = size_layers(target.scaled(factor), measured, sim)
        sized["users"] = target.scaled(factor).users
        frames.append(sized[["layer", "users", "instances", "bound_by", "monthly_cost"]])
    curve = pd.concat(frames, ignore_index=True).sort_values(["layer", "users"])
    curve["moved"] = curve.groupby("layer")["bound_by"].transform(
        lambda s: s.ne(s.shift()) & s.shift().notna()
    )
    return curve


def build_plan(
    target: Target,
    *,
    target_path: Path,
    load: LoadRun,
    bench: BenchRun | None,
    sim: SimRun | None,
    sim_small: SimRun | None,
    runs: list[RunRef],
    notes: list[str] | None = None,
    warnings: list[str] | None = None,
) -> Plan:
    """One strategy's plan (`target.strategy`), from its runs."""
    strategy = target.strategy
    measured = measure(load, bench)
    check_rates(load.steps, measured.demand)
    sizing = size_layers(target, measured, sim)
    p_key = f"p{target.slo_ms.percentile:g}"
    validation = holdouts(load, bench, target.slo_ms.percentile)
    held = validation["holdout"]
    fp = (
        footprint_extrapolation(sim_small, sim)
        if sim is not None and sim_small is not None
        else None
    )
    findings = [Finding(w, strategy, w) for w in warnings or []]
    findings += validation_findings(strategy, validation, p_key)
    findings += drift_findings(strategy, load.steps)
    if fp is not None:
        mine = fp[fp["strategy"] == strategy]
        for _, row in mine[mine["mean_error"].abs() > ERROR_LIMIT].iterrows():
            findings.append(
                Finding(
                    f"footprint extrapolation error over {ERROR_LIMIT:.0%}",
                    strategy,
                    f"footprint extrapolation {strategy}/{row['layer']}: "
                    f"{row['mean_error']:+.0%} is over {ERROR_LIMIT:.0%}",
                    layer=str(row["layer"]),
                    value=float(row["mean_error"]),
                )
            )
    elif sim is not None:
        findings.append(
            Finding(
                "footprint extrapolation not validated: one simulator run only",
                strategy,
                f"{strategy}: footprint from {sim.run_id} only; no smaller population to "
                "validate its extrapolation on",
            )
        )
    if "slo_met" in sizing:
        for _, row in sizing[sizing["slo_met"].eq(False)].iterrows():
            findings.append(
                Finding(
                    f"no number of cores meets the {p_key} SLO: the service time alone is too "
                    "long; make the operation faster",
                    strategy,
                    f"{strategy}/{row['layer']}: no number of cores meets its {p_key} SLO of "
                    f"{row['slo_ms']:g} ms (predicted {row['predicted_p_ms']:.0f} ms)",
                    layer=str(row["layer"]),
                )
            )
    notes = list(notes or []) + measured.demand.notes
    if measured.usl_rejected:
        notes.append("USL cross-check rejected: " + "; ".join(measured.usl_rejected))
    if sim is not None:
        final = sim.series[(sim.series["strategy"] == strategy) & (sim.series["layer"] == "ltm")]
        span = float(final["day"].max()) if len(final) else 0.0
        if len(final) and final["bytes"].iloc[-1] > 0:
            notes.append(
                f"{strategy} still holds LTM facts at the end of the {span:.0f}-day "
                f"simulation: their lifetimes are cut there, so LTM memory is a lower bound "
                f"beyond {span:.0f} days (retention asked: {target.retention_days:g} days)"
            )
        elif span < target.retention_days:
            notes.append(
                f"the simulation spans {span:.0f} days, less than the "
                f"{target.retention_days:g}-day retention: longer lifetimes are not seen"
            )
    if measured.maintenance is None:
        notes.append(
            f"maintenance process not sized: load run {load.run_id} has no maintenance figures "
            f"(`memharness load --strategy {strategy} --rates auto` measures them)"
        )
    demand = measured.demand_s
    bottleneck = max(demand, key=lambda k: demand[k])
    cost = sizing["monthly_cost"].dropna()
    document = {
        "strategy": strategy,
        "capacity": measured.demand.as_dict(),
        "validation_line": validation["line"],
        "runs": [{"kind": r.kind, "path": str(r.path), "chosen": r.chosen} for r in runs],
        "load_strategy": {
            "strategy": load.meta.get("strategy"),
            "strategy_fingerprint": load.meta.get("strategy_fingerprint"),
            "time_scale": load.meta.get("time_scale"),
        },
        "warnings": [f.text for f in findings],
        "notes": notes,
        "bottleneck": {
            "layer": bottleneck,
            "demand_ms": demand[bottleneck] * 1000,
            "bound_turns_per_s": 1.0 / demand[bottleneck],
            "law": "X <= 1 / D_max per core of the bottleneck (operational laws)",
        },
        "usl": measured.usl.as_dict() if measured.usl is not None else None,
        "usl_rejected": measured.usl_rejected,
        "repeats": repeat_table(load.steps, target.slo_ms.percentile),
        "light_steps": measured.light_steps,
        "sizing": _records(sizing),
        "monthly_cost_total": float(cost.sum()) if len(cost) else None,
        "validation": {
            **validation,
            "footprint": _records(fp) if fp is not None else None,
            "footprint_runs": [sim_small.run_id, sim.run_id]
            if fp is not None and sim_small and sim
            else None,
        },
    }
    curve = _curve(target, measured, sim)
    document["scaling"] = _records(curve)
    inputs = _inputs_table(target, measured, load, bench)
    document["inputs"] = _records(inputs)
    images = {
        "Throughput against offered rate: X_max = cores / D": plots.throughput_plot(
            load, measured, held
        ),
        "Response time against throughput": plots.latency_plot(
            load, measured, target.slo_ms.turn, target.slo_ms.percentile
        ),
        "Service demand per layer": plots.demand_plot(measured),
        "Instances from 0.5× to 10× the target's users": plots.scaling_plot(curve),
    }
    if sim is not None:
        images["Footprint per layer over virtual time, projected to the target"] = (
            plots.footprint_plot(
                sim, target, dict(zip(sizing["layer"], sizing["payload_gb"], strict=True))
            )
        )
    return Plan(strategy, document, sizing, inputs, curve, fp, images, findings)


def _answer(plan: Plan) -> dict[str, Any]:
    s = plan.sizing
    cost = s["monthly_cost"]
    b = plan.document["bottleneck"]
    return {
        "strategy": plan.strategy,
        "instances": int(s["instances"].sum()),
        "cores": int(s["cores"].sum()),
        "memory_gb": float(s["ram_gb"].sum()),
        "disk_gb": float(s["disk_gb"].sum()),
        "monthly_cost": float(cost.sum()) if cost.notna().any() else None,
        "bottleneck": f"{b['layer']} ({b['demand_ms']:.2f} ms CPU per turn)",
        "x_max": plan.document["capacity"]["x_max"],
        "validation_holds": plan.document["validation"]["holds"],
    }


def combine(plans: list[Plan], target: Target, *, target_path: Path) -> Plans:
    """The strategies side by side: the answer per strategy, instances per layer, the
    warnings grouped by cause, and each strategy's plan."""
    answer = pd.DataFrame([_answer(p) for p in plans])
    by_layer = pd.concat(
        [p.sizing.set_index("layer")["instances"].rename(p.strategy) for p in plans], axis=1
    ).reset_index()
    document = {
        "kind": "capacity-plan",
        "headline": [
            line
            for p in plans
            for line in (
                f"{p.strategy}: {p.document['capacity']['headline']}",
                f"{p.strategy}: {p.document['validation_line']}",
            )
        ],
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target_file": str(target_path),
        "target": target.model_dump(mode="json"),
        "currency": target.currency,
        "strategies": [p.strategy for p in plans],
        "answer": _records(answer),
        "warnings": group_findings(plans),
        "plans": [p.document for p in plans],
    }
    return Plans(document, plans, answer, by_layer)


def clean(value: Any) -> Any:
    """JSON-safe: numpy scalars to Python, NaN and inf to None, recursively."""
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return {k: clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [clean(row) for row in df.to_dict(orient="records")]
