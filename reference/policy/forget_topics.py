"""The LTM keys a forget topic names ("地址" -> address), from the lexicon's words."""

from __future__ import annotations

import re

from reference.errors import InvalidInput
from reference.policy.field_keys import parse_field
from reference.policy.lexicon import WordSet
from reference.policy.vocabulary import PROFILE_KEYS, SAFETY, TOPICS

_SPACES = re.compile(r"\s+")

# "number" alone is a phone number, but inside a topic it is often another one ("card
# number", "order number"), so it only counts as the whole topic.
_WHOLE_TOPIC_ONLY = frozenset({"number"})
_ALL_PROFILE = frozenset({"profile", "personal details", "个人资料", "资料"})
_ALL_PREFERENCES = frozenset({"preference", "preferences", "偏好", "喜好"})
_TOPIC_DETERMINER = re.compile(r"^(?:(?:my|the|your|our|all(?: of)?|any)\s+|我的|关于)")


def topic_keys(topic: str) -> set[str]:
    """The LTM keys a forget topic names: "地址" -> {"address"}, "preferences" -> all topics.

    Synonyms come from `reference.policy.vocabulary`, so a topic maps to the key its facts were
    promoted under (a health or safety kind names the family of its keys: "allergies"
    -> "allergy", which covers "allergy:peanut"). Unless the topic is itself a synonym,
    the keys also hold the one promotion gives "my <topic> is ..." (spaces as
    underscores): "passport number" finds the fact `passport_number`.
    """
    if not isinstance(topic, str) or not topic.strip():
        raise InvalidInput("topic", "must be a non-empty string")
    norm = _SPACES.sub(" ", topic.strip().lower())
    while (shorter := _TOPIC_DETERMINER.sub("", norm)) != norm:
        norm = shorter
    norm = norm or topic.strip().lower()
    field = parse_field(norm)  # "my home address" -> address, "收货地址" -> delivery_address
    if field is not None:
        return {field.field if field.qualifier is None else field.key}
    for key, synonyms in PROFILE_KEYS.items():
        if norm == key or norm in synonyms:
            return {key}
    if norm in _ALL_PROFILE:
        return set(PROFILE_KEYS)
    if norm in _ALL_PREFERENCES:
        return {name for name, _ in TOPICS}
    keys = profile_keys_in(norm)
    keys.update(name for name, words in _TOPIC_WORDS if name == norm or words.search(norm))
    keys.update(name for name, words in _SAFETY_WORDS if name == norm or words.search(norm))
    # Always the key promotion gives "my <topic> is ...": "我的默认地址是..." is stored under
    # "默认地址", not "address".
    keys.add(_SPACES.sub("_", norm))
    return keys


_TOPIC_WORDS = tuple((name, WordSet(words)) for name, words in TOPICS)
_SAFETY_WORDS = tuple((name, WordSet(words)) for name, words in SAFETY)
_PROFILE_WORDS = tuple(
    (key, WordSet(s for s in synonyms if s not in _WHOLE_TOPIC_ONLY))
    for key, synonyms in PROFILE_KEYS.items()
)


def profile_keys_in(text: str) -> set[str]:
    """The profile keys whose synonyms the text mentions ("my home address" -> address)."""
    return {key for key, words in _PROFILE_WORDS if words.search(text)}
