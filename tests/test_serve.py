"""`memharness serve` through HTTP gives what the Python API gives.

The same calls go to two identical systems (in-memory backends, hashing embedder, hybrid
strategy, virtual clocks at the same time): one through the app, as tenant `acme`'s
user `alice`, the other in process as the scoped user `acme.alice`. Ids are random, so
the results are compared on everything else: texts, scores, layers, what was stored,
what was forgotten, event outcomes, deletion counts.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from memharness.serve.auth import KeyStore
from reference.models import Event
from reference.system import MemorySystem
from reference.turns import Recall
from tests.conftest import T0
from tests.serve_support import auth, client_for, memory_system

SCRIPT = [
    "My address is 12 Baker Street, London.",
    "I always prefer DHL for deliveries.",
    "Please remember that my order 4411 should go by express.",
    "What's the weather like?",
    "My email is alice@example.com",
    "I always prefer UPS for deliveries.",
]


@pytest.fixture
def pair(tmp_path: Path) -> tuple[TestClient, str, MemorySystem]:
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    served = memory_system("srvhttp", tmp_path)
    local = memory_system("srvlocal", tmp_path)
    with client_for(served, keys) as client:
        yield client, key, local


def _hits(found: Recall) -> list[tuple[str, str, float]]:
    return [("stm", h.record.text, round(h.score, 6)) for h in found.stm_hits] + [
        ("ltm", h.record.text, round(h.score, 6)) for h in found.ltm_hits
    ]


def _http_hits(items: list[dict[str, Any]]) -> list[tuple[str, str, float]]:
    return [(i["layer"], i["text"], round(i["score"], 6)) for i in items]


def test_turns_recall_events_forget_and_delete_match_the_python_api(
    pair: tuple[TestClient, str, MemorySystem],
) -> None:
    client, key, local = pair
    at = T0
    for number, text in enumerate(SCRIPT):
        at += 30
        body = {"user_id": "alice", "session_id": "s1", "text": text, "at": at}
        if number == 2:
            body["metadata"] = {"order_id": "4411"}
        got = client.post("/v1/turn", json=body, headers=auth(key))
        assert got.status_code == 200, got.text
        assert "app;dur=" in got.headers["server-timing"]
        want = local.turn(
            user_id="acme.alice", session_id="s1", text=text, at=at, metadata=body.get("metadata")
        )
        turn = got.json()
        assert turn["masked_text"] == want.masked_text
        assert turn["reply"] == want.reply
        assert _http_hits(turn["context"]) == _hits(Recall(want.stm_hits, want.ltm_hits))
        assert (turn["stored"]["stm"] is None) == (want.stm.record is None)
        assert (turn["stored"]["ltm"] is None) == (want.promoted is None)
        assert set(turn["timings_ms"]) == set(want.timings_ms)

    at += 30
    for query, k in [("where do I live", None), ("deliveries courier", 2)]:
        body = {"user_id": "alice", "session_id": "s1", "query": query, "at": at}
        if k:
            body["k"] = k
        got = client.post("/v1/recall", json=body, headers=auth(key))
        assert got.status_code == 200, got.text
        want = local.recall(user_id="acme.alice", session_id="s1", query=query, at=at, k=k)
        assert _http_hits(got.json()["hits"]) == _hits(want)
        assert got.json()["hits"], "the script stored something to find"

    at += 30
    payload = {"order_id": "4411"}
    got = client.post(
        "/v1/events",
        json={"name": "order_completed", "user_id": "alice", "payload": payload, "at": at},
        headers=auth(key),
    )
    assert got.status_code == 200, got.text
    outcome = local.handle_event(
        Event(name="order_completed", user_id="acme.alice", at=at, payload=payload), at=at
    )
    assert got.json() == {
        "stm_removed": outcome.stm_removed,
        "ltm_archived": outcome.ltm_archived,
        "ltm_deleted": outcome.ltm_deleted,
    }

    got = client.post(
        "/v1/forget",
        json={"user_id": "alice", "session_id": "s1", "command": "forget my address"},
        headers=auth(key),
    )
    assert got.status_code == 200, got.text
    want_forget = local.turn(user_id="acme.alice", session_id="s1", text="forget my address")
    assert want_forget.forgotten is not None
    assert got.json() == {
        "scope": want_forget.forgotten.scope,
        "stm_removed": len(want_forget.forgotten.stm_removed),
        "ltm_erased": len(want_forget.forgotten.ltm_erased),
        "reply": want_forget.reply,
    }
    assert got.json()["stm_removed"] + got.json()["ltm_erased"] > 0

    got = client.delete("/v1/users/alice", headers=auth(key))
    assert got.status_code == 200, got.text
    assert got.json() == {"removed": local.delete_user_data(user_id="acme.alice")}
    again = {"user_id": "alice", "session_id": "s1", "query": "address"}
    assert client.post("/v1/recall", json=again, headers=auth(key)).json() == {"hits": []}
    assert local.footprint() == {"session": 0, "stm": 0, "ltm": 0}


def test_forget_everything_asks_then_the_answer_confirms(
    pair: tuple[TestClient, str, MemorySystem],
) -> None:
    client, key, _ = pair
    said = {"user_id": "bo", "session_id": "s1", "text": "I always prefer tea in the morning."}
    assert client.post("/v1/turn", json=said, headers=auth(key)).status_code == 200
    ask = {"user_id": "bo", "session_id": "s1", "command": "forget everything about me"}
    asked = client.post("/v1/forget", json=ask, headers=auth(key)).json()
    assert asked["scope"] is None and asked["reply"]  # hybrid asks first
    yes = {"user_id": "bo", "session_id": "s1", "command": "yes"}
    done = client.post("/v1/forget", json=yes, headers=auth(key)).json()
    assert done["scope"] == "everything" and done["stm_removed"] >= 1


def test_forget_refuses_what_is_not_a_command_and_stores_nothing(
    pair: tuple[TestClient, str, MemorySystem], tmp_path: Path
) -> None:
    client, key, _ = pair
    body = {"user_id": "cy", "session_id": "s1", "command": "I always prefer coffee."}
    got = client.post("/v1/forget", json=body, headers=auth(key))
    assert got.status_code == 422
    assert got.json()["error"]["field"] == "command"
    recall = {"user_id": "cy", "session_id": "s1", "query": "coffee"}
    assert client.post("/v1/recall", json=recall, headers=auth(key)).json() == {"hits": []}


def test_health_and_the_openapi_schema_are_served_behind_auth(
    pair: tuple[TestClient, str, MemorySystem],
) -> None:
    client, key, _ = pair
    assert client.get("/v1/health", headers=auth(key)).json()["status"] == "ok"
    assert client.get("/openapi.json").status_code == 401
    schema = client.get("/openapi.json", headers=auth(key))
    assert schema.status_code == 200 and "server-timing" in schema.headers
    paths = schema.json()["paths"]
    for path in ["/v1/turn", "/v1/recall", "/v1/forget", "/v1/events", "/v1/users/{user_id}"]:
        assert path in paths
    turn_body = schema.json()["components"]["schemas"]["TurnRequest"]
    assert turn_body["additionalProperties"] is False
    assert set(turn_body["required"]) == {"user_id", "session_id", "text"}


def test_at_is_refused_on_a_wall_clock_and_in_the_past(tmp_path: Path) -> None:
    from reference.clock import SystemClock
    from reference.embedding import HashingEmbedder
    from reference.factory import build_memory_system
    from reference.settings import Settings

    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    wall = build_memory_system(
        Settings(backend="memory", data_dir=tmp_path, prefix="srvwall"),
        clock=SystemClock(),
        embedder=HashingEmbedder(),
    )
    body = {"user_id": "a", "session_id": "s", "text": "I prefer tea.", "at": T0}
    with client_for(wall, keys) as client:
        got = client.post("/v1/turn", json=body, headers=auth(key))
        assert got.status_code == 422 and got.json()["error"]["field"] == "at"
        assert "--virtual-time" in got.json()["error"]["message"]
        assert wall.footprint() == {"session": 0, "stm": 0, "ltm": 0}
    virtual = memory_system("srvpast", tmp_path)
    with client_for(virtual, keys) as client:
        body["at"] = T0 + 60
        assert client.post("/v1/turn", json=body, headers=auth(key)).status_code == 200
        before = virtual.footprint()
        body["at"] = T0  # before the clock's now
        got = client.post("/v1/turn", json=body, headers=auth(key))
        assert got.status_code == 422 and got.json()["error"]["field"] == "at"
        assert virtual.footprint() == before


def test_without_the_extra_the_command_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from click.testing import CliRunner

    from memharness.cli import main

    monkeypatch.setitem(sys.modules, "uvicorn", None)  # as if `serve` were not installed
    result = CliRunner().invoke(main, ["serve", "--backend", "memory"])
    assert result.exit_code == 1
    assert "optional extra 'serve'" in result.output and "memharness[serve]" in result.output
    assert "Traceback" not in result.output


def test_keys_add_list_revoke_from_the_command_line(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from memharness.cli import main

    path = str(tmp_path / "k.json")
    runner = CliRunner()
    added = runner.invoke(main, ["serve", "keys", "add", "--tenant", "acme", "--keys", path])
    assert added.exit_code == 0, added.output
    key = added.stdout.strip().splitlines()[0]
    assert KeyStore(Path(path)).tenant_of(key) == "acme"
    listed = runner.invoke(main, ["serve", "keys", "list", "--keys", path])
    assert "acme  active" in listed.output and key not in listed.output
    key_id = key.split("_")[1]
    revoked = runner.invoke(main, ["serve", "keys", "revoke", "--key-id", key_id, "--keys", path])
    assert revoked.exit_code == 0 and KeyStore(Path(path)).tenant_of(key) is None
    bad = runner.invoke(main, ["serve", "keys", "add", "--tenant", "a.b", "--keys", path])
    assert bad.exit_code == 2 and "tenant" in bad.output


def test_an_unexpected_failure_is_a_500_in_the_error_shape_without_its_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from fastapi.testclient import TestClient as Client

    from memharness.serve.app import create_app

    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    system = memory_system("srvfail", tmp_path)

    def explode(**_: object) -> None:
        raise RuntimeError("secret stored value")

    monkeypatch.setattr(system, "turn", explode)
    with Client(create_app(system, keys), raise_server_exceptions=False) as client:
        body = {"user_id": "a", "session_id": "s", "text": "I prefer tea."}
        got = client.post("/v1/turn", json=body, headers=auth(key))
    assert got.status_code == 500
    assert got.json()["error"]["code"] == "internal"
    assert "secret" not in got.text and "RuntimeError" in got.text
