"""Red team on requests answered 503 part-way (issue 37, finding 5), per layer: a turn
that fails after storing its STM record leaves nothing a later read sees (taken back at
once, or, with STM failing too, deleted by the pending work once STM is back); a DELETE
that fails after some layers leaves pending work that completes it in every layer.

The layers fail by a stand-in raising the error a dead server gives
(`BackendUnavailable`); the live kill -9 of each server is `test_redteam_supervision.py`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memharness.serve.auth import KeyStore
from memharness.serve.pending import Pending
from reference.errors import BackendUnavailable
from reference.ltm.filters import LtmFilter
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from tests.serve_support import auth, client_for, memory_system

MARKER = "Quorvantis"
#: A turn STM keeps and promotes to LTM (a stated preference).
PREFERENCE = f"I always prefer {MARKER} Express for my deliveries."


def down(layer: str) -> Any:
    def fail(*_: object, **__: object) -> Any:
        raise BackendUnavailable("connection refused", layer=layer, server="/tmp/x/socket")

    return fail


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Any, str, MemorySystem, Pending]]:
    system = memory_system("rtatom", tmp_path)
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    pending = Pending(tmp_path / "data")
    with client_for(system, keys, pending=pending) as client:
        yield client, key, system, pending


def _held(system: MemorySystem, user: str) -> dict[str, int]:
    """What each layer holds of the scoped user, dead records included."""
    return {
        "stm": len(system.stm.records(filter=StmFilter(user_id=user, include_dead=True))),
        "ltm": len(system.ltm.facts(filter=LtmFilter(user_id=user, include_dead=True))),
    }


def _recalled(client: Any, key: str, user: str) -> list[str]:
    body = {"user_id": user, "session_id": "s1", "query": f"{MARKER} deliveries", "k": 20}
    answer = client.post("/v1/recall", headers=auth(key), json=body)
    assert answer.status_code == 200, answer.text
    return [hit["text"] for hit in answer.json()["hits"]]


def _turn(client: Any, key: str, user: str, text: str = PREFERENCE) -> Any:
    body = {"user_id": user, "session_id": "s1", "text": text}
    return client.post("/v1/turn", headers=auth(key), json=body)


def test_a_turn_failing_in_ltm_after_stm_stored_leaves_nothing(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, key, system, pending = served
    with monkeypatch.context() as patch:
        patch.setattr(system.ltm, "query", down("ltm"))
        answer = _turn(client, key, "pia")
    assert answer.status_code == 503 and answer.json()["error"]["field"] == "ltm"
    assert _held(system, "acme.pia") == {"stm": 0, "ltm": 0}
    assert not any(MARKER in text for text in _recalled(client, key, "pia"))
    assert pending.entries() == []
    # The layer back, the same turn is stored as usual (the undo left nothing in the way).
    assert _turn(client, key, "pia").status_code == 200
    assert _held(system, "acme.pia")["stm"] == 1


def test_a_turn_whose_undo_fails_too_is_completed_by_the_pending_work(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, key, system, pending = served
    with monkeypatch.context() as patch:
        patch.setattr(system.ltm, "query", down("ltm"))
        patch.setattr(system.stm, "delete", down("stm"))
        answer = _turn(client, key, "pia")
        assert answer.status_code == 503
        assert _held(system, "acme.pia")["stm"] == 1  # stored, and could not be taken back
        assert [w.kind for w in pending.entries()] == ["stm_record"]
        assert client.app.state.service.complete_pending() == 0  # STM still failing
        assert len(pending.entries()) == 1
    assert client.app.state.service.complete_pending() == 1
    assert _held(system, "acme.pia") == {"stm": 0, "ltm": 0}
    assert pending.entries() == []
    assert not any(MARKER in text for text in _recalled(client, key, "pia"))


@pytest.mark.parametrize("failing", ["stm", "session"])
def test_a_delete_failing_part_way_is_completed_in_every_layer(
    served: Any, monkeypatch: pytest.MonkeyPatch, failing: str
) -> None:
    """LTM is erased first; STM (or the sessions) then fails: 503, the erasure pending,
    and completed once the layer is back."""
    client, key, system, pending = served
    assert _turn(client, key, "pia").status_code == 200
    assert _turn(client, key, "pia").status_code == 200  # said again: promoted
    assert _turn(client, key, "bo", "I always prefer DHL for my deliveries.").status_code == 200
    before = _held(system, "acme.pia")
    assert before["stm"] >= 1 and before["ltm"] >= 1, before
    store = system.stm if failing == "stm" else system.session
    with monkeypatch.context() as patch:
        patch.setattr(store, "delete" if failing == "stm" else "delete_user", down(failing))
        answer = client.delete("/v1/users/pia", headers=auth(key))
        assert answer.status_code == 503 and answer.json()["error"]["field"] == failing
        assert "/tmp" not in answer.text
        assert [(w.kind, w.user) for w in pending.entries()] == [("erase_user", "acme.pia")]
        assert client.app.state.service.complete_pending() == 0  # the layer still fails
    assert client.app.state.service.complete_pending() == 1
    assert pending.entries() == []
    assert _held(system, "acme.pia") == {"stm": 0, "ltm": 0}
    assert system.session.get(user_id="acme.pia", session_id="s1") is None
    assert _recalled(client, key, "pia") == []
    assert _held(system, "acme.bo")["stm"] == 1  # another user untouched


def test_a_delete_that_completes_leaves_no_pending_entry(served: Any) -> None:
    client, key, system, pending = served
    assert _turn(client, key, "pia").status_code == 200
    answer = client.delete("/v1/users/pia", headers=auth(key))
    assert answer.status_code == 200
    assert pending.entries() == [] and not list(pending.directory.glob("*"))
    assert _held(system, "acme.pia") == {"stm": 0, "ltm": 0}
