"""Precision and recall of forget-command detection, and false commands on LoCoMo.

    .venv/bin/python scripts/forget_detection.py [--utterances tests/data/utterances.yaml]
        [--locomo PATH/TO/locomo10.json]

Reads the labelled utterances (a row is a command when its `forget` is not null), runs
`reference.policy.forget_commands.parse_forget_command` on each, and prints a table per
language; then counts the LoCoMo turns (as the importer says them, "Speaker: text", and
the bare text) that parse as a command. LoCoMo is data/locomo10.json of
https://github.com/snap-research/locomo, given by --locomo or MEMH_LOCOMO (it is not
shipped with memharness; tests/data/locomo_excerpt.json is an excerpt of it). Only that
parser is used, so the script also measures an older checkout (PYTHONPATH=/path/to/worktree).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import yaml

from reference.policy.forget_commands import parse_forget_command

REPO = Path(__file__).resolve().parents[1]
_CJK = re.compile("[\u3400-\u9fff]")


def load_rows(path: Path) -> list[dict[str, Any]]:
    """The labelled utterances; a malformed row is an error naming its index."""
    rows = yaml.safe_load(path.read_text(encoding="utf-8"))
    if not isinstance(rows, list):
        raise SystemExit(f"{path}: must be a list of rows")
    for i, row in enumerate(rows):
        if not isinstance(row, dict) or not isinstance(row.get("text"), str):
            raise SystemExit(f"{path}: row {i}: must be a mapping with a string 'text'")
        if "forget" not in row:
            raise SystemExit(f"{path}: row {i} ({row['text']!r}): has no 'forget' field")
    return rows


def confusion(rows: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    """True/false positives and negatives of detection, per language and overall."""
    out: dict[str, dict[str, int]] = {}
    for row in rows:
        lang = "zh" if _CJK.search(row["text"]) else "en"
        said = row["forget"] is not None
        found = parse_forget_command(row["text"]) is not None
        cell = ("tp" if found else "fn") if said else ("fp" if found else "tn")
        for group in (lang, "all"):
            counts = out.setdefault(group, {"tp": 0, "fp": 0, "fn": 0, "tn": 0})
            counts[cell] += 1
    return out


def locomo_commands(path: Path) -> list[str]:
    """LoCoMo turns that parse as a forget command (as imported, or bare)."""
    data = json.loads(path.read_text(encoding="utf-8"))
    found = []
    for sample in data:
        for key, turns in sample["conversation"].items():
            if not (key.startswith("session_") and isinstance(turns, list)):
                continue
            for turn in turns:
                text = turn["text"]
                caption = turn.get("blip_caption")
                if isinstance(caption, str) and caption.strip():
                    text = f"{text} [shares a photo: {caption.strip()}]"
                said = f"{turn['speaker']}: {text}"
                if parse_forget_command(said) or parse_forget_command(text):
                    found.append(said)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--utterances", type=Path, default=REPO / "tests/data/utterances.yaml")
    parser.add_argument(
        "--locomo",
        type=Path,
        default=os.environ.get("MEMH_LOCOMO") or None,
        help="LoCoMo's locomo10.json [default: $MEMH_LOCOMO]",
    )
    args = parser.parse_args(argv)
    rows = load_rows(args.utterances)
    print(f"forget detection on {args.utterances.name} ({len(rows)} utterances)")
    print("| language | utterances | commands | TP | FP | FN | precision | recall |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for group, c in sorted(confusion(rows).items(), key=lambda kv: kv[0] == "all"):
        found, said = c["tp"] + c["fp"], c["tp"] + c["fn"]
        precision = f"{c['tp'] / found:.3f}" if found else "-"
        recall = f"{c['tp'] / said:.3f}" if said else "-"
        total = sum(c.values())
        print(
            f"| {group} | {total} | {said} | {c['tp']} | {c['fp']} | {c['fn']} | {precision}"
            f" | {recall} |"
        )
    if args.locomo is None or not args.locomo.is_file():
        where = "not given" if args.locomo is None else f"not found at {args.locomo}"
        print(
            f"\nLoCoMo {where}: download data/locomo10.json from"
            " https://github.com/snap-research/locomo and pass --locomo PATH (or set"
            " MEMH_LOCOMO)",
            file=sys.stderr,
        )
        return 1
    found_turns = locomo_commands(args.locomo)
    print(f"\nLoCoMo turns parsed as forget commands: {len(found_turns)}")
    for text in found_turns:
        print(f"  {text[:160]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
