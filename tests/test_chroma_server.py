"""`start_chroma_server`: a `chroma run` subprocess that two processes share."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from reference.errors import BackendUnavailable
from reference.stm.chroma_client import make_chroma_client
from reference.stm.chroma_server import ChromaServer, start_chroma_server


def test_a_second_process_sees_what_the_first_wrote(tmp_path: Path) -> None:
    with start_chroma_server(tmp_path / "chroma") as server:
        assert server.running()
        assert server.url.startswith("http://127.0.0.1:")
        client = make_chroma_client(server.url, tmp_path)
        client.get_or_create_collection("shared").add(
            ids=["a"], documents=["hello"], embeddings=[[0.1, 0.2, 0.3]]
        )
        code = (
            "import sys; from reference.stm.chroma_client import make_chroma_client as m;"
            "from pathlib import Path;"
            "c = m(sys.argv[1], Path(sys.argv[2])).get_collection('shared');"
            "print(c.get(ids=['a'])['documents'][0])"
        )
        out = subprocess.run(
            [sys.executable, "-c", code, server.url, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        assert out.stdout.strip() == "hello"
    assert not server.running()
    server.stop()  # idempotent


def test_a_server_that_cannot_start_is_a_clear_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises((BackendUnavailable, OSError)):
        start_chroma_server(blocker / "chroma")


def test_stop_after_the_server_died(tmp_path: Path) -> None:
    server = start_chroma_server(tmp_path / "chroma")
    assert isinstance(server, ChromaServer)
    server.proc.kill()
    server.proc.wait(timeout=30)
    server.stop()
    assert not server.running()
