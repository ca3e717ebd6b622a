"""The oracle's advice: which memories a future probe needs, and until when."""

from __future__ import annotations

import math
from collections.abc import Callable

from reference.dueindex import DueIndex
from reference.policy.decisions import Memory, memory_ident
from reference.policy.rules import Layer


class OracleAdvice:
    """The harness's knowledge of the script: until when a future probe needs a memory.

    Under a strategy with `oracle: true`, a sweep at `now` deletes each live record or fact
    that no probe at or after `now` needs, and keeps the others (nothing expires by time).
    Per memory (an STM record id, or an LTM fact id: its current version), the advice
    holds one moment, `needed_until`: the time of the last probe that needs it (None:
    none does). `needed_until(memory)` computes it for a memory the advice has not been
    told about; the harness tells it with `note` once it knows what a record carries
    (after the write), so a sweep asks nothing per record: `due(now)` lists the memories
    whose moment has passed, from a heap. Run sweeps at least as often as probes.
    """

    def __init__(self, needed_until: Callable[[Memory], float | None]) -> None:
        self._compute = needed_until
        self._until: dict[tuple[Layer, str], float] = {}
        self._owner: dict[tuple[Layer, str], str] = {}
        self._index: dict[Layer, DueIndex] = {"stm": DueIndex(), "ltm": DueIndex()}

    def note(self, memory: Memory, needed_until: float | None = None) -> None:
        """Record until when `memory` is needed (None: not needed at all). Called on
        every write of a record or fact version by the engine (with the moment computed
        by `needed_until(memory)`), and again by a harness that knows better."""
        layer, ident = memory_ident(memory)
        until = -math.inf if needed_until is None else float(needed_until)
        self._until[(layer, ident)] = until
        self._owner[(layer, ident)] = memory.user_id
        # Due once a sweep's `now` is past the last needing probe: the next float after it.
        self._index[layer].set(ident, math.nextafter(until, math.inf))

    def written(self, memory: Memory) -> None:
        """A memory was written (a new record, or a new version of a fact)."""
        self.note(memory, self._compute(memory))

    def needed(self, memory: Memory, now: float) -> bool:
        """Whether a probe at or after `now` needs `memory`."""
        until = self._until.get(memory_ident(memory))
        if until is None:  # not told yet: learn it now
            self.written(memory)
            until = self._until[memory_ident(memory)]
        return now <= until

    def due(self, now: float) -> list[tuple[Layer, str, str]]:
        """(layer, user_id, id) of the memories no probe at or after `now` needs, in
        the order they fell due; it changes nothing."""
        return [
            (layer, self._owner[(layer, ident)], ident)
            for layer, index in self._index.items()
            for ident in index.due(now)
        ]

    def earliest(self) -> float:
        """The earliest moment `due` lists anything (inf: never, as things stand)."""
        return min(index.first() for index in self._index.values())

    def drop(self, layer: Layer, ident: str) -> None:
        """Forget a memory that is gone from its layer."""
        self._until.pop((layer, ident), None)
        self._owner.pop((layer, ident), None)
        self._index[layer].discard(ident)
