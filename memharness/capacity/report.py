"""A capacity plan end to end: runs + target -> capacity.json, capacity.md, capacity.html.

`build_plan` computes (pure, from the runs read by `inputs`); `write_plan` writes the
three files into reports/<id>/. The HTML is one self-contained file: plots are inline
base64 PNG, styles inline, nothing fetched.
"""

from __future__ import annotations

import html
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity import plots
from memharness.capacity.inputs import BenchRun, LoadRun, SimRun
from memharness.capacity.plan import measure, size_layers
from memharness.capacity.target import Target
from memharness.capacity.validate import ERROR_LIMIT, footprint_extrapolation, holdout

__all__ = ["Plan", "RunRef", "build_plan", "markdown_table", "write_plan"]

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
    chosen: str  # "given" or "newest under reports/"


@dataclass
class Plan:
    document: dict[str, Any]
    sizing: pd.DataFrame
    inputs: pd.DataFrame
    curve: pd.DataFrame
    footprint_validation: pd.DataFrame | None
    images: dict[str, str]


def _inputs_table(
    target: Target, measured: Any, load: LoadRun, bench: BenchRun | None
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
        ("strategy", target.strategy, "target", "assumed"),
        ("utilisation ceiling", target.utilisation_ceiling, "target", "assumed"),
        ("memory ceiling", target.memory_ceiling, "target", "assumed"),
        ("calls per turn, each layer", 1, "MemorySystem.turn: one of each", "assumed"),
        ("arrivals c_a²", 1.0, "Poisson arrivals", "assumed"),
        ("embedding cache hit ratio", measured.cache_hit_ratio, f"load {load.run_id}", "measured"),
        ("USL X_max (turns/s per process)", measured.usl.x_max, f"load {load.run_id}", "measured"),
    ]
    for layer, d in measured.demand_s.items():
        source = measured.demand_source[layer]
        kind = "assumed" if "assumed" in source else "measured"
        rows.append((f"service demand {layer} (ms/turn)", round(d * 1000, 4), source, kind))
        lat = measured.samples[layer]
        rows.append(
            (
                f"latency {layer} mean/p95 (ms, light load)",
                f"{lat.mean() * 1000:.3f} / {np.quantile(lat, 0.95) * 1000:.3f}",
                f"load {load.run_id}, steps {measured.light_steps}",
                "measured",
            )
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
    for layer in ("session", "stm", "ltm", "embedder", "turn"):
        node, given = target.node(layer)
        rows.append(
            (f"node {layer}", node.model_dump(), "target" if given else "default node", "assumed")
        )
    return pd.DataFrame(rows, columns=["input", "value", "source", "kind"])


def _curve(target: Target, measured: Any, sim: SimRun | None) -> pd.DataFrame:
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
) -> Plan:
    """Everything the report shows, from the runs and the target."""
    measured = measure(load, bench)
    sizing = size_layers(target, measured, sim)
    held = holdout(load, bench, target.slo_ms.percentile)
    fp = (
        footprint_extrapolation(sim_small, sim)
        if sim is not None and sim_small is not None
        else None
    )
    warnings = []
    p_key = f"p{target.slo_ms.percentile:g}"
    for what, err in (("throughput", held["throughput"]["error"]), (p_key, held[p_key]["error"])):
        if err is not None and abs(err) > ERROR_LIMIT:
            warnings.append(f"held-out {what} error {err:+.0%} is over {ERROR_LIMIT:.0%}")
    if fp is not None:
        bad = fp[fp["mean_error"].abs() > ERROR_LIMIT]
        for _, row in bad.iterrows():
            warnings.append(
                f"footprint extrapolation {row['strategy']}/{row['layer']}: "
                f"{row['mean_error']:+.0%} is over {ERROR_LIMIT:.0%}"
            )
    elif sim is not None:
        warnings.append("footprint extrapolation not validated: one simulator run only")
    demand = measured.demand_s
    bottleneck = max(demand, key=lambda k: demand[k])
    cost = sizing["monthly_cost"].dropna()
    document = {
        "kind": "capacity-plan",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "target_file": str(target_path),
        "target": target.model_dump(mode="json"),
        "runs": [{"kind": r.kind, "path": str(r.path), "chosen": r.chosen} for r in runs],
        "warnings": warnings,
        "bottleneck": {
            "layer": bottleneck,
            "demand_ms": demand[bottleneck] * 1000,
            "bound_turns_per_s": 1.0 / demand[bottleneck],
            "law": "X <= 1 / D_max per core of the bottleneck (operational laws)",
        },
        "usl": measured.usl.as_dict(),
        "light_steps": measured.light_steps,
        "sizing": _records(sizing),
        "monthly_cost_total": float(cost.sum()) if len(cost) else None,
        "validation": {
            "holdout": held,
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
        "Throughput against concurrency (USL)": plots.usl_plot(load, measured, held),
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
    return Plan(document, sizing, inputs, curve, fp, images)


def _clean(value: Any) -> Any:
    if isinstance(value, float | np.floating):
        return float(value) if math.isfinite(value) else None
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def _records(df: pd.DataFrame) -> list[dict[str, Any]]:
    return [_clean(row) for row in df.to_dict(orient="records")]


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, float | np.floating):
        if value == 0:
            return "0"
        number = float(value)
        return f"{number:.3g}" if abs(number) < 1000 else f"{number:,.0f}"
    return str(value)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of `df` (no tabulate needed)."""
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = [
        "| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def _span(values: list[float]) -> str:
    return " – ".join(_fmt(float(v)) for v in values) if len(values) == 2 else "–"


def _sections(plan: Plan) -> list[tuple[str, pd.DataFrame | str]]:
    doc = plan.document
    held = doc["validation"]["holdout"]
    p_key = next(
        k for k in held if k.startswith("p") and isinstance(held[k], dict) and "model" in held[k]
    )
    fit_ci = held["usl"].get("x_max_ci") or [None, None]
    x_range = [min(held["offered"], x) for x in fit_ci if x is not None]
    holdout_df = pd.DataFrame(
        [
            [
                "throughput (turns/s)",
                held["throughput"]["predicted"],
                _span(x_range),
                held["throughput"]["measured"],
                held["throughput"]["error"],
                "min(offered, USL X_max)",
            ],
            [
                f"{p_key} turn@intended (ms)",
                held[p_key]["predicted_ms"],
                _span(held[p_key].get("predicted_range_ms") or []),
                held[p_key]["measured_ms"],
                held[p_key]["error"],
                held[p_key]["model"],
            ],
        ],
        columns=["held-out figure", "predicted", "at X_max's 95% CI", "measured", "error", "model"],
    )
    usl = doc["usl"]
    usl_df = pd.DataFrame(
        [
            [name, usl[key], *(usl[f"{key}_ci"] or [None, None])]
            for name, key in (
                ("λ (turns/s at N=1)", "lam"),
                ("σ (contention)", "sigma"),
                ("κ (coherency)", "kappa"),
                ("X_max (turns/s)", "x_max"),
            )
        ]
        + [["N*", usl["n_star"], None, None], ["ceiling λ/σ", usl["ceiling"], None, None]],
        columns=["parameter", "fit", "95% CI low", "95% CI high"],
    )
    sections: list[tuple[str, pd.DataFrame | str]] = [
        ("Sizing", plan.sizing[SIZING_COLUMNS]),
        ("Validation: held-out load step", holdout_df),
    ]
    if plan.footprint_validation is not None:
        sections.append(
            (
                f"Validation: footprint {' → '.join(doc['validation']['footprint_runs'])}",
                plan.footprint_validation,
            )
        )
    sections += [
        ("Fitted parameters (USL, bootstrap 95% intervals)", usl_df),
        ("Inputs", plan.inputs),
    ]
    return sections


def _summary_lines(plan: Plan) -> list[str]:
    doc = plan.document
    t = doc["target"]
    b = doc["bottleneck"]
    total = doc["monthly_cost_total"]
    lines = [
        f"Target: {t['users']:,} users × {t['turns_per_user_per_day']:g} turns/day, "
        f"peak ×{t['peak_factor']:g} = {plan.sizing['lambda_peak_per_s'].iloc[0]:.2f} turns/s "
        f"at peak; strategy {t['strategy']}; utilisation ≤ {t['utilisation_ceiling']:g}.",
        f"Bottleneck (largest service demand): {b['layer']} at {b['demand_ms']:.2f} ms per turn "
        f"(≤ {b['bound_turns_per_s']:.1f} turns/s per core).",
        "Instances: "
        + ", ".join(f"{r.layer} {r.instances} ({r.bound_by})" for r in plan.sizing.itertuples())
        + (f"; about {total:,.0f} per month." if total else "."),
        "Runs: " + "; ".join(f"{r['kind']} {r['path']} ({r['chosen']})" for r in doc["runs"]) + ".",
    ]
    return lines


def write_plan(plan: Plan, out_dir: Path) -> dict[str, Path]:
    """capacity.json, capacity.md and capacity.html in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / f"capacity.{name}" for name in ("json", "md", "html")}
    paths["json"].write_text(json.dumps(_clean(plan.document), indent=2, ensure_ascii=False) + "\n")
    warnings = plan.document["warnings"]
    md = ["# Capacity plan", ""]
    md += [f"> **WARNING: {w}**" for w in warnings] + ([""] if warnings else [])
    md += [f"- {line}" for line in _summary_lines(plan)] + [""]
    for title, table in _sections(plan):
        md += [
            f"## {title}",
            "",
            markdown_table(table) if isinstance(table, pd.DataFrame) else table,
            "",
        ]
    md += ["Plots: see capacity.html (inline)."]
    paths["md"].write_text("\n".join(md) + "\n", encoding="utf-8")
    paths["html"].write_text(_html(plan), encoding="utf-8")
    return paths


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px}"
    "table{border-collapse:collapse;font-size:13px;margin:1em 0}"
    "td,th{border:1px solid #ccc;padding:3px 6px;text-align:right}th{background:#f3f3f3}"
    ".warn{background:#fde2e1;border:2px solid #c00;padding:.6em;font-weight:bold}"
    "img{max-width:100%;border:1px solid #eee}"
)


def _html(plan: Plan) -> str:
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Capacity plan</title>",
        f"<style>{_CSS}</style></head><body><h1>Capacity plan</h1>",
    ]
    parts += [f"<p class='warn'>WARNING: {html.escape(w)}</p>" for w in plan.document["warnings"]]
    parts.append(
        "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in _summary_lines(plan)) + "</ul>"
    )
    for title, table in _sections(plan):
        table_id = "sizing" if title == "Sizing" else title.split(":")[0].lower().replace(" ", "-")
        body = (
            table.to_html(index=False, na_rep="–", float_format=_fmt, table_id=table_id)
            if isinstance(table, pd.DataFrame)
            else html.escape(table)
        )
        parts.append(f"<h2>{html.escape(title)}</h2>{body}")
    for title, png in plan.images.items():
        parts.append(
            f"<h2>{html.escape(title)}</h2><img alt='{html.escape(title)}' "
            f"src='data:image/png;base64,{png}'>"
        )
    parts.append("</body></html>")
    return "\n".join(parts)
