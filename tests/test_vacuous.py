"""Checks that could not have failed (`memharness/vacuous.py`): a forbidden fact that no
strategy of the run returned, from hand-made probe records."""

from __future__ import annotations

from typing import Any

from memharness.scenarios.model import User
from memharness.vacuous import forbidden_count, vacuous_checks, vacuous_line


def _user() -> User:
    return User.model_validate(
        {
            "id": "bob",
            "timeline": [
                {"at": "2024-01-05T10:00:00Z", "session": "s1", "say": "I live on Elm Street.",
                 "facts": [{"id": "elm", "type": "profile", "key": "address"}]},
                {"at": "2024-02-01T09:10:00Z", "session": "s2", "say": "I live on Oak Avenue.",
                 "facts": [{"id": "oak", "type": "profile", "key": "address",
                            "supersedes": "elm"}]},
                {"at": "2024-02-01T09:12:00Z", "session": "s2", "probe": "Where do I live?",
                 "needed": ["oak"], "forbidden": ["elm"]},
                {"at": "2024-02-01T09:13:00Z", "session": "s2", "probe": "My street?",
                 "needed": ["oak"], "forbidden": ["elm"]},
                {"at": "2024-02-01T09:14:00Z", "session": "s2", "probe": "Any address?",
                 "needed": ["oak"]},
            ],
        }
    )  # fmt: skip


def _record(step: int, verdicts: dict[str, str]) -> dict[str, Any]:
    return {"user": "bob", "step": step, "verdicts": verdicts}


def test_a_forbidden_fact_no_strategy_returned_is_a_check_that_could_not_fail() -> None:
    user = _user()
    records = {
        # keep_all returned the old address at step 2 (a stale hit); nobody at step 3.
        "keep_all": [_record(2, {"elm": "stale hit", "oak": "retrieved"})],
        "hybrid": [_record(3, {"elm": "kept out", "oak": "missed"})],
    }
    found = vacuous_checks([user], records)
    assert found == [{"user": "bob", "step": 3, "query": "My street?", "never_returned": ["elm"]}]
    assert forbidden_count([user]) == 2
    line = vacuous_line(1, 2, records, "reports/r")
    assert "1 of the 2 probes" in line and "keep_all included" in line
    assert "memharness explain reports/r --vacuous" in line


def test_a_returned_fact_under_any_strategy_makes_the_check_real() -> None:
    records = {"a": [_record(2, {"elm": "forbidden hit"})], "b": [_record(3, {"elm": "leak"})]}
    assert vacuous_checks([_user()], records) == []
    assert "keep_all was not in this run" in vacuous_line(1, 2, records, "r")


def test_explain_lists_them(tmp_path: Any) -> None:
    import json

    from click.testing import CliRunner

    from memharness.cli import main

    probe = {"user": "bob", "step": 3, "query": "My street?", "never_returned": ["elm"]}
    scenario = {"name": "moves", "strategies": [],
                "vacuous": {"checks": 2, "count": 1, "probes": [probe]}}  # fmt: skip
    (tmp_path / "results.json").write_text(json.dumps({"scenarios": [scenario]}))
    result = CliRunner().invoke(main, ["explain", str(tmp_path), "--vacuous"])
    assert result.exit_code == 0, result.output
    assert "# moves: 1 of the 2 probes with a forbidden fact could not have failed" in result.output
    assert "bob step 3: 'My street?' never returned: elm" in result.output
    summary = CliRunner().invoke(main, ["explain", str(tmp_path)])
    assert "(--vacuous lists them)" in summary.output
