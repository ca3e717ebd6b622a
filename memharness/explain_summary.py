"""The words of `memharness explain`: a summary by verdict and cause, and each `why`.

A probe record's `why` (`memharness/sim/causes.py`) says, for a needed fact that was
over-forgotten, when each memory that held it where the probe looks left its layer and by
which rule; for one never stored, what refused it. The summary counts, over the probes
that were not clean, the verdicts of their facts and the causes of those two verdicts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from memharness.sim.causes import UNRECORDED

__all__ = ["cause_of", "explain_why", "summary"]


def _when(at: float | None) -> str:
    if at is None:
        return "before the probe"
    return "at " + datetime.fromtimestamp(float(at), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def cause_of(why: dict[str, Any]) -> str:
    """The short cause of a `why` entry, for counting (a rule, an event, a refusal)."""
    return str(why.get("cause") or UNRECORDED)


def explain_why(why: dict[str, Any]) -> str:
    """One `why` entry in words."""
    gone = why.get("gone")
    if gone is None:  # never stored
        return str(why.get("detail") or why.get("cause") or "no layer stored it")
    parts = []
    for memory in gone:
        detail = memory.get("detail") or ""
        rule = memory.get("rule")
        said = f"gone from {memory.get('layer')} {_when(memory.get('at'))} by {rule}"
        if rule == UNRECORDED:
            said = f"gone from {memory.get('layer')} before the probe: {UNRECORDED}"
        elif detail and rule not in detail:
            said += f" ({detail})"
        elif detail:
            said = f"gone from {memory.get('layer')} {_when(memory.get('at'))}: {detail}"
        parts.append(said)
    if not why.get("promoted"):
        parts.append("never promoted to LTM")
    return "; ".join(parts) or cause_of(why)


def summary(selection: Iterable[tuple[str, list[dict[str, Any]]]]) -> str:
    """Counts over every (strategy label, its probe records) of the selection: probes not
    clean, verdicts of their facts, causes of over-forgotten and never stored facts; then
    the same per strategy (over the scenarios), for the strategies with any."""
    verdicts: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    counts: Counter[str] = Counter()
    by_label: dict[str, tuple[Counter[str], Counter[str]]] = {}
    for label, records in selection:
        own_verdicts, own_causes = by_label.setdefault(label, (Counter(), Counter()))
        counts[label] += len(records)
        for record in records:
            own_verdicts.update((record.get("verdicts") or {}).values())
            for fact, why in (record.get("why") or {}).items():
                verdict = (record.get("verdicts") or {}).get(fact, "?")
                own_causes[f"{verdict}: {cause_of(why)}"] += 1
    for own_verdicts, own_causes in by_label.values():
        verdicts += own_verdicts
        causes += own_causes
    lines = [
        f"summary: {counts.total()} probes not clean",
        f"  facts by verdict: {_counts(verdicts)}",
        f"  causes: {_counts(causes)}",
    ]
    width = max((len(label) for label in by_label), default=0)
    for label, (own_verdicts, own_causes) in by_label.items():
        if not counts[label]:
            continue
        shown = _counts(own_verdicts)
        if own_causes:
            shown += f"; causes: {_counts(own_causes)}"
        lines.append(f"  {label:<{width}}  {counts[label]} not clean: {shown}")
    return "\n".join(lines)


def _counts(counter: Counter[str]) -> str:
    return ", ".join(f"{name} {n}" for name, n in counter.most_common()) or "none"
