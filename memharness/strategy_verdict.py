"""One strategy's verdict over a run's scenarios: the row of the run's closing table.

Its own module so that the objective (`memharness.objective`), which ranks verdicts, and
the run's table (`memharness.run_verdict`), which builds them, both depend on it and not
on each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memharness.tables import format_value

__all__ = ["ALIKE", "StrategyVerdict"]

#: `StrategyVerdict.worst` when every scenario gave the same recall: no worst one.
ALIKE = "all alike"


@dataclass
class StrategyVerdict:
    """One strategy over the run's scenarios."""

    label: str
    missing: list[str]  # scenarios it did not complete
    recall: float | None
    stale: float | None
    leakage: int
    peak_bytes: int | None
    worst: str | None
    worst_recall: float | None
    upper_bound: bool = False  # an oracle: it reads the script
    frontier: bool = False
    pii_raw_at_end: int = 0  # marked personal values still in plaintext at the end, summed
    # The longest a marked personal value stayed in plaintext, over the scenarios: 0
    # without any, infinite when one still was at the end of a scenario.
    pii_plaintext_s: float | None = 0.0
    pii_items: int = 0  # marked personal values followed, summed

    @property
    def complete(self) -> bool:
        return not self.missing

    @property
    def standing(self) -> str:
        """The frontier column: yes, no, incomplete, or upper bound (an oracle)."""
        if self.upper_bound:
            return "upper bound"
        if self.missing:
            return "incomplete"
        return "yes" if self.frontier else "no"

    def row(self) -> dict[str, Any]:
        """The table's row; an incomplete strategy's means and sum, over fewer scenarios
        than the others', are not shown (nor ranked)."""
        return {
            "strategy": self.label,
            "frontier": self.standing,
            "recall": None if self.missing else self.recall,
            "stale": None if self.missing else self.stale,
            "leakage": self.leakage,
            "pii_raw_at_end": self.pii_raw_at_end,
            "pii_plaintext": _shown_time(self.pii_plaintext_s) if self.pii_items else None,
            "peak_bytes": None if self.missing else self.peak_bytes,
            "worst": _worst_text(self.worst, self.worst_recall),
        }


def _worst_text(scenario: str | None, recall: float | None) -> str | None:
    if scenario is None:
        return None
    if scenario == ALIKE:
        return f"none: {format_value(recall, '%')} in each"
    return f"{scenario} ({format_value(recall, '%')})"


def _shown_time(seconds: float | None) -> float | str | None:
    return "to the end" if seconds is not None and seconds == float("inf") else seconds
