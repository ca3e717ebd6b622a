"""Promotion: which short-term utterances become long-term facts, under which key, and
how important each is when first said.

Promoted when first said: a stable default ("always", "by default", "默认", ...); a
declared profile fact ("my address is ...", "I moved to ...", "我的地址是...", "我住在...");
an explicit request to remember ("remember that ...", "please note ...", "记住...",
"请记下..."); a health or safety fact (allergies, medication, conditions and
disabilities, emergency contacts, in both languages); a named entity ("my dentist is
Dr. Lee", "我的经理叫王伟": category `entity`) and stated knowledge ("our return policy
is 30 days": category `knowledge`), both from `reference.policy.memory_types`. Anything
else once the user repeats it in short-term memory.

Which category, the first that holds: a health or safety fact (`fact`), a named entity
(`entity`), a profile statement (`profile`), stated knowledge (`knowledge`), a
preference, an explicit request (`fact`).

The key decides what a newer statement supersedes:

- "my X is Y" / "我的X是Y" key on X, and so do restated values: "my new address is",
  "my address is now", "my address has changed to", "I moved to", "I live in", "我的新
  地址是", "我现在的地址是", "我搬到了", "我住在" all key on `address`. Address, phone and
  e-mail are qualified fields keyed by `reference.policy.field_keys`: "my delivery
  address" and "收货地址" key on `delivery_address`, "my home address" and "家庭住址" on
  `address` (an unqualified address is the home one), "工作电话" on `work_phone`;
- a named entity keys on its role (`dentist`, `manager`, `dog`), knowledge on its
  subject (`return_policy`, `退货政策`);
- preferences key on the topic the lexicon (`reference.policy.lexicon`) finds first, so "I
  prefer window seats" and later "I prefer aisle seats" share `seat`;
- health and safety facts key on their kind and object: `allergy:peanut`,
  `medication:insulin`, `condition:diabet`, `emergency_contact`;
- an explicit "remember that the X is Y" keys on X; anything else on a fingerprint of
  the statement, which only the same statement shares;
- with a speaker (a conversation between people, as LoCoMo's), every key is scoped by
  the speaker (`address@caroline`): two speakers' facts never supersede each other.

The initial importance follows R10 (docs/requirements.md) (a score from keywords and intent):
`IMPORTANCE_SAFETY` for health and safety, `IMPORTANCE_EXPLICIT` for an explicit request,
the stores' default otherwise.
"""

from __future__ import annotations

import functools
import hashlib
import re
from dataclasses import dataclass, replace

from reference.errors import InvalidInput
from reference.models import Category, MemoryType
from reference.policy.entities import named_entity, stated_knowledge
from reference.policy.field_keys import parse_field
from reference.policy.intent import MEMO_MAX_CHARS, MEMO_SIZE, is_question, is_stable_preference
from reference.policy.lexicon import first_topic, safety_word, scoped_key, slug
from reference.policy.remember import explicit_request
from reference.policy.vocabulary import PROFILE_KEYS, TOPICS

__all__ = [
    "DEFAULT_IMPORTANCE",
    "IMPORTANCE_EXPLICIT",
    "IMPORTANCE_SAFETY",
    "PROFILE_KEYS",
    "TOPICS",
    "FactCandidate",
    "extract_fact",
    "should_promote",
]

#: The stores' default importance, which every other statement keeps.
DEFAULT_IMPORTANCE = 5.0
#: "Remember that ...": the user said it matters.
IMPORTANCE_EXPLICIT = 9.0
#: Allergies, medication, conditions, emergency contacts: losing them can do harm.
IMPORTANCE_SAFETY = 10.0


@dataclass(frozen=True, slots=True)
class FactCandidate:
    """A structured fact proposed for long-term memory, with its initial importance."""

    category: Category
    key: str
    value: str
    importance: float = DEFAULT_IMPORTANCE

    @property
    def urgent(self) -> bool:
        """Promoted when first said: an explicit request or a health and safety fact."""
        return self.importance > DEFAULT_IMPORTANCE

    @property
    def kind(self) -> MemoryType:
        """The memory type that makes `extract_fact` take this candidate's path again."""
        return MemoryType(self.category.value)


def extract_fact(
    text: str,
    kind: MemoryType | None,
    *,
    remember: bool = True,
    speaker: str | None = None,
) -> FactCandidate | None:
    """The fact an utterance states, with the key a newer statement would supersede.

    `speaker`, when the conversation names who said it, scopes the key (see the module
    docstring). Memoised as the intent rules are (`reference.policy.intent.memoised`): a turn
    extracts from the same text more than once, and candidates are frozen.
    `remember=False` for text that may hold raw PII (the unmasked utterance), which no
    process-wide cache may keep.
    """
    if speaker is not None and (not isinstance(speaker, str) or not speaker.strip()):
        raise InvalidInput("speaker", f"must be a non-empty string or None, got {speaker!r}")
    if remember and len(text) <= MEMO_MAX_CHARS:
        return _extract_remembered(text, kind, speaker)
    return _extract(text, kind, speaker, remember=remember)


def _extract(
    text: str, kind: MemoryType | None, speaker: str | None = None, *, remember: bool = True
) -> FactCandidate | None:
    candidate = _unscoped(text, kind, remember=remember)
    if candidate is None or speaker is None:
        return candidate
    return replace(candidate, key=scoped_key(candidate.key, speaker))


# typed: MemoryType.FACT == "fact", but only the member takes the `is` paths below.
_extract_remembered = functools.lru_cache(maxsize=MEMO_SIZE, typed=True)(_extract)


def should_promote(
    text: str,
    kind: MemoryType | None,
    *,
    said_before: bool,
    candidate: FactCandidate | None = None,
) -> bool:
    """Stable when repeated, stated as a default, a declared profile fact ("my X is Y"),
    a named entity or stated knowledge (`candidate`'s category), or urgent (`candidate`
    is an explicit request or a health and safety fact)."""
    return (
        said_before
        or kind is MemoryType.PROFILE
        or (candidate is not None and (candidate.urgent or candidate.category in _DECLARED))
        or is_stable_preference(text)
    )


#: Categories promoted when first said, as a declared profile fact is.
_DECLARED = frozenset({Category.ENTITY, Category.KNOWLEDGE})
#: The intent kinds (and STM types) whose statements without a key get a fingerprint key.
_STATED = frozenset(
    {
        MemoryType.PROFILE,
        MemoryType.FACT,
        MemoryType.SENSITIVE,
        MemoryType.ENTITY,
        MemoryType.KNOWLEDGE,
    }
)


def _unscoped(text: str, kind: MemoryType | None, *, remember: bool) -> FactCandidate | None:
    stripped = _trim(text)
    body = explicit_request(stripped)
    asked = body is None and is_question(text)
    statement = stripped if body is None else _trim(body)
    importance = DEFAULT_IMPORTANCE if body is None else IMPORTANCE_EXPLICIT
    if not asked:
        safety = _safety_key(statement)
        if safety is not None:
            return FactCandidate(Category.FACT, safety, statement, IMPORTANCE_SAFETY)
        entity = named_entity(statement)
        if entity is not None:
            return FactCandidate(Category.ENTITY, entity[0], entity[1], importance)
    profile = _profile(statement, asked=asked)
    if profile is not None:
        return FactCandidate(Category.PROFILE, profile[0], profile[1], importance)
    if not asked:
        knowledge = stated_knowledge(statement)
        if knowledge is not None:
            return FactCandidate(Category.KNOWLEDGE, knowledge[0], knowledge[1], importance)
    if kind is MemoryType.PREFERENCE or is_stable_preference(statement, remember=remember):
        return FactCandidate(Category.PREFERENCE, _topic(statement), statement, importance)
    if body is not None:
        named = _THE_X_IS_EN.match(statement) or _THE_X_IS_ZH.match(statement)
        key = slug(named.group(1)) if named else _fingerprint(statement)
        return FactCandidate(Category.FACT, key or _fingerprint(statement), statement, importance)
    if kind in _STATED:
        return FactCandidate(Category.FACT, _fingerprint(statement), statement)
    return None


def _trim(text: str) -> str:
    return text.strip().rstrip("。.!！")


# --- profile ------------------------------------------------------------------------

_MY_X_IS_EN = re.compile(r"\bmy ([a-z][a-z ]{1,30}?) (?:is|are|was|=) (.+)", re.IGNORECASE)
_MY_X_CHANGED_EN = re.compile(
    r"\bmy ([a-z][a-z ]{1,30}?) (?:has |have )?(?:changed|switched|moved) to (.+)", re.IGNORECASE
)
_MY_X_IS_ZH = re.compile(
    r"我(?:的(?:新的?|现在的?|目前的?|最新的?|当前的?)?|(?:新|现在|目前|最新|当前)的)"
    r"([\u4e00-\u9fff]{1,8}?)(?:是|为|叫|改成了?|换成了?|变成了?|改为|换为|变为)(.+)"
)
# Where the user lives now: a clause of its own, so "when I was ten I moved to Sweden"
# is history, not an address.
_RESIDENCE_EN = re.compile(
    r"(?:(?:so|and|well|actually|also|just|btw|yes|yeah|oh|hi|hey|recently|last \w+)\s+)*"
    r"(?:i|we)(?:'ve| have)?(?: just| recently| finally| now| currently| also)?"
    r" (?:moved (?:house |home )?to|relocated to|live (?:in|at|on)|am living in|'m living in"
    r"|are living in|'re living in) (.+)$",
    re.IGNORECASE,
)
_RESIDENCE_ZH = re.compile(
    r"(?:我们?|我家)(?:现在|目前|已经|刚|刚刚|最近)?(?:住在|搬到了?|搬家到了?|搬去了?|搬家去了?)(.+)$"
)
_CLAUSE = re.compile(r"[,，.;；!！?？。]+\s*")
_SUBJECT_MODIFIER = re.compile(r"^(?:new|current|updated|latest|present|correct|actual)\s+")
_ZH_SUBJECT_MODIFIER = re.compile("^(?:新的?|现在的?|目前的?|最新的?|当前的?)")
_VALUE_LEAD = re.compile(r"^(?:now|actually|currently|still)\s+", re.IGNORECASE)


def _profile(statement: str, *, asked: bool) -> tuple[str, str] | None:
    """(key, value) of a profile statement, or None.

    A question keeps today's reading of "my X is" (the STM record is tagged with the
    key a probe asks about) but never a residence.
    """
    for pattern in (_MY_X_IS_EN, _MY_X_CHANGED_EN):
        match = pattern.search(statement)
        if match:
            subject = _SUBJECT_MODIFIER.sub("", match.group(1).strip().lower())
            return _profile_key(subject), _VALUE_LEAD.sub("", match.group(2).strip())
    match = _MY_X_IS_ZH.search(statement)
    if match:
        subject = _ZH_SUBJECT_MODIFIER.sub("", match.group(1)) or match.group(1)
        return _profile_key(subject), match.group(2).strip()
    if asked:
        return None
    # A clause must start the statement; the value runs to its end ("7 Harbour Lane, Brighton").
    for start in (0, *(m.end() for m in _CLAUSE.finditer(statement))):
        match = _RESIDENCE_EN.match(statement, start) or _RESIDENCE_ZH.match(statement, start)
        if match:
            value = match.group(1).strip().rstrip("了啦")
            if value:
                return "address", value
    return None


def _profile_key(subject: str) -> str:
    field = parse_field(subject)  # address, phone, e-mail and their qualifiers
    if field is not None:
        return field.key
    for key, synonyms in PROFILE_KEYS.items():
        if subject in synonyms:
            return key
    return re.sub(r"\s+", "_", subject)


# --- health and safety --------------------------------------------------------------

_ALLERGEN_EN = re.compile(
    r"allergic to (?:the |all |any |some |most |many )?([a-z][a-z -]{0,30}?)"
    r"(?=$|[,.;:!?)]| and | but | so | which | because | too| as well| since)"
)
_ALLERGY_OF_EN = re.compile(r"\b([a-z][a-z-]{1,20}) allerg(?:y|ies)\b")
_ALLERGEN_ZH = (
    re.compile(r"对([\u4e00-\u9fffa-z]{1,10}?)(?:严重|有点|有些|非常|很|特别)?过敏"),
    re.compile(r"我(?:有)?([\u4e00-\u9fff]{1,6}?)过敏"),
)
_NOT_AN_OBJECT = frozenset(
    ("a", "an", "the", "my", "any", "no", "some", "severe", "bad", "mild", "serious", "food")
)
_DRUG_EN = re.compile(
    r"\b(?:i|i'm|i am)\s+(?:on|taking|take|use|using|need)\s+(?:my\s+|a\s+|an\s+|daily\s+)?"
    r"([a-z][a-z-]{2,30})"
)
_DRUG_ZH = re.compile(r"(?:服用|在吃|吃|打|用)([\u4e00-\u9fffa-z]{1,8}?(?:药|素|片|胶囊|针))")
_GENERIC_DRUG = frozenset(
    [
        "medication",
        "medications",
        "medicine",
        "medicines",
        "meds",
        "pills",
        "pill",
        "drugs",
        "prescription",
        "prescribed",
        "药物",
        "服用",
        "吃药",
        "处方药",
        "用药",
    ]
) | {"my medicine"}


def _safety_key(statement: str) -> str | None:
    lower = statement.lower()
    found = safety_word(lower)
    if found is None:
        return None
    kind, word = found
    if kind == "emergency_contact":
        return kind
    if kind == "allergy":
        obj = _allergen(lower)
        return f"allergy:{obj}" if obj else "allergy"
    if kind == "medication":
        match = _DRUG_EN.search(lower) or _DRUG_ZH.search(lower)
        drug = match.group(1) if match else ""
        if not drug or drug in _GENERIC_DRUG:
            drug = word if word not in _GENERIC_DRUG and " " not in word else ""
        return f"medication:{_object(drug)}" if drug else f"medication:{_fingerprint(lower)}"
    return f"{kind}:{slug(word)}"


def _allergen(lower: str) -> str:
    match = _ALLERGEN_EN.search(lower)
    if match and match.group(1).strip() not in _NOT_AN_OBJECT:
        return _object(match.group(1))
    match = _ALLERGY_OF_EN.search(lower)
    if match and match.group(1) not in _NOT_AN_OBJECT:
        return _object(match.group(1))
    for pattern in _ALLERGEN_ZH:
        match = pattern.search(lower)
        if match:
            return _object(match.group(1))
    return ""


def _object(text: str) -> str:
    """A key piece for an allergen or a drug: "Peanuts" -> "peanut"."""
    words = slug(text)[:40]
    if words.isascii() and len(words) > 3 and words.endswith("s") and not words.endswith("ss"):
        words = words[:-1]
    return words


# --- keys ---------------------------------------------------------------------------

_THE_X_IS_EN = re.compile(r"^(?:the|my|our) ([a-z][a-z ]{1,30}?) (?:is|are|=) ", re.IGNORECASE)
_THE_X_IS_ZH = re.compile(r"^(?:我的|我们的|家里的?)?([\u4e00-\u9fff]{2,8}?)(?:是|为)")


def _topic(text: str) -> str:
    return first_topic(text.lower()) or _fingerprint(text)


def _fingerprint(text: str) -> str:
    """A key that only the same statement shares (so unrelated facts never supersede)."""
    normal = re.sub(r"\W+", " ", text.lower()).strip()
    return "stmt_" + hashlib.blake2b(normal.encode(), digest_size=6).hexdigest()
