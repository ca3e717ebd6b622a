"""Counts that describe a scenario: users, turns, facts, probes, events, time span.

A turn is one call of the memory's turn (`MemorySystem.turn`): a statement (`say`) or a
forget command. Events and probes are not turns. `is_turn` is that definition, for
`scenarios stats`, the run's header and the replay's count alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from memharness.scenarios.model import (
    EventStep,
    ForgetStep,
    ProbeStep,
    SayStep,
    Scenario,
    Step,
    User,
    iso,
)
from memharness.scenarios.stream import stream_scenario


def is_turn(step: Step) -> bool:
    """Whether the memory replays `step` as a turn: a statement or a forget command."""
    return isinstance(step, SayStep | ForgetStep)


@dataclass(frozen=True, slots=True)
class ScenarioStats:
    """What `memharness scenarios stats` prints."""

    users: int
    turns: int  # statements and forget commands (`is_turn`)
    statements: int
    sensitive_statements: int  # statements the script marks as carrying PII
    facts: int
    superseding_facts: int
    probes: int
    events: int
    forgets: int
    sessions: int
    adversarial: int
    first_at: float
    last_at: float

    @property
    def span_days(self) -> float:
        return (self.last_at - self.first_at) / 86_400.0

    def lines(self) -> list[str]:
        """`name: value` lines for the terminal."""
        rows = [
            ("users", self.users),
            ("turns", f"{self.turns} (statements and forget commands)"),
            ("statements", self.statements),
            ("with PII", self.sensitive_statements),
            ("facts", self.facts),
            ("superseding facts", self.superseding_facts),
            ("probes", self.probes),
            ("events", self.events),
            ("forgets", self.forgets),
            ("sessions", self.sessions),
            ("adversarial", self.adversarial),
            (
                "time span",
                f"{iso(self.first_at)} .. {iso(self.last_at)} ({self.span_days:.1f} days)",
            ),
        ]
        return [f"{name:18} {value}" for name, value in rows]


_COUNTED = (
    "users",
    "turns",
    "statements",
    "sensitive",
    "facts",
    "superseding",
    "probes",
    "events",
    "forgets",
    "sessions",
)


class StatsTally:
    """Stats accumulated one user at a time (so a streamed file is counted in flat memory)."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(_COUNTED, 0)
        self.first, self.last = float("inf"), float("-inf")

    def add(self, user: User) -> None:
        """Count one user's timeline."""
        c = self.counts
        c["users"] += 1
        sessions: set[str] = set()
        for step in user.timeline:
            self.first, self.last = min(self.first, step.at), max(self.last, step.at)
            c["turns"] += is_turn(step)
            if isinstance(step, SayStep):
                c["statements"] += 1
                c["sensitive"] += step.discloses_pii
                c["facts"] += len(step.facts)
                c["superseding"] += sum(fact.supersedes is not None for fact in step.facts)
            elif isinstance(step, ProbeStep):
                c["probes"] += 1
            elif isinstance(step, EventStep):
                c["events"] += 1
                continue
            elif isinstance(step, ForgetStep):
                c["forgets"] += 1
            sessions.add(step.session)
        c["sessions"] += len(sessions)

    def result(self, *, adversarial: int) -> ScenarioStats:
        """The stats of every user added so far."""
        c = self.counts
        first, last = (self.first, self.last) if self.first <= self.last else (0.0, 0.0)
        return ScenarioStats(
            users=c["users"],
            turns=c["turns"],
            statements=c["statements"],
            sensitive_statements=c["sensitive"],
            facts=c["facts"],
            superseding_facts=c["superseding"],
            probes=c["probes"],
            events=c["events"],
            forgets=c["forgets"],
            sessions=c["sessions"],
            adversarial=adversarial,
            first_at=first,
            last_at=last,
        )


def scenario_stats(scenario: Scenario) -> ScenarioStats:
    """The stats of a loaded scenario."""
    tally = StatsTally()
    for user in scenario.users:
        tally.add(user)
    return tally.result(adversarial=len(scenario.adversarial))


def file_stats(path: str | Path) -> tuple[str, ScenarioStats]:
    """The name and stats of a scenario file, read one user at a time."""
    tally = StatsTally()
    info = stream_scenario(path, tally.add)
    return info.name, tally.result(adversarial=len(info.adversarial))
