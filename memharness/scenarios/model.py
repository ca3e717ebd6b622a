"""The scenario format: users with time-ordered timelines of say, event, forget and probe.

A step is a mapping whose kind is the key it carries: `say: <text>`, `event: <name>`,
`forget: <command text>` or `probe: <query>`. Fact ids are scoped to their user (LoCoMo's
`D1:3` repeats across conversations). Types are checked by pydantic; `check_scenario`
adds the checks across steps (unknown or forward fact references, time going backwards,
duplicate ids) and returns them as `(location, message)` pairs, so the loader can give
each one its YAML line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Set
from datetime import UTC, date, datetime, time
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)

from reference.models import MemoryType
from reference.suggest import did_you_mean
from reference.validation import MAX_TEXT_CHARS

Loc = tuple[int | str, ...]
STEP_KINDS = ("say", "event", "forget", "probe")


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


class SayStep(_Strict):
    """The user says `say` in `session`; it asserts `facts`.

    `sensitive` marks a statement that discloses personal data, and `pii` lists those
    values as said (each must occur in `say`): the ground truth PII residency follows,
    whatever the memory's detector finds. A statement with `pii` values is sensitive.
    """

    at: Timestamp
    session: Id
    say: Text
    facts: list[FactSpec] = Field(default_factory=list)
    sensitive: bool = False
    pii: list[Annotated[str, Field(min_length=1)]] = Field(default_factory=list)
    metadata: dict[str, MetaValue] = Field(default_factory=dict)

    @field_validator("pii")
    @classmethod
    def _pii_is_said(cls, values: list[str], info: ValidationInfo) -> list[str]:
        said = info.data.get("say")
        if isinstance(said, str):
            for value in values:
                if value not in said:
                    raise ValueError(f"{value!r} does not occur in the `say` text")
        return values

    @property
    def discloses_pii(self) -> bool:
        """Whether the script marks this statement as carrying personal data."""
        return self.sensitive or bool(self.pii)


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


def _step_kind(value: Any) -> str | None:
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
        _step_kind,
        custom_error_type="step_kind",
        custom_error_message="a step needs exactly one of the keys say, event, forget, probe",
    ),
]


_STEP: TypeAdapter[Any] = TypeAdapter(Step)
_STEP_MODELS: dict[str, type[BaseModel]] = {
    "say": SayStep,
    "event": EventStep,
    "forget": ForgetStep,
    "probe": ProbeStep,
}


class User(_Strict):
    """One user and their timeline, in time order."""

    id: Id
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


def check_scenario(scenario: Scenario) -> list[tuple[Loc, str]]:
    """Checks across steps that types alone cannot express, as (location, message)."""
    problems: list[tuple[Loc, str]] = []
    facts_by_user: dict[str, set[str]] = {}
    seen_users: set[str] = set()
    for u, user in enumerate(scenario.users):
        _check_user_id(user.id, ("users", u), seen_users, problems)
        facts_by_user[user.id] = check_user(user, ("users", u), problems)
    check_adversarial(enumerate(scenario.adversarial), facts_by_user, problems)
    return problems


def check_scenario_data(data: Mapping[str, Any]) -> list[tuple[Loc, str]]:
    """The checks of `check_scenario` on the parts of plain scenario data that validate,
    for a document whose schema errors are reported too: each step is validated alone,
    and what a step that does not validate asserts is taken as asserted (no "unknown
    fact" for it)."""
    problems: list[tuple[Loc, str]] = []
    facts_by_user: dict[str, set[str]] = {}
    seen_users: set[str] = set()
    users = data.get("users")
    for u, raw in enumerate(users if isinstance(users, list) else []):
        if not isinstance(raw, dict):
            continue
        user_id = raw.get("id")
        user_id = user_id if isinstance(user_id, str) else None
        if user_id is not None:
            _check_user_id(user_id, ("users", u), seen_users, problems)
        facts = check_user_data(raw, ("users", u), problems)
        if user_id is not None:
            facts_by_user[user_id] = facts
    questions = data.get("adversarial")
    parsed = []
    for a, raw in enumerate(questions if isinstance(questions, list) else []):
        try:
            parsed.append((a, Adversarial.model_validate(raw)))
        except ValidationError:
            continue
    check_adversarial(parsed, facts_by_user, problems)
    return problems


def check_user_data(raw: Mapping[str, Any], base: Loc, problems: list[tuple[Loc, str]]) -> set[str]:
    """`check_user` on one user's plain data whose steps may not all validate; returns
    the fact ids the user asserts (those of steps that do not validate included).

    A step that does not validate is checked without its faulty fields (`_repaired`);
    the facts it names are taken as asserted, so no "unknown fact" follows from its
    own error."""
    timeline = raw.get("timeline")
    steps: list[tuple[int, Step]] = []
    assumed: set[str] = set()
    last = 0.0
    for s, raw_step in enumerate(timeline if isinstance(timeline, list) else []):
        try:
            step = _STEP.validate_python(raw_step)
        except ValidationError:
            assumed |= _asserted_ids(raw_step)
            step = _repaired(raw_step, last)
        if step is not None:
            steps.append((s, step))
            last = max(last, step.at)
    return check_timeline(steps, base, problems, assumed=frozenset(assumed)) | assumed


def _repaired(raw: Any, last: float) -> Any:
    """The step `raw` without the fields that fail, required ones filled with stand-ins
    (the time: `last`, so that it cannot be out of order), or None."""
    kind = _step_kind(raw)
    if kind is None:
        return None
    data, model = dict(raw), _STEP_MODELS[kind]
    for _ in range(3):
        try:
            return _STEP.validate_python(data)
        except ValidationError as exc:
            bad = {e["loc"][1] for e in exc.errors() if len(e["loc"]) > 1}
            for key in bad:
                data.pop(key, None)
            for name, info in model.model_fields.items():
                if info.is_required() and name not in data:
                    data[name] = last if name == "at" else "?"
    return None


def _asserted_ids(raw_step: Any) -> set[str]:
    facts = raw_step.get("facts") if isinstance(raw_step, dict) else None
    if not isinstance(facts, list):
        return set()
    ids = (fact.get("id") if isinstance(fact, dict) else fact for fact in facts)
    return {fact_id for fact_id in ids if isinstance(fact_id, str)}


def _check_user_id(user_id: str, loc: Loc, seen: set[str], problems: list[tuple[Loc, str]]) -> None:
    if user_id in seen:
        problems.append(((*loc, "id"), f"duplicate user id {user_id!r}"))
    seen.add(user_id)


def check_adversarial(
    questions: Iterable[tuple[int, Adversarial]],
    facts_by_user: Mapping[str, Set[str]],
    problems: list[tuple[Loc, str]],
) -> None:
    """Each question's user and evidence must exist; appends to `problems`."""
    for a, question in questions:
        known = facts_by_user.get(question.user)
        if known is None:
            hint = did_you_mean(question.user, facts_by_user)
            problems.append((("adversarial", a, "user"), f"unknown user {question.user!r}{hint}"))
            continue
        for e, fact in enumerate(question.evidence):
            if fact not in known:
                message = f"unknown fact {fact!r}{did_you_mean(fact, known)}"
                problems.append((("adversarial", a, "evidence", e), message))


def check_user(user: User, base: Loc, problems: list[tuple[Loc, str]]) -> set[str]:
    """Check one user's timeline, appending to `problems`; returns the user's fact ids."""
    return check_timeline(enumerate(user.timeline), base, problems)


def check_timeline(
    timeline: Iterable[tuple[int, Step]],
    base: Loc,
    problems: list[tuple[Loc, str]],
    *,
    assumed: Set[str] = frozenset(),
) -> set[str]:
    """Check the numbered steps of one user's timeline, appending to `problems`; returns
    the fact ids they assert. Facts in `assumed` (asserted by steps that did not
    validate) are never reported as unknown."""
    steps = list(timeline)
    everything = {fact.id for _, step in steps if isinstance(step, SayStep) for fact in step.facts}
    asserted: set[str] = set()
    gone: dict[str, str] = {}  # fact id -> why it is no longer valid
    last = -math.inf

    def ref(loc: Loc, fact: str) -> bool:
        if fact in assumed and fact not in asserted:
            return False
        if fact not in everything:
            problems.append((loc, f"unknown fact {fact!r}{did_you_mean(fact, everything)}"))
        elif fact not in asserted:
            problems.append((loc, f"fact {fact!r} is only asserted later"))
        else:
            return True
        return False

    for s, step in steps:
        loc: Loc = (*base, "timeline", s)
        if step.at < last:
            problems.append(
                ((*loc, "at"), f"goes back in time (before the previous step, {iso(last)})")
            )
        last = max(last, step.at)
        if isinstance(step, SayStep):
            for f, spec in enumerate(step.facts):
                if spec.id in asserted:
                    problems.append(((*loc, "facts", f, "id"), f"duplicate fact id {spec.id!r}"))
                old = spec.supersedes
                if old is not None and ref((*loc, "facts", f, "supersedes"), old):
                    gone.setdefault(old, f"superseded by {spec.id!r}")
                asserted.add(spec.id)
        elif isinstance(step, EventStep):
            for i, fact in enumerate(step.invalidates):
                if ref((*loc, "invalidates", i), fact):
                    gone.setdefault(fact, f"invalidated by event {step.event!r}")
        elif isinstance(step, ForgetStep):
            for i, fact in enumerate(step.facts):
                if ref((*loc, "facts", i), fact):
                    gone[fact] = "erased by a forget command"
        else:
            for i, fact in enumerate(step.needed):
                if ref((*loc, "needed", i), fact) and fact in gone:
                    problems.append(((*loc, "needed", i), f"fact {fact!r} is {gone[fact]}"))
                if fact in step.forbidden:
                    problems.append(((*loc, "needed", i), f"fact {fact!r} is also forbidden"))
            for i, fact in enumerate(step.forbidden):
                ref((*loc, "forbidden", i), fact)
    return everything
