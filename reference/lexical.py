"""Lexical retrieval, pure: the terms of a text, their ranking, and reciprocal rank fusion.

Both long-term stores call these, so they tokenize, rank and fuse alike (the memory ≡
PostgreSQL conformance tests compare their orders):

- `lexical_terms`: English (any Latin-script text) lower-cased, split on what is not a
  letter or digit, stop words dropped, and each word reduced to its stem by the Snowball
  English stemmer (Porter2: "painting", "paints" and "painted" all give "paint", as
  PostgreSQL's `english` configuration stems them); Chinese segmented by jieba's search
  mode (`cut_for_search`: a long word and the words inside it), stop words dropped.
  PostgreSQL stores the terms as a tsvector (`array_to_tsvector`: exactly these lexemes,
  no parser or dictionary between).
- `lexical_ranking`: candidates sharing at least one query term, scored by the summed
  inverse document frequency (BM25's idf, over the user's searchable facts) of the query
  terms they contain; ties by dense distance, then fact_id.
- `fuse`: reciprocal rank fusion of the dense and the lexical ranking.

jieba (`reference.chinese_words`) loads its dictionary once per process.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Iterable, Sequence

import snowballstemmer

from reference import chinese_words

#: At most this many distinct terms of a query are searched (the first ones said).
MAX_QUERY_TERMS = 32
#: Longer words are no terms: no one searches by them, and PostgreSQL refuses a lexeme
#: of 2 KB or more (a 100-character word is at most 400 bytes of UTF-8).
MAX_TERM_CHARS = 100
#: The reciprocal rank fusion constant (Cormack et al. 2009), the strategies' default.
DEFAULT_RRF_K = 60

_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
# Letters and digits of any script but CJK (split by jieba), and not the underscore.
_WORD = re.compile(f"(?:(?![{_CJK}_])\\w)+")
_ENGLISH_STOP_WORDS = """
    a about above after again all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is
    it its itself just me more most my myself no nor not now of off on once only or other our
    ours ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we
    were what when where which while who whom why will with would you your yours yourself
    yourselves s t d ll m re ve don didn doesn isn wasn aren weren won wouldn shouldn couldn
    hasn haven hadn"""
_ENGLISH_STOP = frozenset(_ENGLISH_STOP_WORDS.split())
_CHINESE_STOP_WORDS = (
    "的 了 是 我 你 他 她 它 们 在 和 与 吗 呢 啊 吧 呀 也 都 就 不 有 这 那 个 一 把 被 给 "
    "让 着 过 很 还 又 要 会 能 说 么 什么 怎么 我们 你们 他们 她们 这个 那个 一个 没有 "
    "就是"
)
_CHINESE_STOP = frozenset(_CHINESE_STOP_WORDS.split())


def lexical_terms(text: str) -> list[str]:
    """The distinct searchable terms of `text`, in order of first appearance."""
    return list(_terms(text))


@functools.lru_cache(maxsize=1 << 14)
def _terms(text: str) -> tuple[str, ...]:
    """`lexical_terms`, remembered: the in-memory store's lexical search reads the terms
    of every candidate fact at each query, and a user's facts repeat from query to
    query (stored texts are masked: no raw PII is remembered here)."""
    seen: dict[str, None] = {}
    position = 0
    lowered = text.lower()
    for run in _CJK_RUN.finditer(lowered):
        _add_words(seen, lowered[position : run.start()])
        for word in chinese_words.segmenter().cut_for_search(run.group()):
            if word not in _CHINESE_STOP and len(word) <= MAX_TERM_CHARS:
                seen.setdefault(word, None)
        position = run.end()
    _add_words(seen, lowered[position:])
    return tuple(seen)


def _add_words(seen: dict[str, None], text: str) -> None:
    for word in _WORD.findall(text):
        if word not in _ENGLISH_STOP and len(word) <= MAX_TERM_CHARS:
            seen.setdefault(_stem(word), None)


_STEMMER = snowballstemmer.stemmer("english")


@functools.lru_cache(maxsize=1 << 16)
def _stem(word: str) -> str:
    """The Snowball English stem of a lower-cased word (a vocabulary repeats: cached, as
    the pure-Python stemmer takes ~40 µs a word)."""
    return str(_STEMMER.stemWord(word))


def query_terms(text: str) -> list[str]:
    """The terms a query searches: its first `MAX_QUERY_TERMS` distinct terms."""
    return lexical_terms(text)[:MAX_QUERY_TERMS]


def lexical_matches(
    terms: Sequence[str], texts: Iterable[tuple[str, str]]
) -> list[tuple[str, list[str]]]:
    """(id, the query terms its text holds) of each (id, text) holding one."""
    out = []
    for ident, text in texts:
        found = set(lexical_terms(text))
        held = [term for term in terms if term in found]
        if held:
            out.append((ident, held))
    return out


def idf(total: int, containing: int) -> float:
    """BM25's inverse document frequency of a term in `containing` of `total` facts."""
    return math.log(1.0 + (total - containing + 0.5) / (containing + 0.5))


def lexical_ranking(
    terms: Sequence[str],
    matches: Iterable[tuple[str, Iterable[str]]],
    *,
    total: int,
    limit: int,
    dense: Sequence[str] = (),
) -> list[str]:
    """The fact_ids of the best `limit` lexical candidates, best first.

    `matches` holds each candidate as (fact_id, the query terms its text holds); `total`
    is how many facts were searchable. A candidate scores the sum of the idf of its
    terms, summed in query order (every backend gets the same bits); ties go to the one
    earlier in the `dense` ranking (one absent from it comes after), then by fact_id.
    """
    candidates = [(fact_id, frozenset(found)) for fact_id, found in matches]
    containing = {term: 0 for term in terms}
    for _, found in candidates:
        for term in found:
            if term in containing:
                containing[term] += 1
    weight = {term: idf(max(total, n), n) for term, n in containing.items()}
    dense_rank = {fact_id: rank for rank, fact_id in enumerate(dense)}
    scored = []
    for fact_id, found in candidates:
        score = 0.0
        for term in terms:
            if term in found:
                score += weight[term]
        if score > 0.0:
            scored.append((-score, dense_rank.get(fact_id, len(dense)), fact_id))
    scored.sort()
    return [fact_id for _, _, fact_id in scored[:limit]]


def fuse(rankings: Sequence[Sequence[str]], *, rrf_k: int) -> list[tuple[str, float]]:
    """Reciprocal rank fusion: each id scores the sum of 1 / (rrf_k + rank) over the
    rankings it is in (rank from 1); best first, ties by the id's rank in the first
    ranking that holds it, then by that ranking's position, then by id."""
    scores: dict[str, float] = {}
    first_seen: dict[str, tuple[int, int]] = {}
    for which, ranking in enumerate(rankings):
        for rank, ident in enumerate(ranking, start=1):
            scores[ident] = scores.get(ident, 0.0) + 1.0 / (rrf_k + rank)
            first_seen.setdefault(ident, (rank, which))
    return sorted(scores.items(), key=lambda item: (-item[1], first_seen[item[0]], item[0]))


def lexical_pool(k: int) -> int:
    """How deep each ranking goes before fusion, for a top-`k`."""
    return min(1000, max(50, 10 * k))
