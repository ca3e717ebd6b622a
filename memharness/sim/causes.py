"""Why a needed fact was over-forgotten or never stored, from what the replay saw happen.

The replayer tells `Causes` what removed each stored memory that carries scenario facts,
and what refused each utterance that stored nothing:

- a sweep's decisions: the rule is in the decision (`ttl.by_category.episode`,
  `sliding.window_s`, `importance` for an expiry; `oracle`; `archival`);
- consolidation: an ended session's STM record became an LTM episode, or none
  (`consolidation.min_importance`, or `consolidation: held as a fact`);
- a business event (`event NAME`), a forget command (`forget command`);
- an LTM value replaced by a newer version of the same key (`replaced`);
- the intent filter's refusal of an utterance (`intent filter: chit-chat: ...`).

`why_over_forgotten` and `why_unstored` turn that into the `why` entry of a probe record.
Only memories that carry scenario facts are followed; telling changes nothing stored.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from reference.policy.decisions import Action, Decision

#: A stored memory: ("stm", record_id, 0) or ("ltm", fact_id, version).
Key = tuple[str, str, int]

#: The cause given when nothing the replay saw removed a memory: its deadline passed
#: after the last sweep (the stores hide it already; the next sweep removes it).
UNRECORDED = "deadline passed since the last sweep"


@dataclass(frozen=True, slots=True)
class Removal:
    """When a memory left its layer, by which rule (short, for counting) and the detail."""

    at: float
    rule: str
    detail: str


def sweep_rule(decision: Decision) -> str | None:
    """The rule of a removing sweep decision (None: it removes nothing)."""
    if decision.action is Action.EXPIRE:
        _, _, rule = decision.reason.rpartition(" by ")
        return rule or "expires_at"
    if decision.action is Action.ARCHIVE:
        return "archival"
    if decision.action is Action.DELETE:
        return "oracle" if decision.reason.startswith("oracle") else "archival"
    return None


class Causes:
    """What removed each followed memory (the first removal counts) and what refused
    each fact that was never stored."""

    def __init__(self) -> None:
        self.removed: dict[Key, Removal] = {}
        self.refused: dict[tuple[int, str], str] = {}  # (user index, fact id) -> why

    def remove(self, key: Key, at: float, rule: str, detail: str) -> None:
        self.removed.setdefault(key, Removal(at, rule, detail))

    def sweep(
        self, at: float, decisions: Iterable[Decision], keys: dict[tuple[str, str], Key]
    ) -> None:
        """A sweep's decisions; `keys` maps (layer, id) to the followed memory."""
        for decision in decisions:
            key = keys.get((decision.layer, decision.record_id))
            if key is None:
                continue
            rule = sweep_rule(decision)
            if rule is not None:
                self.remove(key, at, rule, decision.reason)

    def refuse(self, user: int, fact_ids: Iterable[str], reason: str) -> None:
        for fact_id in fact_ids:
            self.refused.setdefault((user, fact_id), reason)

    def why_unstored(self, user: int, fact_id: str) -> dict[str, Any]:
        reason = self.refused.get((user, fact_id), "no layer stored it")
        return {
            "cause": f"intent filter: {reason}",
            "detail": f"the intent filter did not keep the utterance ({reason}), so it was "
            "neither stored in STM nor considered for promotion to LTM",
        }

    def why_over_forgotten(
        self, reachable: list[Key], *, promoted: bool, probe_at: float
    ) -> dict[str, Any]:
        """The fate of each reachable memory that held the fact; `cause` is the rule of
        the last one to go (what made the fact unavailable)."""
        gone: list[dict[str, Any]] = []
        for key in reachable:
            removal = self.removed.get(key)
            if removal is None:  # hidden by its deadline, not yet swept: before the probe
                gone.append({"layer": key[0], "at": None, "rule": UNRECORDED, "detail": ""})
            else:
                gone.append({"layer": key[0], "at": removal.at, "rule": removal.rule,
                             "detail": removal.detail})  # fmt: skip
        gone.sort(key=lambda g: probe_at if g["at"] is None else g["at"])
        last = gone[-1]["rule"] if gone else UNRECORDED
        return {"cause": last, "gone": gone, "promoted": promoted}


__all__ = ["UNRECORDED", "Causes", "Key", "Removal", "sweep_rule"]
