"""Bilingual (Chinese and English) rule-based intent filter for short-term memory.

An utterance is kept when it carries something a later turn may need: a forget command,
a preference, a profile fact, an instruction or request, or a fact (a date, a number, a
named thing, something that happened or will happen). Everything else (greetings,
thanks, acknowledgements, laughter, small talk, bare emoji) is chit-chat and stays out
of STM, so it is never retrieved in place of what matters ("今天天气真好" next to
"空调不制冷").

Clauses that are pure chit-chat are set aside first: "谢谢！帮我订明天的票" keeps the
request although it opens with thanks. The patterns are compiled once, match lowercased
text without IGNORECASE (three times faster), and English and Chinese rules only run
on text that has Latin letters or CJK characters: the filter sits on every turn.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import TypeVar

from reference.models import MemoryType
from reference.policy.chitchat import chitchat_reason
from reference.policy.entities import named_entity, stated_knowledge
from reference.policy.forget_commands import parse_forget_command
from reference.policy.intent_patterns import HABIT, KINDS_BY_PRIORITY, STABLE
from reference.policy.lexicon import safety_kind, sensitive_word_kind
from reference.policy.remember import explicit_request
from reference.text_interfaces import IntentDecision, IntentFilter

__all__ = [
    "RuleIntentFilter",
    "is_forget_command",
    "is_question",
    "is_stable_preference",
]

T = TypeVar("T")

#: How many texts each memoised rule remembers (least recently used dropped first), and
#: the longest text it remembers: utterances are short, and the bound on memory is then
#: a few megabytes per rule whatever the input.
MEMO_SIZE = 16_384
MEMO_MAX_CHARS = 1_000


def memoised(rule: Callable[[str], T]) -> Callable[[str], T]:
    """`rule`, a pure function of the text, with its answers remembered (see MEMO_SIZE).

    A turn asks the same question about the same text several times (the intent filter,
    fact extraction, promotion), and scripted conversations repeat texts across users.
    """
    remembered = functools.lru_cache(maxsize=MEMO_SIZE)(rule)

    @functools.wraps(rule)
    def answer(text: str) -> T:
        return remembered(text) if len(text) <= MEMO_MAX_CHARS else rule(text)

    return answer


_HAS_CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
_HAS_LATIN = re.compile("[a-z]")

# Separators between clauses. A full stop splits only before a space or the end, so
# "3.5", "No.12" and e-mail addresses stay whole.
_CLAUSE_SPLIT = re.compile(
    r"[,，。!！?？;；~～\n]+|\.+(?=\s|$)|\s+(?:and|but)\s+|然后|另外|还有|顺便"
)
_CONTENT = re.compile(r"[^\W_]")  # letters or digits: not only punctuation and emoji


def _scripts(lower: str) -> tuple[bool, bool]:
    return _HAS_LATIN.search(lower) is not None, _HAS_CJK.search(lower) is not None


def is_stable_preference(text: str, *, remember: bool = True) -> bool:
    """Whether the utterance states a standing default ("always", "默认", "以后都" ...).

    The answer is memoised (process-wide); `remember=False` for text that may hold raw
    PII, which must not outlive the turn in a cache.
    """
    return _is_stable_preference(text) if remember else _stable_preference(text)


def _stable_preference(text: str) -> bool:
    lower = text.lower()
    latin, cjk = _scripts(lower)
    return STABLE.search(lower, latin=latin, cjk=cjk) and parse_forget_command(text) is None


_is_stable_preference = memoised(_stable_preference)


def is_forget_command(text: str) -> bool:
    """Whether the utterance asks to forget something or to reset the conversation.

    The parser in `reference.policy.forget_commands` decides, here and in `classify`, so
    the filter and the command the forgetting engine acts on never disagree.
    """
    return parse_forget_command(text) is not None


class RuleIntentFilter(IntentFilter):
    """Keeps instructions, preferences, profile facts and stated facts; drops chit-chat.

    The kind follows a priority: a forget command is an instruction; otherwise
    preference > profile > instruction > fact, over all clauses of the utterance.
    """

    def classify(self, text: str) -> IntentDecision:
        # Memoised process-wide: callers classify masked text (`ShortTermStore.add`
        # masks first), so no raw PII is kept.
        return _classify(text)


@memoised
def _classify(text: str) -> IntentDecision:
    """`RuleIntentFilter.classify`, memoised (decisions are frozen, so sharing is safe)."""
    stripped = text.strip()
    if not _CONTENT.search(stripped):
        return IntentDecision(False, None, "chit-chat: punctuation or emoji only")
    if parse_forget_command(stripped) is not None:
        return IntentDecision(True, MemoryType.INSTRUCTION, "forget command")
    clauses = [c for c in (p.strip() for p in _CLAUSE_SPLIT.split(stripped)) if c]
    reasons = [chitchat_reason(c) for c in clauses]
    content = "\n".join(c for c, r in zip(clauses, reasons, strict=True) if r is None)
    if content:
        lower = content.lower()
        latin, cjk = _scripts(lower)
        for kind, rule, cased, label in KINDS_BY_PRIORITY:
            if rule.search(lower, latin=latin, cjk=cjk) or (
                cased is not None and latin and cased.search(content)
            ):
                if kind is not MemoryType.INSTRUCTION and is_question(stripped):
                    # "What is my address?" asks for a fact; it does not state one.
                    return IntentDecision(True, MemoryType.INSTRUCTION, "question")
                return IntentDecision(True, kind, label)
    if content:
        # Said to be remembered, or about health and safety: kept whatever its wording.
        if explicit_request(stripped) is not None:
            return IntentDecision(True, MemoryType.FACT, "explicit request to remember")
        if safety_kind(lower) is not None:
            if is_question(stripped):
                return IntentDecision(True, MemoryType.INSTRUCTION, "question")
            return IntentDecision(True, MemoryType.FACT, "health or safety fact")
        if HABIT.search(lower, latin=latin, cjk=cjk) and not is_question(stripped):
            return IntentDecision(True, MemoryType.PREFERENCE, "habit")
        if not is_question(stripped) and (
            named_entity(content) is not None or stated_knowledge(content) is not None
        ):
            return IntentDecision(True, MemoryType.FACT, "named entity or stated knowledge")
        if sensitive_word_kind(lower) is not None and not is_question(stripped):
            # Health, identity or money: kept (and typed `sensitive`, memory_types).
            return IntentDecision(True, MemoryType.FACT, "sensitive disclosure")
    named = [r for r in reasons if r and r != "no content"]
    if named:
        return IntentDecision(False, None, f"chit-chat: {named[0]}")
    return IntentDecision(False, None, "chit-chat: no instruction, preference or fact")


_QUESTION = re.compile(
    r"[?？]\s*$"
    r"|^(?:what|where|when|who|whom|which|how|why|is|are|am|do|does|did|can|could|should|"
    r"would|will)\b"
    r"|[吗呢嘛]\s*[?？]?\s*$|什么|哪里|哪儿|哪个|几点|怎么|多少|是否",
    re.IGNORECASE,
)


def is_question(text: str) -> bool:
    """Whether the utterance asks something (English or Chinese) rather than states it."""
    return bool(_QUESTION.search(text.strip()))
