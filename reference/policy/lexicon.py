"""The words the text rules key on, and how a text is matched against them.

The vocabularies themselves (preference topics, profile attributes, health and safety)
are in `reference.policy.vocabulary`.

How words match:

- **English**: whole words. An entry matches at a word boundary on both sides, with an
  optional plural ("seat" finds "seats"); an entry ending in `*` is a stem ("allerg*"
  finds "allergic", "allergies"); a phrase's words are separated by any whitespace.
  So "friendship" is not shipping, "team" and "instead" are no tea, and "reminds me of"
  is no notification (the entry is "remind me").
- **Chinese**: by segmentation, not substring. The text is cut by forward maximum
  matching over every lexicon word plus a list of compounds that contain one
  (`vocabulary.ZH_COMPOUNDS`: "茶几" is furniture, "编程语言" no language preference, "不过敏感"
  reads 不过|敏感): a word counts only where it is a segment of its own.

Forgetting matches more widely on purpose (`TopicMatcher` in `forgetting.forgetter`):
removing a little too much is safe, keeping what the user asked to forget is not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from reference.policy.type_vocabulary import SENSITIVE
from reference.policy.vocabulary import PROFILE_KEYS, SAFETY, TOPICS, ZH_COMPOUNDS

__all__ = [
    "Lexicon",
    "WordSet",
    "first_topic",
    "key_family",
    "safety_kind",
    "safety_word",
    "scoped_key",
    "segments",
    "sensitive_word_kind",
    "slug",
]


def _latin_body(word: str) -> str:
    """An entry without its boundaries: the words, then a plural or a stem's ending."""
    stem = word.endswith("*")
    body = r"\s+".join(re.escape(part) for part in word.rstrip("*").split())
    return body + (r"[a-z]*" if stem else r"(?:s|es)?")


def _latin_pattern(word: str) -> str:
    return rf"(?<![a-z0-9]){_latin_body(word)}(?![a-z0-9])"


class WordSet:
    """A set of lexicon words (English and Chinese) and where a text mentions one."""

    __slots__ = ("_cjk", "_latin")

    def __init__(self, words: Iterable[str]) -> None:
        words = [w.strip().lower() for w in words if w.strip()]
        latin = sorted({w for w in words if w.isascii()}, key=len, reverse=True)
        self._cjk = frozenset(w for w in words if not w.isascii())
        self._latin = re.compile("|".join(_latin_pattern(w) for w in latin)) if latin else None

    def first(self, lower: str) -> int | None:
        """Where the first mention starts in lowercased text, or None."""
        best: int | None = None
        if self._latin is not None and (m := self._latin.search(lower)):
            best = m.start()
        if self._cjk and _HAS_CJK.search(lower):
            for start, word in segments(lower):
                if word in self._cjk:
                    best = start if best is None else min(best, start)
                    break
        return best

    def search(self, lower: str) -> bool:
        """Whether lowercased text mentions any of the words."""
        return self.first(lower) is not None


_HAS_CJK = re.compile("[\u3400-\u9fff\uf900-\ufaff]")
_HAS_LATIN = re.compile("[a-z]")


def _vocabulary() -> tuple[frozenset[str], int]:
    words = {w for _, ws in (*TOPICS, *SAFETY, *SENSITIVE) for w in ws if not w.isascii()}
    words.update(w for ws in PROFILE_KEYS.values() for w in ws if not w.isascii())
    words.update(ZH_COMPOUNDS)
    return frozenset(words), max(len(w) for w in words)


_VOCABULARY, _LONGEST = _vocabulary()
_FIRST_CHARS = frozenset(w[0] for w in _VOCABULARY)


def segments(lower: str) -> tuple[tuple[int, str], ...]:
    """The lexicon words that are segments of the text, with their start, in order.

    Forward maximum matching: at each position the longest vocabulary word starting
    there is a segment, and the scan goes on after it; a position where none starts is
    skipped. Only lexicon words and their blocking compounds are known, which is all
    the rules ask: whether a lexicon word stands on its own. Not memoised: callers pass
    raw utterances, whose PII no process-wide cache may keep.
    """
    found: list[tuple[int, str]] = []
    i, n = 0, len(lower)
    while i < n:
        if lower[i] not in _FIRST_CHARS:
            i += 1
            continue
        for size in range(min(_LONGEST, n - i), 0, -1):
            piece = lower[i : i + size]
            if piece in _VOCABULARY:
                found.append((i, piece))
                i += size
                break
        else:
            i += 1
    return tuple(found)


class Lexicon:
    """Named groups of words (`TOPICS`, `SAFETY`), matched in one pass.

    One regex holds every English entry and one segmentation finds every Chinese one,
    so a text is scanned once whatever the number of groups; the earliest entry (in
    the order given) that the text mentions decides.
    """

    __slots__ = ("_any_latin", "_cjk", "_entries", "_latin")

    def __init__(self, groups: Iterable[tuple[str, Iterable[str]]]) -> None:
        self._entries = tuple(
            (name, word.strip().lower()) for name, words in groups for word in words
        )
        latin = [(i, w) for i, (_, w) in enumerate(self._entries) if w.isascii()]
        latin.sort(key=lambda item: -len(item[1]))  # the longest entry at a position wins
        # Boundaries outside the alternation: each word start is tried once, not per entry.
        # Entries grouped by their first letter: a word start tries only its letter's.
        by_initial: dict[str, list[str]] = {}
        for i, w in latin:
            by_initial.setdefault(w[0], []).append(f"(?P<w{i}>{_latin_body(w)})")
        branches = "|".join(
            f"(?={re.escape(initial)})(?:{'|'.join(alts)})" for initial, alts in by_initial.items()
        )
        self._latin = re.compile(rf"(?<![a-z0-9])(?:{branches})(?![a-z0-9])")
        self._any_latin = bool(latin)
        cjk: dict[str, int] = {}
        for i, (_, word) in enumerate(self._entries):
            if not word.isascii():
                cjk.setdefault(word, i)
        self._cjk = cjk

    def first(self, lower: str) -> tuple[str, str] | None:
        """(group, entry) of the earliest entry the lowercased text mentions, or None.

        A stem is given without its `*`: ("condition", "diabet").
        """
        best = len(self._entries)
        if self._any_latin and _HAS_LATIN.search(lower):
            for match in self._latin.finditer(lower):
                if match.lastgroup is not None:
                    best = min(best, int(match.lastgroup[1:]))
        if self._cjk and _HAS_CJK.search(lower):
            for _, word in segments(lower):
                best = min(best, self._cjk.get(word, best))
        if best == len(self._entries):
            return None
        name, word = self._entries[best]
        return name, word.rstrip("*")


_TOPIC_LEXICON = Lexicon(TOPICS)
_SAFETY_LEXICON = Lexicon(SAFETY)
_SENSITIVE_LEXICON = Lexicon(SENSITIVE)


def first_topic(lower: str) -> str | None:
    """The first preference topic (in `TOPICS` order) the lowercased text names, or None."""
    found = _TOPIC_LEXICON.first(lower)
    return None if found is None else found[0]


def safety_kind(lower: str) -> str | None:
    """The health or safety kind the text names ("allergy", "medication", ...), or None."""
    found = _SAFETY_LEXICON.first(lower)
    return None if found is None else found[0]


def safety_word(lower: str) -> tuple[str, str] | None:
    """The first health or safety kind the text names, with the lexicon word that named
    it (stems without their `*`): ("condition", "diabet"), ("allergy", "过敏")."""
    return _SAFETY_LEXICON.first(lower)


def sensitive_word_kind(lower: str) -> str | None:
    """The sensitive kind ("health", "identity", "financial") a word of the lowercased
    text names (`type_vocabulary.SENSITIVE`), or None. Health also counts the `SAFETY`
    kinds allergy, medication and condition: `reference.policy.memory_types`."""
    found = _SENSITIVE_LEXICON.first(lower)
    return None if found is None else found[0]


# --- keys ---------------------------------------------------------------------------

_SLUG_GAPS = re.compile(r"[^\w]+")


def slug(text: str) -> str:
    """Lowercased words joined by underscores: a piece of a key."""
    return _SLUG_GAPS.sub("_", text.strip().lower()).strip("_")


def scoped_key(key: str, speaker: str) -> str:
    """`key` as said by `speaker`: "address@caroline". Facts of different speakers in one
    conversation then never share a key, so neither supersedes the other."""
    name = slug(speaker)
    return f"{key}@{name}" if name else key


def key_family(key: str) -> str:
    """The key without its speaker and its object: "allergy:peanut@caroline" -> "allergy".

    Forget commands and events name families ("forget my allergies" -> "allergy").
    """
    return key.split("@", 1)[0].split(":", 1)[0]
