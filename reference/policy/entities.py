"""Named entities and stated knowledge a statement introduces, by plain rules over the
words of `reference.policy.type_vocabulary` (what they are and how they are stored:
`reference.policy.memory_types`)."""

from __future__ import annotations

import re

from reference.policy.lexicon import slug
from reference.policy.type_vocabulary import ENTITY_ROLES, KNOWLEDGE_NOUNS

__all__ = ["named_entity", "stated_knowledge"]

# --- entities -----------------------------------------------------------------------

_ROLES: dict[str, str] = {word: role for role, words in ENTITY_ROLES for word in words}
_EN_ROLE_WORDS = "|".join(
    sorted((re.escape(w) for w in _ROLES if w.isascii()), key=len, reverse=True)
)
_ZH_ROLE_WORDS = "|".join(
    sorted((re.escape(w) for w in _ROLES if not w.isascii()), key=len, reverse=True)
)
_TITLE = r"(?:(?:Dr|Mr|Mrs|Ms|Miss|Prof|Doctor)\.?\s+)"
# A name as said, or as the PII masker left it ("J** S**", "王**": `reference.pii`).
_EN_NAME = (
    rf"(?:{_TITLE}?[A-Z][a-z][A-Za-z'-]*(?:\s+[A-Z][a-z][A-Za-z'-]*)?|[\u4e00-\u9fff]{{2,4}}"
    r"|[A-Z]\*+(?:\s+[A-Z]\*+)?|[\u4e00-\u9fff]{1,2}\*+)"
)
_MODIFIER = r"(?:(?i:new|current|old|family|regular|usual)\s+)?"
# "my dentist is Dr. Lee", "my dog's name is Max", "my manager is called John Smith".
_ENTITY_IS_EN = re.compile(
    rf"\b(?i:my)\s+{_MODIFIER}(?i:({_EN_ROLE_WORDS}))(?:'s name)?\s+"
    rf"(?i:is|was|=|is called|is named|'s called)\s+({_EN_NAME})(?=$|[\s,.;:!?])"
)
# "my dog Max loves walks", "my manager John said ..."
_ENTITY_APPOSITION_EN = re.compile(
    rf"\b(?i:my)\s+{_MODIFIER}(?i:({_EN_ROLE_WORDS}))(?:,\s*|\s+)({_TITLE}?[A-Z][a-z][A-Za-z'-]*)\b"
)
_ZH_NOT_A_NAME = "个一很挺不太真好非特最有在也都没还"
_ENTITY_ZH = re.compile(
    rf"(?:我的|我家的?|我们家的?|我们的)(?:新|现在的)?({_ZH_ROLE_WORDS})"
    rf"(?:叫做?|是|名叫|名字叫|名字是)([^{_ZH_NOT_A_NAME}\W\d][\u4e00-\u9fffA-Za-z*]{{1,5}})"
    r"(?=$|[，,。.!！；;\s])"
)
_NOT_A_NAME_EN = frozenset({"Is", "Was", "And", "But", "The", "My", "He", "She", "It"})


def named_entity(statement: str) -> tuple[str, str] | None:
    """(role, name) of a named entity the statement introduces, or None."""
    for pattern in (_ENTITY_IS_EN, _ENTITY_ZH, _ENTITY_APPOSITION_EN):
        match = pattern.search(statement)
        if match is not None and match.group(2) not in _NOT_A_NAME_EN:
            return _ROLES[match.group(1).lower()], match.group(2).strip()
    return None


# --- knowledge ----------------------------------------------------------------------

_EN_NOUNS = "|".join(
    sorted((re.escape(n) for n in KNOWLEDGE_NOUNS if n.isascii()), key=len, reverse=True)
)
_ZH_NOUNS = "|".join(
    sorted((re.escape(n) for n in KNOWLEDGE_NOUNS if not n.isascii()), key=len, reverse=True)
)
_KNOWLEDGE_EN = re.compile(
    r"^(?:the|our|(?:our|the|my) (?:company|team|firm|office|store|shop)'s)\s+"
    rf"((?:[a-z0-9][a-z0-9-]*\s+){{0,4}}(?:{_EN_NOUNS}))\s+(?:is|are)\s+(.+)",
    re.IGNORECASE,
)
_KNOWLEDGE_ZH = re.compile(
    r"^(?:我们公司|我们团队|我们|我司|本公司|公司|团队|店里|我们店)?的?"
    rf"([\u4e00-\u9fffA-Za-z0-9]{{0,10}}?(?:{_ZH_NOUNS}))(?:是|为|：|:)(.+)"
)


def stated_knowledge(statement: str) -> tuple[str, str] | None:
    """(key, value) of knowledge the statement states, or None."""
    match = _KNOWLEDGE_EN.match(statement) or _KNOWLEDGE_ZH.match(statement)
    if match is None:
        return None
    key = slug(match.group(1).replace("的", ""))
    value = match.group(2).strip()
    return (key, value) if key and value else None
