"""Terminal tables (`memharness/tables.py`), the run's per-scenario tables
(`run_tables.py`) and its cross-scenario summary (`run_verdict.py`), on hand-made rows."""

from __future__ import annotations

from typing import Any

import pytest

from memharness.report import summary_table
from memharness.run_tables import CEILING_NOTE, layer_terminal, summary_terminal
from memharness.run_verdict import (
    cross_scenario,
    recommend,
    verdict_markdown,
    verdict_terminal,
)
from memharness.tables import TIE_NOTE, Column, format_value, render, render_markdown

RECALL = Column("recall", "recall", "%", "higher")
BYTES = Column("bytes", "peak bytes", "bytes", "lower")
NAME = Column("name", "strategy", "text")


def _lines(text: str) -> dict[str, str]:
    """The table's rows by their first word (the strategy), without the note on marks."""
    rows = [line for line in text.splitlines()[2:] if line.strip()]
    return {line.split()[0]: line for line in rows if TIE_NOTE not in line}


def _flat(text: str) -> str:
    """`text` with its line breaks and runs of spaces as single spaces (notes wrap)."""
    return " ".join(text.split())


def test_the_best_is_marked_when_it_stands_alone() -> None:
    rows = [{"name": n, "recall": r} for n, r in (("a", 0.5), ("b", 0.9), ("c", 0.7))]
    text = render((NAME, RECALL), rows)
    lines = _lines(text)
    assert lines["b"].endswith("* 90.0%")
    assert "*" not in lines["a"] and "*" not in lines["c"]
    assert TIE_NOTE in text


def test_a_tie_for_the_best_marks_nothing() -> None:
    rows = [{"name": n, "recall": r} for n, r in (("a", 1.0), ("b", 1.0), ("c", 0.5))]
    text = render((NAME, RECALL, BYTES), rows)
    assert not any("*" in line for line in _lines(text).values())
    assert "ties are unmarked" in text


def test_a_tie_as_shown_is_a_tie() -> None:
    # 0.66671 and 0.66669 both read 66.7%: marking one would show two equal cells apart.
    rows = [{"name": "a", "recall": 0.66671}, {"name": "b", "recall": 0.66669}]
    assert "*" not in "".join(_lines(render((NAME, RECALL), rows)).values())


def test_lower_is_better_where_the_column_says_so() -> None:
    rows = [{"name": "a", "bytes": 5 * 1024}, {"name": "b", "bytes": 3 * 1024 * 1024}]
    lines = _lines(render((NAME, BYTES), rows))
    assert lines["a"].endswith("* 5.0 KiB") and lines["b"].endswith("3.0 MiB")


def test_one_row_has_nothing_to_be_best_against() -> None:
    text = render((NAME, RECALL), [{"name": "a", "recall": 0.5}])
    assert "*" not in text and TIE_NOTE not in text


def test_numbers_are_right_aligned_text_left_and_no_markdown() -> None:
    rows = [{"name": "keep_all", "recall": 1.0}, {"name": "x", "recall": 0.05}]
    lines = render((NAME, RECALL), rows).splitlines()
    header, _, first, second = lines[:4]
    assert first.index("keep_all") == second.index("x") == header.index("strategy")
    assert "* 100.0%" in first
    right = {line.index(cell) + len(cell) for line, cell in
             ((header, "recall"), (first, "100.0%"), (second, "5.0%"))}  # fmt: skip
    assert len(right) == 1
    assert not any(c in "".join(lines) for c in "|`") and "**" not in "".join(lines)


@pytest.mark.parametrize(
    ("value", "unit", "text"),
    [
        (0.25, "%", "25.0%"),
        (1.0, "%", "100.0%"),
        (30.0, "s", "30.0 s"),
        (90.0, "s", "1.5 min"),
        (7200.0, "s", "2.0 h"),
        (900, "bytes", "900 B"),
        (1536, "bytes", "1.5 KiB"),
        (2 * 1024 * 1024, "bytes", "2.0 MiB"),
        (3.25, "ms", "3.2 ms"),
        (12345, "count", "12,345"),
        (1234.5, "num", "1,234"),
        (0.1234567, "num", "0.1235"),
        (None, "%", "-"),
        (float("nan"), "num", "-"),
        ("failed [1]", "%", "failed [1]"),
        ([1.0, 2.0], "num", "[1.0, 2.0]"),
    ],
)
def test_units(value: Any, unit: Any, text: str) -> None:
    assert format_value(value, unit) == text


def test_an_alarm_marks_every_non_zero_value() -> None:
    leak = Column("leakage", "leakage", "count", alarm=True)
    text = render((NAME, leak), [{"name": "a", "leakage": 0}, {"name": "b", "leakage": 2}])
    assert _lines(text)["b"].endswith("! 2") and "!" not in _lines(text)["a"]
    assert "! must be 0 (leakage)" in text


def test_markdown_bolds_only_a_lone_best() -> None:
    rows = [{"name": "a", "recall": 0.9}, {"name": "b", "recall": 0.5}]
    assert "| `a` | **90.0%** |" in render_markdown((NAME, RECALL), rows)
    tied = [{"name": "a", "recall": 0.9}, {"name": "b", "recall": 0.9}]
    assert "**" not in render_markdown((NAME, RECALL), tied)


# ----------------------------------------------------------------------------- run tables


def _strategy(label: str, recall: float | None, *, stale: float = 0.0, nbytes: int = 1000,
              leakage: int = 0, status: str = "ok") -> dict[str, Any]:  # fmt: skip
    if status != "ok":
        return {"label": label, "status": status, "error": "ValueError: boom", "metrics": None}
    return {
        "label": label,
        "status": status,
        "metrics": {
            "recall_at_k": recall,
            "stale_at_k": stale,
            "over_forget_rate": 0.0,
            "unstored_rate": 0.0,
            "leakage": leakage,
            "pii_residency_max_s": None,
            "recall_stm_at_k": recall,
            "recall_ltm_at_k": 0.0,
            "turns_per_s": 100.0,
        },
        "footprint": {"peak": {"stm": {"records": 2, "bytes": nbytes}}},
        "latency_ms": {"turn": {"p95": 2.0}},
    }


def _scenario(name: str, *strategies: dict[str, Any], ceiling: bool = True) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "hash": "h", "strategies": list(strategies)}
    if ceiling:
        out["ceiling"] = {"recall_at_k": 0.75, "needed": 4, "found": 3}
    return out


def test_the_terminal_summary_shows_the_markdown_figures_in_units() -> None:
    scenario = _scenario(
        "s",
        _strategy("keep_all", 1.0, stale=2 / 3, nbytes=5120),
        _strategy("hybrid", 0.5, nbytes=1638),
        _strategy("broken", None, status="failed"),
    )
    text = summary_terminal(scenario)
    lines = _lines(text)
    assert "* 100.0%" in lines["keep_all"] and "66.7%" in lines["keep_all"]
    assert "5.0 KiB" in lines["keep_all"] and "* 1.6 KiB" in lines["hybrid"]
    assert "failed [1]" in lines["broken"]
    assert "[1] broken: ValueError: boom" in text
    markdown = summary_table(scenario)  # the same figures, as summary.md has them
    assert "| **1.000** | 0.667 |" in markdown and "5.0 KiB" in markdown


def test_the_ceiling_is_explained_when_asked_and_not_ranked() -> None:
    scenario = _scenario("s", _strategy("a", 0.75), _strategy("b", 0.5))
    first = layer_terminal(scenario, explain_ceiling=True)
    assert "dense ceiling (3 of 4) 75.0% 100.0%" in _flat(first)
    assert _flat(CEILING_NOTE.format(found=3, needed=4)) in _flat(first)
    assert "found 3 of the 4 needed facts" in _flat(first)
    assert "100.0%" in _lines(first)["a"]  # of the ceiling: 0.75 / 0.75
    assert "found 3 of the 4" not in _flat(layer_terminal(scenario))


# ----------------------------------------------------------------------------- verdict


def _run(*scenarios: dict[str, Any]) -> dict[str, Any]:
    return {"scenarios": list(scenarios)}


def test_the_frontier_worst_scenario_and_recommendation() -> None:
    # Over two scenarios: big has the best recall at the most bytes, lean the fewest
    # bytes, mid neither (lean has more recall and fewer bytes): off the frontier.
    results = _run(
        _scenario("one", _strategy("big", 1.0, nbytes=900), _strategy("lean", 0.9, nbytes=100),
                  _strategy("mid", 0.5, nbytes=300)),
        _scenario("two", _strategy("big", 0.8, nbytes=900), _strategy("lean", 0.5, nbytes=100),
                  _strategy("mid", 0.6, nbytes=300)),
    )  # fmt: skip
    verdicts = {v.label: v for v in cross_scenario(results)}
    assert {k for k, v in verdicts.items() if v.frontier} == {"big", "lean"}
    assert verdicts["big"].recall == pytest.approx(0.9) and verdicts["big"].peak_bytes == 1800
    assert (verdicts["lean"].worst, verdicts["lean"].worst_recall) == ("two", 0.5)
    assert (verdicts["mid"].worst, verdicts["mid"].worst_recall) == ("one", 0.5)
    decision = recommend(list(verdicts.values()))
    assert decision.pick is not None and decision.pick.label == "big"
    text = verdict_terminal(results)
    assert "Recommended: big (recall 90.0%, bytes 1.8 KiB)." in _flat(text)
    assert "Runner-up: lean; lean would need 20.0 points more recall (70.0%)." in _flat(text)
    assert "Objective (the default): stale <= 5%, leakage = 0" in _flat(text)
    assert max(len(line) for line in text.splitlines()) <= 120  # a terminal's width
    assert "|" not in text
    markdown = verdict_markdown(results)
    assert markdown.startswith("## Across the 2 scenarios of the run")
    assert "| `mid` | no |" in markdown


def test_the_worst_scenario_of_a_strategy_equal_in_every_one_is_none() -> None:
    results = _run(
        _scenario("one", _strategy("all", 1.0), _strategy("some", 1.0)),
        _scenario("two", _strategy("all", 1.0), _strategy("some", 0.5)),
    )
    lines = _lines(verdict_terminal(results))
    assert lines["all"].endswith("none: 100.0% in each")
    assert lines["some"].endswith("two (50.0%)")


def test_leakage_and_an_unfinished_scenario_keep_a_strategy_from_being_recommended() -> None:
    results = _run(
        _scenario("one", _strategy("leaky", 1.0, leakage=1), _strategy("safe", 0.6),
                  _strategy("broken", 1.0)),
        _scenario("two", _strategy("leaky", 1.0), _strategy("safe", 0.6),
                  _strategy("broken", None, status="failed")),
    )  # fmt: skip
    verdicts = cross_scenario(results)
    by_label = {v.label: v for v in verdicts}
    assert by_label["leaky"].frontier and by_label["leaky"].leakage == 1
    assert not by_label["broken"].frontier and by_label["broken"].missing == ["two"]
    assert by_label["broken"].row()["recall"] is None
    decision = recommend(verdicts)
    # leaky misses leakage = 0, broken did not complete: safe is the only candidate.
    assert decision.pick is not None and decision.pick.label == "safe"
    assert [c.metric for c in decision.failed["leaky"]] == ["leakage"]
    text = _flat(verdict_terminal(results))
    assert "Recommended: safe (recall 60.0%" in text
    assert "leaky ranks above on the aims but misses leakage 1; a limit of leakage <= 1" in text
    assert "broken is incomplete: not completed in two" in text


def test_a_tie_on_every_aim_is_named_and_too_stale_a_strategy_is_not_picked() -> None:
    results = _run(
        _scenario("one", _strategy("stale", 1.0, stale=0.5), _strategy("fresh", 1.0),
                  _strategy("same", 0.9995))
    )  # fmt: skip
    decision = recommend(cross_scenario(results))
    assert [v.label for v in decision.tied] == ["fresh", "same"]  # within 0.1 point
    text = _flat(verdict_terminal(results))
    assert "Recommended: a tie between fresh and same, equal on every aim" in text
    assert "stale misses stale 50.0%" not in text
    assert "stale ranks above" not in text  # equal on the aims: not above the pick


def test_an_oracle_is_the_upper_bound_not_a_candidate() -> None:
    oracle = _strategy("oracle", 1.0, nbytes=10)
    oracle["config"] = {"oracle": True}
    results = _run(_scenario("one", _strategy("keep_all", 1.0, nbytes=900), oracle,
                             _strategy("lean", 0.5, nbytes=100)))  # fmt: skip
    verdicts = {v.label: v for v in cross_scenario(results)}
    assert verdicts["oracle"].upper_bound and not verdicts["oracle"].frontier
    assert verdicts["keep_all"].frontier and verdicts["lean"].frontier  # not pushed off
    pick = recommend(list(verdicts.values())).pick
    assert pick is not None and pick.label == "keep_all"
    text = verdict_terminal(results)
    assert any(line.split()[:3] == ["oracle", "upper", "bound"] for line in text.splitlines())
    assert "* 100.0 B" not in text and "* 10 B" not in text  # the oracle is not ranked
