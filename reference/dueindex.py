"""`DueIndex`: a min-heap of (moment, id) with lazy deletion, for the in-memory stores.

The in-memory backends keep one per deadline they index (an STM record's `expires_at`;
an LTM fact's `expires_at`, archival time and sealing time; the oracle's last needed
moment). `set` replaces an id's moment, `discard` drops it; the heap keeps stale entries
and skips them, compacting when they outnumber the live ones. `due(until)` lists the ids
whose moment is at or before `until` without removing anything, and `first()` the
earliest moment: reads, so a dry-run sweep or an inspection leaves the index as it was
(stale entries at the top are popped, which changes no answer).
"""

from __future__ import annotations

import heapq


class DueIndex:
    """Ids by a moment each; see the module docstring. Not thread-safe: the owning store
    holds its lock around every call."""

    __slots__ = ("_heap", "_moment")

    def __init__(self) -> None:
        self._moment: dict[str, float] = {}
        self._heap: list[tuple[float, str]] = []

    def __len__(self) -> int:
        return len(self._moment)

    def set(self, ident: str, moment: float | None) -> None:
        """Index `ident` at `moment` (None: not indexed)."""
        if moment is None:
            self._moment.pop(ident, None)
            return
        if self._moment.get(ident) == moment:
            return
        self._moment[ident] = moment
        heapq.heappush(self._heap, (moment, ident))
        if len(self._heap) > 2 * len(self._moment) + 1024:
            self._heap = [(m, i) for i, m in self._moment.items()]
            heapq.heapify(self._heap)

    def discard(self, ident: str) -> None:
        self._moment.pop(ident, None)

    def get(self, ident: str) -> float | None:
        return self._moment.get(ident)

    def first(self) -> float:
        """The earliest moment indexed (inf: none): nothing is due before it. Stale
        entries at the top are popped, which changes no answer."""
        heap, moment = self._heap, self._moment
        while heap and moment.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)
        return heap[0][0] if heap else float("inf")

    def due(self, until: float) -> list[str]:
        """The ids whose moment is at or before `until`, in (moment, id) order."""
        heap, moment = self._heap, self._moment
        while heap and moment.get(heap[0][1]) != heap[0][0]:
            heapq.heappop(heap)  # stale: replaced or discarded
        found: set[tuple[float, str]] = set()  # an id set twice to one moment: once
        stack = [0] if heap and heap[0][0] <= until else []
        while stack:  # the entries <= until form a subtree at the root of the heap
            i = stack.pop()
            at, ident = heap[i]
            if moment.get(ident) == at:
                found.add((at, ident))
            for child in (2 * i + 1, 2 * i + 2):
                if child < len(heap) and heap[child][0] <= until:
                    stack.append(child)
        return [ident for _, ident in sorted(found)]


__all__ = ["DueIndex"]
