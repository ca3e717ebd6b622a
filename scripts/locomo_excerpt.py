"""Cut the LoCoMo excerpt the tests ship with (tests/data/locomo_excerpt.json).

    .venv/bin/python scripts/locomo_excerpt.py --locomo PATH/TO/locomo10.json \
        [--sample conv-26] [--sessions 3] [-o tests/data/locomo_excerpt.json]

Keeps one conversation's first N sessions (turns and dates, both speakers' names) and the
questions whose evidence lies wholly in them, as `memharness scenarios import-locomo`
reads evidence: a question with evidence in a later session, or with none, is left out.
The generated annotations (observations, summaries, events) are left out too. The same
arguments give the same bytes. LoCoMo's licence and attribution: tests/data/README.md.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from memharness.scenarios.locomo import convert_locomo, read_locomo

REPO = Path(__file__).resolve().parents[1]
_SESSION_FIELD = re.compile(r"session_(\d+)(?:_date_time)?")
_QUESTION = re.compile(r"qa\[(\d+)\]")


def cut(sample: dict[str, Any], sessions: int) -> dict[str, Any]:
    """`sample` with its first `sessions` sessions and the questions answered in them."""
    conversation = {
        key: value
        for key, value in sample["conversation"].items()
        if key in ("speaker_a", "speaker_b")
        or ((m := _SESSION_FIELD.fullmatch(key)) is not None and int(m.group(1)) <= sessions)
    }
    trial = {"sample_id": sample["sample_id"], "conversation": conversation, "qa": sample["qa"]}
    _, notes = convert_locomo([trial], source="excerpt")
    left_out = {int(m.group(1)) for note in notes if (m := _QUESTION.search(note))}
    questions = [qa for i, qa in enumerate(sample["qa"]) if i not in left_out]
    return {"sample_id": sample["sample_id"], "conversation": conversation, "qa": questions}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--locomo", type=Path, required=True, help="LoCoMo's locomo10.json")
    parser.add_argument("--sample", default="conv-26", help="the conversation's sample_id")
    parser.add_argument("--sessions", type=int, default=3, help="sessions kept, from the first")
    parser.add_argument(
        "-o", "--output", type=Path, default=REPO / "tests" / "data" / "locomo_excerpt.json"
    )
    args = parser.parse_args(argv)
    data = read_locomo(args.locomo)
    samples = [s for s in data if isinstance(s, dict) and s.get("sample_id") == args.sample]
    if len(samples) != 1:
        raise SystemExit(f"{args.locomo}: no single conversation with sample_id {args.sample!r}")
    excerpt = [cut(samples[0], args.sessions)]
    text = json.dumps(excerpt, ensure_ascii=False, indent=1) + "\n"
    args.output.write_text(text, encoding="utf-8")
    turns = sum(
        len(v)
        for k, v in excerpt[0]["conversation"].items()
        if _SESSION_FIELD.fullmatch(k) and isinstance(v, list)
    )
    print(f"{args.output}: {args.sample}, {turns} turns, {len(excerpt[0]['qa'])} questions")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
