"""Rendering a plan: capacity.md (Markdown tables), capacity.html (one self-contained
file: plots inline as base64 PNG, styles inline, nothing fetched) and capacity.json."""

from __future__ import annotations

import html
import json
import math
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.report import SIZING_COLUMNS, Plan, clean

__all__ = ["SOURCE_COLUMNS", "markdown_table", "write_plan"]

SOURCE_COLUMNS = ["layer", "demand_source", "memory_source", "cores_by", "node", "node_source"]


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
        ("Where each layer's figures come from", plan.sizing[SOURCE_COLUMNS]),
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
        *(f"Note: {note}." for note in doc.get("notes", [])),
        "Runs: " + "; ".join(f"{r['kind']} {r['path']} ({r['chosen']})" for r in doc["runs"]) + ".",
    ]
    return lines


def write_plan(plan: Plan, out_dir: Path) -> dict[str, Path]:
    """capacity.json, capacity.md and capacity.html in `out_dir`."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / f"capacity.{name}" for name in ("json", "md", "html")}
    paths["json"].write_text(json.dumps(clean(plan.document), indent=2, ensure_ascii=False) + "\n")
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
        table_id = (
            "sizing" if title == "Sizing" else re.sub(r"[^a-z]+", "-", title.lower()).strip("-")
        )
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
