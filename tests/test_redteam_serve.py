"""Red team on the service's edges (issue 37, findings 4 and 7): a corrupted keys file
fails closed; bytes that are not UTF-8 and deep nesting get the malformed-JSON error;
a trailing slash is no redirect; health names the layer that is down; a 503 names the
layer, never a path; half-open connections are closed after the header deadline."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

import memharness.serve.protocol as protocol
from memharness.serve.app import create_app
from memharness.serve.auth import KeyStore
from reference.errors import BackendUnavailable
from tests.serve_support import auth, client_for, memory_system

SECRET_PATH = "/tmp/privacy-secret-dir/pg/.s.PGSQL.5432"


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Any]:
    system = memory_system("rtserve", tmp_path)
    keys = KeyStore(tmp_path / "keys.json")
    key = keys.add("acme")
    with client_for(system, keys) as client:
        yield client, key, system, keys


def test_a_corrupted_keys_file_fails_closed_with_503_and_a_log_line(
    served: Any, caplog: pytest.LogCaptureFixture
) -> None:
    client, key, _, keys = served
    keys.path.write_text('{"version": 1, "keys": [ broken', encoding="utf-8")
    with caplog.at_level("ERROR", logger="memharness.serve"):
        answer = client.get("/v1/health", headers=auth(key))
    assert answer.status_code == 503
    assert answer.json()["error"]["code"] == "keys_unavailable"
    assert str(keys.path) not in answer.text
    assert any("keys file cannot be read" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize(
    "body",
    [b'{"user_id": "\xff\xfe", "session_id": "s", "text": "x"}', b"[" * 5000 + b"]" * 5000],
    ids=["invalid utf-8", "nested 5000 deep"],
)
def test_bytes_not_utf8_and_deep_nesting_are_malformed_json(served: Any, body: bytes) -> None:
    client, key, _, _ = served
    headers = {**auth(key), "Content-Type": "application/json"}
    answer = client.post("/v1/turn", headers=headers, content=body)
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "malformed_json"


def test_nesting_over_64_within_the_parser_limit_is_malformed_json(served: Any) -> None:
    client, key, _, _ = served
    deep = '{"a": ' * 70 + "1" + "}" * 70
    body = '{"user_id": "u", "session_id": "s", "text": "x", "metadata": ' + deep + "}"
    headers = {**auth(key), "Content-Type": "application/json"}
    answer = client.post("/v1/turn", headers=headers, content=body.encode())
    assert answer.status_code == 400, answer.text
    assert answer.json()["error"]["code"] == "malformed_json"


def test_a_trailing_slash_is_not_found_not_a_redirect(served: Any) -> None:
    client, key, _, _ = served
    answer = client.delete("/v1/users/alice/", headers=auth(key), follow_redirects=False)
    assert answer.status_code == 404


def test_health_checks_every_layer_and_names_the_one_down(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    client, key, system, _ = served
    answer = client.get("/v1/health", headers=auth(key))
    assert answer.status_code == 200
    assert answer.json() == {"status": "ok", "layers": {"session": "ok", "stm": "ok", "ltm": "ok"}}

    def down(**_: object) -> int:
        raise BackendUnavailable("connection refused", layer="ltm", server=SECRET_PATH)

    monkeypatch.setattr(system.ltm, "count", down)
    answer = client.get("/v1/health", headers=auth(key))
    assert answer.status_code == 503
    assert answer.json()["layers"] == {"session": "ok", "stm": "ok", "ltm": "down"}
    assert "/tmp" not in answer.text


def test_a_503_names_the_layer_and_no_path(served: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    client, key, system, _ = served

    def down(**_: object) -> object:
        raise BackendUnavailable("connection refused", layer="stm", server=SECRET_PATH)

    monkeypatch.setattr(system.stm, "add", down)
    body = {"user_id": "u", "session_id": "s", "text": "I always prefer DHL for deliveries."}
    answer = client.post("/v1/turn", headers=auth(key), json=body)
    assert answer.status_code == 503
    error = answer.json()["error"]
    assert error["code"] == "store_unavailable" and error["field"] == "stm"
    assert "stm" in error["message"] and "/tmp" not in answer.text and "PGSQL" not in answer.text


def test_half_open_connections_are_closed_after_the_header_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol, "HEADER_READ_TIMEOUT_S", 0.5)
    system = memory_system("rtserveh", tmp_path)
    keys = KeyStore(tmp_path / "keys.json")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    config = uvicorn.Config(
        create_app(system, keys),
        host="127.0.0.1",
        port=port,
        log_level="warning",
        http=protocol.HeaderDeadline,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while not server.started and time.monotonic() < deadline:
            time.sleep(0.05)
        conns = [socket.create_connection(("127.0.0.1", port)) for _ in range(100)]
        for i, conn in enumerate(conns):
            if i % 2:
                conn.sendall(b"GET /v1/health HTTP/1.1\r\nHost: x\r\n")  # half a request
            conn.settimeout(5)
        started = time.monotonic()
        closed = sum(1 for conn in conns if conn.recv(1) == b"")
        assert closed == 100
        assert time.monotonic() - started < 5
        for conn in conns:
            conn.close()
    finally:
        server.should_exit = True
        thread.join(10)


_EMBEDDED_RUN = """
import sys
from pathlib import Path
from memharness.serve.files import private_data_dir
from reference.clock import VirtualClock
from reference.embedding import HashingEmbedder
from reference.factory import build_memory_system
from reference.settings import Settings
from tests.serve_support import KEY

data = Path(sys.argv[1])
private_data_dir(data)
settings = Settings(backend="embedded", data_dir=data, prefix="perm", encryption_key=KEY)
system = build_memory_system(settings, clock=VirtualClock(1.767e9), embedder=HashingEmbedder())
system.turn(user_id="u", session_id="s", text="I always prefer DHL for deliveries.")
system.dispose()
"""


def test_the_embedded_servers_files_are_owner_only(tmp_path: Path) -> None:
    """As `memharness serve` starts them: umask 077 first (in a child process, so this
    test's own umask stays), then embedded PostgreSQL, Redis and Chroma write."""
    import os
    import stat
    import subprocess
    import sys

    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    (data / "left.log").write_text("from an earlier run")
    os.chmod(data / "left.log", 0o644)
    done = subprocess.run(
        [sys.executable, "-c", _EMBEDDED_RUN, str(data)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=Path(__file__).parent.parent,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    wide = []
    seen = 0
    for root, dirs, files in os.walk(data):
        for name in (*dirs, *files):
            path = Path(root, name)
            if path.is_symlink() or not path.exists():
                continue
            mode = stat.S_IMODE(path.stat().st_mode)
            seen += 1
            if mode & 0o077 and not stat.S_ISSOCK(path.stat().st_mode):
                wide.append((str(path.relative_to(data)), oct(mode)))
    assert seen > 20 and any(
        p.endswith("chroma.sqlite3") for p, _ in [(str(x), 0) for x in data.rglob("*")]
    )
    assert wide == [], wide[:20]
