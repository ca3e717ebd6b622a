"""Seeded scenario generators for four domains, streamed one user at a time.

Each user gets their own `random.Random` seeded from (seed, domain, user index), so a
user's timeline does not depend on the others: the output is byte-identical for the same
arguments, and 100,000 users are written without holding more than one in memory. A
timeline is a run of episodes, each in a new session: a preference (drifting later with
probability `drift`, or repeated), a business event with its task-scoped facts, a
profile fact later erased by a forget command, a PII disclosure, chit-chat noise, and
at most one long idle gap (100-200 days) before a closing probe of what should last.
A share of users (`thread`) talk in one long-lived session, where stale statements stay
in the session's history and only expiry or events keep them out.
Every personal value a statement says (the PII disclosure, an address given in an
address change) is listed in its `pii:` with its kind, and the users are written
`pii_complete` (`GENERATED_PII_COMPLETE`): the detector's precision is measured on them.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, TextIO

from memharness.scenarios.loader import write_header, write_user
from memharness.scenarios.model import iso, to_epoch
from memharness.scenarios.pii_values import draw_pii
from memharness.scenarios.texts import DOMAINS, EVENTS, NOISE, PREFS, Lang

__all__ = [
    "DOMAINS",
    "GENERATED_PII_COMPLETE",
    "Mixture",
    "generate_scenario",
    "iter_users",
    "user_data",
]

#: Generated users' `pii_complete`: their statements list every personal value they say.
GENERATED_PII_COMPLETE = True

Step = dict[str, Any]
_START = to_epoch("2024-01-01T00:00:00Z")
_DAY = 86_400.0


@dataclass(frozen=True, slots=True)
class Mixture:
    """Per-user probabilities of each behaviour (a preference episode is always there)."""

    drift: float = 0.5
    repeat: float = 0.3
    event: float = 0.6
    forget: float = 0.3
    pii: float = 0.2
    noise: float = 0.7
    long_gap: float = 0.15
    thread: float = 0.3  # the user talks in one long-lived session (a chat thread)


class _Timeline:
    """Steps of one user under construction: a clock, sessions and fact ids."""

    def __init__(self, rng: random.Random, *, thread: bool) -> None:
        self.rng = rng
        self.thread = thread
        self.at = _START + rng.uniform(0, 30 * _DAY)
        self.steps: list[Step] = []
        self.sessions = 0
        self.facts = 0

    def wait(self, gap_days: tuple[float, float]) -> None:
        """Let a random number of days (within `gap_days`) pass."""
        self.at += self.rng.uniform(*gap_days) * _DAY

    def new_session(self, gap_days: tuple[float, float] = (0.2, 7.0)) -> str:
        """Open the next session after a gap."""
        self.wait(gap_days)
        self.sessions += 1
        return "thread" if self.thread else f"s{self.sessions}"

    def fact_id(self) -> str:
        self.facts += 1
        return f"f{self.facts}"

    def add(self, kind: str, value: str, *, session: str | None = None, **extra: Any) -> None:
        """Append a step a little after the previous one; empty extras are left out."""
        self.at += self.rng.uniform(5, 120)
        step: Step = {"at": iso(round(self.at))}
        if session is not None:
            step["session"] = session
        step[kind] = value
        step.update({k: v for k, v in extra.items() if v})
        self.steps.append(step)


def iter_users(
    *, domain: str, users: int, seed: int, zh_share: float = 0.5, mixture: Mixture | None = None
) -> Iterator[tuple[str, list[Step], Counter[str]]]:
    """Each user's id, timeline steps (plain data) and the episodes it contains."""
    if domain not in DOMAINS:
        raise ValueError(f"domain: unknown {domain!r}; expected one of {', '.join(DOMAINS)}")
    if users < 1:
        raise ValueError("users: must be >= 1")
    if not 0.0 <= zh_share <= 1.0:
        raise ValueError("zh_share: must be between 0 and 1")
    mix = mixture or Mixture()
    for index in range(users):
        rng = random.Random(f"{seed}:{domain}:{index}")
        # The newer PII values come from a generator of their own (`pii_values.py`).
        extra = random.Random(f"{seed}:{domain}:{index}:pii")
        lang: Lang = "zh" if rng.random() < zh_share else "en"
        steps, episodes = _user(rng, extra, domain, lang, mix)
        yield f"u{index:06d}", steps, episodes


def user_data(user_id: str, steps: list[Step]) -> dict[str, Any]:
    """A generated user as scenario data, for `User.model_validate`."""
    return {"id": user_id, "pii_complete": GENERATED_PII_COMPLETE, "timeline": steps}


def generate_scenario(
    out: TextIO,
    *,
    domain: str,
    users: int,
    seed: int,
    zh_share: float = 0.5,
    mixture: Mixture | None = None,
) -> Counter[str]:
    """Write a generated scenario as YAML to `out`; returns the episode counts."""
    total: Counter[str] = Counter()
    description = f"generated: domain={domain} users={users} seed={seed} zh_share={zh_share:g}"
    write_header(out, name=f"{domain}-{users}-{seed}", description=description, seed=seed)
    for user_id, steps, episodes in iter_users(
        domain=domain, users=users, seed=seed, zh_share=zh_share, mixture=mixture
    ):
        write_user(out, user_id, steps, pii_complete=GENERATED_PII_COMPLETE)
        total.update(episodes)
        total["users"] += 1
        total["steps"] += len(steps)
    return total


def _user(
    rng: random.Random, extra: random.Random, domain: str, lang: Lang, mix: Mixture
) -> tuple[list[Step], Counter[str]]:
    t = _Timeline(rng, thread=rng.random() < mix.thread)
    episodes: Counter[str] = Counter({"thread": 1} if t.thread else {})
    lasting: list[tuple[str, str]] = []  # (fact id, probe query) that should survive

    def noise(session: str) -> None:
        if rng.random() < mix.noise:
            for _ in range(rng.randint(1, 3)):
                t.add("say", rng.choice(NOISE[lang]), session=session)
            episodes["noise"] += 1

    # A preference, then maybe its drift or a repeat.
    key, spec = rng.choice(sorted(PREFS[domain].items()))
    values = rng.sample(spec.values, 2)
    session = t.new_session()
    noise(session)
    first = t.fact_id()
    t.add(
        "say", spec.say(lang, values[0]), session=session, facts=[_fact(first, "preference", key)]
    )
    t.add("probe", spec.query(lang), session=session, needed=[first])
    current = first
    if rng.random() < mix.drift:
        session = t.new_session((3.0, 40.0))
        newer = t.fact_id()
        fact = _fact(newer, "preference", key) | {"supersedes": first}
        t.add("say", spec.drift(lang, values[1]), session=session, facts=[fact])
        t.add("probe", spec.query(lang), session=session, needed=[newer], forbidden=[first])
        current = newer
        episodes["drift"] += 1
    elif rng.random() < mix.repeat:
        session = t.new_session()
        t.add("say", spec.say(lang, values[0]), session=session)
        episodes["repeat"] += 1
    lasting.append((current, spec.query(lang)))

    if rng.random() < mix.event:
        session = t.new_session()
        noise(session)
        _event(t, domain, lang, session)
        episodes["event"] += 1

    if rng.random() < mix.forget:
        session = t.new_session()
        company = t.fact_id()
        name = rng.choice(_COMPANIES[lang])
        said = f"My company is {name}." if lang == "en" else f"我的公司是{name}。"
        t.add("say", said, session=session, facts=[_fact(company, "profile", "company")])
        session = t.new_session((0.5, 20.0))
        command = "forget my company" if lang == "en" else "忘记我的公司"
        t.add("forget", command, session=session, facts=[company])
        query = "What is my company?" if lang == "en" else "我的公司是哪家？"
        t.add("probe", query, session=session, forbidden=[company])
        episodes["forget"] += 1

    if rng.random() < mix.pii:
        session = t.new_session()
        pii = t.fact_id()
        told = draw_pii(rng, extra, lang)
        fact = _fact(pii, "sensitive", told.key)
        marked = [{"value": told.value, "kind": told.kind}]
        t.add("say", told.said, session=session, facts=[fact], sensitive=True, pii=marked)
        t.add("probe", told.query, session=session, needed=[pii])
        episodes["pii"] += 1

    gap = (100.0, 200.0) if rng.random() < mix.long_gap else (1.0, 14.0)
    episodes["long_gap"] += gap[0] >= 100.0
    session = t.new_session(gap)
    fact_id, query = lasting[0]
    t.add("probe", query, session=session, needed=[fact_id])
    return t.steps, episodes


def _event(t: _Timeline, domain: str, lang: Lang, session: str) -> None:
    """A task-scoped fact, its business event, and probes before and after it."""
    spec = EVENTS[domain]
    ref = f"{spec.prefix}{t.rng.randint(100_000, 999_999)}"
    temp = t.fact_id()
    if spec.event == "profile_updated":  # the old address, then the new one supersedes it
        old, new = t.rng.sample(spec.values[lang], 2)
        t.add(
            "say",
            spec.say[lang].format(value=old),
            session=session,
            facts=[_fact(temp, "profile", "address")],
            pii=[{"value": old, "kind": "address"}],
        )
        t.add("probe", spec.query[lang].format(ref=ref), session=session, needed=[temp])
        session = t.new_session((5.0, 60.0))
        t.add(
            "event",
            spec.event,
            payload={"fields": ["address"], "topic": "address"},
            invalidates=[temp],
        )
        newer = t.fact_id()
        fact = _fact(newer, "profile", "address") | {"supersedes": temp}
        marked = [{"value": new, "kind": "address"}]
        t.add("say", spec.say[lang].format(value=new), session=session, facts=[fact], pii=marked)
        t.add(
            "probe",
            spec.query[lang].format(ref=ref),
            session=session,
            needed=[newer],
            forbidden=[temp],
        )
        return
    value = t.rng.choice(spec.values[lang])
    said = spec.say[lang].format(ref=ref, value=value)
    t.add(
        "say",
        said,
        session=session,
        facts=[_fact(temp, spec.fact_type, spec.key)],
        metadata={spec.ref_field: ref},
    )
    t.add("probe", spec.query[lang].format(ref=ref), session=session, needed=[temp])
    t.wait((0.5, 10.0))
    t.add("event", spec.event, payload={spec.ref_field: ref}, invalidates=[temp])
    session = t.new_session((0.5, 10.0))
    t.add("probe", spec.query[lang].format(ref=ref), session=session, forbidden=[temp])


def _fact(fact_id: str, kind: str, key: str) -> Step:
    return {"id": fact_id, "type": kind, "key": key}


_COMPANIES: dict[Lang, tuple[str, ...]] = {
    "en": ("Acme Corp", "Globex Ltd", "Initech", "Umbrella Systems", "Stark Logistics"),
    "zh": ("星辰科技有限公司", "华光电子", "远洋物流", "青山建设集团", "明德教育"),
}
