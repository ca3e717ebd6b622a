"""Checks that could not have failed: forbidden facts no strategy of the run ever returned.

A probe's `forbidden` list (a superseded value, an invalidated note, an erased fact) is
how a scenario tests staleness and forgetting: the probe fails when one comes back. That
test means something only if the fact could come back: if no strategy of the run ever
retrieved it at that probe, keep_all included (which forgets nothing), the check passed
without testing anything (a retrieval that never finds the old value, an utterance the
intent filter dropped so the fact was never stored, a probe worded far from it). A
strategy's "not stale" there is no evidence.

`vacuous_checks` finds them per scenario, from the scenario's probes and the strategies'
probe records (a forbidden fact retrieved is recorded as `stale hit`, `leak` or
`forbidden hit`; a clean probe has no record, so nothing came back there). The run warns
with their count under each scenario; results.json keeps them (`vacuous` of the
scenario) and `memharness explain` lists them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from memharness.scenarios.model import ProbeStep, User

__all__ = ["LISTED", "RETURNED", "forbidden_count", "vacuous_checks", "vacuous_line"]

#: The verdicts of a forbidden fact that came back.
RETURNED = frozenset({"stale hit", "leak", "forbidden hit"})
#: Probes listed per scenario in results.json (the count is always whole).
LISTED = 50


def vacuous_checks(
    users: Iterable[User], records: Mapping[str, Iterable[Mapping[str, Any]]]
) -> list[dict[str, Any]]:
    """The probes with a forbidden fact that no strategy's records (`records`: label ->
    its probe records) show as returned: user, step, query and those facts."""
    returned: set[tuple[str, int, str]] = set()
    for label_records in records.values():
        for record in label_records:
            for fact, verdict in (record.get("verdicts") or {}).items():
                if verdict in RETURNED:
                    returned.add((str(record["user"]), int(record["step"]), str(fact)))
    found = []
    for user in users:
        for index, step in enumerate(user.timeline):
            if not isinstance(step, ProbeStep) or not step.forbidden:
                continue
            never = [f for f in step.forbidden if (user.id, index, f) not in returned]
            if never:
                found.append(
                    {"user": user.id, "step": index, "query": step.probe, "never_returned": never}
                )
    return found


def forbidden_count(users: Iterable[User]) -> int:
    """The probes with at least one forbidden fact."""
    return sum(
        isinstance(step, ProbeStep) and bool(step.forbidden)
        for user in users
        for step in user.timeline
    )


def vacuous_line(count: int, checks: int, labels: Iterable[str], run_dir: str) -> str:
    """The warning under a scenario's tables."""
    labels = list(labels)
    who = "keep_all included" if "keep_all" in labels else "keep_all was not in this run"
    return (
        f"warning: {count} of the {checks} probes with a forbidden (stale or erased) fact "
        f"could not have failed: no strategy returned that fact ({who}); their 'not stale' "
        f"tests nothing (memharness explain {run_dir} --vacuous)"
    )
