"""Records <-> Chroma rows of the short-term collection: the metadata layout, filters
as `where` clauses, and ranking fetched rows exactly (`cosine_scores`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from reference.models import Hit, MemoryRecord, MemoryType, Status
from reference.stm.access import AccessWrite
from reference.stm.filters import StmFilter
from reference.stm.memory_store import cosine_scores, top_k

#: Stored as expires_at for a record that never expires: a range filter cannot match a
#: missing key, and `expires_at > now` must hold for such a record.
NO_EXPIRY = 1e300
#: Prefix of caller metadata keys, so they never collide with the store's own keys.
USER_KEY_PREFIX = "m_"
#: Every status but active, as an `$in` (Chroma answers `$ne` with a scan: 1.4 ms against
#: 0.35 ms at 3,000 records).
NOT_ACTIVE = sorted(s.value for s in Status if s is not Status.ACTIVE)


def scope_of(user_id: str, session_id: str) -> str:
    """The `scope` metadata value; '/' is outside the id alphabet, so no two pairs collide."""
    return f"{user_id}/{session_id}"


def to_metadata(record: MemoryRecord) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        f"{USER_KEY_PREFIX}{key}": value for key, value in record.metadata.items()
    }
    metadata.update(
        user_id=record.user_id,
        session_id=record.session_id,
        scope=scope_of(record.user_id, record.session_id),
        type=record.type.value,
        created_at=float(record.created_at),
        last_accessed_at=float(record.last_accessed_at),
        access_count=int(record.access_count),
        importance=float(record.importance),
        expires_at=NO_EXPIRY if record.expires_at is None else float(record.expires_at),
        status=record.status.value,
    )
    return metadata


def to_record(record_id: str, document: str | None, md: dict[str, Any]) -> MemoryRecord:
    expires_at = float(md["expires_at"])
    return MemoryRecord(
        record_id=record_id,
        user_id=md["user_id"],
        session_id=md["session_id"],
        text=document or "",
        type=MemoryType(md["type"]),
        created_at=float(md["created_at"]),
        last_accessed_at=float(md["last_accessed_at"]),
        access_count=int(md["access_count"]),
        importance=float(md["importance"]),
        expires_at=None if expires_at >= NO_EXPIRY else expires_at,
        status=Status(md["status"]),
        metadata={
            key[len(USER_KEY_PREFIX) :]: value
            for key, value in md.items()
            if key.startswith(USER_KEY_PREFIX)
        },
    )


def filter_ids(flt: StmFilter) -> list[str] | None:
    return None if flt.record_ids is None else sorted(flt.record_ids)


def where_of(flt: StmFilter, now: float, *, live: bool) -> dict[str, Any] | None:
    """The filter as a Chroma `where`; None when it cannot match anything."""
    if (flt.record_ids is not None and not flt.record_ids) or (
        flt.types is not None and not flt.types
    ):
        return None
    clauses: list[dict[str, Any]] = [
        {"scope": scope_of(flt.user_id, flt.session_id)}
        if flt.session_id is not None
        else {"user_id": flt.user_id}
    ]
    if flt.types is not None:
        clauses.append({"type": {"$in": sorted(t.value for t in flt.types)}})
    if live:
        clauses.extend(live_clauses(now))
    return and_of(clauses)


def live_clauses(now: float) -> list[dict[str, Any]]:
    # Status is checked in Python by the readers that use this (`_fetch`): an equality
    # that every record matches costs Chroma a scan (+0.8 ms at 3,000 records), and no
    # public operation leaves a short-term record inactive.
    return [{"expires_at": {"$gt": now}}]


def and_of(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    # Chroma refuses an $and of fewer than two clauses.
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


Row = tuple[MemoryRecord, str, np.ndarray]


def records_of(result: Any) -> list[MemoryRecord]:
    """The records of a get result with metadatas and documents."""
    return [
        to_record(record_id, doc, md)
        for record_id, doc, md in zip(
            result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True
        )
    ]


def lay_rows(rows: list[Row], pending: Mapping[str, AccessWrite]) -> list[Row]:
    """Rows with the buffered access statistics of their records."""
    return [
        (pending[rid].apply(record), rid, vector) if rid in pending else (record, rid, vector)
        for record, rid, vector in rows
    ]


def rows_of(result: Any, *, nested: bool = False) -> list[Row]:
    """(record, record_id, vector) triples of a get result, or of the one query of a query."""

    def column(name: str) -> list[Any]:
        values = result[name]
        return list(values[0] if nested else values)

    ids = column("ids")
    documents, metadatas, vectors = column("documents"), column("metadatas"), column("embeddings")
    return [
        (to_record(record_id, documents[i], metadatas[i]), record_id, np.asarray(vectors[i]))
        for i, record_id in enumerate(ids)
    ]


def rank(
    rows: list[Row], embedding: list[float], flt: StmFilter, k: int, now: float
) -> list[Hit[MemoryRecord]]:
    live = [row for row in rows if flt.matches(row[0], now)]
    if not live:
        return []
    scores = cosine_scores(np.stack([row[2] for row in live]), embedding)
    best = top_k(
        ((float(score), row[1], row[0]) for score, row in zip(scores, live, strict=True)), k
    )
    return [Hit(record=record, score=score) for score, _, record in best]
