"""SIGTERM stops a command the way Ctrl-C does: its clean-up runs (the servers it started
stop with it) instead of the process vanishing and leaving them behind."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

CHILD = """
import atexit, signal, sys
from memharness.cli import stop_on_sigterm
atexit.register(lambda: open(sys.argv[1], "w").write("cleaned up"))
stop_on_sigterm()
try:
    print("ready", flush=True)
    signal.pause()  # until the SIGTERM the test sends
finally:
    open(sys.argv[2], "w").write("finally ran")
"""


def test_sigterm_runs_finally_blocks_and_atexit(tmp_path: Path) -> None:
    cleaned, final = tmp_path / "atexit", tmp_path / "finally"
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(cleaned), str(final)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    child.send_signal(signal.SIGTERM)
    _, err = child.communicate(timeout=30)
    assert final.read_text() == "finally ran"
    assert cleaned.read_text() == "cleaned up"
    assert "KeyboardInterrupt" in err and child.returncode != 0


def test_a_handler_already_set_is_left_alone() -> None:
    from memharness.cli import stop_on_sigterm

    def mine(signum: int, frame: object) -> None:
        pass

    previous = signal.signal(signal.SIGTERM, mine)
    try:
        stop_on_sigterm()
        assert signal.getsignal(signal.SIGTERM) is mine
    finally:
        signal.signal(signal.SIGTERM, previous)
