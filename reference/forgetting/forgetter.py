"""Forget commands carried out on every layer: a topic, everything, or this conversation.

- **topic** ("forget my address"): the user's STM records in every session, and LTM
  facts, are removed when any of these holds:
  - by key: an LTM key in `topic_keys(topic)`, or an STM record whose `topic` metadata
    (the key its fact was promoted under) is one of those keys or the key of a fact
    erased here, so the record a fact was promoted from goes with it and cannot promote
    it again; an LTM episode (`consolidation.py`) by the `topic` of the record it was
    consolidated from, as that record would be;
  - by wording: the text contains the topic or a synonym of its keys (`promotion`'s
    lexicon, Chinese and English);
  - by meaning: cosine similarity to the topic at least `forget_min_similarity`.
  Dead records (expired, archived) are included: forgetting is about what is stored,
  not only what is returned. LTM facts are *erased*: deleted, and every audit value of
  theirs, and of any earlier fact of the user under the same keys, redacted.
- **topic, pointing back** ("forget that"): the user's latest STM record in this session,
  and the fact promoted from it.
- **everything**: every STM record, every LTM fact (erased, the whole audit of the user
  redacted), every session, and the user's activity record.
- **session** ("reset the conversation"): this session's STM records; its context window
  and task state are emptied, the session stays open.

The context window holds message ids only, never text, so a topic leaves it alone.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from reference.errors import InvalidInput
from reference.ltm.base import LtmFilter
from reference.models import Category, Fact, MemoryRecord
from reference.policy.forget_commands import ForgetCommand
from reference.policy.forget_topics import topic_keys
from reference.policy.lexicon import key_family
from reference.policy.vocabulary import PROFILE_KEYS, SAFETY, TOPICS
from reference.stm.base import StmFilter

if TYPE_CHECKING:
    from reference.forgetting.engine import ForgettingEngine

FORGET_ACTOR = "forget"
#: Synonyms too generic to match on their own inside a text ("order number" is no phone).
_GENERIC = frozenset({"number"})


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What one forget command removed, per layer."""

    scope: str
    topic: str | None
    stm_removed: frozenset[str]  # record ids
    ltm_erased: frozenset[str]  # fact ids
    keys: frozenset[str]  # LTM keys whose audit values were redacted
    sessions_removed: int
    context_cleared: bool
    duration_ms: float

    @property
    def removed(self) -> int:
        """Records and facts removed (sessions not counted)."""
        return len(self.stm_removed) + len(self.ltm_erased)


def apply_forget(
    engine: ForgettingEngine, command: ForgetCommand, *, user_id: str, session_id: str
) -> ForgetReport:
    """Carry out `command` for the user (see the module docstring)."""
    if not isinstance(command, ForgetCommand):
        raise InvalidInput("command", f"must be a ForgetCommand, got {type(command).__name__}")
    started = time.perf_counter()
    if command.scope == "everything":
        parts = _everything(engine, user_id)
    elif command.scope == "session":
        parts = _session(engine, user_id, session_id)
    elif command.topic is None:
        parts = _last_said(engine, user_id, session_id)
    else:
        parts = _topic(engine, user_id, command.topic)
    stm_ids, fact_ids, keys, sessions, cleared = parts
    return ForgetReport(
        scope=command.scope,
        topic=command.topic,
        stm_removed=frozenset(stm_ids),
        ltm_erased=frozenset(fact_ids),
        keys=frozenset(keys),
        sessions_removed=sessions,
        context_cleared=cleared,
        duration_ms=(time.perf_counter() - started) * 1000.0,
    )


_Parts = tuple[set[str], set[str], set[str], int, bool]


def _everything(engine: ForgettingEngine, user_id: str) -> _Parts:
    records = engine.stm.records(filter=StmFilter(user_id=user_id, include_dead=True))
    stm_ids = {r.record_id for r in records}
    engine.stm.delete(filter=StmFilter(user_id=user_id, include_dead=True))
    facts = engine.ltm.facts(filter=LtmFilter(user_id=user_id, include_dead=True))
    # A filter naming the user only: every fact, and the user's whole audit, redacted.
    engine.ltm.erase(filter=LtmFilter(user_id=user_id), actor=FORGET_ACTOR)
    sessions = engine.session.delete_user(user_id=user_id)
    engine.drop_activity(user_id)
    return stm_ids, {f.fact_id for f in facts}, {f.key for f in facts}, sessions, True


def _session(engine: ForgettingEngine, user_id: str, session_id: str) -> _Parts:
    scope = StmFilter(user_id=user_id, session_id=session_id, include_dead=True)
    stm_ids = {r.record_id for r in engine.stm.records(filter=scope)}
    if stm_ids:
        engine.stm.purge(record_ids=stm_ids)
    cleared = engine.session.reset(user_id=user_id, session_id=session_id)
    return stm_ids, set(), set(), 0, cleared


def _last_said(engine: ForgettingEngine, user_id: str, session_id: str) -> _Parts:
    scope = StmFilter(user_id=user_id, session_id=session_id)
    records = engine.stm.records(filter=scope)
    if not records:
        return set(), set(), set(), 0, False
    last = max(records, key=lambda r: (r.created_at, r.record_id))
    engine.stm.purge(record_ids={last.record_id})
    fact_ids: set[str] = set()
    key = last.metadata.get("topic")
    if isinstance(key, str) and key.strip():
        facts = engine.ltm.facts(
            filter=LtmFilter(user_id=user_id, keys=frozenset({key}), include_dead=True)
        )
        # Only a fact this very utterance stated: an older value stays.
        fact_ids = {f.fact_id for f in facts if f.text == last.text}
        if fact_ids:
            engine.ltm.erase(
                filter=LtmFilter(user_id=user_id, fact_ids=frozenset(fact_ids)),
                actor=FORGET_ACTOR,
            )
    return {last.record_id}, fact_ids, set(), 0, False


def _topic(engine: ForgettingEngine, user_id: str, topic: str) -> _Parts:
    keys = topic_keys(topic)
    matcher = TopicMatcher(topic, keys)
    vector = engine.embedder.embed_one(engine.pii.mask(topic))
    threshold = engine.forget_min_similarity

    facts = engine.ltm.facts(filter=LtmFilter(user_id=user_id, include_dead=True))
    close = {
        hit.record.fact_id
        for hit in engine.ltm.similar(user_id=user_id, embedding=vector, min_score=threshold)
    }
    erased = [
        f
        for f in facts
        if f.key in keys
        or key_family(f.key) in keys
        or _in_keys(_episode_topic(f), keys)
        or f.fact_id in close
        or matcher.says(f.text)
    ]
    fact_ids = {f.fact_id for f in erased}
    if fact_ids:
        engine.ltm.erase(
            filter=LtmFilter(user_id=user_id, fact_ids=frozenset(fact_ids)), actor=FORGET_ACTOR
        )
    # Audit entries of earlier facts under these keys (gone already) hold values too.
    engine.ltm.erase(filter=LtmFilter(user_id=user_id, keys=frozenset(keys)), actor=FORGET_ACTOR)

    source_keys = keys | {f.key for f in erased}
    records = engine.stm.records(filter=StmFilter(user_id=user_id, include_dead=True))
    near = {
        hit.record.record_id
        for hit in engine.stm.similar(user_id=user_id, embedding=vector, min_score=threshold)
    }
    stm_ids = {
        r.record_id
        for r in records
        if r.record_id in near or matcher.says(r.text) or _in_keys(_topic_of(r), source_keys)
    }
    if stm_ids:
        engine.stm.purge(record_ids=stm_ids)
    return stm_ids, fact_ids, source_keys, 0, False


def _in_keys(key: str | None, keys: set[str]) -> bool:
    """Whether a record's key is one of `keys`, or of their family ("allergy:peanut@ann"
    is in the family "allergy"; a speaker's "address@ann" in "address")."""
    return key is not None and (key in keys or key_family(key) in keys)


def _episode_topic(fact: Fact) -> str | None:
    """The key of the fact an episode's utterance stated (its record's `topic`): an
    episode is matched as the record it came from."""
    if fact.category is not Category.EPISODE:
        return None
    value = fact.value.get("topic")
    return value if isinstance(value, str) else None


def _topic_of(record: MemoryRecord) -> str | None:
    value = record.metadata.get("topic")
    return value if isinstance(value, str) else None


class TopicMatcher:
    """Whether a text speaks of a topic: the topic itself, or a synonym of one of its
    keys from `reference.policy.vocabulary`. Wider than the lexicon's own matching on purpose
    (erasing a little more is safe, keeping what the user asked to forget is not): Latin
    words must start at a word boundary, and only short ones end at one too ("tea" is
    not in "steak"); CJK words match as substrings, whatever the segmentation."""

    def __init__(self, topic: str, keys: Iterable[str]) -> None:
        words = {topic.strip().casefold()}
        topics = dict(TOPICS) | dict(SAFETY)
        for key in keys:
            if key in PROFILE_KEYS:
                words.update(PROFILE_KEYS[key])
                words.add(key)
            if key in topics:
                words.update(w.strip().rstrip("*") for w in topics[key])
        words = {w.casefold() for w in words if w.strip() and w not in _GENERIC}
        latin = sorted(w for w in words if w.isascii())
        self._cjk = tuple(sorted(w for w in words if not w.isascii()))
        parts = [re.escape(w) + (r"(?:e?s)?(?![a-z0-9])" if len(w) <= 3 else "") for w in latin]
        self._latin = re.compile(r"(?<![a-z0-9])(?:" + "|".join(parts) + ")") if parts else None

    def says(self, text: str) -> bool:
        lower = text.casefold()
        if self._latin is not None and self._latin.search(lower):
            return True
        return any(word in lower for word in self._cjk)


__all__ = ["ForgetReport", "TopicMatcher", "apply_forget"]
