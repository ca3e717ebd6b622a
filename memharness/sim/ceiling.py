"""The retrieval ceiling: what a plain dense search could find at all.

For each probe, the user's said turns up to the probe's moment (every `say`, whether or
not the memory kept it: no forgetting, no intent filter, no session scope) are ranked by
cosine similarity to the query with the run's own embedder, and the facts of the top-k
turns count as found. The ceiling is the share of needed facts found, micro-averaged over
the needed facts as `recall_at_k` is, so `recall_at_k / ceiling` is the share of what was
findable that a strategy kept and ranked.

Texts go through the same PII masker as the memory's (the memory never sees the raw
text), and ties keep the order in which the turns were said. The tally depends on the
scenario and the embedder only, never on a strategy, and each user's on that user alone,
so shards add up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from memharness.scenarios.model import ProbeStep, SayStep, User

Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class CeilingTally:
    """Needed facts of the probes, and how many of them the dense search found."""

    needed: int = 0
    found: int = 0

    def __add__(self, other: CeilingTally) -> CeilingTally:
        return CeilingTally(self.needed + other.needed, self.found + other.found)


def user_ceiling(user: User, *, embed: Embed, mask: Callable[[str], str], k: int) -> CeilingTally:
    """The ceiling tally of one user's probes (`k` unless a probe sets its own)."""
    said: list[SayStep] = []
    texts: list[str] = []
    probes: list[tuple[int, ProbeStep]] = []  # (turns said before it, probe)
    for step in user.timeline:
        if isinstance(step, SayStep):
            said.append(step)
            texts.append(mask(step.say))
        elif isinstance(step, ProbeStep) and step.needed:
            probes.append((len(said), step))
    if not probes:
        return CeilingTally()
    turns = _unit(embed(texts)) if texts else np.empty((0, 0), dtype=np.float32)
    queries = _unit(embed([mask(p.probe) for _, p in probes]))
    needed = found = 0
    for (before, probe), query in zip(probes, queries, strict=True):
        top = top_k(turns[:before] @ query if before else np.empty(0), probe.k or k)
        seen = {fact.id for i in top for fact in said[i].facts}
        needed += len(probe.needed)
        found += sum(fact_id in seen for fact_id in probe.needed)
    return CeilingTally(needed, found)


def top_k(scores: np.ndarray, k: int) -> list[int]:
    """Indices of the `k` highest scores, best first; ties in index order."""
    order = np.argsort(-scores, kind="stable")
    return [int(i) for i in order[:k]]


def _unit(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


__all__ = ["CeilingTally", "top_k", "user_ceiling"]
