"""The isolation property of tests/test_isolation.py, through HTTP, across two tenants.

The same hypothesis steps (say, recall, forget, events; a sweep in process; the
property's direct fact writes become a user's deletion, the one write the API has left)
are sent to the app by two tenants, `acme` and `beta`, whose users are drawn so that they
often share the same raw id: tenant scoping, not luck, must keep them apart. Hostile ids
act as extra users of `acme`. After every step: everything the other users stored is
unchanged, record for record; each user's recall in every session returns only that
user's own records; and a refused request got a 422 naming a field of the request.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote

from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memharness.serve.auth import KeyStore
from reference.ltm.filters import LtmFilter
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from reference.validation import MAX_ID_LENGTH
from tests.serve_support import auth, client_for, memory_system
from tests.test_isolation import (
    FORGETS,
    SESSIONS,
    TEMPLATES,
    VALID_ID,
    _metadata_ok,
    snapshot,
    step,
    text_ok,
    valid_id,
)

TENANTS = ("acme", "beta")
EXAMPLES = 30
OUTCOMES: Counter[str] = Counter()
# The property's steps are mostly hostile; plain ones beside them make sure that enough
# turns are stored (and facts promoted) for the reads to have something to leak.
WORDS = st.sampled_from(["12 Baker Street", "DHL", "peanuts", "tea", "the blue car"])
plain_say = st.tuples(
    st.just("say"),
    st.integers(0, 1),
    st.sampled_from(SESSIONS),
    st.builds(str.format, st.sampled_from(TEMPLATES), WORDS),
    st.none(),
)
plain_recall = st.tuples(st.just("recall"), st.integers(0, 1), st.sampled_from(SESSIONS), WORDS)
plain_forget = st.tuples(
    st.just("forget"), st.integers(0, 1), st.sampled_from(SESSIONS), st.sampled_from(FORGETS)
)
http_step = st.one_of(step, plain_say, plain_say, plain_recall, plain_forget)
FIELDS = {"user_id", "session_id", "text", "query", "metadata", "command", "name", "payload"}


def scoped_ok(tenant: str, raw: str) -> bool:
    return VALID_ID.fullmatch(raw) is not None and len(tenant) + 1 + len(raw) <= MAX_ID_LENGTH


def own_ids(system: MemorySystem, scoped: str) -> set[str]:
    records = system.stm.records(filter=StmFilter(user_id=scoped, include_dead=True))
    facts = system.ltm.facts(filter=LtmFilter(user_id=scoped, include_dead=True))
    return {r.record_id for r in records} | {f.fact_id for f in facts}


def post(client: TestClient, key: str, path: str, body: dict[str, Any]) -> Any:
    # ensure_ascii: lone surrogates and NULs travel as JSON escapes, as a hostile client's do
    headers = {**auth(key), "Content-Type": "application/json"}
    return client.post(path, content=json.dumps(body).encode(), headers=headers)


def send(client: TestClient, key: str, kind: str, raw: str, args: list[Any]) -> tuple[Any, bool]:
    """One step through the API: the response, and whether the request may pass (False:
    it must be refused whatever the user id; True: the user id and the stores decide)."""
    if kind in ("say", "recall", "forget"):
        sid, text = args[1], args[2]
        ids_ok = VALID_ID.fullmatch(sid) is not None
        if kind == "say":
            body = {"user_id": raw, "session_id": sid, "text": text}
            if args[3] is not None:
                body["metadata"] = args[3]
            ok = ids_ok and text_ok(text) and (not args[3] or _metadata_ok(args[3]))
            return post(client, key, "/v1/turn", body), ok
        if kind == "recall":
            body = {"user_id": raw, "session_id": sid, "query": text}
            return post(client, key, "/v1/recall", body), ids_ok and text_ok(text)
        body = {"user_id": raw, "session_id": sid, "command": text}
        return post(client, key, "/v1/forget", body), ids_ok
    if kind == "event":
        value = args[2]
        payload = {"order_id": value, "ticket_id": value, "fields": [value], "keys": [value]}
        body = {"name": args[1], "user_id": raw, "payload": payload}
        return post(client, key, "/v1/events", body), True
    got = client.delete(f"/v1/users/{quote(raw, safe='')}", headers=auth(key))
    return got, True


def test_no_tenant_or_user_reaches_another_through_http(tmp_path: Path) -> None:
    keys = KeyStore(tmp_path / "keys.json")
    key = {tenant: keys.add(tenant) for tenant in TENANTS}
    counter = iter(range(10**6))

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow],
        database=None,
    )
    @given(
        first=valid_id,
        # None (half the time): both tenants' users have the same raw id
        second=st.one_of(st.none(), st.none(), st.none(), valid_id, st.just("L" * 124)),
        steps=st.lists(http_step, min_size=4, max_size=12),
    )
    def attack(first: str, second: str | None, steps: list[tuple[Any, ...]]) -> None:
        actors = [("acme", first), ("beta", first if second is None else second)]
        system = memory_system(f"srviso{next(counter)}", tmp_path)
        try:
            with client_for(system, keys) as client:
                for kind, *args in steps:
                    run_step(client, system, actors, kind, args)
        finally:
            system.drop()

    def run_step(
        client: TestClient,
        system: MemorySystem,
        actors: list[tuple[str, str]],
        kind: str,
        args: list[Any],
    ) -> None:
        tenant, raw = (
            actors[args[0]] if kind != "sweep" and isinstance(args[0], int) else ("acme", "")
        )
        if kind != "sweep" and not isinstance(args[0], int):
            raw = args[0]  # a hostile or raw id: a user of acme
        if kind == "fact" and not args[1].strip():
            kind = "sweep"
        tracked = {f"{t}.{u}" for t, u in actors if scoped_ok(t, u)}
        acting = f"{tenant}.{raw}"
        before = {u: snapshot(system, u) for u in tracked if u != acting}
        if kind == "sweep":
            system.sweep()
        else:
            got, may_pass = send(client, key[tenant], kind, raw, args)
            OUTCOMES[f"{kind}: {got.status_code}"] += 1
            must_refuse = not scoped_ok(tenant, raw) or not may_pass
            if must_refuse and kind != "fact":
                assert got.status_code == 422, (kind, raw, args, got.text)
            if got.status_code != 200:
                assert got.status_code in (404, 422), got.text
                error = got.json()["error"]
                assert error["message"], error
                if got.status_code == 422:
                    assert error["field"].split(".")[0] in FIELDS, error
        for user, state in before.items():
            assert snapshot(system, user) == state, f"{kind} by {acting!r} changed {user!r}"
        for t, u in actors:
            if not scoped_ok(t, u):
                continue
            mine = own_ids(system, f"{t}.{u}")
            for sid in SESSIONS:
                ask = {"user_id": u, "session_id": sid, "query": "address prefer remember"}
                hits = post(client, key[t], "/v1/recall", ask).json()["hits"]
                assert {h["id"] for h in hits} <= mine, (t, u, hits)

    OUTCOMES.clear()
    attack()
    print(f"\nHTTP isolation: {EXAMPLES} examples; steps: {dict(sorted(OUTCOMES.items()))}")
    assert OUTCOMES["say: 200"] >= EXAMPLES // 2 and OUTCOMES["recall: 200"], OUTCOMES
