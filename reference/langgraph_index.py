"""The semantic index of `reference.langgraph_store`: which texts of an item a LangGraph
`IndexConfig` embeds, with which embedder, and each item's best score for a query.

Needs the optional extra `langgraph` (imported by `reference.langgraph_store`, which
says so when it is missing).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
from langgraph.store.base import IndexConfig, ensure_embeddings, get_text_at_path, tokenize_path

from reference.langgraph_mapping import is_vector
from reference.ltm.base import LongTermStore
from reference.text_interfaces import Embedder
from reference.validation import EMBEDDING_DIM


class SemanticIndex:
    """An `IndexConfig` checked against the reference: `dims` must be the LTM's vector
    size and `distance_type`, if given, "cosine". Without `embed`, `fallback` (the
    system's embedder) embeds."""

    def __init__(self, config: IndexConfig, fallback: Embedder) -> None:
        dims = config.get("dims")
        if dims != EMBEDDING_DIM:
            raise ValueError(f"index.dims: the reference's LTM keeps {EMBEDDING_DIM}, got {dims}")
        distance = dict(config).get("distance_type", "cosine")
        if distance != "cosine":
            raise ValueError(f"index.distance_type: only 'cosine' is supported, got {distance!r}")
        self.config = config.copy()
        embed = config.get("embed")
        self.embeddings: Any = ensure_embeddings(embed) if embed is not None else None
        self.fallback = fallback
        self.fields: list[tuple[str, Any]] = [
            (p, tokenize_path(p) if p != "$" else p) for p in (config.get("fields") or ["$"])
        ]

    def texts(self, value: Mapping[str, Any], index: list[str] | None) -> list[tuple[str, str]]:
        """(path, text) of each text of `value` to embed: the config's fields, or the
        put's own `index` paths (LangGraph's path syntax; a list gives `path.i`)."""
        paths = self.fields if index is None else [(p, tokenize_path(p)) for p in index]
        texts: list[tuple[str, str]] = []
        for path, tokens in paths:
            found = get_text_at_path(value, tokens)
            many = len(found) > 1
            named = [f"{path}.{i}" for i in range(len(found))] if many else [path] * len(found)
            # An empty text has no direction to compare: nothing to find it by.
            texts.extend((p, t) for p, t in zip(named, found, strict=True) if t.strip())
        return texts

    def embed_documents(self, texts: list[str]) -> list[np.ndarray]:
        if not texts:
            return []
        if self.embeddings is None:
            return list(self.fallback.embed(texts))
        return [np.asarray(v, dtype=np.float64) for v in self.embeddings.embed_documents(texts)]

    def embed_query(self, query: str) -> np.ndarray:
        if self.embeddings is None:
            return self.fallback.embed_one(query)
        return np.asarray(self.embeddings.embed_query(query), dtype=np.float64)


def best_scores(
    ltm: LongTermStore, vector: np.ndarray, users: Iterable[str], wanted: set[str]
) -> dict[str, float]:
    """Each wanted item's (by item fact key) best cosine score over its vector facts."""
    best: dict[str, float] = {}
    for user in users:
        # Every live fact of the user, scored (`query` caps k at 1,000); the item facts
        # among them carry a placeholder vector and are skipped.
        hits = ltm.similar(
            user_id=user, embedding=vector, min_score=float("-inf"), include_dead=False
        )
        for hit in hits:
            if not is_vector(hit.record):
                continue
            item = hit.record.value["item"]
            if item in wanted and hit.score > best.get(item, float("-inf")):
                best[item] = hit.score
    return best
