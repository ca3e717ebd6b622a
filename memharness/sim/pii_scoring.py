"""The memory's PII detector scored against the script's marks, per kind.

For each statement the script labels, `detect(text)` (the reference's `pii.detect`) is
compared with the marked values (`pii:` entries, `memharness/scenarios/model.py`):

- **recall**, per marked kind: a marked value is found when detected spans cover every
  place it occurs in the statement (what masking needs to hide it whole). Kinds are not
  compared: a value detected under another kind is masked all the same. Every marked
  statement counts, whoever wrote it.
- **precision**, per detected kind: a detected span that overlaps no marked value is a
  false positive. It is measured only on users marked `pii_complete: true`, whose
  statements list all the personal values they contain (one without `pii` contains
  none): elsewhere (LoCoMo, a hand-written file) an unmarked name or address may well be
  there, and a detection of it is no error.

A statement marked `sensitive: true` without values is not scored (it names nothing to
find; the run counts it as `pii_unmeasured`). The reference builds the same detector
under every strategy (`reference.factory`), so a shard is scored once (`ShardReplayer`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from memharness.scenarios.model import PII_KINDS, PiiValue, SayStep, User
from reference.text_interfaces import PiiMatch

Detect = Callable[[str], Sequence[PiiMatch]]
#: The counts kept per kind, as "<kind>.<count>" in a `Counter` (shards add up).
COUNTS = ("marked", "found", "detected", "false_positives")


def score_statement(
    text: str,
    marks: Sequence[PiiValue],
    matches: Sequence[PiiMatch],
    *,
    complete: bool,
    tally: Counter[str],
) -> None:
    """Add one statement's marks and detections to `tally` (see the module docstring)."""
    places: list[tuple[int, int]] = []
    for value, kind in dict.fromkeys((m.value, m.kind) for m in marks):
        spans = _occurrences(text, value)
        places += spans
        tally[f"{kind}.marked"] += 1
        covered = all(any(m.start <= a and b <= m.end for m in matches) for a, b in spans)
        tally[f"{kind}.found"] += bool(spans) and covered
    if complete:
        for match in matches:
            tally[f"{match.kind}.detected"] += 1
            overlaps = any(match.start < b and a < match.end for a, b in places)
            tally[f"{match.kind}.false_positives"] += not overlaps


def user_tally(user: User, detect: Detect) -> Counter[str]:
    """The counts of one user's labelled statements."""
    tally: Counter[str] = Counter()
    for step in user.timeline:
        if not isinstance(step, SayStep) or step.pii_unmeasured:
            continue
        if step.pii or user.pii_complete:
            matches = detect(step.say)
            score_statement(step.say, step.pii, matches, complete=user.pii_complete, tally=tally)
    return tally


def detector_figures(tally: Counter[str]) -> dict[str, dict[str, Any]]:
    """Per kind (the script's kinds first, then any other the detector names) and over
    all (`all`): the counts, `recall` (found / marked) and `precision` (detections that
    are not false positives / detected); None where there is nothing to divide. Empty
    when nothing was labelled."""
    seen = {key.rsplit(".", 1)[0] for key, n in tally.items() if n}
    kinds = [k for k in PII_KINDS if k in seen] + sorted(seen - set(PII_KINDS))
    out = {kind: _figures({c: tally[f"{kind}.{c}"] for c in COUNTS}) for kind in kinds}
    if out:
        out["all"] = _figures({c: sum(tally[f"{k}.{c}"] for k in kinds) for c in COUNTS})
    return out


def _figures(counts: dict[str, int]) -> dict[str, Any]:
    marked, detected = counts["marked"], counts["detected"]
    return {
        **counts,
        "recall": counts["found"] / marked if marked else None,
        "precision": (detected - counts["false_positives"]) / detected if detected else None,
    }


def _occurrences(text: str, value: str) -> list[tuple[int, int]]:
    spans, start = [], text.find(value)
    while start >= 0:
        spans.append((start, start + len(value)))
        start = text.find(value, start + 1)
    return spans


__all__ = ["COUNTS", "Detect", "detector_figures", "score_statement", "user_tally"]
