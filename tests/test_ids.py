"""Ids for messages, STM records and LTM facts: random, laid out as version-4 UUIDs."""

from __future__ import annotations

import os
import uuid

from reference.ids import new_id


def test_a_new_id_is_the_hex_of_a_version_4_uuid() -> None:
    ids = [new_id() for _ in range(2000)]
    assert len(set(ids)) == len(ids)
    for ident in ids:
        parsed = uuid.UUID(hex=ident)
        assert parsed.hex == ident
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
    # Every bit that is not the version's or the variant's varies.
    fixed = ~(0xF << 76 | 0x3 << 62) & (2**128 - 1)
    seen_ones = 0
    for ident in ids:
        seen_ones |= int(ident, 16) & fixed
    assert seen_ones == fixed


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    new_id()  # the pool is filled
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next ids, to the parent
        os.close(read)
        os.write(write, " ".join(new_id() for _ in range(8)).encode())
        os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {new_id() for _ in range(8)}
    assert len(child) == 8
    assert not child & parent
