"""The objective a recommendation follows (`memharness/objective.py`): reading it, and the
decision it gives on hand-made strategy figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from memharness.cli import main
from memharness.objective import (
    ObjectiveError,
    decide,
    decision_lines,
    default_objective,
    load_objective,
    parse_objective,
    with_constraints,
)
from memharness.strategy_verdict import StrategyVerdict


def _verdict(label: str, recall: float, **figures: Any) -> StrategyVerdict:
    base: dict[str, Any] = {
        "missing": [], "stale": 0.0, "leakage": 0, "peak_bytes": 1000, "worst": None,
        "worst_recall": None,
    }  # fmt: skip
    base.update(figures)
    return StrategyVerdict(label=label, recall=recall, **base)


def _flat(lines: list[str]) -> str:
    return " ".join(lines)


def test_the_default_objective_is_the_requirements() -> None:
    objective = default_objective()
    assert objective.text() == (
        "stale <= 5%, leakage = 0, pii_raw_at_end = 0, pii_plaintext <= 24h; "
        "then highest recall; then fewest bytes"
    )
    assert [c.limit for c in objective.constraints] == [0.05, 0, 0, 86400]


def test_keeping_everything_is_not_picked_when_a_third_of_its_answers_are_stale() -> None:
    keep_all = _verdict("keep_all", 0.42, stale=0.35, peak_bytes=9000)
    hybrid = _verdict("hybrid", 0.40, stale=0.02, peak_bytes=3000)
    fixed = _verdict("fixed_ttl", 0.30, stale=0.01, peak_bytes=2000)
    decision = decide(default_objective(), [keep_all, hybrid, fixed])
    assert decision.pick is hybrid and decision.runner_up is fixed
    text = _flat(decision_lines(decision, [keep_all, hybrid, fixed]))
    assert "Recommended: hybrid (recall 40.0%, bytes 2.9 KiB)." in text
    assert "Runner-up: fixed_ttl; fixed_ttl would need 10.0 points more recall (30.0%)." in text
    assert (
        "keep_all ranks above on the aims but misses stale 35.0%; a limit of stale <= 35.0% "
        "would admit it." in text
    )
    looser = with_constraints(default_objective(), ["stale <= 40%"])
    assert decide(looser, [keep_all, hybrid, fixed]).pick is keep_all


def test_a_recall_tie_goes_to_the_fewer_bytes_and_says_what_decided() -> None:
    big = _verdict("big", 0.5, peak_bytes=5000)
    small = _verdict("small", 0.5004, peak_bytes=1000)
    decision = decide(default_objective(), [big, small])
    assert decision.pick is small and decision.tied == [small]
    text = _flat(decision_lines(decision, [big, small]))
    assert "big would need 3.9 KiB fewer bytes (4.9 KiB)" in text


def test_when_nothing_meets_the_constraints_each_strategy_says_what_it_missed() -> None:
    leaky = _verdict("leaky", 0.9, leakage=2)
    open_pii = _verdict("open", 0.8, pii_raw_at_end=3, pii_plaintext_s=float("inf"))
    slow = _verdict("slow", 0.7, pii_plaintext_s=3 * 86400.0)
    verdicts = [leaky, open_pii, slow]
    decision = decide(default_objective(), verdicts)
    assert decision.pick is None
    lines = decision_lines(decision, verdicts)
    assert "No recommendation: no strategy meets the objective's constraints." in lines
    assert "leaky misses leakage 2" in lines
    assert "open misses pii_raw_at_end 3, pii_plaintext to the end" in lines
    assert "slow misses pii_plaintext 3.0 d" in lines


def test_an_incomplete_strategy_or_an_oracle_is_not_decided_on() -> None:
    oracle = _verdict("oracle", 1.0, upper_bound=True)
    broken = _verdict("broken", 1.0, missing=["two"])
    only = _verdict("only", 0.1)
    decision = decide(default_objective(), [oracle, broken, only])
    assert decision.pick is only and decision.failed == {}
    none = decide(default_objective(), [oracle, broken])
    assert "No recommendation: no strategy completed every scenario." in decision_lines(
        none, [oracle, broken]
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"constraints": ["stale <= 5"], "aims": ["highest recall"]}, "stale takes the unit '%'"),
        ({"constraints": ["staleness <= 5%"], "aims": ["highest recall"]}, "unknown metric"),
        ({"constraints": ["stale ~ 5%"], "aims": ["highest recall"]}, "is not METRIC OP VALUE"),
        ({"constraints": [], "aims": ["best recall"]}, "aims[0]: 'best recall'"),
        ({"constraints": []}, "aims: at least one"),
        ({"aims": ["highest recall"], "aim": []}, "unknown key 'aim'"),
        ({"constraints": ["pii_plaintext <= 2w"], "aims": ["highest recall"]}, "'min', 'h'"),
    ],
)
def test_a_bad_objective_names_the_file_the_entry_and_why(data: Any, message: str) -> None:
    with pytest.raises(ObjectiveError, match=r"^mine\.yaml") as info:
        parse_objective(data, "mine.yaml")
    assert message in str(info.value)


def test_an_objective_file_and_the_recommend_command(tmp_path: Path) -> None:
    objective_file = tmp_path / "objective.yaml"
    objective_file.write_text("constraints: [stale <= 50%]\naims: [highest recall]\n")
    assert load_objective(objective_file).text() == "stale <= 50%; then highest recall"

    def entry(label: str, recall: float, stale: float) -> dict[str, Any]:
        metrics = {"recall_at_k": recall, "stale_at_k": stale, "leakage": 0}
        return {"label": label, "status": "ok", "metrics": metrics, "footprint": {}}

    run_dir = tmp_path / "run"
    run_dir.mkdir()
    strategies = [entry("keep_all", 0.9, 0.35), entry("hybrid", 0.8, 0.0)]
    results = {"run_id": "r", "status": "complete", "scenarios": [
        {"name": "s", "hash": "h", "strategies": strategies}]}  # fmt: skip
    (run_dir / "results.json").write_text(json.dumps(results))
    runner = CliRunner()
    default = runner.invoke(main, ["recommend", str(run_dir)])
    assert default.exit_code == 0, default.output
    assert "Recommended: hybrid" in default.output
    mine = runner.invoke(main, ["recommend", str(run_dir), "--objective", str(objective_file)])
    assert "Recommended: keep_all" in mine.output
    assert f"Objective ({objective_file})" in " ".join(mine.output.split())
    flag = runner.invoke(main, ["recommend", str(run_dir), "--require", "stale <= 40%"])
    assert "Recommended: keep_all" in flag.output
    bad = runner.invoke(main, ["recommend", str(run_dir), "--require", "stale <= 40"])
    assert bad.exit_code != 0 and "stale takes the unit '%'" in bad.output
