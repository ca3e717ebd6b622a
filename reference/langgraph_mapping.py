"""How LangGraph store items map onto long-term facts (`reference.langgraph_store`).

Pure functions, no LangGraph import: which user a namespace belongs to, which fact keys
an item and its vectors have, what an item's fact value holds, and LangGraph's value
filters and namespace match conditions, with the meaning of LangGraph's `InMemoryStore`.

One item `(namespace, key)` is one fact of category `ITEM_CATEGORY` under the user of its
namespace, keyed by `item_key` (a hash: any namespace and key fit the fact key's length
and character rules). Each text of the item the index embeds (one per indexed field) is
a fact of category `VECTOR_CATEGORY` keyed `vector_key(item, i)`: a search scores an item
by its best field, as LangGraph's stores do.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from reference.models import Category, Fact
from reference.validation import EMBEDDING_DIM

#: The category of the facts that hold items, and of those that hold their vectors.
ITEM_CATEGORY = Category.KNOWLEDGE
VECTOR_CATEGORY = Category.ENTITY
#: Fact ids in this store's own LTM namespace start users with this when the namespace's
#: user label is not a valid reference id (or itself starts with it): then the rest is
#: the label's UTF-8 in hex, so two labels never share a user.
ENCODED_USER_PREFIX = "lg-"
_PLAIN_USER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")
#: What an item fact's text is: the fact is found by key, never by its text or vector.
ITEM_TEXT = "langgraph store item"
#: The vector an item fact carries (the LTM keeps one per fact; items are searched
#: through their vector facts only).
ITEM_VECTOR = np.eye(1, EMBEDDING_DIM, dtype=np.float32)[0]


def user_of_label(label: str) -> str:
    """The reference user id of a namespace's user label (see `ENCODED_USER_PREFIX`)."""
    if _PLAIN_USER.fullmatch(label) and not label.startswith(ENCODED_USER_PREFIX):
        return label
    encoded = ENCODED_USER_PREFIX + label.encode("utf-8").hex()
    if len(encoded) > 128:
        raise ValueError(
            f"namespace: the user label {label[:40]!r} is too long to name a user "
            "(at most 62 UTF-8 bytes when it is not a plain id)"
        )
    return encoded


def item_key(namespace: Sequence[str], key: str) -> str:
    """The fact key of an item: a SHA-256 of its namespace and key."""
    encoded = json.dumps([list(namespace), key], ensure_ascii=True)
    return hashlib.sha256(encoded.encode("ascii")).hexdigest()


def vector_key(item: str, index: int) -> str:
    """The fact key of the `index`-th embedded text of the item whose key is `item`."""
    return f"{item}:{index}"


def item_value(
    namespace: Sequence[str], key: str, value: Mapping[str, Any], *, ttl: float | None, vectors: int
) -> dict[str, Any]:
    """An item fact's value: the item's namespace, key and value (a copy), its TTL in
    minutes (refreshed reads extend by it) and how many vector facts it has."""
    copied = json.loads(json.dumps(value))
    return {
        "namespace": list(namespace),
        "key": key,
        "value": copied,
        "ttl_minutes": ttl,
        "vectors": vectors,
    }


_ITEM_FIELDS = frozenset({"namespace", "key", "value", "ttl_minutes", "vectors"})


def is_item(fact: Fact) -> bool:
    """Whether a fact holds a store item (not a fact the reference's turns wrote, should
    the store share a system's LTM with them)."""
    return fact.category is ITEM_CATEGORY and fact.value.keys() >= _ITEM_FIELDS


def is_vector(fact: Fact) -> bool:
    """Whether a fact holds the vector of an item's field."""
    return fact.category is VECTOR_CATEGORY and {"item", "path"} == fact.value.keys()


def matches_filter(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """Whether an item value passes a LangGraph search filter: each field equals the
    filter's value (nested objects and lists compared as JSON), or passes its
    operators `$eq $ne $gt $gte $lt $lte`."""
    if not flt:
        return True
    return all(_compare(value.get(field), wanted) for field, wanted in flt.items())


def _compare(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(actual, op, operand) for op, operand in wanted.items())
        if not isinstance(actual, dict):
            return False
        return all(_compare(actual.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=True))
        )
    return bool(actual == wanted)


def _operator(actual: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(actual == operand)
    if operator == "$ne":
        return bool(actual != operand)
    if operator in _ORDERED:
        if not _is_number(actual) or not _is_number(operand):
            return False  # a missing or non-numeric field never passes a comparison
        return _ORDERED[operator](float(actual), float(operand))
    raise ValueError(
        f"filter: unsupported operator {operator!r}; expected one of $eq $ne $gt $gte $lt $lte"
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_ORDERED = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def namespace_matches(namespace: Sequence[str], kind: str, path: Sequence[str]) -> bool:
    """LangGraph's namespace match condition: `kind` "prefix" or "suffix", whole labels,
    "*" matching any one label."""
    if len(namespace) < len(path):
        return False
    if kind == "prefix":
        pairs = zip(namespace, path, strict=False)
    elif kind == "suffix":
        pairs = zip(reversed(namespace), reversed(path), strict=False)
    else:
        raise ValueError(f"match_conditions: unknown match type {kind!r}")
    return all(p == "*" or label == p for label, p in pairs)
