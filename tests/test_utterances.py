"""The text rules on real-looking speech: a table of utterances (tests/data/utterances.yaml)
with the kind the intent filter must give, the key promotion must give, whether it is
promoted when first said, and the forget command it is, if any; and no forget command
anywhere in LoCoMo's turns (the full release when the tests find it, else the excerpt in
tests/data: tests/fixtures/locomo.py)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from reference.models import MemoryType
from reference.policy.forget_commands import ForgetCommand, parse_forget_command
from reference.policy.intent import RuleIntentFilter
from reference.policy.lexicon import key_family
from reference.promotion import extract_fact, should_promote

REPO = Path(__file__).resolve().parents[1]
TABLE = REPO / "tests" / "data" / "utterances.yaml"
_FIELDS = {"text", "kind", "key", "forget", "urgent", "speaker"}
_KINDS = {None, *(t.value for t in MemoryType)}
_FORGET = re.compile(r"everything|session|back|topic:.+")
_CJK = re.compile("[\u3400-\u9fff]")


def _load() -> list[dict[str, Any]]:
    rows = yaml.safe_load(TABLE.read_text(encoding="utf-8"))
    assert isinstance(rows, list), f"{TABLE}: must be a list of rows"
    for i, row in enumerate(rows):
        where = f"{TABLE.name}: row {i}"
        assert isinstance(row, dict), f"{where}: must be a mapping"
        assert _FIELDS >= row.keys() >= {"text", "kind", "key", "forget"}, (
            f"{where}: fields {sorted(row)}; expected text, kind, key, forget"
            " (urgent, speaker optional)"
        )
        assert isinstance(row["text"], str) and row["text"].strip(), f"{where}: empty text"
        assert row["kind"] in _KINDS, f"{where}: unknown kind {row['kind']!r}"
        assert row["forget"] is None or _FORGET.fullmatch(str(row["forget"])), (
            f"{where}: forget {row['forget']!r} is not everything, session, back or topic:X"
        )
    return rows


ROWS = _load()
RULES = RuleIntentFilter()


def _expected_command(label: str | None) -> ForgetCommand | None:
    if label is None:
        return None
    if label == "back":
        return ForgetCommand("topic")
    if label.startswith("topic:"):
        return ForgetCommand("topic", label.removeprefix("topic:"))
    return ForgetCommand(label)  # type: ignore[arg-type]


def _id(row: dict[str, Any]) -> str:
    return str(row["text"])[:50]


@pytest.mark.parametrize("row", ROWS, ids=_id)
def test_utterance(row: dict[str, Any]) -> None:
    text = row["text"]
    assert parse_forget_command(text) == _expected_command(row["forget"])
    decision = RULES.classify(text)
    kind = decision.kind.value if decision.kind is not None else None
    assert kind == row["kind"], decision
    if row["forget"] is not None or decision.kind is None:
        return  # a command is carried out, chit-chat is not stored: no fact either way
    fact = extract_fact(text, decision.kind, speaker=row.get("speaker"))
    if row["key"] is None:
        assert fact is None or not should_promote(text, decision.kind, said_before=False), fact
        return
    assert fact is not None
    if row["key"] == "stmt":
        assert fact.key.split("@", 1)[0].startswith("stmt_"), fact
        if row.get("speaker"):
            assert fact.key.endswith("@" + row["speaker"].lower()), fact
    else:
        assert fact.key == row["key"], fact
    urgent = bool(row.get("urgent", False))
    assert fact.urgent is urgent, fact
    if urgent:
        assert should_promote(text, decision.kind, said_before=False, candidate=fact)


def test_the_table_covers_both_languages_and_both_decisions() -> None:
    assert len(ROWS) >= 200
    for lang in (True, False):
        rows = [r for r in ROWS if bool(_CJK.search(r["text"])) is lang]
        assert any(r["forget"] for r in rows) and any(not r["forget"] for r in rows)
        assert any(r.get("urgent") for r in rows)


def test_speakers_never_share_a_key() -> None:
    a = extract_fact("My address is 1 Elm St", MemoryType.PROFILE, speaker="Caroline")
    b = extract_fact("My address is 1 Elm St", MemoryType.PROFILE, speaker="Melanie")
    assert a is not None and b is not None and a.key != b.key
    assert key_family(a.key) == key_family(b.key) == "address"


def test_bad_speaker_is_refused() -> None:
    with pytest.raises(ValueError, match="speaker"):
        extract_fact("My address is 1 Elm St", MemoryType.PROFILE, speaker=" ")


def _report_module() -> Any:
    spec = importlib.util.spec_from_file_location(
        "forget_detection", REPO / "scripts" / "forget_detection.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_no_locomo_turn_is_a_forget_command(locomo: Path) -> None:
    # Two people talking to each other: nothing there is said to the assistant
    # (LoCoMo, or its excerpt: tests/fixtures/locomo.py).
    assert _report_module().locomo_commands(locomo) == []


def test_the_report_counts_the_table() -> None:
    counts = _report_module().confusion(ROWS)["all"]
    assert sum(counts.values()) == len(ROWS)
    assert counts["tp"] + counts["fn"] == sum(1 for r in ROWS if r["forget"])
