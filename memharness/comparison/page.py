"""The strategy comparison page: one self-contained HTML file (plots inline as base64
PNG, styles inline, nothing fetched) built from result files only.

The joined table (pandas, outer join on the strategy) has a row per strategy: quality
(simulator), p95 per layer and the highest sustainable rate (load), background cost
(maintenance CPU per turn, event lag), bytes per user, monthly cost at the target
(capacity). A figure no run measured shows as "not measured", never as zero. The
quality-vs-cost frontier is drawn against the monthly cost when at least two strategies
have one, else against bytes per user; its Pareto points are those no other strategy
beats on both recall (higher) and cost (lower). The first screen says which strategies
are on it and why, in sentences built from the figures.
"""

from __future__ import annotations

import base64
import html
import io
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from memharness.capacity.render import write_atomic
from memharness.comparison.inputs import NEVER_SEALED, PII, Inputs
from memharness.result_figures import pareto_frontier
from memharness.units import human_bytes, human_duration

__all__ = ["NOT_MEASURED", "Page", "build_page", "write_page"]

NOT_MEASURED = "not measured"
_LAYERS = ("session", "stm", "ltm", "embedder", "turn")


@dataclass
class Page:
    table: pd.DataFrame
    frontier: list[str]
    axis: str  # "monthly_cost" or "bytes_per_user"
    summary: list[str]
    document: dict[str, Any]
    images: dict[str, str]


def _join(inputs: Inputs) -> pd.DataFrame:
    table = inputs.quality
    for other in (inputs.load, inputs.capacity):
        table = table.merge(other, on="strategy", how="outer")
    # Every figure has its column: a kind of run not given shows as not measured.
    for column in HEADINGS:
        if column not in table and column != "on_frontier":
            table[column] = np.nan
    return table.reset_index(drop=True)


def _cost_text(value: float, axis: str, currency: str) -> str:
    if axis == "monthly_cost":
        return f"{value:,.0f} {currency}/month"
    return f"{human_bytes(value)} per user"


def _frontier(table: pd.DataFrame, currency: str) -> tuple[str, list[str], list[str]]:
    """The cost axis, the frontier, and the sentences that say why."""
    has_cost = (
        table.get("monthly_cost", pd.Series(dtype=float)).notna() & table["recall_at_k"].notna()
        if "recall_at_k" in table
        else pd.Series(False, index=table.index)
    )
    axis = "monthly_cost" if int(has_cost.sum()) >= 2 else "bytes_per_user"
    if "recall_at_k" not in table or axis not in table:
        return axis, [], ["No strategy has both a recall and a cost: no frontier to draw."]
    placed = table.dropna(subset=["recall_at_k", axis])
    points = [(str(r.strategy), float(getattr(r, axis)), float(r.recall_at_k))
              for r in placed.itertuples()]  # fmt: skip
    frontier = pareto_frontier(points)
    what = "monthly cost at the target" if axis == "monthly_cost" else "bytes per user"
    figures = {label: (cost, recall) for label, cost, recall in points}

    def say(label: str) -> str:
        cost, recall = figures[label]
        return f"{label} (recall {recall:.3f}, {_cost_text(cost, axis, currency)})"

    lines = []
    by_cost = axis == "monthly_cost"
    if frontier:
        reasons = []
        for i, label in enumerate(frontier):  # by cost ascending, recall ascending with it
            if len(frontier) == 1:
                why = "no other strategy has as much recall for as little"
            elif i == 0:
                why = "the least cost of all" if by_cost else "the fewest bytes of all"
            elif i == len(frontier) - 1:
                why = "the most recall, " + (
                    "for the least cost that buys it" if by_cost else "in the fewest bytes"
                )
            else:
                why = (
                    "more recall than every "
                    + ("cheaper" if by_cost else "smaller")
                    + (" strategy")
                )
            reasons.append(f"{say(label)}: {why}")
        lines.append(f"On the frontier of recall against {what}: " + "; ".join(reasons) + ".")
    for label, cost, recall in points:
        if label in frontier:
            continue
        better = [f for f in frontier if figures[f][0] <= cost and figures[f][1] >= recall]
        if better:
            b = better[0]
            lines.append(
                f"{label} is off it: {b} has {'more' if figures[b][1] > recall else 'as much'} "
                f"recall ({figures[b][1]:.3f} vs {recall:.3f}) for "
                f"{'less' if figures[b][0] < cost else 'the same'} "
                f"({_cost_text(figures[b][0], axis, currency)} vs "
                f"{_cost_text(cost, axis, currency)})."
            )
    missing = sorted(set(table["strategy"]) - set(figures))
    if missing:
        lines.append(f"Not placed (recall or {what} not measured): {', '.join(map(str, missing))}.")
    return axis, frontier, lines


def build_page(inputs: Inputs) -> Page:
    """The joined table, the frontier and its sentences, and the plots."""
    table = _join(inputs)
    if table.empty:
        raise ValueError("the runs given hold no strategy's figures")
    currency = inputs.currency or "USD"
    axis, frontier, summary = _frontier(table, currency)
    breaking = deadline_breakers(table)
    if breaking:
        summary.append(
            f"Breaking the {human_duration(PRIVACY_DEADLINE_S)} privacy deadline (a value the "
            "scenarios mark personal stayed in plaintext longer, or to the end of the run, "
            f"whatever the strategy's expiry): {', '.join(breaking)}."
        )
    table["on_frontier"] = table["strategy"].isin(frontier)
    images = {}
    if frontier:
        images[f"Recall against {axis.replace('_', ' ')} (Pareto points ringed)"] = _frontier_plot(
            table, axis, frontier, currency
        )
    p95 = [c for c in (f"p95_{layer}_ms" for layer in _LAYERS) if c in table]
    if p95 and table[p95].notna().any().any():
        images["p95 per layer under load"] = _p95_plot(table, p95)
    document = {
        "kind": "strategy-comparison",
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "sources": inputs.sources,
        "notes": inputs.notes,
        "currency": currency,
        "target_users": inputs.target_users,
        "frontier_axis": axis,
        "frontier": frontier,
        "summary": summary,
        "privacy_deadline_s": PRIVACY_DEADLINE_S,
        "privacy_deadline_broken": breaking,
        "strategies": [
            {k: _json_value(k, v) for k, v in row.items()}
            for row in table.to_dict(orient="records")
        ],
    }
    return Page(table, frontier, axis, summary, document, images)


def _json_value(column: str, value: Any) -> Any:
    """A figure as the page's JSON holds it: what a PII infinity stands for, None for
    a figure not measured."""
    if isinstance(value, float) and not math.isfinite(value):
        return _pii_cell(value) if column in PII and not math.isnan(value) else None
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    return value


def _figure(width: float = 7.0, height: float = 4.2) -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=(width, height), dpi=90)


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.tight_layout()
    fig.savefig(buffer, format="png")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _frontier_plot(table: pd.DataFrame, axis: str, frontier: list[str], currency: str) -> str:
    fig, ax = _figure()
    placed = table.dropna(subset=["recall_at_k", axis])
    ax.scatter(placed[axis], placed["recall_at_k"], zorder=3)
    for row in placed.itertuples():
        ax.annotate(str(row.strategy), (getattr(row, axis), row.recall_at_k), fontsize=8,
                    xytext=(4, 4), textcoords="offset points")  # fmt: skip
    front = placed.set_index("strategy").loc[frontier]
    ax.scatter(front[axis], front["recall_at_k"], s=160, facecolors="none", edgecolors="red",
               label="Pareto frontier", zorder=4)  # fmt: skip
    ax.step(front[axis], front["recall_at_k"], where="post", color="red", lw=1)
    ax.set_xlabel(f"monthly cost ({currency})" if axis == "monthly_cost" else "bytes per user")
    ax.set_ylabel("recall@k")
    ax.legend(fontsize=8)
    return _png(fig)


def _p95_plot(table: pd.DataFrame, columns: list[str]) -> str:
    fig, ax = _figure(8.0, 4.2)
    width = 0.8 / max(len(table), 1)
    x = np.arange(len(columns))
    table = table.dropna(subset=columns, how="all")  # strategies with no load run: no bars
    width = 0.8 / max(len(table), 1)
    for i, row in enumerate(table.itertuples()):
        values = [getattr(row, c) for c in columns]
        ax.bar(x + i * width, values, width, label=str(row.strategy))
    ax.set_xticks(
        x + 0.4 - width / 2, [c.removeprefix("p95_").removesuffix("_ms") for c in columns]
    )
    ax.set_yscale("log")
    ax.set_ylabel("p95 (ms); missing bars: not measured")
    ax.legend(fontsize=7)
    return _png(fig)


#: Column -> heading ({cur}: the capacity run's currency).
HEADINGS = {
    "strategy": "strategy",
    "on_frontier": "on the frontier",
    "recall_at_k": "recall@k",
    "stale_at_k": "stale@k",
    "over_forget_rate": "over-forget",
    "leakage": "leakage",
    "pii_raw_max_s": "PII raw max",
    "pii_sealed_max_s": "PII sealed max",
    **{f"p95_{layer}_ms": f"{layer} p95 (ms)" for layer in _LAYERS},
    "p95_at_rate": "p95 taken at (turns/s)",
    "sustainable_rate": "highest sustainable rate (turns/s)",
    "maintenance_cpu_ms_per_turn": "maintenance CPU (ms/turn)",
    "event_lag_p95_ms": "event lag p95 (ms)",
    "bytes_per_user": "bytes per user",
    "instances": "instances",
    "monthly_cost": "monthly cost ({cur})",
}


#: Personal data masked within 24 hours of being written (docs/requirements.md, R6).
PRIVACY_DEADLINE_S = 86_400.0


def deadline_breakers(table: pd.DataFrame) -> list[str]:
    """The strategies under which a marked personal value stayed in plaintext longer
    than `PRIVACY_DEADLINE_S` (to the end of the run included)."""
    if "pii_raw_max_s" not in table:
        return []
    late = table["pii_raw_max_s"].astype(float) > PRIVACY_DEADLINE_S
    return [str(name) for name in table.loc[late, "strategy"]]


def _pii_cell(seconds: float) -> str:
    """A PII figure (`comparison.inputs`): a time, or what its infinities stand for."""
    if seconds == NEVER_SEALED:
        return "never sealed"
    if seconds == math.inf:
        return "to the end of the run"
    return human_duration(seconds)


def _cell(column: str, value: Any) -> str:
    if column == "on_frontier":
        return "yes" if value else "no"
    if column in PII and isinstance(value, float) and not math.isnan(value):
        late = column == "pii_raw_max_s" and value > PRIVACY_DEADLINE_S
        return _pii_cell(value) + (" (breaks the 24 h privacy deadline)" if late else "")
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return NOT_MEASURED
    if column == "bytes_per_user":
        return human_bytes(float(value))
    if column == "monthly_cost":
        return f"{float(value):,.0f}"
    if isinstance(value, float | np.floating):
        number = float(value)
        return f"{number:.3g}" if abs(number) < 1000 else f"{number:,.0f}"
    return html.escape(str(value))


#: The page's two tables (id, title, columns): narrow enough for 1,300 px each.
TABLES = (
    ("quality", "Quality and cost", ["strategy", "on_frontier", "recall_at_k", "stale_at_k",
     "over_forget_rate", "leakage", "pii_raw_max_s", "pii_sealed_max_s", "bytes_per_user",
     "instances", "monthly_cost"]),
    ("load", "Under load, and background work", ["strategy", *(f"p95_{layer}_ms" for layer in
     _LAYERS), "p95_at_rate", "sustainable_rate", "maintenance_cpu_ms_per_turn",
     "event_lag_p95_ms"]),
)  # fmt: skip


def _table_html(table: pd.DataFrame, table_id: str, columns: list[str], currency: str) -> str:
    head = "".join(f"<th>{html.escape(HEADINGS[c].format(cur=currency))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{_cell(c, row[c])}</td>" for c in columns) + "</tr>"
        for _, row in table.iterrows()
    )
    return f"<table id='{table_id}'><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = (
    "body{font-family:system-ui,sans-serif;margin:1.5em auto;max-width:1240px;padding:0 1em}"
    "table{border-collapse:collapse;font-size:13px;margin:1em 0;width:100%}"
    "td,th{border:1px solid #ccc;padding:3px 5px;text-align:right;vertical-align:top;"
    "overflow-wrap:break-word}th{background:#f3f3f3;font-weight:600}"
    "td:first-child,th:first-child{text-align:left}"
    "#answer{border:2px solid #246;border-radius:8px;padding:.6em 1em;background:#f4f8fc}"
    "#answer h1{margin:.2em 0}img{max-width:100%;height:auto;border:1px solid #eee}"
)


def _html(page: Page) -> str:
    doc = page.document
    currency = doc["currency"]
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Strategies compared</title>",
        f"<style>{_CSS}</style></head><body>",
        "<section id='answer'><h1>Strategies compared</h1>"
        + "".join(f"<p>{html.escape(line)}</p>" for line in page.summary)
        + "</section>",
        *(
            f"<h2>{title}</h2>{_table_html(page.table, table_id, columns, currency)}"
            for table_id, title, columns in TABLES
        ),
        f"<p>“{NOT_MEASURED}”: no run given measured it (never a zero). Cost at "
        + (f"{doc['target_users']:,} users" if doc.get("target_users") else "the target")
        + f", in {html.escape(currency)}. p95 per layer is taken at the highest sustainable "
        "rate (else at the lightest step).</p>",
    ]
    for title, png in page.images.items():
        label = html.escape(title)
        parts.append(f"<h2>{label}</h2><img alt='{label}' src='data:image/png;base64,{png}'>")
    if doc["notes"]:
        parts.append(
            "<h2>Notes</h2><ul>"
            + "".join(f"<li>{html.escape(n)}</li>" for n in doc["notes"])
            + "</ul>"
        )
    parts.append(
        "<h2>Runs read</h2><ul>"
        + "".join(
            f"<li>{html.escape(s['kind'])}: {html.escape(s['path'])}</li>" for s in doc["sources"]
        )
        + "</ul></body></html>"
    )
    return "\n".join(parts)


def write_page(page: Page, out_dir: Path) -> dict[str, Path]:
    """report.html and report.json in `out_dir`, rendered first, written atomically."""
    texts = {
        "html": _html(page),
        "json": json.dumps(page.document, indent=2, ensure_ascii=False, allow_nan=False) + "\n",
    }
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {name: out_dir / f"report.{name}" for name in texts}
    for name, text in texts.items():
        write_atomic(paths[name], text)
    return paths
