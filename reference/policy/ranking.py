"""Ranking: recency decay over retrieval hits (over-fetch, e.g. 3k by similarity, then
rerank to k)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TypeVar

from reference.models import Fact, Hit, MemoryRecord
from reference.policy.decisions import Memory, written_at
from reference.policy.rules import DAY_S, DecayRule
from reference.policy.strategy import Strategy
from reference.validation import check_k, check_timestamp

R = TypeVar("R", MemoryRecord, Fact)


def rerank(hits: Sequence[Hit[R]], *, strategy: Strategy, now: float, k: int) -> list[Hit[R]]:
    """The top `k` hits after recency decay; without a decay rule, `hits[:k]` unchanged.

    A hit's score becomes similarity * exp(-lambda * age_days) (a negative similarity is
    divided instead, so age never helps); a hit the rule's `types` and `layers` leave
    out keeps its score. Ties keep the input order.
    """
    check_k("k", k)
    now = check_timestamp("now", now)
    rule = strategy.decay
    if rule is None:
        return list(hits[:k])
    everywhere = rule.everywhere
    decayed = []
    for hit in hits:
        record = hit.record
        if not everywhere and not rule.covers(
            record.category if isinstance(record, Fact) else record.type
        ):
            decayed.append(hit)
            continue
        factor = recency_factor(rule, record, now)
        if hit.score >= 0:
            score = hit.score * factor
        else:
            score = hit.score / factor if factor > 0 else -math.inf
        decayed.append(Hit(record=record, score=score))
    decayed.sort(key=lambda hit: -hit.score)  # stable: ties keep the store's order
    return decayed[:k]


def recency_factor(rule: DecayRule, record: Memory, now: float) -> float:
    """exp(-lambda * age_days), the age from the write or the last access (`age_from`)."""
    since = record.last_accessed_at if rule.age_from == "last_access" else written_at(record)
    age_days = max(0.0, now - since) / DAY_S
    return math.exp(-rule.lambda_per_day * age_days)
