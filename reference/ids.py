"""Random ids for messages, STM records and LTM facts."""

from __future__ import annotations

import os


def new_id() -> str:
    """A random 128-bit id as 32 hex digits, laid out as a version-4 UUID's: what
    `uuid.uuid4().hex` gives, without building a `UUID` (which cost 2-3% of a simulated
    replay: every turn makes one to three ids)."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # RFC 4122 variant
    return raw.hex()


__all__ = ["new_id"]
