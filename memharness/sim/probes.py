"""Per-probe diagnostics: what each layer returned and what became of each fact.

A needed fact that a probe did not retrieve is, in this order:

- `never stored`: no layer ever held it (the intent filter or promotion passed it by);
- `unreachable`: stored, but only where this probe cannot look: short-term memory is
  scoped to its session, so a fact in another session's STM was never findable here
  (whether or not it is still live);
- `over-forgotten`: it was stored where this probe could find it (long-term memory, or
  the probe's own session's STM), and no longer is;
- `missed`: still stored where the probe looks, but not in the top-k.

Every retrieved fact that is stale (superseded or invalidated) is a `stale hit`, every
erased one a `leak`, and a retrieved fact the probe lists as forbidden is a
`forbidden hit`; a forbidden fact not retrieved is `kept out`.

To keep result files a sane size, a probe gets a record only when it is not clean: a
needed fact was not retrieved, or a retrieved fact was stale, erased or forbidden. A
clean probe is counted and not written; its absence from a strategy's records means
every needed fact came back and nothing bad did.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from enum import StrEnum
from typing import Any

from memharness.scenarios.model import ProbeStep
from memharness.sim.tally import ShardResult
from memharness.sim.truth import FactState

#: Characters of a hit's text kept in its record: enough to see what took the slot.
HIT_TEXT_CHARS = 80


class Verdict(StrEnum):
    RETRIEVED = "retrieved"
    MISSED = "missed"
    OVER_FORGOTTEN = "over-forgotten"
    UNREACHABLE = "unreachable"
    UNSTORED = "never stored"
    STALE_HIT = "stale hit"
    LEAK = "leak"
    FORBIDDEN_HIT = "forbidden hit"
    KEPT_OUT = "kept out"


#: Verdicts that make a probe worth a record (and a reader's attention).
BAD = frozenset(
    {
        Verdict.MISSED,
        Verdict.OVER_FORGOTTEN,
        Verdict.UNREACHABLE,
        Verdict.UNSTORED,
        Verdict.STALE_HIT,
        Verdict.LEAK,
        Verdict.FORBIDDEN_HIT,
    }
)
#: The verdicts of a needed fact that was not retrieved.
NOT_RETRIEVED = (Verdict.MISSED, Verdict.OVER_FORGOTTEN, Verdict.UNREACHABLE, Verdict.UNSTORED)


def needed_verdict(*, stored: bool, reachable: bool, live: bool) -> Verdict:
    """The verdict of a needed fact the probe did not retrieve: `stored` (some layer ever
    held it), `reachable` (some of those places are where the probe looks), `live` (one of
    those reachable places still holds it)."""
    if not stored:
        return Verdict.UNSTORED
    if not reachable:
        return Verdict.UNREACHABLE
    return Verdict.MISSED if live else Verdict.OVER_FORGOTTEN


#: The ShardResult tally each verdict of a needed fact adds to.
TALLY = {
    Verdict.RETRIEVED: "retrieved",
    Verdict.MISSED: "missed",
    Verdict.OVER_FORGOTTEN: "over_forgotten",
    Verdict.UNREACHABLE: "unreachable",
    Verdict.UNSTORED: "unstored",
}


def judge(
    step: ProbeStep,
    retrieved: Iterable[str],
    *,
    state: Callable[[str], FactState],
    why_not: Callable[[str], Verdict],
) -> dict[str, Verdict]:
    """The verdict of every fact the probe concerns: the retrieved ones that are bad (in
    fact id order; `state` is the ground truth at the probe), the forbidden ones, and the
    needed ones (`why_not` explains one that was not retrieved)."""
    got = set(retrieved)
    verdicts: dict[str, Verdict] = {}
    for fact_id in sorted(got):
        current = state(fact_id)
        if current is FactState.ERASED:
            verdicts[fact_id] = Verdict.LEAK
        elif current is FactState.STALE:
            verdicts[fact_id] = Verdict.STALE_HIT
        elif fact_id in step.forbidden:
            verdicts[fact_id] = Verdict.FORBIDDEN_HIT
    for fact_id in step.forbidden:
        verdicts.setdefault(fact_id, Verdict.KEPT_OUT)
    for fact_id in step.needed:
        verdicts[fact_id] = Verdict.RETRIEVED if fact_id in got else why_not(fact_id)
    return verdicts


def count_probe(
    result: ShardResult, step: ProbeStep, verdicts: dict[str, Verdict], found: dict[str, set[str]]
) -> None:
    """Add a judged probe to the shard's tallies: the probe, whether it hit something
    stale, each needed fact by its verdict, and per layer (`found`: "stm", "ltm") the
    needed facts that layer returned."""
    result.probes += 1
    result.stale_probes += Verdict.STALE_HIT in verdicts.values()
    stm, ltm = found.get("stm", set()), found.get("ltm", set())
    for fact_id in step.needed:
        result.needed += 1
        name = TALLY[verdicts[fact_id]]
        setattr(result, name, getattr(result, name) + 1)
        result.retrieved_stm += fact_id in stm
        result.retrieved_ltm += fact_id in ltm


def is_clean(verdicts: dict[str, Verdict]) -> bool:
    return not any(v in BAD for v in verdicts.values())


def probe_record(
    user: str,
    user_index: int,
    index: int,
    step: ProbeStep,
    hits: dict[str, list[dict[str, Any]]],
    verdicts: dict[str, Verdict],
    why: dict[str, dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The record of a probe that is not clean: where it was asked, what it needed and
    must not get, what each layer returned (`hit_record`, best first), the verdicts, and
    `why` each over-forgotten or never stored needed fact is so (`causes.py`)."""
    return {
        "user": user,
        "user_index": user_index,
        "step": index,
        "at": step.at,
        "session": step.session,
        "query": step.probe,
        "needed": list(step.needed),
        "forbidden": list(step.forbidden),
        "hits": hits,
        "verdicts": {f: str(v) for f, v in verdicts.items()},
        "why": why or {},
    }


def hit_record(score: float, facts: tuple[str, ...], text: str) -> dict[str, Any]:
    """One retrieved item: its score, the scenario facts it carries, the start of its text
    (rank is its position in its layer's list, best first)."""
    return {"score": round(float(score), 4), "facts": list(facts), "text": text[:HIT_TEXT_CHARS]}


def outcome(record: dict[str, Any] | None) -> tuple[tuple[str, str], ...]:
    """What a probe came to under one strategy, comparable across strategies: its bad
    verdicts by fact (empty for a clean probe, which has no record)."""
    if record is None:
        return ()
    verdicts: dict[str, str] = record.get("verdicts") or {}
    return tuple(sorted((f, v) for f, v in verdicts.items() if v in BAD))


def probe_key(record: dict[str, Any]) -> tuple[str, int]:
    """A probe's identity across strategies and workers: its user and its step index."""
    return str(record["user"]), int(record["step"])


__all__ = [
    "BAD",
    "HIT_TEXT_CHARS",
    "NOT_RETRIEVED",
    "TALLY",
    "Verdict",
    "hit_record",
    "is_clean",
    "judge",
    "needed_verdict",
    "outcome",
    "probe_key",
    "probe_record",
]
