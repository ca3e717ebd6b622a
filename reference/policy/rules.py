"""The rule blocks a strategy is made of: which rule is on, with which parameters.

Data only; the decisions they imply live in the other modules of `reference.policy`.
Durations are float seconds (a YAML file may write them with units: `7d`, `1h30m`);
`None` means "never".
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    field_validator,
    model_serializer,
    model_validator,
)
from pydantic_core import PydanticCustomError

from reference.durations import seconds_field
from reference.models import Category, MemoryType
from reference.user_words import EVENT_PATTERN

DAY_S = 86_400.0
Layer = Literal["stm", "ltm"]
#: A positive duration: seconds, or a text with units (`7d`, `1h30m`; `reference.durations`).
Seconds = Annotated[float, BeforeValidator(seconds_field), Field(gt=0)]


def sorted_unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    """A set as a sorted tuple: stable YAML output and a stable fingerprint."""
    return tuple(sorted(set(values)))


def field_error(message: str) -> PydanticCustomError:
    """A validation error of a strategy field, reported under the field's name."""
    return PydanticCustomError("strategy", message)


class Block(BaseModel):
    """A frozen block of a strategy: unknown keys and non-finite numbers are refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class TtlRule(Block):
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


def _not_empty(value: tuple[Any, ...]) -> tuple[Any, ...]:
    if not value:
        raise field_error("must not be empty (omit it to mean any)")
    return value


def _no_session(value: tuple[MemoryType, ...]) -> tuple[MemoryType, ...]:
    if MemoryType.SESSION in value:
        raise field_error(
            "session is not a memory of STM or LTM (the session layer's lifetime is "
            "ttl.by_type.session)"
        )
    return value


Layers = Annotated[tuple[Layer, ...], AfterValidator(sorted_unique), AfterValidator(_not_empty)]
MemoryTypes = Annotated[
    tuple[MemoryType, ...],
    AfterValidator(sorted_unique),
    AfterValidator(_not_empty),
    AfterValidator(_no_session),
]


class ScopedRule(Block):
    """A rule that applies to some memories only: `layers` (default both), then `types`
    (default all). As in `TtlRule`, an LTM fact counts as the memory type named like its
    category: `types: [preference]` covers STM preference records and LTM preference
    facts, and `layers: [ltm]` then only the facts.

    `types` and `layers` are left out of the strategy's dump (YAML, results, fingerprint)
    while they cover everything, so a rule that does not narrow them dumps and hashes
    as one that cannot.
    """

    types: MemoryTypes | None = None
    layers: Layers = ("ltm", "stm")

    #: Options left out of the dump while at their default.
    quiet_options: ClassVar[tuple[str, ...]] = ("types", "layers")

    @property
    def everywhere(self) -> bool:
        """Whether the rule covers every memory of both layers."""
        return self.types is None and len(self.layers) == 2

    def covers(self, kind: MemoryType | Category) -> bool:
        """Whether the rule applies to an STM record of this type (a `MemoryType`) or an
        LTM fact of this category (a `Category`)."""
        if isinstance(kind, Category):
            if "ltm" not in self.layers:
                return False
            return self.types is None or MemoryType(kind.value) in self.types
        return "stm" in self.layers and (self.types is None or kind in self.types)

    @model_serializer(mode="wrap")
    def _dump_without_quiet_defaults(self, handler: SerializerFunctionWrapHandler) -> Any:
        data = handler(self)
        fields = type(self).model_fields
        for name in self.quiet_options:
            if getattr(self, name) == fields[name].default:
                data.pop(name, None)
        return data


class SlidingRule(ScopedRule):
    """A memory lives while it is accessed within `window_s` of its last access."""

    window_s: Seconds


class ImportanceRule(ScopedRule):
    """The seed's importance TTL: `base * (1 + 2*score/max)`.

    A score below `low_score` gets `low_score_ttl_s` instead. Each access adds
    `access_boost` (capped at `max_score`); time since the last access takes away
    `decay_per_day`. `ttl_from` says where the TTL counts from:

    - `last_access` (the default): from the last access, with the score decaying as
      time passes, so a memory expires once it outlives the TTL its current score
      grants (`reference.policy.importance.expiry_delay`; score 5: 12.3 days);
    - `written`: R10's rule (docs/requirements.md), from when the value was written
      (an STM record's creation, an LTM fact's last update), for the score as of the
      last access (decayed and boosted at each access only): score 5 gives 14 days, 10 gives 21,
      below 2 one day.
    """

    base_s: Seconds = 7 * DAY_S
    low_score: float = Field(2.0, ge=0)
    low_score_ttl_s: Seconds = DAY_S
    access_boost: float = Field(1.0, ge=0)
    decay_per_day: float = Field(0.1, ge=0)
    max_score: float = Field(10.0, gt=0)
    ttl_from: Literal["last_access", "written"] = "last_access"

    quiet_options: ClassVar[tuple[str, ...]] = ("types", "layers", "ttl_from")

    @field_validator("max_score")
    @classmethod
    def _not_below_low_score(cls, value: float, info: Any) -> float:
        low = info.data.get("low_score")
        if low is not None and value < low:
            raise field_error(f"must be at least low_score ({low})")
        return value


class DecayRule(ScopedRule):
    """Ranking only: similarity times `exp(-lambda_per_day * age_days)`; deletes nothing.

    `age_from: written` ages a memory from when its value was written (STM created_at,
    LTM updated_at); `last_access` from its last access, as the seed did. Written is the
    default because retrieval touches what it returns: with last-access ages, whatever
    is retrieved stays fresh, and a stale value that keeps winning never fades.
    """

    lambda_per_day: float = Field(0.1, ge=0)
    age_from: Literal["written", "last_access"] = "written"


class EventRule(Block):
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
    layers: Annotated[tuple[Layer, ...], AfterValidator(sorted_unique)] = ("ltm", "stm")
    types: Annotated[tuple[MemoryType, ...], AfterValidator(sorted_unique)] | None = None
    categories: Annotated[tuple[Category, ...], AfterValidator(sorted_unique)] | None = None
    keys_from: str | None = Field(None, min_length=1)
    topic_field: str = Field("topic", min_length=1)
    match_on: Annotated[tuple[str, ...], AfterValidator(sorted_unique)] = ()
    action: Literal["delete", "archive"] = "archive"

    @field_validator("layers", "types", "categories")
    @classmethod
    def _not_empty(cls, value: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if value is not None and not value:
            raise field_error("must not be empty (omit it to mean any)")
        return value


class PiiRule(Block):
    """Personal data: masked in the session layer and STM, sealed in LTM, then anonymised.

    A sealed LTM value is a JSON object with a `_sealed` key (the ciphertext) and
    `_sealed_at` (when it was sealed); it is anonymised `anonymise_after_s` later.
    """

    mask_session_stm: bool = True
    encrypt_ltm: bool = True
    anonymise_after_s: Seconds | None = DAY_S

    @field_validator("mask_session_stm")
    @classmethod
    def _masking_is_always_on(cls, value: bool) -> bool:
        if not value:
            raise field_error(
                "must be true: the reference masks PII in the session layer and STM under"
                " every strategy (omit the `pii` block for a strategy that only masks)"
            )
        return value


class ArchivalRule(Block):
    """A user inactive for `inactive_s` is archived; archived records are hard-deleted
    `delete_after_s` later."""

    inactive_s: Seconds = 90 * DAY_S
    delete_after_s: Seconds = 30 * DAY_S


class ConsolidationRule(Block):
    """Which utterances of an ended session become LTM episodes (`promotion:
    consolidate`): those whose initial importance (`consolidation.initial_importance`)
    is at least `min_importance`. The others leave STM with their session."""

    min_importance: float = Field(0.0, ge=0, le=10)


class ForgetCommandsRule(Block):
    """Whether forget commands are carried out, and whether "forget everything" waits for
    the user's confirmation (`reference.policy.confirmation`).

    In a strategy file, `forget_commands: true` is this block at its defaults (every
    command carried out at once) and `false` is `enabled: false` (commands are stored as
    instructions and erase nothing: a baseline for what obeying them costs).
    """

    enabled: bool = True
    #: "Forget everything" erases nothing until the user confirms within `confirm_within_s`.
    confirm_everything: bool = False
    confirm_within_s: Seconds = 120.0

    @model_validator(mode="before")
    @classmethod
    def _from_bool(cls, value: Any) -> Any:
        if isinstance(value, bool):
            return {"enabled": value}
        return value

    @model_validator(mode="after")
    def _confirm_needs_commands(self) -> ForgetCommandsRule:
        if self.confirm_everything and not self.enabled:
            raise field_error("confirm_everything needs forget commands on (enabled: true)")
        return self


class RetrievalRule(Block):
    """How LTM retrieval ranks: dense (cosine over embeddings) alone, or with `lexical`
    fused by reciprocal rank with the lexical ranking of the query's terms
    (`reference.lexical`); `rrf_k` is the fusion constant (larger flattens the ranks)."""

    lexical: bool = True
    rrf_k: int = Field(60, ge=1, le=100_000)
