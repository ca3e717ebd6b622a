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
_MARK = re.compile(r"<!-- (?:runnable(?:[,:][^>]*)?|not runnable[^:>]*: *\S[^>]*) *-->")
_BLOCK = re.compile(
    r"<!-- runnable(?P<mark>[^>]*)-->\n```(?:bash|sh)\n(?P<script>.*?)\n```", re.DOTALL
)
_FENCE = re.compile(r"^```(?P<lang>\S*)\n(?P<body>.*?)^```$", re.DOTALL | re.MULTILINE)
_PRINTS = re.compile(r"prints: (.*?)\s*$")


def test_the_http_api_reference_is_the_schema() -> None:
    written = (REPO / "docs" / "http-api.md").read_text(encoding="utf-8")
    assert written == render(schema()), (
        "docs/http-api.md is out of date: python -m memharness.serve.api_doc > docs/http-api.md"
    )


def _blocks() -> list[tuple[str, str, str]]:
    found = []
    for path in DOCS:
        for i, match in enumerate(_BLOCK.finditer(path.read_text(encoding="utf-8"))):
            printed = _PRINTS.search(match.group("mark"))
            expected = "" if printed is None else printed.group(1)
            found.append((f"{path.relative_to(REPO)}#{i}", match.group("script"), expected))
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_every_shell_block_of_the_docs_says_whether_it_runs() -> None:
    # A fence names its language (`text` for output), so no command hides in a bare block;
    # each shell block is marked runnable, or not runnable with the reason.
    bare, unmarked = [], []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for fence in _FENCE.finditer(text):
            where = f"{path.relative_to(REPO)}:{text.count(chr(10), 0, fence.start()) + 1}"
            if not fence.group("lang"):
                bare.append(where)
            before = text[: fence.start()].rstrip("\n").rsplit("\n", 1)[-1]
            if fence.group("lang") in ("bash", "sh") and not _MARK.fullmatch(before):
                unmarked.append(where)
    assert bare == [], "name the language of each fence (bash, text, yaml, ...)"
    assert unmarked == [], "mark each with <!-- runnable --> or <!-- not runnable...: why -->"


def test_there_are_runnable_blocks() -> None:
    names = [block[0] for block in _blocks()]
    assert any(n.startswith("docs/serve.md") for n in names), names


def _scratch_checkout(tmp_path: Path) -> Path:
    """The checkout's files, linked, in a scratch directory: what a block writes under
    reports/ (a run's results) stays out of the checkout."""
    work = tmp_path / "checkout"
    work.mkdir()
    for entry in REPO.iterdir():
        if entry.name not in {"reports", ".git", ".pytest_cache"}:
            (work / entry.name).symlink_to(entry)
    return work


@pytest.mark.parametrize(("name", "script", "expected"), _blocks(), ids=[b[0] for b in _blocks()])
def test_a_runnable_block_runs(name: str, script: str, expected: str, tmp_path: Path) -> None:
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
        cwd=_scratch_checkout(tmp_path), env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, f"{name}:\n{done.stdout}\n{done.stderr}"
    if "/v1/turn" in script:
        assert '"message_id"' in done.stdout, done.stdout
    printed = done.stdout + done.stderr
    assert expected in printed, f"{name}: expected {expected!r} in:\n{printed}"
