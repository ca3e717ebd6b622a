"""The planners of forget commands and business events: the `ChangeBatch` each makes.

A forget command reaches every layer: a topic, everything, or this conversation.

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

A business event invalidates what the strategy's event rules name
(`policy.invalidations_for`): LTM facts archived or deleted, STM records removed.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable
from dataclasses import dataclass

from reference.errors import InvalidInput
from reference.forgetting.plans import (
    EVENTS_ACTOR,
    FORGET_ACTOR,
    Applied,
    ChangeBatch,
    ForgetReport,
    decision_causes,
)
from reference.ltm.base import LongTermStore
from reference.ltm.filters import FactChanges, LtmFilter
from reference.models import Category, Event, Fact, MemoryRecord
from reference.policy.decisions import Action
from reference.policy.forget_commands import ForgetCommand
from reference.policy.forget_topics import topic_keys
from reference.policy.invalidation import invalidations_for
from reference.policy.lexicon import key_family
from reference.policy.strategy import Strategy
from reference.policy.vocabulary import PROFILE_KEYS, SAFETY, TOPICS
from reference.stm.base import ShortTermStore
from reference.stm.filters import StmFilter
from reference.text_interfaces import Embedder, PiiMasker

#: Synonyms too generic to match on their own inside a text ("order number" is no phone).
_GENERIC = frozenset({"number"})


@dataclass(frozen=True, slots=True)
class ForgetPlan:
    """A forget command's batch, and what it names for the report: the STM records and
    LTM facts it removes and the keys whose audit values it redacts."""

    batch: ChangeBatch
    stm_ids: frozenset[str]
    fact_ids: frozenset[str]
    keys: frozenset[str]

    def report(self, command: ForgetCommand, done: Applied, started: float) -> ForgetReport:
        """The report of the command once `done` (`started`: its `perf_counter`)."""
        return ForgetReport(
            scope=command.scope,
            topic=command.topic,
            stm_removed=self.stm_ids,
            ltm_erased=self.fact_ids,
            keys=self.keys,
            sessions_removed=done.sessions_removed,
            context_cleared=done.context_cleared,
            duration_ms=(time.perf_counter() - started) * 1000.0,
        )


@dataclass(frozen=True, slots=True)
class TopicSearch:
    """What a topic is matched by besides its keys and words: its embedding (the masked
    topic) and the similarity a record needs."""

    embedder: Embedder
    pii: PiiMasker
    min_similarity: float


def plan_forget(
    command: ForgetCommand,
    *,
    stm: ShortTermStore,
    ltm: LongTermStore,
    search: TopicSearch,
    user_id: str,
    session_id: str,
) -> ForgetPlan:
    """The changes that carry out `command` for the user (see the module docstring)."""
    if not isinstance(command, ForgetCommand):
        raise InvalidInput("command", f"must be a ForgetCommand, got {type(command).__name__}")
    if command.scope == "everything":
        return _everything(stm, ltm, user_id)
    if command.scope == "session":
        return _session(stm, user_id, session_id)
    if command.topic is None:
        return _last_said(stm, ltm, user_id, session_id)
    return _topic(stm, ltm, search, user_id, command.topic)


def _plan(
    batch: ChangeBatch, stm_ids: Iterable[str], fact_ids: Iterable[str], keys: Iterable[str]
) -> ForgetPlan:
    return ForgetPlan(batch, frozenset(stm_ids), frozenset(fact_ids), frozenset(keys))


def _everything(stm: ShortTermStore, ltm: LongTermStore, user_id: str) -> ForgetPlan:
    every = StmFilter(user_id=user_id, include_dead=True)
    records = stm.records(filter=every)
    facts = ltm.facts(filter=LtmFilter(user_id=user_id, include_dead=True))
    # The erasure of the user (`erasure.erase_user`, the executor runs it): every
    # layer, the whole audit of the user redacted, the activity row removed.
    batch = ChangeBatch(actor=FORGET_ACTOR, cause="forget command: everything", delete_user=user_id)
    return _plan(
        batch, (r.record_id for r in records), (f.fact_id for f in facts), (f.key for f in facts)
    )


def _session(stm: ShortTermStore, user_id: str, session_id: str) -> ForgetPlan:
    scope = StmFilter(user_id=user_id, session_id=session_id, include_dead=True)
    stm_ids = frozenset(r.record_id for r in stm.records(filter=scope))
    batch = ChangeBatch(stm_remove=stm_ids, reset_session=(user_id, session_id))
    return _plan(batch, stm_ids, (), ())


def _last_said(
    stm: ShortTermStore, ltm: LongTermStore, user_id: str, session_id: str
) -> ForgetPlan:
    records = stm.records(filter=StmFilter(user_id=user_id, session_id=session_id))
    if not records:
        return _plan(ChangeBatch(), (), (), ())
    last = max(records, key=lambda r: (r.created_at, r.record_id))
    fact_ids: frozenset[str] = frozenset()
    key = last.metadata.get("topic")
    if isinstance(key, str) and key.strip():
        facts = ltm.facts(
            filter=LtmFilter(user_id=user_id, keys=frozenset({key}), include_dead=True)
        )
        # Only a fact this very utterance stated: an older value stays.
        fact_ids = frozenset(f.fact_id for f in facts if f.text == last.text)
    erase = (LtmFilter(user_id=user_id, fact_ids=fact_ids),) if fact_ids else ()
    batch = ChangeBatch(
        actor=FORGET_ACTOR,
        cause="forget command: what was just said",
        ltm_erase=erase,
        stm_remove=frozenset({last.record_id}),
    )
    return _plan(batch, (last.record_id,), fact_ids, ())


def _topic(
    stm: ShortTermStore, ltm: LongTermStore, search: TopicSearch, user_id: str, topic: str
) -> ForgetPlan:
    keys = topic_keys(topic)
    matcher = TopicMatcher(topic, keys)
    vector = search.embedder.embed_one(search.pii.mask(topic))
    threshold = search.min_similarity

    facts = ltm.facts(filter=LtmFilter(user_id=user_id, include_dead=True))
    close = {
        hit.record.fact_id
        for hit in ltm.similar(user_id=user_id, embedding=vector, min_score=threshold)
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
    fact_ids = frozenset(f.fact_id for f in erased)
    erase = [LtmFilter(user_id=user_id, fact_ids=fact_ids)] if fact_ids else []
    # Audit entries of earlier facts under these keys (gone already) hold values too.
    erase.append(LtmFilter(user_id=user_id, keys=frozenset(keys)))

    source_keys = keys | {f.key for f in erased}
    records = stm.records(filter=StmFilter(user_id=user_id, include_dead=True))
    near = {
        hit.record.record_id
        for hit in stm.similar(user_id=user_id, embedding=vector, min_score=threshold)
    }
    stm_ids = frozenset(
        r.record_id
        for r in records
        if r.record_id in near or matcher.says(r.text) or _in_keys(_topic_of(r), source_keys)
    )
    cause = forget_topic_cause(keys)
    batch = ChangeBatch(actor=FORGET_ACTOR, cause=cause, ltm_erase=tuple(erase), stm_remove=stm_ids)
    return _plan(batch, stm_ids, fact_ids, source_keys)


#: The keys a forget topic may name in an audit cause: the vocabulary's, never words of
#: the command itself (a topic such as "phone 138..." holds the value being erased).
_NAMED_KEYS = frozenset(
    {*PROFILE_KEYS, *(name for name, _ in TOPICS), *(name for name, _ in SAFETY)}
)


def forget_topic_cause(keys: Iterable[str]) -> str:
    """The audit cause of a forget command on a topic: the scope and the vocabulary
    keys the topic names; the topic's own words stay out (they may hold the value)."""
    named = sorted(set(keys) & _NAMED_KEYS)
    return "forget command: topic " + (", ".join(named) if named else "(no known key)")


def plan_event(
    event: Event,
    *,
    stm: ShortTermStore,
    ltm: LongTermStore,
    strategy: Strategy,
    event_id: str | None = None,
) -> ChangeBatch:
    """The strategy's invalidations for one business event (`policy.invalidations_for`).
    STM has no archived state: invalidating a short-lived record removes it. Each LTM
    change's audit cause is its decision's reason (event, time, rule), with the event's
    id on the bus when given."""
    if not any(rule.event == event.name for rule in strategy.events):
        return ChangeBatch(actor=EVENTS_ACTOR)
    records = stm.records(filter=StmFilter(user_id=event.user_id, include_dead=True))
    facts = ltm.facts(filter=LtmFilter(user_id=event.user_id, include_dead=True))
    decisions = invalidations_for(event, records, facts, strategy=strategy)
    archive = {d.record_id for d in decisions if d.layer == "ltm" and d.action is Action.ARCHIVE}
    delete = {d.record_id for d in decisions if d.layer == "ltm" and d.action is Action.DELETE}
    suffix = "" if event_id is None else f", event id {event_id}"
    causes = decision_causes(decisions, suffix)
    return ChangeBatch(
        actor=EVENTS_ACTOR,
        ltm=FactChanges(delete=frozenset(delete), archive=frozenset(archive), causes=causes),
        stm_remove=frozenset(d.record_id for d in decisions if d.layer == "stm"),
    )


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


__all__ = ["ForgetPlan", "TopicMatcher", "TopicSearch", "plan_event", "plan_forget"]
