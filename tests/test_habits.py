"""The intent filter on preferences and habits in English and Chinese
(tests/data/habits.yaml): what a user says of their routine is kept, chit-chat is not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from reference.policy.intent import RuleIntentFilter

DATA = Path(__file__).resolve().parent / "data"
RULES = RuleIntentFilter()


def _rows(name: str) -> list[dict[str, Any]]:
    rows = yaml.safe_load((DATA / name).read_text(encoding="utf-8"))
    assert all({"text", "lang", "keep"} == row.keys() for row in rows), name
    return rows


def _recall(rows: list[dict[str, Any]], lang: str) -> float:
    kept = [RULES.classify(r["text"]).keep for r in rows if r["keep"] and r["lang"] == lang]
    assert len(kept) >= 10, f"too few {lang} habits to measure"
    return sum(kept) / len(kept)


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_habits_and_preferences_are_kept(lang: str) -> None:
    assert _recall(_rows("habits.yaml"), lang) >= 0.95


def test_the_habit_of_the_issue_is_kept_and_what_follows_it_counts() -> None:
    decision = RULES.classify("每天早上我都喝美式咖啡，从不加糖")
    assert decision.keep and decision.kind is not None
    # A medication taken every morning stays a health fact, not a habit.
    assert RULES.classify("I take insulin every morning.").reason == "health or safety fact"


@pytest.mark.parametrize("name", ["habits.yaml", "habits_heldout.yaml"])
def test_chit_chat_in_the_sets_is_dropped(name: str) -> None:
    kept = [r["text"] for r in _rows(name) if not r["keep"] and RULES.classify(r["text"]).keep]
    assert kept == []


def test_the_held_out_set_stays_near() -> None:
    # Written after the habit patterns and not used to write them: 17 of 20 kept when
    # they were written (docs/strategies.md); a floor, so that it cannot silently fall.
    rows = _rows("habits_heldout.yaml")
    assert min(_recall(rows, "zh"), _recall(rows, "en")) >= 0.8
