"""Strategies: named, validated configurations of the forgetting engine, kept in YAML.

A `Strategy` is data only: which rule blocks are on and with which parameters. The pure
decisions it implies live in `reference.policy.sweep`; the engine that applies them
to the stores is separate. Durations are float seconds (a YAML file may write them with
units: `7d`, `1h30m`); `None` means "never".

Reading strategies from YAML (with errors that name the file, line and field), and the
registry of built-in and user strategies, live in `reference.policy.loading`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, field_validator
from pydantic_core import PydanticCustomError

from reference.durations import seconds_field
from reference.models import Category, MemoryType
from reference.user_words import EVENT_PATTERN, NAME_PATTERN

DAY_S = 86_400.0
Layer = Literal["stm", "ltm"]
#: A positive duration: seconds, or a text with units (`7d`, `1h30m`; `reference.durations`).
Seconds = Annotated[float, BeforeValidator(seconds_field), Field(gt=0)]


def _sorted_unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    # Sets as sorted tuples: stable YAML output and a stable fingerprint.
    return tuple(sorted(set(values)))


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("strategy", message)


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class TtlRule(_Block):
    """A fixed lifetime from the moment a value is written (an LTM fact: its last update).

    STM records look up `by_type[record.type]`. LTM facts look up `by_category[category]`,
    then `by_type` under the same name (every category is also a memory type), then
    `default_s`. A key present with `null` means "never expires"; an absent key falls
    through. `by_type.session` is the session layer's (sliding) lifetime.
    """

    default_s: Seconds | None = None
    by_type: dict[MemoryType, Seconds | None] = Field(default_factory=dict)
    by_category: dict[Category, Seconds | None] = Field(default_factory=dict)

    def ttl_for(self, kind: MemoryType | Category) -> float | None:
        """The lifetime of a value of this STM type or LTM category (None: never)."""
        if isinstance(kind, Category):
            if kind in self.by_category:
                return self.by_category[kind]
            kind = MemoryType(kind.value)
        return self.by_type.get(kind, self.default_s)

    def rule_for(self, kind: MemoryType | Category) -> str:
        """Which entry `ttl_for(kind)` reads, as written in YAML: `ttl.by_category.episode`,
        `ttl.by_type.preference` or `ttl.default_s`."""
        if isinstance(kind, Category):
            if kind in self.by_category:
                return f"ttl.by_category.{kind.value}"
            kind = MemoryType(kind.value)
        return f"ttl.by_type.{kind.value}" if kind in self.by_type else "ttl.default_s"


class SlidingRule(_Block):
    """A memory lives while it is accessed within `window_s` of its last access."""

    window_s: Seconds


class ImportanceRule(_Block):
    """The seed's importance TTL, counted from the last access: `base * (1 + 2*score/max)`.

    A score below `low_score` gets `low_score_ttl_s` instead. Each access adds
    `access_boost` (capped at `max_score`); time since the last access takes away
    `decay_per_day`. See `reference.policy.importance` for the expiry instant.
    """

    base_s: Seconds = 7 * DAY_S
    low_score: float = Field(2.0, ge=0)
    low_score_ttl_s: Seconds = DAY_S
    access_boost: float = Field(1.0, ge=0)
    decay_per_day: float = Field(0.1, ge=0)
    max_score: float = Field(10.0, gt=0)

    @field_validator("max_score")
    @classmethod
    def _not_below_low_score(cls, value: float, info: Any) -> float:
        low = info.data.get("low_score")
        if low is not None and value < low:
            raise _fail(f"must be at least low_score ({low})")
        return value


class DecayRule(_Block):
    """Ranking only: similarity times `exp(-lambda_per_day * age_days)`; deletes nothing.

    `age_from: written` ages a memory from when its value was written (STM created_at,
    LTM updated_at); `last_access` from its last access, as the seed did. Written is the
    default because retrieval touches what it returns: with last-access ages, whatever
    is retrieved stays fresh, and a stale value that keeps winning never fades.
    """

    lambda_per_day: float = Field(0.1, ge=0)
    age_from: Literal["written", "last_access"] = "written"


class EventRule(_Block):
    """What one business event invalidates, among the event user's memories older than it.

    Scope: `layers`, then `types` (STM) and `categories` (LTM); omitted means any.
    Selection, all given conditions must hold:
    - `keys_from`: a payload field with a key or a list of keys. LTM facts whose key is
      in it; STM records whose `metadata[topic_field]` is in it.
    - `match_on`: payload fields whose value must equal the STM record's metadata field,
      or the LTM fact's top-level value field, of the same name.
    A payload that lacks a named field invalidates nothing (never "everything").
    """

    event: str = Field(pattern=EVENT_PATTERN)
    layers: Annotated[tuple[Layer, ...], AfterValidator(_sorted_unique)] = ("ltm", "stm")
    types: Annotated[tuple[MemoryType, ...], AfterValidator(_sorted_unique)] | None = None
    categories: Annotated[tuple[Category, ...], AfterValidator(_sorted_unique)] | None = None
    keys_from: str | None = Field(None, min_length=1)
    topic_field: str = Field("topic", min_length=1)
    match_on: Annotated[tuple[str, ...], AfterValidator(_sorted_unique)] = ()
    action: Literal["delete", "archive"] = "archive"

    @field_validator("layers", "types", "categories")
    @classmethod
    def _not_empty(cls, value: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if value is not None and not value:
            raise _fail("must not be empty (omit it to mean any)")
        return value


class PiiRule(_Block):
    """Personal data: masked in the session layer and STM, sealed in LTM, then anonymised.

    A sealed LTM value is a JSON object with a `_sealed` key (the ciphertext) and
    `_sealed_at` (when it was sealed); it is anonymised `anonymise_after_s` later.
    """

    mask_session_stm: bool = True
    encrypt_ltm: bool = True
    anonymise_after_s: Seconds | None = DAY_S


class ArchivalRule(_Block):
    """A user inactive for `inactive_s` is archived; archived records are hard-deleted
    `delete_after_s` later."""

    inactive_s: Seconds = 90 * DAY_S
    delete_after_s: Seconds = 30 * DAY_S


class ConsolidationRule(_Block):
    """Which utterances of an ended session become LTM episodes (`promotion:
    consolidate`): those whose initial importance (`consolidation.initial_importance`)
    is at least `min_importance`. The others leave STM with their session."""

    min_importance: float = Field(0.0, ge=0, le=10)


Promotion = Literal["rules", "consolidate"]


class Strategy(_Block):
    """A named configuration of the forgetting engine. Immutable; `with_params` derives."""

    name: str = Field(pattern=NAME_PATTERN)
    description: str = Field(min_length=1, max_length=200)
    ttl: TtlRule | None = None
    sliding: SlidingRule | None = None
    importance: ImportanceRule | None = None
    decay: DecayRule | None = None
    events: tuple[EventRule, ...] = ()
    forget_commands: bool = True
    pii: PiiRule | None = None
    archival: ArchivalRule | None = None
    sweep_interval_s: Seconds = 300.0
    sweep_batch_size: int = Field(1000, ge=1, le=1_000_000)
    #: `rules`: only the inline promotion of stable facts reaches LTM (`reference.
    #: promotion`). `consolidate`: that, and when a session ends its STM records become
    #: LTM episodes (`reference.forgetting.consolidation`).
    promotion: Promotion = "rules"
    consolidation: ConsolidationRule | None = None
    # Last, so that its validator sees the rule blocks above.
    oracle: bool = False

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise _fail("must be one line")
        return value.strip()

    @field_validator("consolidation")
    @classmethod
    def _consolidation_needs_consolidate(
        cls, value: ConsolidationRule | None, info: Any
    ) -> ConsolidationRule | None:
        promotion = info.data.get("promotion")
        if value is not None and promotion == "rules":
            raise _fail("applies only with promotion: consolidate (promotion is 'rules')")
        return value

    @property
    def consolidates(self) -> bool:
        """Whether ended sessions are consolidated into LTM episodes."""
        return self.promotion == "consolidate"

    @property
    def consolidation_rule(self) -> ConsolidationRule:
        """The consolidation settings (defaults when the block is omitted)."""
        return self.consolidation or ConsolidationRule()

    @field_validator("oracle")
    @classmethod
    def _oracle_alone(cls, value: bool, info: Any) -> bool:
        # The oracle is the upper bound: any other removal rule would make it lose what
        # the probes need. Compliance rules (forget commands, PII) still apply.
        clashing = [
            b for b in ("ttl", "sliding", "importance", "archival", "events") if info.data.get(b)
        ]
        if value and clashing:
            raise _fail(f"an oracle keeps exactly what the probes need; remove {clashing}")
        return value

    def with_params(self, overrides: Mapping[str, Any]) -> Strategy:
        """A new validated strategy with dotted parameters replaced, e.g.
        `{"ttl.default_s": 600, "events.0.action": "delete", "decay": None}`."""
        # At call time: `loading` imports this module.
        from reference.policy.loading import set_path, validate_strategy

        data = self.model_dump(mode="json")
        for path, value in overrides.items():
            set_path(data, path, value)
        return validate_strategy(data, source=None)

    def fingerprint(self) -> str:
        """A short stable hash of the behaviour (every field but name and description)."""
        config = self.model_dump(mode="json", exclude={"name", "description"})
        if self.promotion == "rules":  # the default: fingerprints made before it stay
            del config["promotion"], config["consolidation"]
        blob = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        """The full configuration as YAML, which loads back into an equal strategy."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
