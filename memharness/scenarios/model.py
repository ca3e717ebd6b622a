"""The scenario format: users with time-ordered timelines of say, event, forget and probe.

A step is a mapping whose kind is the key it carries: `say: <text>`, `event: <name>`,
`forget: <command text>` or `probe: <query>`. Fact ids are scoped to their user (LoCoMo's
`D1:3` repeats across conversations). Types are checked by pydantic; the checks across
steps are in `checks.py`.
"""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationInfo,
    field_validator,
)

from reference.models import MemoryType
from reference.validation import MAX_TEXT_CHARS

Loc = tuple[int | str, ...]
STEP_KINDS = ("say", "event", "forget", "probe")
#: The kinds of personal value a statement's `pii:` entry may name (the detector's names):
#: `mobile` a Chinese mobile number, `phone` any other phone number (landlines,
#: international), `ssn` a US social security number, `name` a person's name, `address`
#: a street or postal address, `other` what none of these says (a plain string entry).
PiiKind = Literal[
    "cn_id", "mobile", "phone", "email", "bank_card", "passport", "ssn", "name", "address",
    "other",
]  # fmt: skip
PII_KINDS: tuple[str, ...] = get_args(PiiKind)


def to_epoch(value: Any) -> float:
    """Seconds since the epoch from an ISO-8601 string, a datetime or a number.

    A time without a zone is read as UTC, so a scenario means the same on every machine.
    """
    if isinstance(value, bool):
        raise ValueError("must be an ISO-8601 timestamp or epoch seconds, not a boolean")
    if isinstance(value, int | float):
        if not math.isfinite(value) or not 0 <= value <= MAX_EPOCH:
            raise ValueError(
                f"epoch seconds must be a number from 0 to {MAX_EPOCH:.0f} (year 9999)"
            )
        return float(value)
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{value!r} is not an ISO-8601 timestamp") from None
    if isinstance(value, date) and not isinstance(value, datetime):
        value = datetime.combine(value, time())
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        return value.timestamp()
    raise ValueError("must be an ISO-8601 timestamp or epoch seconds")


#: The last second a timestamp may name (datetime stops at year 9999).
MAX_EPOCH = datetime(9999, 12, 31, 23, 59, 59, tzinfo=UTC).timestamp()


def iso(epoch: float) -> str:
    """The ISO-8601 UTC form of epoch seconds (`2024-03-01T09:00:00Z`)."""
    text = datetime.fromtimestamp(epoch, UTC).isoformat()
    return text.replace("+00:00", "Z")


Timestamp = Annotated[float, BeforeValidator(to_epoch)]
Id = Annotated[str, Field(min_length=1, max_length=200)]
#: What the memory is told or asked: the facade's limit (`MemorySystem.turn`, `recall`)
#: applies, so a scenario that cannot run is refused when it loads, at its line.
Text = Annotated[str, Field(min_length=1, max_length=MAX_TEXT_CHARS)]
MetaValue = str | int | float | bool


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class FactSpec(_Strict):
    """A fact a `say` asserts: its id (unique within the user), type and optional key.

    `supersedes` names an earlier fact of the same user that this one makes stale.
    """

    id: Id
    type: MemoryType
    key: str | None = None
    supersedes: Id | None = None


def _pii_entry(value: Any) -> Any:
    # A plain string names a value of no particular kind: `other`.
    return {"value": value, "kind": "other"} if isinstance(value, str) else value


class PiiValue(_Strict):
    """A personal value a statement contains, exactly as said, and its kind."""

    value: Annotated[str, Field(min_length=1)]
    kind: PiiKind = "other"


class SayStep(_Strict):
    """The user says `say` in `session`; it asserts `facts`.

    `pii` lists the personal values the statement contains, as said (each must occur in
    `say`), each a string or `{value, kind}`: the ground truth PII residency follows and
    the detector is scored against, whatever the memory's detector finds. A statement
    with `pii` values discloses PII; one only marked `sensitive: true` does too, but
    names no value to follow: it is unmeasurable (`scenarios validate` warns, a run
    counts it as `pii_unmeasured`).
    """

    at: Timestamp
    session: Id
    say: Text
    facts: list[FactSpec] = Field(default_factory=list)
    sensitive: bool = False
    pii: list[Annotated[PiiValue, BeforeValidator(_pii_entry)]] = Field(default_factory=list)
    metadata: dict[str, MetaValue] = Field(default_factory=dict)
    #: The user's answer to "forget everything" (the turn right after a `scope:
    #: everything` forget in this session): true confirms, false refuses. Ground truth:
    #: under a strategy that asks (`forget_commands.confirm_everything`), that forget
    #: erases only on `confirms: true` within the strategy's `confirm_within_s`.
    confirms: bool | None = None

    @field_validator("pii")
    @classmethod
    def _pii_is_said(cls, values: list[PiiValue], info: ValidationInfo) -> list[PiiValue]:
        said = info.data.get("say")
        if isinstance(said, str):
            for i, entry in enumerate(values):
                if entry.value not in said:
                    raise ValueError(f"entry {i}: {entry.value!r} does not occur in the `say` text")
        return values

    @property
    def discloses_pii(self) -> bool:
        """Whether the script marks this statement as carrying personal data."""
        return self.sensitive or bool(self.pii)

    @property
    def pii_unmeasured(self) -> bool:
        """Marked `sensitive` with no value to follow: its residency cannot be measured."""
        return self.sensitive and not self.pii

    @property
    def pii_values(self) -> tuple[str, ...]:
        """The marked values as said, each once, in the order listed."""
        return tuple(dict.fromkeys(entry.value for entry in self.pii))


class EventStep(_Strict):
    """A business event (`profile_updated`, `order_completed`, ...) for this user.

    `invalidates` is ground truth: the facts the event makes stale.
    """

    at: Timestamp
    event: Id
    payload: dict[str, Any] = Field(default_factory=dict)
    invalidates: list[Id] = Field(default_factory=list)


class ForgetStep(_Strict):
    """The user gives a forget command; `facts` are the facts it erases."""

    at: Timestamp
    session: Id
    forget: Text
    scope: Literal["topic", "everything", "session"] = "topic"
    facts: list[Id] = Field(default_factory=list)


class ProbeStep(_Strict):
    """A question at this moment: `needed` facts must be retrieved, `forbidden` must not.

    `k` overrides the run's top-k for this probe.
    """

    at: Timestamp
    session: Id
    probe: Text
    needed: list[Id] = Field(default_factory=list)
    forbidden: list[Id] = Field(default_factory=list)
    k: int | None = Field(default=None, ge=1, le=1000)
    answer: str | None = None  # the expected answer, when the source has one (LoCoMo)


def step_kind(value: Any) -> str | None:
    if isinstance(value, BaseModel):
        return next(kind for kind in STEP_KINDS if hasattr(value, kind))
    if isinstance(value, dict):
        kinds = [kind for kind in STEP_KINDS if kind in value]
        return kinds[0] if len(kinds) == 1 else None
    return None


Step = Annotated[
    Annotated[SayStep, Tag("say")]
    | Annotated[EventStep, Tag("event")]
    | Annotated[ForgetStep, Tag("forget")]
    | Annotated[ProbeStep, Tag("probe")],
    Discriminator(
        step_kind,
        custom_error_type="step_kind",
        custom_error_message="a step needs exactly one of the keys say, event, forget, probe",
    ),
]


class User(_Strict):
    """One user and their timeline, in time order.

    `pii_complete: true` says every statement of the user lists all the personal values
    it contains (a statement without `pii` contains none): the detector's precision is
    measured on such users only (a detection no mark covers is a false positive).
    """

    id: Id
    pii_complete: bool = False
    timeline: list[Step] = Field(default_factory=list)


class Adversarial(_Strict):
    """A question kept apart from the probes (LoCoMo category 5): not scored as recall."""

    user: Id
    query: str
    evidence: list[Id] = Field(default_factory=list)
    answer: str | None = None


class Scenario(_Strict):
    """A named scenario: users, their timelines, and questions kept apart."""

    name: Id
    description: str = ""
    seed: int | None = None
    users: list[User] = Field(min_length=1)
    adversarial: list[Adversarial] = Field(default_factory=list)
