"""Property: whatever the timeline, nothing forgotten or erased is ever returned again.

Random timelines of utterances, forget commands, time jumps, sweeps, business events and
task-state updates run on the in-memory stack under every built-in strategy. After every
step, for every user:

- no STM record and no LTM fact that a forget removed is stored, listed or retrieved;
  what must go is decided here, independently of the engine's matching: under a topic,
  the records whose text names the topic or whose fact key is one of `topic_keys(topic)`,
  and the facts under those keys or naming the topic; under "everything", all of it;
  under "session", the session's records;
- every audit entry of an erased fact, or under an erased key before the forget, has
  its values redacted;
- "everything" leaves no session that started before it; a reset session's context
  window holds no message and its task state no value from before the reset;
- LTM episodes (sessions consolidated when they end: closed, or swept after their TTL)
  go with a forget exactly as the record they came from, and hold no raw PII.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import REDACTED, LtmFilter
from reference.models import Category, Event, SessionStatus
from reference.policy.forget_commands import parse_forget_command
from reference.policy.forget_topics import topic_keys
from reference.policy.loading import BUILTINS
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import DAY_S
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from tests.conftest import T0

USERS = ("alice", "bob")
SESSIONS = ("s1", "s2")  # per user: session ids are global, so "alice-s1", "bob-s1"
SAYS: list[tuple[str, dict[str, Any] | None]] = [
    ("My address is 12 Oak Street, Springfield.", None),
    ("My address is 5 Elm Road, Shelbyville.", None),
    ("我的地址是北京市朝阳区建国路88号", None),
    ("My phone is 13812345678.", None),
    ("My email is alice@example.com.", None),
    ("I always want deliveries by SF Express.", None),
    ("I like jazz music.", None),
    ("Please book a table for two at 7pm at Luigi's.", None),
    ("I always want gift wrapping for this order.", {"order_id": "O1"}),
    ("My laptop screen is broken, please fix it.", {"ticket_id": "T1"}),
    ("Hi there!", None),
]
FORGETS = [
    "Please forget my address.",
    "忘记我的地址",
    "forget my phone number",
    "Forget jazz.",
    "forget my email",
    "Forget that.",
    "Forget everything about me.",
    "reset the conversation",
]
EVENTS = [
    ("profile_updated", {"fields": ["address"]}),
    ("order_completed", {"order_id": "O1"}),
    ("ticket_closed", {"ticket_id": "T1"}),
]
JUMPS = [1.0, 60.0, 3600.0, DAY_S, 30 * DAY_S, 91 * DAY_S]
KEY = generate_key()
ORACLE = OracleAdvice(needed_until=lambda memory: math.inf if len(memory.text) % 2 == 0 else None)

step = st.one_of(
    st.tuples(
        st.just("say"),
        st.sampled_from(USERS),
        st.sampled_from(SESSIONS),
        st.integers(0, len(SAYS) - 1),
    ),
    st.tuples(
        st.just("forget"),
        st.sampled_from(USERS),
        st.sampled_from(SESSIONS),
        st.integers(0, len(FORGETS) - 1),
    ),
    st.tuples(st.just("advance"), st.sampled_from(JUMPS)),
    st.tuples(st.just("sweep")),
    st.tuples(st.just("event"), st.sampled_from(USERS), st.integers(0, len(EVENTS) - 1)),
    st.tuples(st.just("task"), st.sampled_from(USERS), st.sampled_from(SESSIONS)),
    # Ends the session: consolidated at once under `promotion: consolidate`.
    st.tuples(st.just("close"), st.sampled_from(USERS), st.sampled_from(SESSIONS)),
)


@dataclass
class Model:
    """What must never come back, as decided when each forget ran."""

    stm_gone: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    facts_gone: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    # (user, key or "*", last audit id then): entries under the key up to then stay redacted.
    keys_gone: list[tuple[str, str, int]] = field(default_factory=list)
    # Message ids and task-state values that a reset or "everything" removed.
    messages_gone: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    values_gone: dict[str, set[str]] = field(default_factory=lambda: {u: set() for u in USERS})
    messages: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    task_values: dict[tuple[str, str], set[str]] = field(default_factory=dict)
    counter: itertools.count[int] = field(default_factory=itertools.count)


def test_the_forget_samples_parse_as_intended() -> None:
    scopes = [parse_forget_command(text) for text in FORGETS]
    assert [c.scope if c else None for c in scopes] == [
        *["topic"] * 6,
        "everything",
        "session",
    ]
    assert scopes[5] is not None and scopes[5].topic is None


@pytest.mark.parametrize("name", list(BUILTINS))
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(steps=st.lists(step, min_size=1, max_size=30))
# A fact that expired and was swept before the forget: only its audit entries remain.
@example(
    steps=[
        ("say", "alice", "s1", 0),
        ("advance", 91 * DAY_S),
        ("sweep",),
        ("forget", "alice", "s1", 0),
    ]
)
def test_nothing_forgotten_is_ever_returned(
    name: str, steps: list[tuple[Any, ...]], embedder: Embedder, tmp_path: Path
) -> None:
    clock = VirtualClock(T0)
    system = build_memory_system(
        Settings(backend="memory", data_dir=tmp_path, encryption_key=KEY),  # type: ignore[arg-type]
        clock=clock,
        embedder=embedder,
        namespace=Namespace("props"),
        strategy=name,
        oracle=ORACLE,
    )
    model = Model()
    for action, *args in steps:
        run(system, model, clock, action, args)
        check(system, model)


def run(
    system: MemorySystem, model: Model, clock: VirtualClock, action: str, args: list[Any]
) -> None:
    if action in ("say", "forget", "close", "task") and closed(
        system, args[0], f"{args[0]}-{args[1]}"
    ):
        return  # a closed session takes no more turns
    if action == "say":
        user, session, index = args
        session = f"{user}-{session}"
        text, metadata = SAYS[index]
        said = system.turn(user_id=user, session_id=session, text=text, metadata=metadata)
        model.messages.setdefault((user, session), set()).add(said.message_id)
        if said.context_ids == [said.message_id]:  # a new session under this id
            model.messages[(user, session)] = {said.message_id}
    elif action == "forget":
        user, session, index = args
        forget(system, model, clock, user, f"{user}-{session}", FORGETS[index])
    elif action == "advance":
        clock.advance(args[0])
    elif action == "sweep":
        system.sweep()
    elif action == "event":
        user, index = args
        event_name, payload = EVENTS[index]
        system.handle_event(Event(name=event_name, user_id=user, at=clock.now(), payload=payload))
    elif action == "close":
        user, session = args
        system.close_session(user_id=user, session_id=f"{user}-{session}")
    elif action == "task":
        user, session = args
        session = f"{user}-{session}"
        if system.session.peek(user_id=user, session_id=session) is not None:
            value = f"v{next(model.counter)}"  # unique: a later value is never an old one
            system.session.update_task_state(
                user_id=user, session_id=session, task_state={"note": value}
            )
            model.task_values.setdefault((user, session), set()).add(value)


def closed(system: MemorySystem, user: str, session: str) -> bool:
    state = system.session.peek(user_id=user, session_id=session)
    return state is not None and state.status is SessionStatus.CLOSED


def forget(
    system: MemorySystem, model: Model, clock: VirtualClock, user: str, session: str, text: str
) -> None:
    command = parse_forget_command(text)
    assert command is not None
    records = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
    facts = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
    must_stm: set[str] = set()
    must_facts: set[str] = set()
    if command.scope == "everything":
        must_stm = {r.record_id for r in records}
        must_facts = {f.fact_id for f in facts}
    elif command.scope == "session":
        must_stm = {r.record_id for r in records if r.session_id == session}
    elif command.topic is not None:
        keys = topic_keys(command.topic)
        word = command.topic.casefold()
        must_stm = {
            r.record_id
            for r in records
            if word in r.text.casefold() or r.metadata.get("topic") in keys
        }
        # An episode goes as the record it was consolidated from would.
        must_facts = {
            f.fact_id
            for f in facts
            if f.key in keys
            or word in f.text.casefold()
            or (f.category is Category.EPISODE and f.value.get("topic") in keys)
        }
    said = system.turn(user_id=user, session_id=session, text=text)
    if said.confirmation == "asked":  # the strategy asks before erasing everything
        assert said.forgotten is None
        said = system.turn(user_id=user, session_id=session, text="yes")
    report = said.forgotten
    assert report is not None and report.scope == command.scope
    assert must_stm <= report.stm_removed, "a record that names the topic was kept"
    assert must_facts <= report.ltm_erased, "a fact under the topic's keys was kept"
    model.stm_gone[user] |= report.stm_removed
    model.facts_gone[user] |= report.ltm_erased
    last_audit = max((e.audit_id for e in system.ltm.audit_log(user_id=user)), default=0)
    if command.scope == "topic" and command.topic is not None:
        model.keys_gone += [(user, key, last_audit) for key in topic_keys(command.topic)]
    scopes: list[tuple[str, str]] = []
    if command.scope == "everything":
        model.keys_gone.append((user, "*", last_audit))
        assert system.session.list_user_sessions(user_id=user) == []
        scopes = [(user, f"{user}-{s}") for s in SESSIONS]
    elif command.scope == "session":
        scopes = [(user, session)]
    for scope in scopes:
        model.messages_gone[user] |= model.messages.pop(scope, set())
        model.values_gone[user] |= model.task_values.pop(scope, set())
    if command.scope in ("everything", "session"):
        model.messages_gone[user].add(said.message_id)


def check(system: MemorySystem, model: Model) -> None:
    for user in USERS:
        records = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
        facts = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
        assert not model.stm_gone[user] & {r.record_id for r in records}
        assert not model.facts_gone[user] & {f.fact_id for f in facts}
        for episode in (f for f in facts if f.category is Category.EPISODE):
            # Consolidated from a masked STM record: the text holds no raw PII, and the
            # value is masked (any original sealed) as a promoted fact's is.
            assert system.pii.mask(episode.text) == episode.text
            shown = {k: v for k, v in episode.value.items() if k not in ("_sealed", "_sealed_at")}
            assert system.pii.mask(repr(shown)) == repr(shown)
        for session, query in itertools.product(SESSIONS, ("address", "phone jazz email")):
            session = f"{user}-{session}"
            recalled = system.recall(user_id=user, session_id=session, query=query)
            assert not model.stm_gone[user] & {h.record.record_id for h in recalled.stm_hits}
            assert not model.facts_gone[user] & {h.record.fact_id for h in recalled.ltm_hits}
        for entry in system.ltm.audit_log(user_id=user):
            erased = entry.fact_id in model.facts_gone[user] or any(
                who == user and key in ("*", entry.key) and entry.audit_id <= last
                for who, key, last in model.keys_gone
            )
            if erased:
                assert entry.old_value in (None, REDACTED), entry
                assert entry.new_value in (None, REDACTED), entry
        for session in (f"{user}-{s}" for s in SESSIONS):
            context = system.session.context(user_id=user, session_id=session)
            assert not model.messages_gone[user] & set(context)
            state = system.session.peek(user_id=user, session_id=session)
            if state is not None:
                assert state.task_state.get("note") not in model.values_gone[user]
