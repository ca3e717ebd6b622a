"""Ground truth of one user's timeline: what each fact is at a moment, and who needs it.

A fact is *valid* from the `say` that asserts it until a later `say` supersedes it or an
event invalidates it (then it is *stale*), or a forget command erases it (then it is
*erased*: it must never come back). The oracle strategy asks whether a probe after now
still needs a fact; `needed_from` answers from the probes' times.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, User


class FactState(StrEnum):
    VALID = "valid"
    STALE = "stale"  # superseded by a later fact, or invalidated by an event
    ERASED = "erased"  # removed by a forget command: must never come back


@dataclass
class UserTruth:
    """The facts of one user and when each changed state; built once from the timeline."""

    #: fact id -> [(time, state)] in time order; the first entry is its assertion.
    changes: dict[str, list[tuple[float, FactState]]] = field(default_factory=dict)
    #: fact id -> ascending times of the probes that need it.
    needed_at: dict[str, list[float]] = field(default_factory=dict)

    @classmethod
    def of(cls, user: User) -> UserTruth:
        truth = cls()
        for step in user.timeline:
            if isinstance(step, SayStep):
                for fact in step.facts:
                    truth.changes[fact.id] = [(step.at, FactState.VALID)]
                    if fact.supersedes is not None:
                        truth._mark(fact.supersedes, step.at, FactState.STALE)
            elif isinstance(step, EventStep):
                for fact_id in step.invalidates:
                    truth._mark(fact_id, step.at, FactState.STALE)
            elif isinstance(step, ForgetStep):
                for fact_id in step.facts:
                    truth._mark(fact_id, step.at, FactState.ERASED)
            elif isinstance(step, ProbeStep):
                for fact_id in step.needed:
                    truth.needed_at.setdefault(fact_id, []).append(step.at)
        return truth

    def _mark(self, fact_id: str, at: float, state: FactState) -> None:
        history = self.changes[fact_id]
        if history[-1][1] is not FactState.ERASED:  # erased is final
            history.append((at, state))

    def state(self, fact_id: str, at: float) -> FactState:
        """The fact's state at `at` (a change at exactly `at` has happened)."""
        current = FactState.VALID
        for when, state in self.changes.get(fact_id, ()):
            if when > at:
                break
            current = state
        return current

    def needed_until(self, fact_ids: Iterable[str]) -> float | None:
        """The time of the last probe that needs any of these facts (None: none does)."""
        return max((self.needed_at[f][-1] for f in fact_ids if f in self.needed_at), default=None)

    def needed_from(self, fact_id: str, at: float) -> bool:
        """Whether a probe at `at` or later needs the fact (the oracle's question: a sweep
        at a probe's moment runs before the probe)."""
        times = self.needed_at.get(fact_id, [])
        return bisect.bisect_left(times, at) < len(times)
