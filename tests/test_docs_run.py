"""Docs that run: the HTTP API reference is what the service's schema gives, and every
shell block of README.md and docs/ marked `<!-- runnable ... -->` runs as written (with
the in-memory stores, the hashing embedder, a free port and a scratch directory)."""

from __future__ import annotations

import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

from memharness.serve.api_doc import render, schema

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
_BLOCK = re.compile(r"<!-- runnable[^>]*-->\n```(?:bash|sh)\n(.*?)\n```", re.DOTALL)


def test_the_http_api_reference_is_the_schema() -> None:
    written = (REPO / "docs" / "http-api.md").read_text(encoding="utf-8")
    assert written == render(schema()), (
        "docs/http-api.md is out of date: python -m memharness.serve.api_doc > docs/http-api.md"
    )


def _blocks() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        for i, match in enumerate(_BLOCK.finditer(path.read_text(encoding="utf-8"))):
            found.append((f"{path.relative_to(REPO)}#{i}", match.group(1)))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


_COMMAND = re.compile(r"^(?:\.venv/bin/|make |bash |export |curl )")


def test_every_command_block_of_the_readme_says_whether_it_runs() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [m for m in re.finditer(r"(?m)^```(?:bash|sh)?\n(.*)$", text)]
    unmarked = []
    for match in blocks:
        first = match.group(1)
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        if _COMMAND.match(first) and not re.match(r"<!-- (?:runnable|not runnable)", before):
            unmarked.append(first)
    assert unmarked == [], "mark each with <!-- runnable --> or <!-- not runnable...: why -->"


def test_there_are_runnable_blocks() -> None:
    names = [name for name, _ in _blocks()]
    assert any(n.startswith("docs/serve.md") for n in names), names


@pytest.mark.parametrize(("name", "script"), _blocks(), ids=[n for n, _ in _blocks()])
def test_a_runnable_block_runs(name: str, script: str, tmp_path: Path) -> None:
    port = str(_free_port())
    script = script.replace("8080", port).replace("/tmp/serve-demo", str(tmp_path / "serve"))
    script = script.replace("/tmp/", f"{tmp_path}/")
    env = {
        **os.environ,
        "MEMH_BACKEND": "memory",
        "MEMH_EMBEDDER": "hashing",
        "MEMH_DATA_DIR": str(tmp_path / "data"),
        "MEMH_PREFIX": "docsrun",
        "HF_HUB_OFFLINE": "1",
    }
    done = subprocess.run(
        ["timeout", "180", "bash", "-euo", "pipefail", "-c", script],
        cwd=REPO, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
    if "/v1/turn" in script:
        assert '"message_id"' in done.stdout, done.stdout
