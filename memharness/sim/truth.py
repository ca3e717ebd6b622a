"""Ground truth of one user's timeline: what each fact is at a moment, and who needs it.

A fact is *valid* from the `say` that asserts it until a later `say` supersedes it or an
event invalidates it (then it is *stale*), or a forget command erases it (then it is
*erased*: it must never come back). The oracle strategy asks whether a probe after now
still needs a fact; `needed_from` answers from the probes' times.

Whether a forget command erases depends on the script and the strategy's
`forget_commands` setting, never on what the memory replied: under `enabled: false` no
command erases; under `confirm_everything`, a `scope: everything` command erases its facts
only when the user's next turn in that session is a `say` marked `confirms: true` within
`confirm_within_s`, and then at that turn's time. A fact a command names and does not
erase is *spared*: a probe's `needed` list keeps it, its `forbidden` list drops it
(`judged`); an erased fact leaves `needed` (retrieving it is a leak).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum

from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, Step, User
from reference.policy.rules import ForgetCommandsRule


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
    #: fact id -> when a forget command named it and did not erase it (yet).
    spared_at: dict[str, float] = field(default_factory=dict)
    #: timeline index of a turn -> the facts that turn erased (a forget, a confirmation).
    erased_by: dict[int, list[str]] = field(default_factory=dict)

    @classmethod
    def of(cls, user: User, forget: ForgetCommandsRule | None = None) -> UserTruth:
        """The truth of the user's timeline under a strategy's `forget_commands`
        (default: every command carried out at once)."""
        rule = forget or ForgetCommandsRule()
        truth = cls()
        asking: dict[str, tuple[ForgetStep, float]] = {}  # session -> (command, deadline)
        for index, step in enumerate(user.timeline):
            if isinstance(step, SayStep | ForgetStep):
                asked = asking.pop(step.session, None)
                if asked is not None and _confirms(step, asked[1]):
                    truth._erase(index, asked[0].facts, step.at)
            if isinstance(step, SayStep):
                for fact in step.facts:
                    truth.changes[fact.id] = [(step.at, FactState.VALID)]
                    if fact.supersedes is not None:
                        truth._mark(fact.supersedes, step.at, FactState.STALE)
            elif isinstance(step, EventStep):
                for fact_id in step.invalidates:
                    truth._mark(fact_id, step.at, FactState.STALE)
            elif isinstance(step, ForgetStep):
                if not rule.enabled or (step.scope == "everything" and rule.confirm_everything):
                    for fact_id in step.facts:
                        truth.spared_at.setdefault(fact_id, step.at)
                    if rule.enabled:
                        asking[step.session] = (step, step.at + rule.confirm_within_s)
                else:
                    truth._erase(index, step.facts, step.at)
            elif isinstance(step, ProbeStep):
                for fact_id in step.needed:
                    truth.needed_at.setdefault(fact_id, []).append(step.at)
        return truth

    def _erase(self, index: int, fact_ids: list[str], at: float) -> None:
        self.erased_by.setdefault(index, []).extend(fact_ids)
        for fact_id in fact_ids:
            self._mark(fact_id, at, FactState.ERASED)

    def judged(self, step: ProbeStep) -> ProbeStep:
        """The probe with the lists this truth implies at its time: erased facts are not
        needed, spared ones are not forbidden (see the module docstring)."""
        needed = [f for f in step.needed if self.state(f, step.at) is not FactState.ERASED]
        forbidden = [f for f in step.forbidden if not self._spared(f, step.at)]
        if len(needed) == len(step.needed) and len(forbidden) == len(step.forbidden):
            return step
        return step.model_copy(update={"needed": needed, "forbidden": forbidden})

    def _spared(self, fact_id: str, at: float) -> bool:
        since = self.spared_at.get(fact_id)
        return since is not None and since <= at and self.state(fact_id, at) is not FactState.ERASED

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


def _confirms(step: Step, deadline: float) -> bool:
    """Whether a turn answers a pending forget-everything with a confirmation in time."""
    return isinstance(step, SayStep) and step.confirms is True and step.at <= deadline
