"""Conformance suite of the session layer: every backend passes the same tests.

Time moves only through the virtual clock (`clock.advance`); nothing sleeps.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from typing import Any

import pytest

from reference.clock import ScaledClock, SystemClock, VirtualClock
from reference.errors import InvalidInput, NotFound, SessionClosed
from reference.footprint import Usage, session_bytes
from reference.models import SessionState, SessionStatus
from reference.session.base import DEFAULT_SESSION_TTL_S, SessionStore
from reference.session.primitives import (
    AppendMessage,
    CloseSession,
    CreateSession,
    DeleteSession,
    DeleteUserSessions,
    ListSessions,
    ReadContext,
    ReadSession,
    ResetSession,
    SessionOp,
)
from reference.session.redis_store import NATIVE_TTL_MARGIN_S
from tests.conftest import T0
from tests.fixtures.session_backends import (
    MINIMAL,
    SESSION_BACKENDS,
    SessionStoreFactory,
    raw_values,
    redis_client_for,
    redis_keys,
)

TTL = DEFAULT_SESSION_TTL_S
MIN = 60.0
ALICE, BOB = "alice", "bob"
PHONE, EMAIL = "13812345678", "alice.wang@example.com"


def _open(store: SessionStore, session_id: str = "s1", user_id: str = ALICE, **kw: Any) -> None:
    store.create(user_id=user_id, session_id=session_id, **kw)


# ---------------------------------------------------------------- create / get / peek
def test_create_get_peek(session_store: SessionStore) -> None:
    created = session_store.create(
        user_id=ALICE, session_id="s1", channel="app", task_state={"step": 1, "目的地": "北京"}
    )
    assert created.started_at == created.last_active_at == T0
    assert created.expires_at == T0 + TTL
    assert created.status is SessionStatus.ACTIVE
    assert session_store.get(user_id=ALICE, session_id="s1") == created
    assert session_store.peek(user_id=ALICE, session_id="s1") == created


def test_create_defaults(session_store: SessionStore) -> None:
    state = session_store.create(user_id=ALICE, session_id="s1")
    assert (state.channel, state.task_state) == ("web", {})
    assert session_store.get(user_id=ALICE, session_id="s1") == state


def test_timestamps_round_trip_exactly(session_store: SessionStore, clock: VirtualClock) -> None:
    clock.advance(0.123456789)
    created = session_store.create(user_id=ALICE, session_id="s1")
    assert session_store.peek(user_id=ALICE, session_id="s1") == created


def test_duplicate_create_names_session_id(session_store: SessionStore) -> None:
    _open(session_store)
    with pytest.raises(InvalidInput) as err:
        _open(session_store)
    assert err.value.field == "session_id"


def test_sessions_are_keyed_per_user(session_store: SessionStore, clock: VirtualClock) -> None:
    """Another user's session of the same id neither blocks a create nor shows through."""
    alice = session_store.create(user_id=ALICE, session_id="s1", task_state={"who": "alice"})
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="a1")
    clock.advance(MIN)
    bob = session_store.create(user_id=BOB, session_id="s1", task_state={"who": "bob"})
    session_store.append_message(user_id=BOB, session_id="s1", message_id="b1")
    assert session_store.peek(user_id=ALICE, session_id="s1") == alice
    assert session_store.peek(user_id=BOB, session_id="s1") == bob
    assert session_store.context(user_id=ALICE, session_id="s1") == ["a1"]
    assert session_store.context(user_id=BOB, session_id="s1") == ["b1"]
    assert session_store.count() == 2
    assert session_store.delete(user_id=BOB, session_id="s1") is True
    assert session_store.peek(user_id=ALICE, session_id="s1") == alice
    clock.advance(TTL - MIN)  # Alice's session expires (Bob's is gone already)
    assert session_store.sweep_expired(batch_size=1) == 1
    assert session_store.peek(user_id=ALICE, session_id="s1") is None
    assert session_store.count() == 0


def test_create_replaces_an_expired_session(
    session_store: SessionStore, clock: VirtualClock
) -> None:
    _open(session_store)
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    clock.advance(TTL)
    state = session_store.create(user_id=BOB, session_id="s1")
    assert state.user_id == BOB
    assert session_store.context(user_id=BOB, session_id="s1") == []
    assert session_store.get(user_id=ALICE, session_id="s1") is None
    assert session_store.list_user_sessions(user_id=ALICE) == []
    assert session_store.count() == 1


def test_returned_task_state_is_a_copy(session_store: SessionStore) -> None:
    _open(session_store, task_state={"items": [1, 2]})
    got = session_store.get(user_id=ALICE, session_id="s1")
    assert got is not None
    got.task_state["items"].append(3)
    again = session_store.get(user_id=ALICE, session_id="s1")
    assert again is not None and again.task_state == {"items": [1, 2]}


# ---------------------------------------------------------------- expiry
def test_get_slides_the_ttl(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    clock.advance(20 * MIN)
    got = session_store.get(user_id=ALICE, session_id="s1")
    assert got is not None
    assert (got.last_active_at, got.expires_at) == (clock.now(), clock.now() + TTL)
    clock.advance(20 * MIN)  # 40 min after creation, 20 after the last access
    assert session_store.get(user_id=ALICE, session_id="s1") is not None
    clock.advance(31 * MIN)
    assert session_store.get(user_id=ALICE, session_id="s1") is None


def test_peek_does_not_slide_the_ttl(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    clock.advance(20 * MIN)
    peeked = session_store.peek(user_id=ALICE, session_id="s1")
    assert peeked is not None and peeked.expires_at == T0 + TTL
    clock.advance(11 * MIN)
    assert session_store.peek(user_id=ALICE, session_id="s1") is None


def test_lazy_expiry_without_sweep(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    clock.advance(TTL - 0.001)
    assert session_store.peek(user_id=ALICE, session_id="s1") is not None
    clock.advance(0.001)  # now == expires_at: expired
    assert session_store.count() == 0
    assert session_store.context(user_id=ALICE, session_id="s1") == []
    assert session_store.get(user_id=ALICE, session_id="s1") is None
    assert session_store.list_user_sessions(user_id=ALICE) == []
    assert redis_keys(session_store) == []  # the read purged everything, indexes included


def test_sweep_removes_expired_sessions(session_store: SessionStore, clock: VirtualClock) -> None:
    for i in range(3):
        _open(session_store, f"old{i}")
        session_store.append_message(user_id=ALICE, session_id=f"old{i}", message_id="m")
    clock.advance(20 * MIN)
    _open(session_store, "new", user_id=BOB)
    clock.advance(15 * MIN)
    assert session_store.sweep_expired() == 3
    assert session_store.sweep_expired() == 0
    assert session_store.count() == 1
    assert [s.session_id for s in session_store.list_user_sessions(user_id=BOB)] == ["new"]
    if redis_client_for(session_store) is not None:
        assert not [k for k in redis_keys(session_store) if "old" in k]
        assert not any(v.startswith("old") for v in raw_values(session_store))


def test_sweep_respects_batch_size(session_store: SessionStore, clock: VirtualClock) -> None:
    for i in range(5):
        _open(session_store, f"s{i}")
        clock.advance(1)
    clock.advance(TTL)
    assert [session_store.sweep_expired(batch_size=2) for _ in range(4)] == [2, 2, 1, 0]
    assert redis_keys(session_store) == []


def test_sweep_spares_refreshed_sessions(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    clock.advance(20 * MIN)
    session_store.get(user_id=ALICE, session_id="s1")
    clock.advance(15 * MIN)
    assert session_store.sweep_expired() == 0
    assert session_store.peek(user_id=ALICE, session_id="s1") is not None


def test_sweep_batch_size_must_be_positive(session_store: SessionStore) -> None:
    with pytest.raises(InvalidInput) as err:
        session_store.sweep_expired(batch_size=0)
    assert err.value.field == "batch_size"


def test_count(session_store: SessionStore, clock: VirtualClock) -> None:
    assert session_store.count() == 0
    _open(session_store, "s1")
    clock.advance(10 * MIN)
    _open(session_store, "s2", user_id=BOB)
    session_store.close(user_id=BOB, session_id="s2")
    assert session_store.count() == 2  # closed sessions live until they expire
    clock.advance(20 * MIN)
    assert session_store.count() == 1
    clock.advance(10 * MIN)
    assert session_store.count() == 0


# ---------------------------------------------------------------- context window
def test_context_window_keeps_the_newest(session_store_factory: SessionStoreFactory) -> None:
    store = session_store_factory(window=3)
    _open(store)
    windows = [
        store.append_message(user_id=ALICE, session_id="s1", message_id=f"m{i}") for i in range(5)
    ]
    assert windows[0] == ["m0"]
    assert windows[-1] == ["m4", "m3", "m2"]
    assert store.context(user_id=ALICE, session_id="s1") == ["m4", "m3", "m2"]
    if (client := redis_client_for(store)) is not None:
        assert client.llen(store.namespace.context_key(ALICE, "s1")) == 3


def test_append_slides_the_ttl(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    clock.advance(25 * MIN)
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    clock.advance(25 * MIN)
    state = session_store.peek(user_id=ALICE, session_id="s1")
    assert state is not None and state.last_active_at == T0 + 25 * MIN


def test_append_without_a_live_session(session_store: SessionStore, clock: VirtualClock) -> None:
    with pytest.raises(NotFound):
        session_store.append_message(user_id=ALICE, session_id="nope", message_id="m1")
    _open(session_store)
    clock.advance(TTL)
    with pytest.raises(NotFound):
        session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")


def test_context_without_a_session_is_empty(session_store: SessionStore) -> None:
    assert session_store.context(user_id=ALICE, session_id="nope") == []
    _open(session_store)
    assert session_store.context(user_id=ALICE, session_id="s1") == []


def test_concurrent_appends_keep_the_window(session_store: SessionStore) -> None:
    _open(session_store)

    def worker(n: int) -> None:
        for i in range(25):
            session_store.append_message(user_id=ALICE, session_id="s1", message_id=f"t{n}-{i}")

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    window = session_store.context(user_id=ALICE, session_id="s1")
    assert len(window) == len(set(window)) == session_store.window


# ---------------------------------------------------------------- task state
def test_update_task_state(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store, task_state={"step": 1})
    clock.advance(10 * MIN)
    state = session_store.update_task_state(user_id=ALICE, session_id="s1", task_state={"step": 2})
    assert state.task_state == {"step": 2}
    assert state.expires_at == clock.now() + TTL
    assert session_store.peek(user_id=ALICE, session_id="s1") == state
    with pytest.raises(NotFound):
        session_store.update_task_state(user_id=ALICE, session_id="nope", task_state={})


def test_task_state_pii_is_stored_masked(session_store: SessionStore) -> None:
    pii = {"phone": PHONE, "contact": {"email": EMAIL}, "notes": [f"call {PHONE}"], PHONE: "key"}
    created = session_store.create(user_id=ALICE, session_id="s1", task_state=pii)
    session_store.create(user_id=ALICE, session_id="s2")
    session_store.update_task_state(user_id=ALICE, session_id="s2", task_state={"to": EMAIL})
    for state in [
        created,
        session_store.get(user_id=ALICE, session_id="s1"),
        session_store.get(user_id=ALICE, session_id="s2"),
    ]:
        assert state is not None
        text = json.dumps(state.task_state, ensure_ascii=False)
        assert PHONE not in text and EMAIL not in text
    assert created.task_state["phone"] == session_store.pii.mask(PHONE)
    stored = "\n".join(raw_values(session_store))
    assert PHONE not in stored and EMAIL not in stored
    assert session_store.pii.mask(PHONE) in stored  # masked, not dropped


# ---------------------------------------------------------------- close / delete
def test_close(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    assert session_store.close(user_id=ALICE, session_id="s1") is True
    state = session_store.get(user_id=ALICE, session_id="s1")
    assert state is not None and state.status is SessionStatus.CLOSED
    assert session_store.context(user_id=ALICE, session_id="s1") == ["m1"]
    with pytest.raises(SessionClosed):
        session_store.append_message(user_id=ALICE, session_id="s1", message_id="m2")
    with pytest.raises(SessionClosed):
        session_store.update_task_state(user_id=ALICE, session_id="s1", task_state={})
    assert session_store.close(user_id=ALICE, session_id="nope") is False


def test_get_does_not_refresh_a_closed_session(
    session_store: SessionStore, clock: VirtualClock
) -> None:
    _open(session_store)
    session_store.close(user_id=ALICE, session_id="s1")
    clock.advance(20 * MIN)
    state = session_store.get(user_id=ALICE, session_id="s1")
    assert state is not None and state.expires_at == T0 + TTL
    clock.advance(11 * MIN)
    assert session_store.get(user_id=ALICE, session_id="s1") is None
    assert session_store.close(user_id=ALICE, session_id="s1") is False
    assert session_store.sweep_expired() == 0  # the read already purged it


def test_delete(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store)
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    assert session_store.delete(user_id=ALICE, session_id="s1") is True
    assert session_store.get(user_id=ALICE, session_id="s1") is None
    assert session_store.context(user_id=ALICE, session_id="s1") == []
    assert session_store.delete(user_id=ALICE, session_id="s1") is False
    assert session_store.count() == 0
    assert redis_keys(session_store) == []
    _open(session_store)  # the id is free again
    clock.advance(TTL)
    assert session_store.delete(user_id=ALICE, session_id="s1") is False  # expired = absent


# ---------------------------------------------------------------- per-user operations
def test_list_user_sessions(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store, "b-first")
    clock.advance(5 * MIN)
    _open(session_store, "a-second")
    _open(session_store, "theirs", user_id=BOB)
    session_store.close(user_id=ALICE, session_id="a-second")
    clock.advance(26 * MIN)  # b-first expired, a-second (closed) still live
    _open(session_store, "c-third")
    listed = session_store.list_user_sessions(user_id=ALICE)
    assert [s.session_id for s in listed] == ["a-second", "c-third"]
    assert listed[0].status is SessionStatus.CLOSED
    assert listed[1].expires_at == clock.now() + TTL
    clock.advance(1 * MIN)
    listed_again = session_store.list_user_sessions(user_id=ALICE)
    assert [s.expires_at for s in listed_again] == [s.expires_at for s in listed]  # no refresh
    assert session_store.list_user_sessions(user_id="nobody") == []


def test_delete_user(session_store: SessionStore, clock: VirtualClock) -> None:
    _open(session_store, "s1")
    clock.advance(TTL)
    _open(session_store, "s2")
    _open(session_store, "s3")
    _open(session_store, "s4", user_id=BOB)
    assert session_store.delete_user(user_id=ALICE) == 2  # s1 had already expired
    assert session_store.list_user_sessions(user_id=ALICE) == []
    assert session_store.get(user_id=ALICE, session_id="s2") is None
    assert session_store.count() == 1
    assert session_store.delete_user(user_id=ALICE) == 0
    assert session_store.peek(user_id=BOB, session_id="s4") is not None
    assert not [k for k in redis_keys(session_store) if ":s1" in k or ":s2" in k or ALICE in k]


# ---------------------------------------------------------------- isolation and input
def test_another_user_sees_nothing(session_store: SessionStore) -> None:
    _open(session_store, task_state={"step": 1})
    session_store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    before = session_store.peek(user_id=ALICE, session_id="s1")
    assert session_store.get(user_id=BOB, session_id="s1") is None
    assert session_store.peek(user_id=BOB, session_id="s1") is None
    assert session_store.context(user_id=BOB, session_id="s1") == []
    with pytest.raises(NotFound):
        session_store.append_message(user_id=BOB, session_id="s1", message_id="evil")
    with pytest.raises(NotFound):
        session_store.update_task_state(user_id=BOB, session_id="s1", task_state={"x": 1})
    assert session_store.close(user_id=BOB, session_id="s1") is False
    assert session_store.delete(user_id=BOB, session_id="s1") is False
    assert session_store.list_user_sessions(user_id=BOB) == []
    assert session_store.delete_user(user_id=BOB) == 0
    assert session_store.peek(user_id=ALICE, session_id="s1") == before
    assert session_store.context(user_id=ALICE, session_id="s1") == ["m1"]


CRAFTED_IDS = [
    "",
    "a:b",
    "*",
    "../x",
    "%s",
    "x" * 129,
    "s1 ",
    " s1",
    "s1\n",
    "a b",
    "_x",
    "-x",
    "ü",
    "会话",
    "s1\x00",
    "{s1}",
    "s[1]",
]

SESSION_CALLS = {
    "create": lambda st, u, s: st.create(user_id=u, session_id=s),
    "get": lambda st, u, s: st.get(user_id=u, session_id=s),
    "peek": lambda st, u, s: st.peek(user_id=u, session_id=s),
    "append": lambda st, u, s: st.append_message(user_id=u, session_id=s, message_id="m1"),
    "context": lambda st, u, s: st.context(user_id=u, session_id=s),
    "update": lambda st, u, s: st.update_task_state(user_id=u, session_id=s, task_state={}),
    "close": lambda st, u, s: st.close(user_id=u, session_id=s),
    "delete": lambda st, u, s: st.delete(user_id=u, session_id=s),
}


@pytest.mark.parametrize("call", list(SESSION_CALLS))
def test_crafted_ids_are_rejected_naming_the_field(session_store: SessionStore, call: str) -> None:
    _open(session_store)
    fn = SESSION_CALLS[call]
    for bad in CRAFTED_IDS:
        with pytest.raises(InvalidInput) as err:
            fn(session_store, ALICE, bad)
        assert err.value.field == "session_id", bad
        with pytest.raises(InvalidInput) as err:
            fn(session_store, bad, "s1")
        assert err.value.field == "user_id", bad
    for bad in CRAFTED_IDS:
        for user_call in (session_store.list_user_sessions, session_store.delete_user):
            with pytest.raises(InvalidInput) as err:
                user_call(user_id=bad)
            assert err.value.field == "user_id"
    assert session_store.count() == 1
    assert session_store.peek(user_id=ALICE, session_id="s1") is not None


def test_longest_valid_ids_work(session_store: SessionStore) -> None:
    user, sid = "u" * 128, "S.1_a@b-" + "9" * 120
    session_store.create(user_id=user, session_id=sid)
    session_store.append_message(user_id=user, session_id=sid, message_id="m" * 128)
    assert session_store.context(user_id=user, session_id=sid) == ["m" * 128]
    assert [s.session_id for s in session_store.list_user_sessions(user_id=user)] == [sid]


@pytest.mark.parametrize("bad", ["a:b", "", "m 1", 42, None])
def test_bad_message_id(session_store: SessionStore, bad: Any) -> None:
    _open(session_store)
    with pytest.raises(InvalidInput) as err:
        session_store.append_message(user_id=ALICE, session_id="s1", message_id=bad)
    assert err.value.field == "message_id"
    assert session_store.context(user_id=ALICE, session_id="s1") == []


@pytest.mark.parametrize("bad", ["a:b", "", "web app"])
def test_bad_channel(session_store: SessionStore, bad: str) -> None:
    with pytest.raises(InvalidInput) as err:
        session_store.create(user_id=ALICE, session_id="s1", channel=bad)
    assert err.value.field == "channel"
    assert session_store.count() == 0


@pytest.mark.parametrize("bad", [123, None, b"s1", ["s1"]])
def test_non_string_ids(session_store: SessionStore, bad: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        session_store.create(user_id=ALICE, session_id=bad)
    assert err.value.field == "session_id"


BAD_TASK_STATES = [
    ["not", "a", "dict"],
    "text",
    42,
    {"when": object()},
    {"set": {1, 2}},
    {"nan": float("nan")},
    {"big": "x" * (64 * 1024 + 1)},
]


@pytest.mark.parametrize("bad", BAD_TASK_STATES, ids=lambda v: type(v).__name__)
def test_bad_task_state(session_store: SessionStore, bad: Any) -> None:
    with pytest.raises(InvalidInput) as err:
        session_store.create(user_id=ALICE, session_id="s1", task_state=bad)
    assert err.value.field == "task_state"
    assert session_store.count() == 0
    _open(session_store)
    with pytest.raises(InvalidInput) as err:
        session_store.update_task_state(user_id=ALICE, session_id="s1", task_state=bad)
    assert err.value.field == "task_state"


@pytest.mark.parametrize(("kwargs", "field"), [({"ttl_s": 0}, "ttl_s"), ({"window": 0}, "window")])
def test_bad_store_settings(
    session_store_factory: SessionStoreFactory, kwargs: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        session_store_factory(**kwargs)
    assert err.value.field == field


# ---------------------------------------------------------------- native TTLs (Redis)
def _exercise(store: SessionStore) -> None:
    store.create(user_id=ALICE, session_id="s1", task_state={"a": 1})
    store.append_message(user_id=ALICE, session_id="s1", message_id="m1")
    store.get(user_id=ALICE, session_id="s1")
    store.update_task_state(user_id=ALICE, session_id="s1", task_state={"a": 2})


def test_no_native_ttl_under_a_virtual_clock(session_store: SessionStore) -> None:
    client = redis_client_for(session_store)
    if client is None:
        assert not session_store.supports_native_ttl
        pytest.skip("a backend without a server has no native TTL")
    _exercise(session_store)
    keys = redis_keys(session_store)
    assert len(keys) == 4  # hash, context list, user set, expiry index
    assert {k: client.ttl(k) for k in keys} == {k: -1 for k in keys}


def test_native_ttl_under_the_system_clock(session_store_factory: SessionStoreFactory) -> None:
    store = session_store_factory(clock=SystemClock())
    client = redis_client_for(store)
    if client is None:
        pytest.skip("a backend without a server has no native TTL")
    assert store.supports_native_ttl
    _exercise(store)
    ns = store.namespace
    for key in (ns.session_key(ALICE, "s1"), ns.context_key(ALICE, "s1")):
        remaining = client.pttl(key) / 1000
        assert TTL < remaining <= TTL + NATIVE_TTL_MARGIN_S, key
    # Indexes span sessions: they are cleaned by sweeps, never by a native TTL.
    assert client.ttl(ns.user_sessions_key(ALICE)) == -1
    assert client.ttl(ns.session_expiry_key) == -1


def test_native_ttl_follows_a_scaled_clock(session_store_factory: SessionStoreFactory) -> None:
    """At scale N a session's safety-net TTL is its remaining life over N in wall time."""
    scale = 600.0
    store = session_store_factory(clock=ScaledClock(scale))
    client = redis_client_for(store)
    if client is None:
        pytest.skip("a backend without a server has no native TTL")
    _exercise(store)
    ns = store.namespace
    for key in (ns.session_key(ALICE, "s1"), ns.context_key(ALICE, "s1")):
        remaining_ms = client.pttl(key)
        # Below the TTL's wall length plus the margin's, and far below the unscaled TTL.
        assert 0 < remaining_ms <= (TTL + NATIVE_TTL_MARGIN_S) / scale * 1000, key
        assert remaining_ms > (TTL - MIN) / scale * 1000, key


def test_usage_counts_the_live_sessions_and_their_bytes(
    session_store: SessionStore, clock: VirtualClock
) -> None:
    assert session_store.usage() == Usage(0, 0)
    _open(session_store, "s1", ALICE)
    clock.advance(DEFAULT_SESSION_TTL_S / 2)
    _open(session_store, "s2", BOB)
    session_store.update_task_state(user_id=BOB, session_id="s2", task_state={"step": "pay"})
    live = [s for u in (ALICE, BOB) for s in session_store.list_user_sessions(user_id=u)]
    assert session_store.usage() == Usage(2, sum(session_bytes(s) for s in live))
    clock.advance(DEFAULT_SESSION_TTL_S / 2)  # alice's session expires (lazily): not live
    (bob,) = session_store.list_user_sessions(user_id=BOB)
    assert session_store.usage() == Usage(1, session_bytes(bob))


# ---------------------------------------------------------------- a backend from the primitives
class MinimalSessionStore(SessionStore):
    """A session backend written from the four primitives alone: one dict, brute force.
    It runs the whole suite above (the "minimal" backend): the public API and its
    semantics come from `SessionStore`, not from the backend."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.sessions: dict[tuple[str, str], tuple[SessionState, list[str]]] = {}

    def _live(self, key: tuple[str, str], now: float) -> tuple[SessionState, list[str]] | None:
        entry = self.sessions.get(key)
        if entry is not None and now >= entry[0].expires_at:
            del self.sessions[key]  # lazy expiry
            return None
        return entry

    def _apply(self, op: SessionOp) -> Any:
        if isinstance(op, CreateSession):
            key = (op.state.user_id, op.state.session_id)
            if self._live(key, op.state.started_at) is not None:
                return False
            self.sessions[key] = (_copied(op.state), [])
            return True
        if isinstance(op, ListSessions):
            mine = [k for k in list(self.sessions) if k[0] == op.user_id]
            states = [e[0] for k in mine if (e := self._live(k, op.now)) is not None]
            return sorted(map(_copied, states), key=lambda s: (s.started_at, s.session_id))
        if isinstance(op, DeleteUserSessions):
            mine = [k for k in self.sessions if k[0] == op.user_id]
            live = sum(op.now < self.sessions[k][0].expires_at for k in mine)
            for key in mine:
                del self.sessions[key]
            return live
        key = (op.user_id, op.session_id)
        entry = self._live(key, op.now)
        if entry is None:
            return False if isinstance(op, CloseSession | ResetSession | DeleteSession) else None
        state, window = entry
        if isinstance(op, ReadContext):
            return list(window)
        if isinstance(op, CloseSession):
            self.sessions[key] = (replace(state, status=SessionStatus.CLOSED), window)
        elif isinstance(op, ResetSession):
            self.sessions[key] = (replace(state, task_state={}), [])
        elif isinstance(op, DeleteSession):
            del self.sessions[key]
        elif isinstance(op, ReadSession):
            if op.refresh_until is not None and state.status is SessionStatus.ACTIVE:
                state = replace(state, last_active_at=op.now, expires_at=op.refresh_until)
                self.sessions[key] = (state, window)
            return _copied(state)
        elif state.status is SessionStatus.CLOSED:
            raise SessionClosed(f"session_id: session {op.session_id!r} is closed")
        else:
            state = replace(state, last_active_at=op.now, expires_at=op.refresh_until)
            if isinstance(op, AppendMessage):
                window = [op.message_id, *window][: self.window]
                self.sessions[key] = (state, window)
                return list(window)
            state = replace(state, task_state=json.loads(json.dumps(op.task_state)))
            self.sessions[key] = (state, window)
            return _copied(state)
        return True

    def _sweep(self, now: float, batch_size: int) -> int:
        due = sorted(
            (state.expires_at, f"{user}:{sid}", (user, sid))
            for (user, sid), (state, _) in self.sessions.items()
            if state.expires_at <= now
        )[:batch_size]
        for *_, key in due:
            del self.sessions[key]
        return len(due)

    def _count(self, now: float) -> int:
        return sum(now < state.expires_at for state, _ in self.sessions.values())

    def _usage(self, now: float) -> Usage:
        live = [state for state, _ in self.sessions.values() if now < state.expires_at]
        return Usage(len(live), sum(session_bytes(s) for s in live))

    def raw_values(self) -> list[str]:
        """Every string held, as the PII tests read a backend's stored data."""
        return [
            text
            for (user, sid), (state, window) in self.sessions.items()
            for text in (user, sid, state.channel, json.dumps(state.task_state), *window)
        ]


def _copied(item: Any) -> Any:
    """`item` with its task state copied (stored apart from what callers hold)."""
    return replace(item, task_state=json.loads(json.dumps(item.task_state)))


@pytest.fixture(params=[*SESSION_BACKENDS, MINIMAL])
def session_backend(request: pytest.FixtureRequest) -> str:
    """Every session backend, and the minimal one above."""
    return str(request.param)


@pytest.fixture
def minimal_session_store_class() -> type[SessionStore]:
    return MinimalSessionStore
