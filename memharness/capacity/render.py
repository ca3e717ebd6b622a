"""Rendering a plan: capacity.md (Markdown tables), capacity.html (one self-contained
file: plots inline as base64 PNG, styles inline, nothing fetched) and capacity.json.

The answer comes first (one card: instances, cores, memory, disk, monthly cost and the
bottleneck per strategy), then the warnings, one line per cause, then the detail. Tables
carry readable column names and wrap to fit a 1,300 px page. Every file is rendered
before any is written, and each is written atomically: a failed report leaves an earlier
one in the same directory whole.
"""

from __future__ import annotations

import html
import json
import math
import os
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.report import Plan, Plans, clean

__all__ = ["COLUMN_NAMES", "markdown_table", "readable", "write_atomic", "write_plan"]

#: Field -> column heading ({cur}: the target's currency, {p}: the SLO percentile).
COLUMN_NAMES = {
    "layer": "layer",
    "lambda_peak_per_s": "turns/s at peak",
    "demand_ms": "service demand (ms/turn)",
    "offered_cores": "offered work (cores)",
    "cores": "cores",
    "cores_unit": "counted as",
    "cores_by": "cores set by",
    "utilisation": "utilisation at peak",
    "predicted_p_ms": "predicted {p} (ms)",
    "slo_ms": "SLO {p} (ms)",
    "ram_gb": "memory (GB)",
    "disk_gb": "disk (GB)",
    "instances_by_cpu": "instances for CPU",
    "instances_by_memory": "instances for memory",
    "instances_by_disk": "instances for disk",
    "instances": "instances",
    "bound_by": "bound by",
    "monthly_cost": "monthly cost ({cur})",
    "demand_source": "service demand from",
    "memory_source": "memory from",
    "node": "node",
    "node_source": "node from",
    "strategy": "strategy",
    "memory_gb": "memory (GB)",
    "bottleneck": "bottleneck (largest service demand)",
    "validation_holds": "held-out predictions hold",
    "x_max": "X_max here (turns/s, cores / D)",
    "event_lag_p95_ms": "event lag p95 (ms)",
    "users_small": "users (small run)",
    "users_large": "users (large run)",
    "mean_predicted": "mean bytes predicted",
    "mean_measured": "mean bytes measured",
    "mean_error": "mean error",
    "peak_predicted": "peak bytes predicted",
    "peak_measured": "peak bytes measured",
    "peak_error": "peak error",
}
SIZING = ["layer", "cores", "cores_unit", "cores_by", "utilisation", "predicted_p_ms", "slo_ms",
          "ram_gb", "disk_gb", "instances", "bound_by", "monthly_cost"]  # fmt: skip
DEMAND = ["layer", "lambda_peak_per_s", "demand_ms", "offered_cores", "instances_by_cpu",
          "instances_by_memory", "instances_by_disk"]  # fmt: skip
SOURCES = ["layer", "demand_source", "memory_source", "cores_by", "node", "node_source"]


def _fmt(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "–"
    if isinstance(value, bool | np.bool_):
        return "yes" if value else "no"
    if isinstance(value, float | np.floating):
        if value == 0:
            return "0"
        number = float(value)
        return f"{number:.3g}" if abs(number) < 1000 else f"{number:,.0f}"
    return str(value)


def readable(df: pd.DataFrame, currency: str, percentile: str = "p95") -> pd.DataFrame:
    """`df` with readable column names."""
    names = {c: COLUMN_NAMES.get(c, c).format(cur=currency, p=percentile) for c in df.columns}
    return df.rename(columns=names)


def markdown_table(df: pd.DataFrame) -> str:
    """A GitHub-flavoured Markdown table of `df` (no tabulate needed)."""
    head = "| " + " | ".join(map(str, df.columns)) + " |"
    rule = "|" + "---|" * len(df.columns)
    body = [
        "| " + " | ".join(_fmt(v).replace("|", "/") for v in row) + " |"
        for row in df.itertuples(index=False)
    ]
    return "\n".join([head, rule, *body])


def _interval(values: list[Any] | None) -> str:
    if not values or len(values) != 2 or any(v is None for v in values):
        return "–"
    return " – ".join(_fmt(float(v)) for v in values)


def _holdout_table(plan: Plan) -> pd.DataFrame:
    rows = []
    for h in plan.document["validation"]["holdout"]:
        p_key = next(k for k in h if k.startswith("p") and isinstance(h[k], dict))
        for label, j, unit in (
            ("throughput (turns/s)", h["throughput"], ""),
            (f"{p_key} turn@intended (ms)", h[p_key], "_ms"),
        ):
            predicted = j[f"predicted{unit}"]
            rows.append(
                {
                    "held-out step": f"{h['held_out_step']} ({h['offered']:g}/s, {h['position']})",
                    "figure": label,
                    "predicted": predicted if predicted is not None else "saturated, unbounded",
                    "measured": j[f"measured{unit}"],
                    "error": j["error"],
                    "limit": f"±{j['limit']:.0%}",
                    "holds": "not judged" if j["holds"] is None else j["holds"],
                }
            )
    return pd.DataFrame(rows)


def _usl_table(plan: Plan) -> pd.DataFrame:
    usl = plan.document["usl"]
    rejected = "; ".join(plan.document.get("usl_rejected") or []) or "accepted as a cross-check"
    if usl is None:
        return pd.DataFrame([["USL", rejected]], columns=["parameter", "verdict"])
    return pd.DataFrame(
        [
            [name, usl[key], *(usl[f"{key}_ci"] or [None, None])]
            for name, key in (
                ("λ (turns/s at N=1)", "lam"),
                ("σ (contention)", "sigma"),
                ("κ (coherency)", "kappa"),
                ("X_max (turns/s)", "x_max"),
                ("ceiling λ/σ", "ceiling"),
            )
        ]
        + [["N*", usl["n_star"], None, None], [f"verdict: {rejected}", None, None, None]],
        columns=["parameter", "fit", "95% CI low", "95% CI high"],
    )


def _repeats_table(plan: Plan) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {k: (_interval(v) if k.endswith("_ci") else v) for k, v in row.items()}
            for row in plan.document.get("repeats") or []
        ]
    )


def _sections(plan: Plan, currency: str, p_key: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(id, title, table) of one strategy's detail."""
    s = plan.strategy
    doc = plan.document
    sections = [
        (f"sizing-{s}", f"{s}: sizing", readable(plan.sizing[SIZING], currency, p_key)),
        (f"demand-{s}", f"{s}: load and demand", readable(plan.sizing[DEMAND], currency, p_key)),
        (f"sources-{s}", f"{s}: where each layer's figures come from",
         readable(plan.sizing[SOURCES], currency, p_key)),
        (f"holdout-{s}", f"{s}: validation, held-out load steps (interleaved with the fitting "
         "steps)", _holdout_table(plan)),
        (f"repeats-{s}", f"{s}: steps per offered rate: medians, bootstrap 95% intervals, "
         "run-to-run CV", _repeats_table(plan)),
    ]  # fmt: skip
    if plan.footprint_validation is not None:
        runs = " → ".join(doc["validation"]["footprint_runs"])
        fp = plan.footprint_validation
        sections.append(
            (f"footprint-{s}", f"{s}: validation, footprint {runs}", readable(fp, currency))
        )
    sections += [
        (
            f"usl-{s}",
            f"{s}: USL cross-check (bootstrap 95% intervals; not the plan's model)",
            _usl_table(plan),
        ),
        (f"inputs-{s}", f"{s}: inputs", plan.inputs),
    ]
    return sections


def _answer_lines(plans: Plans) -> list[str]:
    doc = plans.document
    t = doc["target"]
    cur = doc["currency"]
    peak = plans.plans[0].sizing["lambda_peak_per_s"].iloc[0]
    lines = [
        line
        for plan in plans.plans
        for line in (
            f"{plan.strategy}: {plan.document['capacity']['headline']}.",
            f"{plan.strategy}: {plan.document['validation_line']}.",
        )
    ]
    lines += [
        f"Target: {t['users']:,} users × {t['turns_per_user_per_day']:g} turns/day, "
        f"peak ×{t['peak_factor']:g} = {peak:.2f} turns/s; utilisation ≤ "
        f"{t['utilisation_ceiling']:g}; prices in {cur}."
    ]
    for row in plans.answer.itertuples():
        cost = (
            "no prices"
            if row.monthly_cost is None or pd.isna(row.monthly_cost)
            else (f"{row.monthly_cost:,.0f} {cur} per month")
        )
        lines.append(
            f"{row.strategy}: {row.instances} instances, {row.cores} cores, "
            f"{row.memory_gb:,.1f} GB memory, {row.disk_gb:,.1f} GB disk, {cost}; "
            f"bottleneck {row.bottleneck}."
        )
    return lines


def _details(plan: Plan) -> list[str]:
    doc = plan.document
    return [
        *(f"Note: {note}." for note in doc.get("notes", [])),
        "Runs: " + "; ".join(f"{r['kind']} {r['path']} ({r['chosen']})" for r in doc["runs"]) + ".",
        *(f"Warning: {w}" for w in doc["warnings"]),
    ]


def _markdown(plans: Plans) -> str:
    doc = plans.document
    cur = doc["currency"]
    p_key = f"p{doc['target']['slo_ms']['percentile']:g}"
    md = ["# Capacity plan", ""]
    md += [f"- **{line}**" for line in _answer_lines(plans)] + [""]
    md += [readable_markdown(plans.answer, cur, p_key), ""]
    if doc["warnings"]:
        md += ["## Warnings, by cause", ""] + [f"- WARNING: {w}" for w in doc["warnings"]] + [""]
    md += ["## Instances per layer", "", markdown_table(plans.by_layer), ""]
    for plan in plans.plans:
        md += [f"## {plan.strategy}", ""] + [f"- {line}" for line in _details(plan)] + [""]
        for _, title, table in _sections(plan, cur, p_key):
            md += [f"### {title}", "", markdown_table(table), ""]
    md += ["Plots: see capacity.html (inline)."]
    return "\n".join(md) + "\n"


def readable_markdown(df: pd.DataFrame, currency: str, p_key: str) -> str:
    return markdown_table(readable(df, currency, p_key))


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1240px;padding:0 1em}"
    "table{border-collapse:collapse;font-size:13px;margin:1em 0;width:100%;"
    "table-layout:auto}"
    "td,th{border:1px solid #ccc;padding:3px 5px;text-align:right;vertical-align:top;"
    "overflow-wrap:break-word}"
    "th{background:#f3f3f3;white-space:normal;font-weight:600}"
    "td:first-child,th:first-child{text-align:left}"
    "#answer{border:2px solid #246;border-radius:8px;padding:.6em 1em;background:#f4f8fc}"
    "#answer h1{margin:.2em 0}#answer li{margin:.2em 0}"
    ".warn{background:#fde2e1;border:2px solid #c00;padding:.4em .8em}"
    ".warn li{margin:.2em 0}"
    "img{max-width:100%;height:auto;border:1px solid #eee}"
)


def _table_html(df: pd.DataFrame, table_id: str) -> str:
    df = df.apply(lambda column: column.map(_yes_no) if column.dtype == object else column)
    df = df.apply(lambda column: column.map(_yes_no) if column.dtype == bool else column)
    return df.to_html(index=False, na_rep="–", float_format=_fmt, table_id=table_id, border=0)


def _yes_no(value: Any) -> Any:
    return ("yes" if value else "no") if isinstance(value, bool | np.bool_) else value


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", text).strip("-")


def _html(plans: Plans) -> str:
    doc = plans.document
    cur = doc["currency"]
    p_key = f"p{doc['target']['slo_ms']['percentile']:g}"
    answer = readable(plans.answer, cur, p_key)
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Capacity plan</title>",
        f"<style>{_CSS}</style></head><body>",
        "<section id='answer'><h1>Capacity plan</h1><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in _answer_lines(plans))
        + "</ul>"
        + _table_html(answer, "answer-table")
        + "</section>",
    ]
    if doc["warnings"]:
        parts.append(
            "<section class='warn' id='warnings'><strong>Warnings, by cause "
            "(detail under each strategy)</strong><ul>"
            + "".join(f"<li>{html.escape(w)}</li>" for w in doc["warnings"])
            + "</ul></section>"
        )
    parts.append(
        f"<h2>Instances per layer</h2>{_table_html(plans.by_layer, 'instances-per-layer')}"
    )
    for plan in plans.plans:
        parts.append(f"<h2 id='{_slug(plan.strategy)}'>{html.escape(plan.strategy)}</h2>")
        parts.append(
            "<ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in _details(plan)) + "</ul>"
        )
        for table_id, title, table in _sections(plan, cur, p_key):
            parts.append(f"<h3>{html.escape(title)}</h3>{_table_html(table, _slug(table_id))}")
        for title, png in plan.images.items():
            label = html.escape(f"{plan.strategy}: {title}")
            parts.append(f"<h3>{label}</h3><img alt='{label}' src='data:image/png;base64,{png}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` through a temporary file renamed into place."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_plan(plans: Plans, out_dir: Path) -> dict[str, Path]:
    """capacity.json, capacity.md and capacity.html in `out_dir`: all rendered first,
    then each written atomically."""
    texts = {
        "json": json.dumps(clean(plans.document), indent=2, ensure_ascii=False, allow_nan=False)
        + "\n",
        "md": _markdown(plans),
        "html": _html(plans),
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / f"capacity.{name}" for name in texts}
    for name, text in texts.items():
        write_atomic(paths[name], text)
    return paths
