"""Scenario users' timelines as load: what each step of a timeline does to the memory.

`MEMH_LOAD_SCENARIO` names a scenario file (`memharness load --scenario FILE`, or the
users it generates for `--domain`); each Locust user then plays one scenario user's
timeline after another, every play as a new memory user, so facts, questions, business
events and forget commands reach the memory in the proportions the scenario has:

- `say`: a turn (`MemorySystem.turn`, with the step's metadata: an order or ticket id
  that a business event later names);
- `forget`: a turn whose text is the command; the turn carries it out;
- `probe`: a retrieval call, `MemorySystem.recall` (which changes nothing), timed as
  `recall`;
- `event`: the business event published to the event stream (`build_event_bus`), timed
  as `event`, where the maintenance process beside the load applies it. On the in-memory
  backend no other process can see the stores, so the serving process applies it itself
  (`MemorySystem.handle_event`).

A timeline's own times only order its steps: when a step is played is the load's
pacing (think time, `--rate`, open-loop arrivals), and the memory takes the time from
its clock (a `ScaledClock` under `memharness load --time-scale`). Only turns take an
arrival slot of the pacing; the probes and events between two turns are played right
before the later turn, so the offered rate is in turns per second as without a scenario.
"""

from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from memharness.scenarios import load_scenario
from memharness.scenarios.model import EventStep, ForgetStep, ProbeStep, SayStep, Step, User

__all__ = [
    "SCENARIO_ENV",
    "Play",
    "TimelineQueue",
    "is_turn",
    "load_timelines",
    "scenario_requested",
    "session_of",
]

SCENARIO_ENV = "MEMH_LOAD_SCENARIO"
#: The plays kept for the report (memory user, scenario user, steps played): enough to
#: check a run's outcome user by user, bounded for long runs.
MAX_PLAYS = 10_000
#: What a played step counts as in the run's `played` tally.
KINDS = {SayStep: "say", ForgetStep: "forget", ProbeStep: "probe", EventStep: "event"}


def scenario_requested() -> bool:
    """True when `MEMH_LOAD_SCENARIO` names a scenario file to play."""
    return bool(os.environ.get(SCENARIO_ENV, "").strip())


def load_timelines(path: str | Path) -> tuple[User, ...]:
    """The users of a scenario file (raises `ScenarioError` naming the file and line)."""
    return tuple(load_scenario(path).users)


def is_turn(step: Step | str) -> bool:
    """Whether playing `step` is a turn (a built-in utterance, a say, a forget command)."""
    return isinstance(step, str | SayStep | ForgetStep)


def session_of(user_id: str, step: SayStep | ForgetStep | ProbeStep) -> str:
    """The memory's session id of a step played by memory user `user_id`."""
    return f"{user_id}-{step.session}"


@dataclass
class Play:
    """One play of a scenario user's timeline by a memory user: how far it got."""

    memory_user: str
    scenario_user: str
    steps: list[Step]
    played: int = 0

    def as_list(self) -> list[str | int]:
        return [self.memory_user, self.scenario_user, self.played]


@dataclass
class TimelineQueue:
    """The scenario users in a fixed order, handed out round robin from a seeded start;
    the count of what was played, and the first MAX_PLAYS plays."""

    users: tuple[User, ...]
    seed: int = 0
    played: Counter[str] = field(default_factory=Counter)
    plays: list[Play] = field(default_factory=list)
    _next: int = -1

    def __post_init__(self) -> None:
        if not self.users:
            raise ValueError("a scenario to play needs at least one user")
        self._next = self.seed % len(self.users)

    def take(self, memory_user: str) -> Play:
        """The next scenario user's timeline, played by `memory_user`."""
        user = self.users[self._next]
        self._next = (self._next + 1) % len(self.users)
        self.played["timelines"] += 1
        play = Play(memory_user, user.id, list(user.timeline))
        if len(self.plays) < MAX_PLAYS:
            self.plays.append(play)
        return play

    def count(self, play: Play, step: Step) -> None:
        """`step` of `play` was played: it finished, whether or not the memory raised (a
        step cut short by the end of the run is not counted), or, for an event, its
        publishing began (the stream may hold an event whose call the stop cut short)."""
        self.played[KINDS[type(step)]] += 1
        play.played += 1

    def document(self, source: str | None) -> dict[str, object]:
        """What the report keeps: the file, counts per kind, and the plays."""
        return {
            "file": source,
            "users": len(self.users),
            "played": dict(self.played),
            "plays": [play.as_list() for play in self.plays],
            "plays_truncated": self.played["timelines"] > len(self.plays),
        }
