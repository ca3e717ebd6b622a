"""The service lets no one in where they don't belong (issue 26, part 4).

Tried, each through the app with `TestClient`, on the in-memory backends with the hashing
embedder: a missing, malformed, forged, unknown and revoked key (401, and a system that
fails the test if any of it is touched); another tenant's user ids, including one spelled
with the other tenant's prefix; an oversized body, declared and chunked (413); malformed
JSON (400), wrong types, missing and unknown fields (422 naming the field); hostile ids
(path traversal, NUL, over the length limit once scoped, unicode look-alikes and
invisible characters, glob and filter characters). Each gets a clear error, and the
stores are compared before and after: nothing is written.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from memharness.serve.auth import KeyStore
from reference.clock import VirtualClock
from reference.system import MemorySystem
from tests.conftest import T0
from tests.serve_support import auth, client_for, memory_system
from tests.test_isolation import snapshot

ROUTES: list[tuple[str, str, dict[str, Any] | None]] = [
    ("POST", "/v1/turn", {"user_id": "alice", "session_id": "s1", "text": "I prefer tea."}),
    ("POST", "/v1/recall", {"user_id": "alice", "session_id": "s1", "query": "tea"}),
    ("POST", "/v1/forget", {"user_id": "alice", "session_id": "s1", "command": "forget it"}),
    ("POST", "/v1/events", {"name": "order_completed", "user_id": "alice", "payload": {}}),
    ("DELETE", "/v1/users/alice", None),
    ("GET", "/v1/health", None),
    ("GET", "/openapi.json", None),
    ("GET", "/docs", None),
]


class Untouchable:
    """Stands in for the system: any use of it but its clock fails the test."""

    def __init__(self) -> None:
        self.clock = VirtualClock(T0)

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the system was touched ({name}) by an unauthenticated request")


@pytest.fixture
def keys(tmp_path: Path) -> KeyStore:
    return KeyStore(tmp_path / "keys.json")


def test_no_valid_key_means_401_before_anything_is_touched(keys: KeyStore) -> None:
    good = keys.add("acme")
    revoked = keys.add("acme")
    assert keys.revoke(key_id=revoked.split("_")[1]) == 1
    key_id = good.split("_")[1]
    forged = f"mhk_{key_id}_{'A' * 43}"  # a real key id, a made-up secret
    unknown = f"mhk_00000000_{good.split('_', 2)[2]}"  # a real secret, another id
    bad_headers: list[dict[str, str]] = [
        {},
        {"Authorization": ""},
        {"Authorization": "Bearer"},
        {"Authorization": f"Basic {good}"},
        {"Authorization": f"Bearer {good[:-1]}"},
        {"Authorization": f"Bearer {good}x"},
        {"Authorization": f"Bearer {forged}"},
        {"Authorization": f"Bearer {unknown}"},
        {"Authorization": f"Bearer {revoked}"},
        {"Authorization": "Bearer ' OR '1'='1"},
    ]
    system: Any = Untouchable()
    with client_for(system, keys, max_body_bytes=1024) as client:
        for headers in bad_headers:
            for method, path, body in ROUTES:
                got = client.request(method, path, json=body, headers=headers)
                assert got.status_code == 401, (headers, path, got.text)
                assert got.json()["error"]["code"] == "unauthorized"
                assert "server-timing" in got.headers
            # Neither a huge nor a broken body gets past the key check.
            huge = client.post("/v1/turn", content=b"x" * 10_000, headers=headers)
            broken = client.post("/v1/turn", content=b"{not json", headers=headers)
            assert huge.status_code == broken.status_code == 401


def test_a_key_revoked_while_serving_stops_working_at_the_next_request(
    keys: KeyStore, tmp_path: Path
) -> None:
    key = keys.add("acme")
    with client_for(memory_system("secrev", tmp_path), keys) as client:
        assert client.get("/v1/health", headers=auth(key)).status_code == 200
        KeyStore(keys.path).revoke(tenant="acme")  # as `memharness serve keys revoke` does
        assert client.get("/v1/health", headers=auth(key)).status_code == 401


def test_the_keys_file_holds_hashes_only(keys: KeyStore) -> None:
    key = keys.add("acme")
    text = keys.path.read_text()
    assert key not in text and key.split("_", 2)[2] not in text
    assert oct(keys.path.stat().st_mode & 0o777) == "0o600"
    with pytest.raises(ValueError, match="tenant"):
        keys.add("acme.evil")  # '.' would blur the tenant/user boundary


def _stores(system: MemorySystem, users: list[str]) -> tuple[Any, ...]:
    return (system.footprint(), [snapshot(system, u) for u in users])


@pytest.fixture
def two_tenants(keys: KeyStore, tmp_path: Path) -> tuple[TestClient, str, str, MemorySystem]:
    acme, beta = keys.add("acme"), keys.add("beta")
    system = memory_system("sectenant", tmp_path)
    with client_for(system, keys, max_body_bytes=2048) as client:
        yield client, acme, beta, system


def test_a_tenant_never_reaches_another_tenants_users(
    two_tenants: tuple[TestClient, str, str, MemorySystem],
) -> None:
    client, acme, beta, system = two_tenants
    said = {"user_id": "alice", "session_id": "s1", "text": "My address is 12 Baker Street."}
    assert client.post("/v1/turn", json=said, headers=auth(acme)).status_code == 200
    said["text"] = "I always prefer DHL for deliveries."
    assert client.post("/v1/turn", json=said, headers=auth(acme)).status_code == 200
    before = _stores(system, ["acme.alice"])
    assert before[0]["stm"] >= 1
    # Beta's alice, and beta naming acme's alice by her internal id: other users.
    for user in ["alice", "acme.alice", "acme.alice.", "ACME.alice"]:
        ask = {"user_id": user, "session_id": "s1", "query": "address deliveries"}
        got = client.post("/v1/recall", json=ask, headers=auth(beta))
        assert got.status_code == 200 and got.json() == {"hits": []}, (user, got.text)
        forget = {"user_id": user, "session_id": "s1", "command": "forget everything"}
        assert client.post("/v1/forget", json=forget, headers=auth(beta)).status_code == 200
        yes = {**forget, "command": "yes"}
        assert client.post("/v1/forget", json=yes, headers=auth(beta)).status_code in (200, 422)
        event = {"name": "profile_updated", "user_id": user, "payload": {"fields": ["address"]}}
        assert client.post("/v1/events", json=event, headers=auth(beta)).status_code == 200
        deleted = client.delete(f"/v1/users/{quote(user)}", headers=auth(beta))
        assert deleted.status_code == 200
        assert sum(deleted.json()["removed"].values()) == 0
        assert _stores(system, ["acme.alice"])[1] == before[1], user
    mine = {"user_id": "alice", "session_id": "s1", "query": "address deliveries"}
    assert client.post("/v1/recall", json=mine, headers=auth(acme)).json()["hits"]


def test_oversized_bodies_get_413_and_write_nothing(
    two_tenants: tuple[TestClient, str, str, MemorySystem],
) -> None:
    client, acme, _, system = two_tenants
    before = _stores(system, ["acme.alice"])
    big = {"user_id": "alice", "session_id": "s1", "text": "I prefer tea. " * 200}
    got = client.post("/v1/turn", json=big, headers=auth(acme))
    assert got.status_code == 413 and got.json()["error"]["code"] == "body_too_large"

    def chunks() -> Any:  # no Content-Length: the body arrives in pieces
        data = json.dumps(big).encode()
        for i in range(0, len(data), 500):
            yield data[i : i + 500]

    headers = {**auth(acme), "Content-Type": "application/json"}
    got = client.post("/v1/turn", content=chunks(), headers=headers)
    assert got.status_code == 413
    assert _stores(system, ["acme.alice"]) == before
    small = {**big, "text": "I prefer tea."}
    assert client.post("/v1/turn", json=small, headers=auth(acme)).status_code == 200


@pytest.mark.parametrize(
    ("body", "status", "code", "field"),
    [
        (b"{not json", 400, "malformed_json", None),
        (b'{"user_id": "alice", "session_id": "s1", "text": "hi"', 400, "malformed_json", None),
        (b"", 422, "missing_body", None),
        (b"[]", 422, "invalid", None),
        (b'{"user_id": 5, "session_id": "s1", "text": "hi"}', 422, "invalid", "user_id"),
        (b'{"session_id": "s1", "text": "hi"}', 422, "missing_field", "user_id"),
        (b'{"user_id": "a", "session_id": "s", "text": "hi", "admin": 1}', 422, "unknown_field",
         "admin"),
        (b'{"user_id": "a", "session_id": "s", "text": "hi", "metadata": {"k": [1]}}', 422,
         "invalid", "metadata.k"),
        (b'{"user_id": "a", "session_id": "s", "text": "hi", "metadata": {"_p": 1}}', 422,
         "invalid", "metadata"),
        (b'{"user_id": "a", "session_id": "s", "text": "  "}', 422, "invalid", "text"),
        (b'{"user_id": "a", "session_id": "s", "text": "a\\u0000b"}', 422, "invalid", "text"),
        (b'{"user_id": "a", "session_id": "s", "text": "\\ud800"}', 422, "invalid", "text"),
    ],
)  # fmt: skip
def test_malformed_and_ill_typed_bodies_get_clear_errors(
    two_tenants: tuple[TestClient, str, str, MemorySystem],
    body: bytes,
    status: int,
    code: str,
    field: str | None,
) -> None:
    client, acme, _, system = two_tenants
    before = system.footprint()
    headers = {**auth(acme), "Content-Type": "application/json"}
    got = client.post("/v1/turn", content=body, headers=headers)
    assert got.status_code == status, got.text
    error = got.json()["error"]
    assert error["code"] == code and error["message"]
    if field is not None:
        assert error["field"] is not None and error["field"].startswith(field), error
    assert system.footprint() == before


def test_recall_k_is_strict(two_tenants: tuple[TestClient, str, str, MemorySystem]) -> None:
    client, acme, _, _ = two_tenants
    for k in ["5", 0, 1001, 2.5, True]:
        ask = {"user_id": "alice", "session_id": "s1", "query": "tea", "k": k}
        got = client.post("/v1/recall", json=ask, headers=auth(acme))
        assert got.status_code == 422 and got.json()["error"]["field"] == "k", (k, got.text)


SCOPED_TOO_LONG = "a" * 124  # a valid id alone, too long once scoped: "acme." + 124 > 128
HOSTILE_IDS = [
    "../../etc/passwd",
    "..",
    "a\x00",
    "\x00",
    "a" * 129,
    SCOPED_TOO_LONG,
    "аlice",  # Cyrillic а
    "alice\u200b",  # zero-width space
    "ａｌｉｃｅ",  # fullwidth
    "\u202ealice",  # right-to-left override
    "alice\u0301",  # combining accent
    "*",
    "u:x",
    "$and",
    " alice",
    ".alice",
    "",
]


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_are_refused_naming_the_field_and_write_nothing(
    two_tenants: tuple[TestClient, str, str, MemorySystem], bad: str
) -> None:
    client, acme, _, system = two_tenants
    seed = {"user_id": "alice", "session_id": "s1", "text": "I always prefer tea."}
    assert client.post("/v1/turn", json=seed, headers=auth(acme)).status_code == 200
    before = _stores(system, ["acme.alice"])
    calls: list[tuple[str, dict[str, Any], str]] = [
        ("/v1/turn", {"user_id": bad, "session_id": "s1", "text": "I prefer tea."}, "user_id"),
        ("/v1/turn", {"user_id": "alice", "session_id": bad, "text": "I prefer tea."},
         "session_id"),
        ("/v1/recall", {"user_id": bad, "session_id": "s1", "query": "tea"}, "user_id"),
        ("/v1/recall", {"user_id": "alice", "session_id": bad, "query": "tea"}, "session_id"),
        ("/v1/forget", {"user_id": bad, "session_id": "s1", "command": "forget everything"},
         "user_id"),
        ("/v1/events", {"name": "order_completed", "user_id": bad, "payload": {}}, "user_id"),
        ("/v1/events", {"name": bad, "user_id": "alice", "payload": {}}, "name"),
    ]  # fmt: skip
    headers = {**auth(acme), "Content-Type": "application/json"}
    for path, body, field in calls:
        if bad == SCOPED_TOO_LONG and field != "user_id":
            continue  # only user ids are scoped
        # ensure_ascii: a lone surrogate or NUL travels as an escape, as a hostile client sends it
        got = client.post(path, content=json.dumps(body).encode(), headers=headers)
        assert got.status_code == 422, (path, body, got.text)
        assert got.json()["error"]["field"] == field, got.json()
        assert got.json()["error"]["message"]
    if bad == SCOPED_TOO_LONG:
        got = client.post("/v1/turn", json=calls[0][1], headers=auth(acme))
        assert "this tenant's limit is 123" in got.json()["error"]["message"]
    elif bad:
        got = client.delete(f"/v1/users/{quote(bad, safe='')}", headers=auth(acme))
        assert got.status_code in (404, 422), got.text  # '/' in it: no such route
        assert got.json()["error"]["message"]
    assert _stores(system, ["acme.alice"]) == before
