"""Ids for messages, STM records and LTM facts: random, laid out as version-4 UUIDs."""

from __future__ import annotations

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
