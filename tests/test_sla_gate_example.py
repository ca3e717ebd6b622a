"""The GitHub Actions example's commands (docs/examples/sla-gate.sh) on the in-memory
stores with the hashing embedder: a broken SLA fails the gate with load's exit code 3,
and a user's own service at a URL is gated the same way."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "docs" / "examples" / "sla-gate.sh"
WORKFLOW = REPO / "docs" / "examples" / "github-actions-sla.yml"
MEMHARNESS = str(Path(sys.executable).with_name("memharness"))


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        **os.environ,
        "MEMH_BACKEND": "memory",
        "MEMH_EMBEDDER": "hashing",
        "MEMH_DATA_DIR": str(tmp_path / "data"),
        "MEMH_PREFIX": "slagate",
        "MEMHARNESS": MEMHARNESS,
        "SLA_USERS": "2",
        "SLA_DURATION": "5s",
        **extra,
    }


def _gate(target: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["timeout", "240", "bash", str(SCRIPT), target],
        cwd=cwd, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip


def test_the_workflow_runs_the_script_for_the_reference_and_a_url() -> None:
    text = WORKFLOW.read_text(encoding="utf-8")
    assert "bash docs/examples/sla-gate.sh reference" in text
    assert "bash docs/examples/sla-gate.sh ${{ vars.MEMORY_URL }}" in text


def test_a_broken_sla_fails_the_gate_on_the_reference(tmp_path: Path) -> None:
    env = _env(tmp_path, SLA_PORT=str(_port()), SLA_LIMITS="turn=0.001")
    done = _gate("reference", env, tmp_path)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "sla-gate: an SLA is broken" in done.stderr


def test_a_service_at_a_url_is_gated(tmp_path: Path) -> None:
    port = _port()
    env = _env(tmp_path, SLA_LIMITS="turn=5000")  # 5 s: too short for recall samples
    key = subprocess.run(
        [MEMHARNESS, "serve", "keys", "add", "--tenant", "mine", "--data-dir", str(tmp_path)],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    server = subprocess.Popen(
        [MEMHARNESS, "serve", "--port", str(port), "--data-dir", str(tmp_path),
         "--strategy", "keep_all"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        for _ in range(120):  # until it answers (wall-clock ok: a process starting)
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/health", timeout=1)
            except OSError as exc:
                if getattr(exc, "code", None) == 401:
                    break  # up: it wants a key
                time.sleep(0.5)
            else:
                break
        done = _gate(f"http://127.0.0.1:{port}", {**env, "MEMH_API_KEY": key}, tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "sla-gate: every SLA held" in done.stdout
    finally:
        server.terminate()
        server.wait(timeout=30)
