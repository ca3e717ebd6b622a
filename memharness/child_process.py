"""Stopping a child process the way every memharness parent does: SIGTERM, a bounded
wait for it to finish what it holds, then SIGKILL."""

from __future__ import annotations

import signal
import subprocess
from typing import Any

__all__ = ["stop_process"]


def stop_process(process: subprocess.Popen[Any], timeout_s: float) -> int | None:
    """Stop `process` if it still runs; its exit code, or None when it had to be killed."""
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return None
