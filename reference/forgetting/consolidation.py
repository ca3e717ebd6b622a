"""Consolidation: when a session ends, its short-term records settle into long-term memory
as episodes (R5 in docs/requirements.md: data settles layer by layer, distilled by the forgetting
engine), under a strategy with `promotion: consolidate`.

**When a session ends.** A session ends when its sliding TTL runs out (the session layer
no longer has it live) or when it is closed (`MemorySystem.close_session`). What it
consolidates is what STM held live when it ended, even if the sweep comes later than
a record's own STM deadline (sweeps run every few minutes, or hours when idle). The engine
learns of every session a turn touches (`SessionTracker.note`, with the moment its TTL
would run out); each sweep asks the session layer about the sessions due by then
(`peek`, which refreshes nothing): one still live was extended by a later turn and is
due again at its new expiry, the others have ended and are consolidated. A user's next
session does not end the previous one: a person may keep two conversations open, and
the sweep that follows the previous one's TTL consolidates it (off the turn's path).
The tracker lives in the engine's process, as the activity buffer does: a process that
restarts forgets which sessions were open, and their records stay in STM until their own
TTL (a consolidation of a session already consolidated finds nothing to do).

**What becomes an episode.** Every live STM record of the session, one episode per
utterance (never a summary: summaries would make recall incomparable across
strategies), unless

- its initial importance is under the strategy's `consolidation.min_importance`, or
- a long-term fact stated at or after it holds its key (`topic`): the fact is the
  distilled value (the same statement, promoted inline, or a newer one that superseded
  it); an older fact does not hold back a newer statement.

An episode is an LTM fact of category `episode` under the key `episode:<STM record id>`,
so episodes never supersede each other or a fact. Its text is the record's masked text
(STM never held the raw one), embedded again (a cache hit where texts are cached); its
value holds the record's metadata (what events match on: `order_id`, `ticket_id`, the
`topic` key, the `speaker`), the session, when it was said and its memory type
(`kind`), sealed by the engine as any LTM value (PII still detected in the metadata is
masked and its original encrypted). The strategy gives it its expiry as any LTM value
of category `episode` (`ttl.by_category.episode`, the importance rule from its score),
and an episode of a `sensitive` utterance no later than `ttl.by_type.sensitive` after
it was said;
decay, archival, anonymisation, events and forget commands treat it as a fact, and
events and forget commands match it as the record it came from (`kind`, `topic`).

A statement supersedes the user's older episodes under the same key (`topic`), as a
newer value supersedes a fact's older one: they are deleted (the audit keeps their
values, as it keeps a superseded fact value).

Then the session's records leave STM, consolidated or not: the session is over, and
STM is its working memory (R3: "the current session's active window").

**As a plan.** `plan_session` decides all of this for one session into one
`ChangeBatch` (episodes, superseded episodes, the records to remove), reading STM and
LTM only; `plan_ended` yields one per tracked session that has ended by a sweep's time.
The executor writes them (`executor.py`).

**Initial importance** (R10: a score from keywords and intent, 0-10): a
health or safety fact 10 and an explicit "remember that ..." 9 (`reference.promotion`);
otherwise by the record's intent (profile 7, preference 6, fact 5, instruction 4,
conversation 3), one point more when it carries a detail (a number or a date), two
points less when it asks rather than tells, and two less when the speaker says nothing
about themselves (no "I", "my", "we", "我": small talk about the other person or the
world). Clamped to 0-10.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from typing import Any

from reference.dueindex import DueIndex
from reference.forgetting.plans import CONSOLIDATION_ACTOR, ChangeBatch, EpisodeWrite
from reference.ltm.base import LongTermStore
from reference.ltm.filters import FactChanges, LtmFilter
from reference.models import Category, Fact, MemoryRecord, MemoryType, SessionStatus
from reference.policy.intent import is_question
from reference.policy.strategy import Strategy
from reference.promotion import DEFAULT_IMPORTANCE, extract_fact
from reference.session.base import SessionStore
from reference.stm.base import ShortTermStore
from reference.stm.filters import StmFilter

EPISODE_KEY_PREFIX = "episode:"

#: The initial score of an utterance by its intent (R10), before details.
_BY_KIND: dict[MemoryType, float] = {
    MemoryType.PROFILE: 7.0,
    MemoryType.ENTITY: 7.0,
    MemoryType.KNOWLEDGE: 7.0,
    MemoryType.PREFERENCE: 6.0,
    MemoryType.FACT: 5.0,
    MemoryType.INSTRUCTION: 4.0,
    MemoryType.CONVERSATION: 3.0,
}
_DETAIL_BONUS = 1.0
_QUESTION_PENALTY = 2.0
_NOT_ABOUT_SPEAKER_PENALTY = 2.0
_DETAIL = re.compile(r"\d")
# The speaker speaking of themselves: what a memory of a person is made of.
_FIRST_PERSON = re.compile(
    r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|myself|we|we're|we've|we'd|we'll|us|our|ours)\b"
    r"|我",
    re.IGNORECASE,
)
MAX_SCORE = 10.0


def initial_importance(record: MemoryRecord) -> float:
    """The score an utterance starts with as an episode (module docstring)."""
    speaker = record.metadata.get("speaker")
    speaker = speaker if isinstance(speaker, str) and speaker.strip() else None
    candidate = extract_fact(record.text, record.type, speaker=speaker)
    if candidate is not None and candidate.urgent:
        return candidate.importance
    score = _BY_KIND.get(record.type, DEFAULT_IMPORTANCE)
    if _DETAIL.search(record.text):
        score += _DETAIL_BONUS
    if is_question(record.text):
        score -= _QUESTION_PENALTY
    if not _FIRST_PERSON.search(_said(record.text)):
        score -= _NOT_ABOUT_SPEAKER_PENALTY
    return max(0.0, min(MAX_SCORE, score))


def _said(text: str) -> str:
    # A transcript line names its speaker first ("Caroline: ..."): the name is no content.
    head, sep, rest = text.partition(": ")
    return rest if sep and len(head) <= 40 and "\n" not in head else text


def episode_key(record_id: str) -> str:
    """The LTM key of the episode consolidated from this STM record."""
    return EPISODE_KEY_PREFIX + record_id


def episode_source(fact: Fact) -> str | None:
    """The STM record id an episode was consolidated from (None: not an episode)."""
    if fact.category is not Category.EPISODE or not fact.key.startswith(EPISODE_KEY_PREFIX):
        return None
    return fact.key[len(EPISODE_KEY_PREFIX) :]


def episode_value(record: MemoryRecord) -> dict[str, Any]:
    """What an episode's value holds besides its text (module docstring)."""
    return {
        **record.metadata,
        "session_id": record.session_id,
        "said_at": record.created_at,
        "kind": record.type.value,
    }


# ---------------------------------------------------------------------- open sessions
class SessionTracker:
    """The sessions turns have touched and not yet consolidated, indexed by the moment
    each would end if no turn came (its session TTL from the last turn). Thread-safe:
    a serving process's turns note sessions while `ServingBackground` drains them to
    the shared tracker (`reference.maintenance.shared`)."""

    def __init__(self) -> None:
        self._due = DueIndex()
        self._sessions: dict[str, tuple[str, str]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._sessions)

    def note(self, user_id: str, session_id: str, ends_at: float) -> None:
        """A turn of this session; without another, it ends at `ends_at`."""
        ident = f"{user_id} {session_id}"
        with self._lock:
            self._sessions[ident] = (user_id, session_id)
            self._due.set(ident, ends_at)

    def earliest(self) -> float:
        """The earliest moment a tracked session may end (inf: none tracked)."""
        return self._due.first()

    def due(self, now: float) -> list[tuple[str, str, float]]:
        """(user_id, session_id, ends_at) of the sessions that may have ended by `now`,
        in the order they fell due; it changes nothing."""
        out = []
        with self._lock:
            for ident in self._due.due(now):
                user_id, session_id = self._sessions[ident]
                ends_at = self._due.get(ident)
                out.append((user_id, session_id, now if ends_at is None else ends_at))
        return out

    def ends_at(self, user_id: str, session_id: str) -> float | None:
        """When the tracked session ends if no turn comes; None if not tracked."""
        with self._lock:
            return self._due.get(f"{user_id} {session_id}")

    def done(self, user_id: str, session_id: str) -> None:
        """The session was consolidated (or is gone): forget it."""
        ident = f"{user_id} {session_id}"
        with self._lock:
            self._sessions.pop(ident, None)
            self._due.discard(ident)

    def drain(self) -> list[tuple[str, str, float]]:
        """Every tracked (user_id, session_id, ends_at), forgotten here: for a process
        that hands its sessions to another (`reference.maintenance.serving`)."""
        with self._lock:
            out = []
            for ident, (user_id, session_id) in self._sessions.items():
                ends_at = self._due.get(ident)
                if ends_at is not None:
                    out.append((user_id, session_id, ends_at))
            self._sessions = {}
            self._due = DueIndex()
        return out


def plan_ended(
    session: SessionStore,
    stm: ShortTermStore,
    ltm: LongTermStore,
    tracker: SessionTracker,
    strategy: Strategy,
    now: float,
) -> Iterator[ChangeBatch]:
    """The batches that consolidate every tracked session that has ended by `now`, one
    per session, each planned after the previous one was applied; a session a later
    turn extended is tracked again at its new end (module docstring)."""
    if not strategy.consolidates:
        return
    for user_id, session_id, ends_at in tracker.due(now):
        state = session.peek(user_id=user_id, session_id=session_id)
        if state is not None and state.status is SessionStatus.ACTIVE:
            yield ChangeBatch(track=((user_id, session_id, state.expires_at),))
            continue
        yield plan_session(stm, ltm, strategy, user_id, session_id, min(ends_at, now))


def plan_session(
    stm: ShortTermStore,
    ltm: LongTermStore,
    strategy: Strategy,
    user_id: str,
    session_id: str,
    ended_at: float,
) -> ChangeBatch:
    """The batch that consolidates the STM records of a session that ended at `ended_at`
    into LTM episodes and removes all its records from STM (module docstring). The
    records are those live when the session ended: a sweep may come later than a
    record's own STM deadline."""
    every = stm.records(filter=_every(user_id, session_id))
    records = [r for r in every if r.is_live(ended_at)]
    chosen, dropped = _chosen(ltm, strategy, user_id, records)
    cause = f"consolidation of session {session_id}"
    superseded = _superseded(ltm, user_id, records)
    why = f"{cause}: a later statement of its topic supersedes it"
    return ChangeBatch(
        actor=CONSOLIDATION_ACTOR,
        cause=cause,
        ltm=FactChanges(delete=superseded, causes=dict.fromkeys(superseded, why)),
        episodes=tuple(EpisodeWrite(record, score, until) for record, score, until in chosen),
        stm_remove=frozenset(r.record_id for r in every),
        consolidated=(user_id, session_id),
        dropped=tuple(dropped),
        session_records=len(records),
    )


def _chosen(
    ltm: LongTermStore, strategy: Strategy, user_id: str, records: list[MemoryRecord]
) -> tuple[list[tuple[MemoryRecord, float, float | None]], list[tuple[str, str, str]]]:
    """The records that become episodes, with their initial importance and the latest
    expiry their episode may have; and the others as (record_id, rule, why)."""
    floor = strategy.consolidation_rule.min_importance
    topics = {t for r in records if (t := _topic(r)) is not None}
    held: dict[str, float] = {}  # key -> when its live fact was last written
    if topics:
        for fact in ltm.facts(filter=LtmFilter(user_id=user_id, keys=frozenset(topics))):
            if fact.category is not Category.EPISODE:
                held[fact.key] = max(fact.updated_at, held.get(fact.key, fact.updated_at))
    chosen = []
    dropped = []
    for record in records:
        topic = _topic(record)
        if topic is not None and topic in held and held[topic] >= record.created_at:
            # the fact is this statement, or a newer one
            why = f"its session ended; LTM holds {topic} as a fact, so no episode was made"
            dropped.append((record.record_id, "consolidation: held as a fact", why))
            continue
        score = initial_importance(record)
        if score >= floor:
            chosen.append((record, score, _not_after(strategy, record)))
        else:
            why = f"its session ended; importance {score:.2f} is under the floor {floor:.2f}"
            dropped.append((record.record_id, "consolidation.min_importance", why))
    return chosen, dropped


def _not_after(strategy: Strategy, record: MemoryRecord) -> float | None:
    """A sensitive utterance's episode expires by the strategy's `ttl.by_type.sensitive`
    from when it was said, as its STM record would: consolidation must not keep what the
    strict TTL removes. None: no such bound."""
    if record.type is not MemoryType.SENSITIVE or strategy.ttl is None:
        return None
    ttl = strategy.ttl.by_type.get(MemoryType.SENSITIVE)
    return None if ttl is None else record.created_at + ttl


def _superseded(ltm: LongTermStore, user_id: str, records: list[MemoryRecord]) -> frozenset[str]:
    """The user's episodes that a statement of this session supersedes: same `topic`
    key, said before it (as a newer value of a key supersedes a fact's older one)."""
    latest: dict[str, float] = {}
    for record in records:
        topic = _topic(record)
        if topic is not None:
            latest[topic] = max(record.created_at, latest.get(topic, record.created_at))
    if not latest:
        return frozenset()
    flt = LtmFilter(user_id=user_id, categories=frozenset({Category.EPISODE}))
    return frozenset(
        f.fact_id
        for f in ltm.facts(filter=flt)
        if (topic := f.value.get("topic")) in latest and _said_at(f) < latest[topic]
    )


def _said_at(episode: Fact) -> float:
    said = episode.value.get("said_at")
    return float(said) if isinstance(said, int | float) else episode.created_at


def _topic(record: MemoryRecord) -> str | None:
    topic = record.metadata.get("topic")
    return topic.strip() if isinstance(topic, str) and topic.strip() else None


def _every(user_id: str, session_id: str) -> StmFilter:
    return StmFilter(user_id=user_id, session_id=session_id, include_dead=True)


__all__ = [
    "SessionTracker",
    "episode_key",
    "episode_source",
    "episode_value",
    "initial_importance",
    "plan_ended",
    "plan_session",
]
