"""The checks of a scenario across steps, which types alone cannot express: unknown or
forward fact references, time going backwards, duplicate ids; each a `(location,
message)` pair, so that the loader can give each one its YAML line.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Set
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from memharness.scenarios.model import (
    Adversarial,
    EventStep,
    ForgetStep,
    Loc,
    ProbeStep,
    SayStep,
    Scenario,
    Step,
    User,
    iso,
    step_kind,
)
from reference.suggest import did_you_mean

_STEP: TypeAdapter[Any] = TypeAdapter(Step)
_STEP_MODELS: dict[str, type[BaseModel]] = {
    "say": SayStep,
    "event": EventStep,
    "forget": ForgetStep,
    "probe": ProbeStep,
}


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
    kind = step_kind(raw)
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


def pii_findings(user: User, base: Loc) -> list[tuple[Loc, str]]:
    """Warnings, not errors: statements marked `sensitive: true` that list no `pii`
    value. The scenario replays, but their PII residency cannot be measured (a run counts
    them as `pii_unmeasured`) and the detector cannot be scored on them."""
    return [
        (
            (*base, "timeline", s, "sensitive"),
            "marked sensitive but lists no `pii` values: unmeasurable (list the personal"
            " values as said, e.g. pii: [{value: ..., kind: phone}])",
        )
        for s, step in enumerate(user.timeline)
        if isinstance(step, SayStep) and step.pii_unmeasured
    ]


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
    asking: dict[str, ForgetStep] = {}  # session -> its forget-everything awaiting an answer

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
        if isinstance(step, SayStep | ForgetStep):
            asked = asking.pop(step.session, None)
            if isinstance(step, SayStep) and step.confirms is not None and asked is None:
                problems.append(((*loc, "confirms"), _CONFIRMS_ALONE))
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
            if step.scope == "everything":
                asking[step.session] = step
            # Whether a forget-everything erases depends on the strategy (it may ask, and
            # a confirmation may come too late): a later probe may need its facts, and
            # the ground truth drops them where they are erased (`sim/truth.py`).
            definite = step.scope != "everything"
            for i, fact in enumerate(step.facts):
                if ref((*loc, "facts", i), fact) and definite:
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


_CONFIRMS_ALONE = (
    "answers a forget command of scope everything: it must be the user's next turn "
    "(say or forget) in that session after one"
)
