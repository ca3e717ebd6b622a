"""docker-compose.yml agrees with the settings the code reads, and its healthchecks can run."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from reference.settings import Settings

ROOT = Path(__file__).resolve().parents[1]
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]

#: The commands each image ships, as its documentation and its users report them:
#: redis:7 has redis-cli (the official image); pgvector/pgvector:pg16 is postgres:16 with
#: the extension, which has pg_isready and sh; chromadb/chroma:1.5.9 is Chroma's Rust
#: binary on Debian slim, with bash but no curl, wget or Python (rust/Dockerfile in
#: chroma-core/chroma; its users' reports, e.g. neomjs/neo#10908, Osmantic/ODS#635).
IMAGE_COMMANDS = {
    "redis:7": {"redis-cli", "redis-server", "sh", "bash"},
    "pgvector/pgvector:pg16": {"pg_isready", "psql", "sh", "bash"},
    "chromadb/chroma:1.5.9": {"chroma", "bash", "sh"},
}
#: The port each server listens on inside its container.
CONTAINER_PORT = {"redis": 6379, "postgres": 5432, "chroma": 8000}
#: The service each setting's URL must name.
SETTING_SERVICE = {"redis_url": "redis", "pg_url": "postgres", "chroma_url": "chroma"}


def _header_urls() -> dict[str, str]:
    """The `MEMH_...=URL` lines of the file's header comment, by setting name."""
    found = re.findall(
        r"^#\s+MEMH_(\w+)=(\S+)$", (ROOT / "docker-compose.yml").read_text(), flags=re.M
    )
    return {name.lower(): url for name, url in found}


def _published(service: str) -> dict[int, int]:
    """Container port -> host port of a service's `ports`."""
    out = {}
    for mapping in SERVICES[service]["ports"]:
        host, container = str(mapping).split(":")[-2:]
        out[int(container)] = int(host)
    return out


def test_the_header_names_a_url_for_each_server_setting() -> None:
    assert set(_header_urls()) == set(SETTING_SERVICE)


@pytest.mark.parametrize("setting", sorted(SETTING_SERVICE))
def test_each_url_is_a_setting_the_code_reads_and_reaches_its_service(
    setting: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = _header_urls()[setting]
    monkeypatch.setenv(f"MEMH_{setting.upper()}", url)
    read = getattr(Settings(), setting)
    assert (read.get_secret_value() if hasattr(read, "get_secret_value") else read) == url
    service = SETTING_SERVICE[setting]
    parsed = urlparse(url)
    assert parsed.hostname in {"127.0.0.1", "localhost"}
    assert parsed.port == _published(service)[CONTAINER_PORT[service]]
    documented = (ROOT / "docs" / "configuration.md").read_text(encoding="utf-8")
    assert f"`MEMH_{setting.upper()}`" in documented


def test_the_postgres_url_carries_the_credentials_and_database_of_the_service() -> None:
    url = urlparse(_header_urls()["pg_url"])
    env = SERVICES["postgres"]["environment"]
    assert url.scheme == "postgresql"
    assert (url.username, url.password, url.path.lstrip("/")) == (
        env["POSTGRES_USER"],
        env["POSTGRES_PASSWORD"],
        env["POSTGRES_DB"],
    )
    check = " ".join(SERVICES["postgres"]["healthcheck"]["test"][1:])
    assert f"-U {env['POSTGRES_USER']}" in check and f"-d {env['POSTGRES_DB']}" in check


def _healthcheck_program(test: list[str]) -> str:
    kind, *rest = test
    if kind == "CMD":
        return rest[0]
    assert kind == "CMD-SHELL", f"unknown healthcheck form {kind}"
    return shlex.split(rest[0])[0]


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_every_healthcheck_runs_a_command_its_image_ships(service: str) -> None:
    image = SERVICES[service]["image"]
    test = SERVICES[service]["healthcheck"]["test"]
    shipped = IMAGE_COMMANDS[image]
    assert _healthcheck_program(test) in shipped, f"{service}: {test}"
    if test[0] == "CMD-SHELL":
        assert "sh" in shipped


class _Heartbeat(BaseHTTPRequestHandler):
    status = 200

    def do_GET(self) -> None:
        code = self.status if self.path == "/api/v2/heartbeat" else 404
        self.send_response(code)
        self.end_headers()
        self.wfile.write(b'{"nanosecond heartbeat": 1}')

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server(status: int) -> Iterator[int]:
    handler = type("Handler", (_Heartbeat,), {"status": status})
    httpd = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield httpd.server_address[1]
    finally:
        httpd.shutdown()
        httpd.server_close()


def _run_chroma_check(port: int) -> int:
    """Run the chroma healthcheck as the container would, against 127.0.0.1:`port`."""
    kind, program, *args = SERVICES["chroma"]["healthcheck"]["test"]
    assert kind == "CMD"
    # Compose unescapes `$$` to `$` before the container runs the command.
    args = [a.replace("$$", "$").replace("/8000", f"/{port}") for a in args]
    return subprocess.run([program, *args], timeout=10, capture_output=True).returncode


def test_the_chroma_healthcheck_passes_on_a_heartbeat_and_fails_otherwise() -> None:
    assert "/dev/tcp/127.0.0.1/8000" in " ".join(SERVICES["chroma"]["healthcheck"]["test"])
    with _server(200) as port:
        assert _run_chroma_check(port) == 0
    with _server(500) as port:
        assert _run_chroma_check(port) != 0
    with socket.socket() as s:  # nothing listening
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    assert _run_chroma_check(closed) != 0
