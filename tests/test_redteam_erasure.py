"""Red team: every erasure path leaves nothing of the user in any layer (issue 37,
finding 1). After DELETE /v1/users/{id}, `delete_user_data` and a confirmed "forget
everything", the test walks every PostgreSQL table of the namespace (facts, audit,
memh_users ...), every record of the Chroma collection and every Redis key of the
prefix, on the embedded servers (and the same through the stores' own reads on the
in-memory backends), and looks for the user's strings. The strings are not PII, so
they are stored in plaintext before the erasure: the test checks that they are there
first, so it can fail.

The servers' files (old row versions in PostgreSQL's heap, indexes and WAL, Chroma's
log and freed SQLite pages) are checked by `tests/test_redteam_files.py`.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient

from memharness.serve.auth import KeyStore
from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system
from reference.keys import Namespace
from reference.ltm.filters import LtmFilter
from reference.settings import Settings
from reference.stm.filters import StmFilter
from reference.system import MemorySystem
from tests.conftest import T0
from tests.serve_support import KEY, auth, client_for

SAID = [
    "I always prefer Zylbertal Express for my deliveries.",
    "My favourite food is Quorvanese dumplings.",
    "I work as a Brenthallow engineer.",
]
SECRETS = ("Zylbertal", "Quorvanese", "Brenthallow")
OTHER = "I always prefer Mardonico Freight for my deliveries."


def _system(backend: str, root: Path, data_dir: Path) -> MemorySystem:
    prefix = f"rte{uuid.uuid4().hex[:10]}"
    settings = Settings(
        backend=backend,
        data_dir=data_dir if backend == "embedded" else root,
        prefix=prefix,
        encryption_key=KEY,
    )
    return build_memory_system(
        settings,
        clock=VirtualClock(T0),
        embedder=HashingEmbedder(),
        namespace=Namespace(prefix),
        strategy="hybrid",
    )


def _everything_stored(system: MemorySystem, data_dir: Path) -> str:
    """Every row, record and key of the namespace as text: through the servers
    themselves on the embedded backends, through the stores' reads in memory."""
    ns: Namespace = system.stm.namespace
    if system.ltm.__class__.__name__.startswith("Postgres"):
        from reference.ltm.embedded_pg import start_embedded_postgres

        url = start_embedded_postgres(data_dir / "pg").url
        parts = []
        with psycopg.connect(url, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE tablename LIKE %s",
                (f"{ns.prefix}%",),
            ).fetchall()
            assert len(tables) >= 3
            for (table,) in tables:
                rows = conn.execute(f'SELECT t::text FROM "{table}" t').fetchall()
                parts += [row[0] for row in rows]
        collection = system.stm.client.get_collection(ns.stm_collection)  # type: ignore[attr-defined]
        got = collection.get(include=["documents", "metadatas"])
        parts.append(json.dumps([got["documents"], got["metadatas"]], ensure_ascii=False))
        client = system.session.client  # type: ignore[attr-defined]
        for key in client.scan_iter(match=f"{ns.prefix}*"):
            parts.append(repr(key) + repr(client.dump(key)))
        return "\n".join(parts)
    users = ["acme.pia", "acme.max"]
    stm = [
        r for u in users for r in system.stm.records(filter=StmFilter(user_id=u, include_dead=True))
    ]
    facts = [
        f for u in users for f in system.ltm.facts(filter=LtmFilter(user_id=u, include_dead=True))
    ]
    audit = [a for u in users for a in system.ltm.audit_log(user_id=u)]
    sessions = [system.session.get(user_id=u, session_id="s1") for u in users]
    return repr((stm, facts, audit, sessions, system.ltm.last_active(user_ids=users)))


def _delete_route(client: TestClient, key: str) -> None:
    answer = client.delete("/v1/users/pia", headers=auth(key))
    assert answer.status_code == 200, answer.text


def _delete_user_data(client: TestClient, key: str) -> None:
    system: MemorySystem = client.app_state["system"]
    system.delete_user_data(user_id="acme.pia")


def _forget_everything(client: TestClient, key: str) -> None:
    body = {"user_id": "pia", "session_id": "s1", "command": "forget everything about me"}
    answer = client.post("/v1/forget", headers=auth(key), json=body)
    assert answer.status_code == 200, answer.text
    if answer.json()["scope"] is None:  # asked to confirm
        body["command"] = "yes, delete everything"
        answer = client.post("/v1/forget", headers=auth(key), json=body)
        assert answer.status_code == 200, answer.text
    assert answer.json()["scope"] == "everything"


PATHS: dict[str, Callable[[TestClient, str], None]] = {
    "DELETE /v1/users": _delete_route,
    "delete_user_data": _delete_user_data,
    "forget everything, confirmed": _forget_everything,
}


@pytest.mark.parametrize("backend", ["memory", "embedded"])
@pytest.mark.parametrize("path", list(PATHS))
def test_each_erasure_path_leaves_nothing_of_the_user_in_any_layer(
    backend: str, path: str, tmp_path: Path, data_dir: Path
) -> None:
    system = _system(backend, tmp_path, data_dir)
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    try:
        with client_for(system, keys) as client:
            client.app_state = {"system": system}
            for text in SAID:
                turn = {"user_id": "pia", "session_id": "s1", "text": text}
                assert client.post("/v1/turn", headers=auth(key), json=turn).status_code == 200
            turn = {"user_id": "max", "session_id": "s1", "text": OTHER}
            assert client.post("/v1/turn", headers=auth(key), json=turn).status_code == 200
            system.engine.flush_activity()  # type: ignore[union-attr]
            before = _everything_stored(system, data_dir)
            assert all(s in before for s in SECRETS), "the strings were never stored"
            assert "acme.pia" in repr(system.ltm.last_active(user_ids=["acme.pia"]))

            PATHS[path](client, key)

            system.engine.flush_activity()  # type: ignore[union-attr]
            after = _everything_stored(system, data_dir)
            for secret in SECRETS:
                assert secret not in after, (path, secret)
            assert "Mardonico" in after  # the other user keeps everything
            assert system.ltm.last_active(user_ids=["acme.pia"]) == {}
            assert system.ltm.count(filter=LtmFilter(user_id="acme.pia", include_dead=True)) == 0
            assert system.stm.records(filter=StmFilter(user_id="acme.pia", include_dead=True)) == []
            assert system.session.get(user_id="acme.pia", session_id="s1") is None
    finally:
        system.drop()
