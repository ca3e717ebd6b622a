"""The PII detector's table: its recall and precision per kind against the values the
scenario marks (`memharness/sim/pii_scoring.py`), for the terminal and `summary.md`.

The detector is the same under every strategy, so a scenario shows one table, from its
first strategy that finished.
"""

from __future__ import annotations

from typing import Any

from memharness.tables import Column, render, render_markdown, wrapped

__all__ = ["DETECTOR_COLUMNS", "DETECTOR_NOTE", "detector_markdown", "detector_terminal"]

DETECTOR_COLUMNS = (
    Column("kind", "kind", "text"),
    Column("marked", "marked", "count"),
    Column("found", "found", "count"),
    Column("recall", "recall", "%"),
    Column("detected", "detected", "count"),
    Column("false_positives", "false pos", "count"),
    Column("precision", "precision", "%"),
)

DETECTOR_NOTE = (
    "PII detector against the values the scenario marks: recall per marked kind (a value "
    "is found when detected spans cover it, whatever kind they name), precision per "
    "detected kind, on users marked pii_complete only (a detection that overlaps no "
    "marked value is a false positive); the same under every strategy."
)


def _figures(scenario: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """The table's rows and the unmeasured statements, from the first ok strategy."""
    for strategy in scenario.get("strategies") or []:
        metrics = strategy.get("metrics") if strategy.get("status") == "ok" else None
        if metrics and "pii_detector" in metrics:
            rows = [{"kind": k, **v} for k, v in (metrics["pii_detector"] or {}).items()]
            return rows, int(metrics.get("pii_unmeasured") or 0)
    return [], 0


def _unmeasured_line(unmeasured: int) -> str:
    return (
        f"{unmeasured} statements marked sensitive list no pii values: their residency "
        "was not measured (`memharness scenarios validate` names them)."
    )


def detector_terminal(scenario: dict[str, Any]) -> str:
    """The table as aligned text with its note, or "" when nothing was marked."""
    rows, unmeasured = _figures(scenario)
    text = render(DETECTOR_COLUMNS, rows) + wrapped(DETECTOR_NOTE) if rows else ""
    return text + (wrapped(_unmeasured_line(unmeasured)) if unmeasured else "")


def detector_markdown(scenario: dict[str, Any]) -> list[str]:
    """The table as Markdown lines with its note, or [] when nothing was marked."""
    rows, unmeasured = _figures(scenario)
    out = [DETECTOR_NOTE, "", render_markdown(DETECTOR_COLUMNS, rows)] if rows else []
    return out + ([_unmeasured_line(unmeasured), ""] if unmeasured else [])
