"""The tables `memharness run` prints per scenario, for a person at a terminal.

The same figures as `summary.md`'s Markdown tables (`report.summary_table`,
`diagnostics.layer_table`), shown with `memharness/tables.py`: aligned, in units, the
best of a column marked only when it stands alone. The columns are listed once, here
(`SUMMARY_COLUMNS`, `LAYER_COLUMNS`): a new figure of the result rows is a new line.
"""

from __future__ import annotations

from typing import Any

from memharness.report import pii_raw_text, pii_sealed_text
from memharness.result_figures import error_line, peak_total
from memharness.tables import Column, render, wrapped

__all__ = [
    "CEILING_NOTE",
    "LAYER_COLUMNS",
    "QUALITY_COLUMNS",
    "SUMMARY_COLUMNS",
    "layer_terminal",
    "strategy_row",
    "summary_terminal",
]

_NAME = Column("strategy", "strategy", "text")
_STATUS = Column("status", "status", "text")

#: The strategies side by side: field of `strategy_row`, header, unit, better.
SUMMARY_COLUMNS = (
    Column("recall_at_k", "recall", "%", "higher"),
    Column("stale_at_k", "stale", "%", "lower"),
    Column("over_forget_rate", "over-forget", "%", "lower"),
    Column("unstored_rate", "unstored", "%", "lower"),
    Column("leakage", "leakage", "count", alarm=True),
    Column("pii_raw", "PII raw max", "s"),
    Column("pii_sealed", "PII sealed max", "s"),
    Column("peak_records", "peak records", "count", "lower"),
    Column("peak_bytes", "peak bytes", "bytes", "lower"),
    Column("turn_p95_ms", "turn p95", "ms", "lower"),
    Column("turns_per_s", "turns/s", "num", "higher"),
)

#: Recall against the dense retrieval ceiling, per layer, and the needed facts it missed.
LAYER_COLUMNS = (
    Column("recall_at_k", "recall", "%"),
    Column("of_ceiling", "of ceiling", "%"),
    Column("recall_stm_at_k", "recall STM", "%"),
    Column("recall_ltm_at_k", "recall LTM", "%"),
    Column("missed_rate", "missed", "%"),
    Column("over_forget_rate", "over-forget", "%"),
    Column("unreachable_rate", "unreachable", "%"),
    Column("unstored_rate", "unstored", "%"),
)

#: The quality figures `memharness compare` shows first for two simulator runs, in this
#: order (a figure neither run has is left out: PII residency is one figure in older
#: results, raw and sealed apart in newer ones).
QUALITY_COLUMNS = (
    Column("recall_at_k", "recall", "%"),
    Column("stale_at_k", "stale", "%"),
    Column("over_forget_rate", "over-forget", "%"),
    Column("leakage", "leakage", "count"),
    Column("pii_residency_max_s", "PII max", "s"),
    Column("pii_raw_max_s", "PII raw max", "s"),
    Column("pii_sealed_max_s", "PII sealed max", "s"),
    Column("peak_bytes", "peak bytes", "bytes"),
)

#: What the ceiling row says, under the first table that has one (`found`, `needed`).
CEILING_NOTE = (
    "dense ceiling ({found} of {needed}): a plain dense search over every turn each user "
    "said before the probe (nothing forgotten, no intent filter, no session scope) found "
    "{found} of the {needed} needed facts: what was findable at all. 'of ceiling' is a "
    "strategy's recall over it, and can pass 100% (the memory returns the top k of STM "
    "and of LTM)."
)


def strategy_row(strategy: dict[str, Any]) -> dict[str, Any]:
    """A strategy's entry of results.json as one flat row: its metrics (when ok), name,
    status, peak records and bytes (summed over the layers' peaks) and turn p95."""
    ok = strategy.get("status") == "ok"
    metrics = (strategy.get("metrics") or {}) if ok else {}
    turn = (strategy.get("latency_ms") or {}).get("turn") or {}
    return {
        **metrics,
        "strategy": str(strategy.get("label") or strategy.get("name") or "?"),
        "status": str(strategy.get("status") or "?"),
        "pii_raw": pii_raw_text(metrics) if ok else None,
        "pii_sealed": pii_sealed_text(metrics) if ok else None,
        "peak_records": peak_total(strategy, "records") if ok else None,
        "peak_bytes": peak_total(strategy, "bytes") if ok else None,
        "turn_p95_ms": turn.get("p95") if ok else None,
    }


def summary_terminal(scenario: dict[str, Any]) -> str:
    """One scenario's strategies side by side; failed ones keep their row (`failed [n]`)
    with their error's first line under the table."""
    rows = []
    notes: list[str] = []
    for strategy in scenario.get("strategies") or []:
        row = strategy_row(strategy)
        if row["status"] == "failed":
            error = error_line(strategy.get("error"))
            notes.append(f"  [{len(notes) + 1}] {row['strategy']}: {error}")
            row["status"] = f"failed [{len(notes)}]"
        rows.append(row)
    if not rows:
        return "  (no strategy finished)\n"
    show_status = any(row["status"] != "ok" for row in rows)
    columns = (_NAME, *((_STATUS,) if show_status else ()), *SUMMARY_COLUMNS)
    text = render(columns, rows)
    return text + "".join(f"{note}\n" for note in notes)


def layer_terminal(scenario: dict[str, Any], *, explain_ceiling: bool = False) -> str:
    """The dense retrieval ceiling, then each ok strategy's recall (overall, its share of
    the ceiling, per layer) and what became of the needed facts it did not retrieve;
    `explain_ceiling` adds a line on what the ceiling is (the first time it is shown)."""
    ceiling = scenario.get("ceiling") or {}
    top = ceiling.get("recall_at_k")
    counts = {"found": ceiling.get("found", "-"), "needed": ceiling.get("needed", "-")}
    reference = []
    if top is not None:
        name = "dense ceiling ({found} of {needed})".format(**counts)
        reference.append({"strategy": name, "recall_at_k": top, "of_ceiling": 1.0})
    rows = []
    for strategy in scenario.get("strategies") or []:
        if strategy.get("status") != "ok" or not strategy.get("metrics"):
            continue
        row = strategy_row(strategy)
        recall = row.get("recall_at_k")
        row["of_ceiling"] = recall / top if recall is not None and top else None
        rows.append(row)
    if not rows and not reference:
        return ""
    text = render((_NAME, *LAYER_COLUMNS), rows, reference=reference)
    if explain_ceiling and reference:
        text += wrapped(CEILING_NOTE.format(**counts))
    return text
