""" "Did you mean" for a name the user mistyped: keys, strategy names, fact ids, values.

One rule for every message that suggests: the closest known name by `difflib`'s ratio
(at least `CUTOFF`), or nothing when none is close.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["CUTOFF", "closest", "did_you_mean"]

#: How alike (0 to 1, difflib's ratio) a known name must be to be suggested.
CUTOFF = 0.6


def closest(word: str, known: Iterable[str]) -> str | None:
    """The known name closest to `word`, or None when none is alike enough."""
    matches = difflib.get_close_matches(word, list(dict.fromkeys(known)), n=1, cutoff=CUTOFF)
    return matches[0] if matches else None


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """` (did you mean 'x'?)` for the closest known name, or an empty string."""
    match = closest(word, known)
    return f" (did you mean {match!r}?)" if match is not None else ""
