"""Random ids for messages, STM records and LTM facts."""

from __future__ import annotations

import os
import threading

_BATCH = 256  # ids per read of the system's random source
_lock = threading.Lock()
_pool = b""
_at = 0


def new_id() -> str:
    """A random 128-bit id as 32 hex digits, laid out as a version-4 UUID's: what
    `uuid.uuid4().hex` gives, from the same source (`os.urandom`), read 256 ids at a
    time. One `uuid4` (a system call and a `UUID` object) costs 2-3% of a simulated
    replay: every turn makes one to three ids."""
    global _pool, _at
    with _lock:
        if _at == len(_pool):
            _pool, _at = os.urandom(16 * _BATCH), 0
        raw = bytearray(_pool[_at : _at + 16])
        _at += 16
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


def _forget_pool() -> None:
    """A forked child must not hand out the ids its parent's pool holds."""
    global _pool, _at
    _pool, _at = b"", 0


os.register_at_fork(after_in_child=_forget_pool)

__all__ = ["new_id"]
