"""Decisions as data: the `ChangeBatch` a planner makes and the executor applies, and what
sweeps, forget commands, events and consolidation report.

A planner (`sweeper.plan_sweep`, `consolidation.plan_session`, `forgetter.plan_forget`,
`forgetter.plan_event`) reads records through the stores' read methods and decides;
`executor.Executor` applies its batches through the stores' write methods, in the order
the fields below are listed (LTM before STM: a failure leaves the source records for the
next attempt), and counts what they did. Nothing here reads or writes a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from reference.crypto import anonymise_value
from reference.ltm.filters import FactChangeCounts, FactChanges, LtmFilter
from reference.models import Fact, MemoryRecord, Status
from reference.policy.decisions import Action, Decision
from reference.policy.rules import Layer
from reference.records import fast_init
from reference.stm.filters import StmFilter

#: The actor each kind of batch writes in the LTM audit.
SWEEP_ACTOR = "sweeper"
CONSOLIDATION_ACTOR = "consolidation"
FORGET_ACTOR = "forget"
EVENTS_ACTOR = "events"

_NO_FACT_CHANGES = FactChanges()


@fast_init
@dataclass(frozen=True, slots=True)
class EpisodeWrite:
    """An LTM episode to write from an STM record, with its initial importance and the
    latest expiry it may have (None: the strategy's rule for episodes alone)."""

    record: MemoryRecord
    importance: float
    not_after: float | None = None


@fast_init
@dataclass(frozen=True, slots=True)
class ChangeBatch:
    """One batch of changes: a page of a sweep, one session's consolidation, one forget
    command or event. Empty fields change nothing."""

    #: The layer whose figures the batch counts in ("session", "stm", "ltm"; "" none).
    layer: str = ""
    #: Records read and decided on, and the decisions (counted per action).
    examined: int = 0
    decisions: tuple[Decision, ...] = ()
    #: The LTM audit's actor for every LTM write of the batch.
    actor: str = SWEEP_ACTOR
    #: Why the batch's erasures by filter and its episodes happen (the audit's cause);
    #: changes by id carry theirs in `ltm.causes`.
    cause: str = ""
    # LTM: expire/delete, erase, archive, anonymise by fact id; erasures by filter, in order.
    ltm: FactChanges = _NO_FACT_CHANGES
    ltm_erase: tuple[LtmFilter, ...] = ()
    episodes: tuple[EpisodeWrite, ...] = ()
    # STM: records removed (expired, archived, deleted), by filter or by id.
    stm_delete: StmFilter | None = None
    stm_remove: frozenset[str] = frozenset()
    # Sessions: expired ones removed in pages of this many (0: none); one reset; a user's all.
    expire_sessions: int = 0
    reset_session: tuple[str, str] | None = None
    #: A user erased from every layer (`erasure.erase_user`), and the user's activity.
    delete_user: str | None = None
    #: A session consolidated: (user_id, session_id), no longer tracked; its records that
    #: became no episode, (record_id, rule, why); how many live records it had.
    consolidated: tuple[str, str] | None = None
    dropped: tuple[tuple[str, str, str], ...] = ()
    session_records: int = 0
    # In-process bookkeeping (no store write, no lease check): sessions tracked again
    # with a later end, records the oracle no longer tracks, the archival mark.
    track: tuple[tuple[str, str, float], ...] = ()
    oracle_drops: tuple[tuple[Layer, str], ...] = ()
    inactive_through: float | None = None

    @property
    def writes(self) -> bool:
        """Whether the batch changes a store or the tracker (the lease is checked first)."""
        return bool(
            self.ltm
            or self.ltm_erase
            or self.episodes
            or self.stm_delete is not None
            or self.stm_remove
            or self.expire_sessions
            or self.reset_session is not None
            or self.delete_user is not None
            or self.consolidated is not None
        )


@dataclass(slots=True)
class Applied:
    """What applying one batch did, as the stores reported it."""

    ltm: FactChangeCounts = field(default_factory=FactChangeCounts)
    episodes: list[Fact] = field(default_factory=list)
    stm_removed: int = 0
    sessions_removed: int = 0
    context_cleared: bool = False


@dataclass(slots=True)
class LayerStats:
    """What a sweep did (or, in a dry run, would do) in one layer."""

    examined: int = 0
    expired: int = 0
    archived: int = 0
    anonymised: int = 0
    deleted: int = 0
    batches: int = 0
    #: Every decision, in the order made (a test compares the due and full-scan sweeps).
    decisions: list[Decision] = field(default_factory=list)

    def count(self, decisions: tuple[Decision, ...]) -> None:
        self.decisions.extend(decisions)
        for decision in decisions:
            if decision.action is Action.EXPIRE:
                self.expired += 1
            elif decision.action is Action.ARCHIVE:
                self.archived += 1
            elif decision.action is Action.ANONYMISE:
                self.anonymised += 1
            else:
                self.deleted += 1


@fast_init
@dataclass(frozen=True, slots=True)
class Consolidation:
    """What consolidating ended sessions did (or, in a dry run, would do)."""

    sessions: int = 0
    #: STM records of the ended sessions (each became an episode or was dropped).
    records: int = 0
    #: The episodes written (empty in a dry run), in the order written.
    episodes: tuple[Fact, ...] = ()
    #: How many records a dry run would consolidate (equal to len(episodes) otherwise).
    consolidated: int = 0
    #: The live records that became no episode: (record_id, rule, why), the rule being
    #: `consolidation.min_importance` or `consolidation: held as a fact`.
    dropped: tuple[tuple[str, str, str], ...] = ()


@fast_init
@dataclass(frozen=True, slots=True)
class SweepStats:
    """One sweep: totals over the layers, and each layer's own figures.

    `examined` counts records read and decided on; `expired` what was past its deadline;
    `archived`, `anonymised`, `deleted` (grace over, oracle, erased) the other decisions.
    """

    examined: int
    expired: int
    archived: int
    anonymised: int
    deleted: int
    duration_s: float
    dry_run: bool = False
    events: int = 0
    by_layer: dict[str, LayerStats] = field(default_factory=dict)
    #: Ended sessions consolidated, and the LTM episodes written from them (a dry run
    #: writes none: `consolidated` counts the records it would consolidate).
    sessions_consolidated: int = 0
    consolidated: int = 0
    episodes: tuple[Fact, ...] = ()
    #: The ended sessions' live STM records that became no episode: (record_id, rule, why).
    consolidation_dropped: tuple[tuple[str, str, str], ...] = ()

    @property
    def examined_per_s(self) -> float:
        """Throughput: records examined per second of sweep."""
        return self.examined / self.duration_s if self.duration_s > 0 else float("inf")


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What one forget command removed, per layer."""

    scope: str
    topic: str | None
    stm_removed: frozenset[str]  # record ids
    ltm_erased: frozenset[str]  # fact ids
    keys: frozenset[str]  # LTM keys whose audit values were redacted
    sessions_removed: int
    context_cleared: bool
    duration_ms: float

    @property
    def removed(self) -> int:
        """Records and facts removed (sessions not counted)."""
        return len(self.stm_removed) + len(self.ltm_erased)


@dataclass(frozen=True, slots=True)
class EventOutcome:
    """What one event invalidated."""

    event: str
    user_id: str
    stm_removed: int
    ltm_archived: int
    ltm_deleted: int


def fact_changes(facts: list[Fact], decisions: list[Decision]) -> FactChanges:
    """The store changes that carry out one page's LTM decisions:

    - expire: deleted (its audit keeps the masked value);
    - archive: archived;
    - delete: an archived fact past its grace erased (audit values redacted), a live one
      (the oracle's decision) deleted;
    - anonymise: the sealed original dropped from the value and its audit.
    """
    by_id = {f.fact_id: f for f in facts}
    delete: set[str] = set()
    erase: set[str] = set()
    archive: set[str] = set()
    anonymise: dict[str, dict[str, Any]] = {}
    causes: dict[str, str] = {}
    for decision in decisions:
        fact = by_id[decision.record_id]
        causes[fact.fact_id] = sweep_cause(decision)
        if decision.action is Action.EXPIRE:
            delete.add(fact.fact_id)
        elif decision.action is Action.DELETE:
            (erase if fact.status is Status.ARCHIVED else delete).add(fact.fact_id)
        elif decision.action is Action.ARCHIVE:
            archive.add(fact.fact_id)
        else:
            anonymise[fact.fact_id] = anonymised(fact.value)
    return FactChanges(
        delete=frozenset(delete),
        erase=frozenset(erase),
        archive=frozenset(archive),
        anonymise=anonymise,
        causes=causes,
    )


def sweep_cause(decision: Decision) -> str:
    """The audit cause of a sweep's decision: the sweep, and the rule's reason (which
    names the rule: `expired at ... by ttl.by_type.preference`)."""
    return f"sweep: {decision.reason}"


def decision_causes(decisions: list[Decision], suffix: str = "") -> dict[str, str]:
    """Each LTM decision's reason (with `suffix`), by fact id: the causes of its changes."""
    return {d.record_id: d.reason + suffix for d in decisions if d.layer == "ltm"}


def anonymised(value: dict[str, Any]) -> dict[str, Any]:
    """`anonymise_value` of the value and of each object field in it (the policy finds
    seals one level down too)."""
    top = anonymise_value(value)
    return {k: anonymise_value(v) if isinstance(v, dict) else v for k, v in top.items()}


__all__ = [
    "CONSOLIDATION_ACTOR",
    "EVENTS_ACTOR",
    "FORGET_ACTOR",
    "SWEEP_ACTOR",
    "Applied",
    "ChangeBatch",
    "Consolidation",
    "EpisodeWrite",
    "EventOutcome",
    "ForgetReport",
    "LayerStats",
    "SweepStats",
    "anonymised",
    "decision_causes",
    "fact_changes",
    "sweep_cause",
]
