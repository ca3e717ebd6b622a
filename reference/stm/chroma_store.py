"""The short-term layer on ChromaDB: one cosine collection per namespace, scoped by metadata.

Why one collection per namespace and not one per session: a run has thousands of
sessions, each living about an hour. A collection per session would mean thousands of
HNSW indexes and segment directories, a create and a drop per session, and no single
place to sweep or count. Instead every record carries `user_id`, `session_id` and
`scope` ("user/session", one indexed equality that is both at once) in its metadata, and
every read filters on them.

Lifecycle: built by `reference.factory` with a client from `make_chroma_client` (shared
by every store of the process; the store does not own it); `dispose()` drops the
store's reference to the collection. Thread-safe: the client is, and touches (a
read-modify-write) hold a lock.

Faults (`reference.resilience`): the HTTP client has connect and read timeouts; a lost
connection or a timeout is raised as `BackendUnavailable("short-term memory: Chroma at
<url>: ...")`. Every collection call the store makes is safe to repeat (get, query,
upsert by id, update of absolute values by id, delete by id; never `add`), so each is
retried under `RetryPolicy`.

How `query` stays exact (the in-memory backend is its oracle):

- A session of at most `scan_limit` records is scored exhaustively: its rows are fetched
  and ranked by `cosine_scores`. A filtered HNSW search whose allowed set is smaller
  than `ef` never fills its candidate list and walks the whole graph, so for small
  sessions the scan is both exact and much cheaper (measured: 3 ms against 15 ms for 10
  records among 20,000).
- A larger session goes to HNSW restricted to the session's ids, fetching a margin
  beyond k; the candidates are re-scored by `cosine_scores` and ranked (score, then
  record_id). If the k-th score is too close to the last candidate's to rule out an
  unseen tie, or expired records crowd out live ones, the fetch doubles. While the
  session fits in `ef` the filtered search is exhaustive, hence exact; beyond, HNSW is
  approximate: with the default `ef_search=100` and 1,000 records in the session among
  20,000, recall@5 against the oracle measured 0.999 (hashing embedder) and 0.993
  (random 384-d vectors, the worst case); 1.0 with `ef_search=200`, ~5 ms slower.
- Liveness (status and expires_at) is checked in Python after the fetch: each extra
  clause in a Chroma `where` costs a scan of its index over the whole collection
  (~9 ms at 20,000 records), which `query` cannot afford. Other reads narrow by expiry
  in the `where` and check the status in Python; `scan_due` asks for inactive records
  with `$in` (Chroma scans for a `$ne`).

Scores match the in-memory store's to ~1e-8, not bit for bit: Chroma normalises vectors
for cosine and gives back one within an ulp of float32 of what it was given. A sweep
smaller than the backlog removes *some* expired records, not the earliest to expire
(Chroma cannot order a `get` by metadata); only reads with `include_dead` can tell.
"""

from __future__ import annotations

import bisect
import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, ClassVar

import httpx
import numpy as np
from chromadb.errors import ChromaError, NotFoundError

from reference.clock import Clock
from reference.errors import BackendUnavailable, ConfigurationError
from reference.keys import Namespace
from reference.models import Hit, MemoryRecord, MemoryType, Status
from reference.resilience import DEFAULT_RETRY, SHORT_TERM, RetryPolicy, call_with_retry
from reference.stm.access import AccessBuffer, AccessWrite, lay_records
from reference.stm.base import DEFAULT_STM_TTL_S, ShortTermStore, StmFilter
from reference.stm.memory_store import cosine_scores, storable_record, storable_vector, top_k
from reference.text_interfaces import Embedder, IntentFilter, PiiMasker

#: Stored as expires_at for a record that never expires: a range filter cannot match a
#: missing key, and `expires_at > now` must hold for such a record.
NO_EXPIRY = 1e300
#: Prefix of caller metadata keys, so they never collide with the store's own keys.
USER_KEY_PREFIX = "m_"
#: Score slack when deciding that no unfetched record can tie the k-th: Chroma's HNSW
#: distances are float32, the re-scored similarities float64.
_SCORE_SLACK = 1e-5

_ROW = ["metadatas", "documents", "embeddings"]
_log = logging.getLogger(__name__)
#: Every status but active, as an `$in` (Chroma answers `$ne` with a scan: 1.4 ms against
#: 0.35 ms at 3,000 records).
_NOT_ACTIVE = sorted(s.value for s in Status if s is not Status.ACTIVE)


#: The collection's index settings for writes. Chroma applies writes to the HNSW index
#: on disk only every `sync_threshold` writes (default 1,000), and until then each write
#: costs more the more writes are pending: measured on this project's 2-core machine
#: (embedded Chroma, one STM add at a time), the default made an add's p50 climb from
#: 8 to 28 ms between syncs (a saw tooth of period 1,000), and at 20,000 records gave
#: p50 15.2 / p95 25.7 ms; syncing every 200 writes kept it flat, p50 8.0 / p95 11.0 ms,
#: the syncs included (max 34 ms). Only a new collection takes these (Chroma fixes them
#: at creation); the data is durable in Chroma's log either way.
HNSW_WRITES = {"space": "cosine", "sync_threshold": 200}


class ChromaShortTermStore(ShortTermStore):
    """Short-term memory in a ChromaDB collection (embedded or over HTTP)."""

    supports_forgetting: ClassVar[bool] = True

    def __init__(
        self,
        *,
        client: Any,
        clock: Clock,
        namespace: Namespace,
        embedder: Embedder,
        intent_filter: IntentFilter,
        pii: PiiMasker,
        ttl_s: float = DEFAULT_STM_TTL_S,
        id_factory: Callable[[], str] | None = None,
        ef_search: int = 100,
        scan_limit: int = 100,
        access_buffer: int = 1000,
        retry: RetryPolicy = DEFAULT_RETRY,
    ) -> None:
        """`client` is a `chromadb.api.ClientAPI`. `ef_search` applies only when this
        store creates the collection; `scan_limit` is the largest session scored by a
        scan; `access_buffer` is how many records' access statistics wait behind the
        request before they are written in one batch (`reference.stm.access`; 0: at once)."""
        super().__init__(
            clock=clock,
            namespace=namespace,
            embedder=embedder,
            intent_filter=intent_filter,
            pii=pii,
            ttl_s=ttl_s,
            id_factory=id_factory,
        )
        self.scan_limit = scan_limit
        self._access = AccessBuffer(limit=access_buffer)
        self._flusher: threading.Thread | None = None
        self._flusher_lock = threading.Lock()
        self.client = client
        from reference.stm.chroma_client import describe_chroma

        self.server = describe_chroma(client)
        self.retry = retry
        with _unavailable(self.server):
            collection = call_with_retry(
                lambda: _translated(self.server)(client.get_or_create_collection)(
                    name=namespace.stm_collection,
                    configuration={"hnsw": {**HNSW_WRITES, "ef_search": ef_search}},
                    embedding_function=None,
                ),
                idempotent=True,
                policy=retry,
            )
            self._collection: Any = _RetryingCollection(collection, self.server, retry)
            space = (collection.configuration.get("hnsw") or {}).get("space")
            self._batch = int(client.get_max_batch_size())
        if space != "cosine":
            raise ConfigurationError(
                f"Chroma collection {namespace.stm_collection!r} exists with space "
                f"{space!r}; the short-term layer needs 'cosine' (drop the collection)"
            )

    # ------------------------------------------------------------------ primitives
    def _put(self, record: MemoryRecord, embedding: list[float]) -> None:
        storable_record(record)
        vector = storable_vector("embedding", embedding)
        metadata = _to_metadata(record)
        if self._access.discard([record.record_id]):  # replaced: its old statistics go too
            self._access.wait()  # and a batch in flight must not land on the new record
        with _unavailable(self.server):
            if not self.fresh_ids:  # a caller's id may name a stored record
                old = self._collection.get(ids=[record.record_id], include=["metadatas"])
                # upsert merges metadata; None removes the caller keys the new record lacks.
                for old_metadata in old["metadatas"] or ():
                    for key in old_metadata or {}:
                        metadata.setdefault(key, None)
            self._collection.upsert(
                ids=[record.record_id],
                embeddings=[vector],
                metadatas=[metadata],
                documents=[record.text],
            )

    def _query(
        self, embedding: list[float], flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        query = storable_vector("embedding", embedding)
        where = _where(flt, now, live=False)
        if where is None:
            return []
        with _unavailable(self.server):
            # The ids first, then the rows of a small session: reading up to `scan_limit`
            # rows to learn whether a session is small costs more than this second get
            # saves when it is not (`memharness bench --size small`, whose session is
            # big: `stm.query[cached]` p50 43.9 ms with one get of the rows, 20.4-23.4 ms
            # in the runs after it with two gets, same machine).
            ids = self._collection.get(where=where, include=[])["ids"]
            if not ids:
                return []
            if len(ids) <= self.scan_limit:
                rows = self._access.overlaid(
                    lambda: _rows(self._collection.get(ids=ids, include=_ROW)), _lay_rows
                )
                return _rank(rows, embedding, flt, k, now)
            return self._knn(query, embedding, ids, where, flt, k, now)

    def _knn(
        self,
        query: np.ndarray,
        embedding: list[float],
        ids: list[str],
        where: dict[str, Any],
        flt: StmFilter,
        k: int,
        now: float,
    ) -> list[Hit[MemoryRecord]]:

        def nearest(n: int) -> list[Row]:
            try:
                result = self._collection.query(
                    query_embeddings=[query], ids=ids, n_results=n, include=_ROW
                )
            except ChromaError:
                # An id deleted since `get` listed it fails the id filter: filter by
                # metadata instead (slower: Chroma re-runs the where on its side).
                result = self._collection.query(
                    query_embeddings=[query], where=where, n_results=n, include=_ROW
                )
            return _rows(result, nested=True)

        n = min(len(ids), k + max(k, 10))
        while True:
            rows = self._access.overlaid(functools.partial(nearest, n), _lay_rows)
            hits = _rank(rows, embedding, flt, k + 1, now)
            if len(rows) < n or n >= len(ids):
                return hits[:k]
            floor = float(cosine_scores(np.stack([r[2] for r in rows]), embedding).min())
            if len(hits) > k and hits[k - 1].score > floor + _SCORE_SLACK:
                return hits[:k]
            n = min(len(ids), n * 2)

    def _write_access(self, writes: list[AccessWrite]) -> None:
        if self._access.put(writes):
            self._flush_behind()

    def flush_access(self) -> int:
        return self._access.flush(self._store_access)

    def _flush_behind(self) -> None:
        """Flush on a background thread (one at a time), so no request waits for it."""
        with self._flusher_lock:
            if self._flusher is not None and self._flusher.is_alive():
                return
            self._flusher = threading.Thread(
                target=self._flush_quietly, name="stm-access-flush", daemon=True
            )
            self._flusher.start()

    def _flush_quietly(self) -> None:
        try:
            self.flush_access()
        except BackendUnavailable as exc:  # kept: the next flush (a sweep's) raises it
            _log.warning("short-term access statistics not written yet: %s", exc)

    def wait_for_flush(self) -> None:
        """Return once no background flush of access statistics is running."""
        with self._flusher_lock:
            flusher = self._flusher
        if flusher is not None:
            flusher.join()

    def _store_access(self, writes: list[AccessWrite]) -> None:
        # update, never upsert: a record deleted by another process stays deleted (Chroma
        # skips ids it does not have); a collection deleted by another (a namespace
        # dropped under this store) holds no record to write to.
        with _unavailable(self.server), contextlib.suppress(NotFoundError):
            for start in range(0, len(writes), self._batch):
                batch = writes[start : start + self._batch]
                self._collection.update(
                    ids=[w.record_id for w in batch],
                    metadatas=[
                        {
                            "last_accessed_at": float(w.last_accessed_at),
                            "access_count": int(w.access_count),
                            "expires_at": NO_EXPIRY
                            if w.expires_at is None
                            else float(w.expires_at),
                            "importance": float(w.importance),
                        }
                        for w in batch
                    ],
                )

    def _scan(self, after: str | None, limit: int) -> list[MemoryRecord]:
        # Chroma cannot order a `get` or filter ids by range, so the page is cut from the
        # sorted id list of the namespace: O(namespace) per page, fine for a short-lived
        # layer, and correct while records come and go between pages.
        def page() -> list[MemoryRecord]:
            with _unavailable(self.server):
                ids = sorted(self._collection.get(include=[])["ids"])
                start = 0 if after is None else bisect.bisect_right(ids, after)
                return self._fetch_records(ids[start : start + limit])

        records = self._access.overlaid(page, lay_records)
        return sorted(records, key=lambda r: r.record_id)

    def _scan_due(self, now: float, after: str | None, limit: int) -> list[MemoryRecord]:
        # One metadata filter finds what is due (past expiry, or not active; a record that
        # never expires holds NO_EXPIRY). Chroma cannot order or range ids, so the page is
        # cut from the sorted due ids (O(due) ids per page, not O(namespace)), and only
        # its records are read in full; ids removed in between are made up from the next.
        # Records with buffered accesses are candidates too: their stored expiry may be
        # stale (`scan_due` keeps the due ones after the overlay).
        where = {"$or": [{"expires_at": {"$lte": now}}, {"status": {"$in": _NOT_ACTIVE}}]}

        def page() -> list[MemoryRecord]:
            with _unavailable(self.server):
                stored = self._collection.get(where=where, include=[])["ids"]
            ids = sorted({*stored, *self._access.ids()})
            position = 0 if after is None else bisect.bisect_right(ids, after)
            found: list[MemoryRecord] = []
            while len(found) < limit and position < len(ids):
                wanted = ids[position : position + limit - len(found)]
                position += len(wanted)
                found += self._fetch_records(wanted)
            return found

        records = self._access.overlaid(page, lay_records)
        return sorted(records, key=lambda r: r.record_id)

    def _purge(self, record_ids: list[str]) -> int:
        with _unavailable(self.server):
            found = self._collection.get(ids=record_ids, include=[])["ids"]
        self._delete_ids(found)
        return len(found)

    def _records(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        # The where narrows by expiry; liveness is decided in Python (`flt.matches`): the
        # status, and an expiry a buffered access of this user may have moved (then the
        # where does not narrow by expiry at all).
        def matching() -> list[MemoryRecord]:
            live = not flt.include_dead and not self._access.has_user(flt.user_id)
            where = _where(flt, now, live=live)
            if where is None:
                return []
            with _unavailable(self.server):
                result = self._collection.get(
                    ids=_ids(flt), where=where, include=["metadatas", "documents"]
                )
            return _records_of(result)

        records = self._access.overlaid(matching, lay_records)
        return sorted(
            (r for r in records if flt.matches(r, now)), key=lambda r: (r.created_at, r.record_id)
        )

    def _delete(self, flt: StmFilter, now: float) -> int:
        ids = self._matching_ids(flt, now)
        self._delete_ids(ids)
        return len(ids)

    def _count(self, flt: StmFilter | None, now: float) -> int:
        if flt is not None:
            return len(self._matching_ids(flt, now))

        # The stored count of live records, corrected by the buffered accesses: each
        # record whose liveness they change counts as they have it.
        def stored() -> tuple[int, list[MemoryRecord]]:
            unexpired = {"expires_at": {"$gt": now}}
            inactive = {"$and": [unexpired, {"status": {"$in": _NOT_ACTIVE}}]}
            with _unavailable(self.server):
                live = len(self._collection.get(where=unexpired, include=[])["ids"])
                live -= len(self._collection.get(where=inactive, include=[])["ids"])
            return live, self._fetch_records(self._access.ids())

        def corrected(
            counted: tuple[int, list[MemoryRecord]], pending: Mapping[str, AccessWrite]
        ) -> tuple[int, list[MemoryRecord]]:
            live, records = counted
            for record in records:
                if record.record_id in pending:
                    now_live = pending[record.record_id].apply(record).is_live(now)
                    live += int(now_live) - int(record.is_live(now))
            return live, records

        return self._access.overlaid(stored, corrected)[0]

    def _sweep(self, now: float, batch_size: int) -> int:
        self.flush_access()  # an access may have moved an expiry: the stored ones must be right
        with _unavailable(self.server):
            found = self._collection.get(
                where={"expires_at": {"$lte": now}}, limit=batch_size, include=[]
            )
        self._delete_ids(found["ids"])
        return len(found["ids"])

    def drop(self) -> None:
        self._access.discard(self._access.ids())  # nothing left to write them to
        self.wait_for_flush()
        with contextlib.suppress(NotFoundError, ValueError):  # gone already (by version)
            self.client.delete_collection(self.namespace.stm_collection)
        self.dispose()

    def dispose(self) -> None:
        """Write the buffered access statistics, then drop the reference to the
        collection; the shared client stays open."""
        try:
            self.wait_for_flush()
            self.flush_access()
        finally:
            self._collection = None

    # ------------------------------------------------------------------ helpers
    def _matching_ids(self, flt: StmFilter, now: float) -> list[str]:
        if not flt.include_dead:  # status, and any buffered access, checked in Python
            return [r.record_id for r in self._records(flt, now)]
        where = _where(flt, now, live=False)
        if where is None:
            return []
        with _unavailable(self.server):
            found = self._collection.get(ids=_ids(flt), where=where, include=[])
        return list(found["ids"])

    def _delete_ids(self, ids: Sequence[str]) -> None:
        with _unavailable(self.server):
            for start in range(0, len(ids), self._batch):
                self._collection.delete(ids=list(ids[start : start + self._batch]))
        self._access.discard(ids)  # deleted: nothing to write

    def _fetch_records(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """These records as stored (those that exist), in no particular order."""
        if not ids:
            return []
        with _unavailable(self.server):
            return _records_of(
                self._collection.get(ids=list(ids), include=["metadatas", "documents"])
            )


# --------------------------------------------------------------------------- translation


def scope_of(user_id: str, session_id: str) -> str:
    """The `scope` metadata value; '/' is outside the id alphabet, so no two pairs collide."""
    return f"{user_id}/{session_id}"


def _to_metadata(record: MemoryRecord) -> dict[str, Any]:
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


def _to_record(record_id: str, document: str | None, md: dict[str, Any]) -> MemoryRecord:
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


def _ids(flt: StmFilter) -> list[str] | None:
    return None if flt.record_ids is None else sorted(flt.record_ids)


def _where(flt: StmFilter, now: float, *, live: bool) -> dict[str, Any] | None:
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
        clauses.extend(_live_clauses(now))
    return _and(clauses)


def _live_clauses(now: float) -> list[dict[str, Any]]:
    # Status is checked in Python by the readers that use this (`_records`): an equality
    # that every record matches costs Chroma a scan (+0.8 ms at 3,000 records), and no
    # public operation leaves a short-term record inactive.
    return [{"expires_at": {"$gt": now}}]


def _and(clauses: list[dict[str, Any]]) -> dict[str, Any]:
    # Chroma refuses an $and of fewer than two clauses.
    return clauses[0] if len(clauses) == 1 else {"$and": clauses}


Row = tuple[MemoryRecord, str, np.ndarray]


def _records_of(result: Any) -> list[MemoryRecord]:
    """The records of a get result with metadatas and documents."""
    return [
        _to_record(record_id, doc, md)
        for record_id, doc, md in zip(
            result["ids"], result["documents"] or [], result["metadatas"] or [], strict=True
        )
    ]


def _lay_rows(rows: list[Row], pending: Mapping[str, AccessWrite]) -> list[Row]:
    """Rows with the buffered access statistics of their records."""
    return [
        (pending[rid].apply(record), rid, vector) if rid in pending else (record, rid, vector)
        for record, rid, vector in rows
    ]


def _rows(result: Any, *, nested: bool = False) -> list[Row]:
    """(record, record_id, vector) triples of a get result, or of the one query of a query."""

    def column(name: str) -> list[Any]:
        values = result[name]
        return list(values[0] if nested else values)

    ids = column("ids")
    documents, metadatas, vectors = column("documents"), column("metadatas"), column("embeddings")
    return [
        (_to_record(record_id, documents[i], metadatas[i]), record_id, np.asarray(vectors[i]))
        for i, record_id in enumerate(ids)
    ]


def _rank(
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


@contextlib.contextmanager
def _unavailable(server: str) -> Iterator[None]:
    """Turns a lost connection to a Chroma server into `BackendUnavailable`."""
    try:
        yield
    except (httpx.TransportError, ConnectionError) as exc:
        if isinstance(exc, BackendUnavailable):
            raise
        raise _as_unavailable(exc, server) from exc


def _as_unavailable(exc: Exception, server: str) -> BackendUnavailable:
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if isinstance(exc, httpx.TimeoutException):
        detail = f"no reply in time ({detail})"
    return BackendUnavailable(detail, layer=SHORT_TERM, server=server, in_doubt=True)


def _translated(server: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def wrap(call: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(call)
        def run(*args: Any, **kwargs: Any) -> Any:
            try:
                return call(*args, **kwargs)
            except (httpx.TransportError, ConnectionError) as exc:
                if isinstance(exc, BackendUnavailable):
                    raise
                raise _as_unavailable(exc, server) from exc

        return run

    return wrap


#: A read that met a delete in flight on the server (another process purging, e.g. the
#: maintenance process's sweep): Chroma's plan found an id its index had just dropped.
#: The read is repeated at once; the delete has finished by then.
_READ_RACE = "Error finding id"
_READ_RACE_TRIES = 3
_READS = frozenset({"get", "query", "count"})


def _reread_on_race(call: Callable[..., Any]) -> Callable[..., Any]:
    """`call` (a read), repeated up to `_READ_RACE_TRIES` times while Chroma reports the
    read/delete race (`_READ_RACE`); any other error, or the race persisting, is raised."""

    @functools.wraps(call)
    def run(*args: Any, **kwargs: Any) -> Any:
        for attempt in range(1, _READ_RACE_TRIES + 1):
            try:
                return call(*args, **kwargs)
            except ChromaError as exc:
                if _READ_RACE not in str(exc) or attempt == _READ_RACE_TRIES:
                    raise
        raise AssertionError("unreachable")

    return run


class _RetryingCollection:
    """A Chroma collection whose calls are retried under the store's policy: the store
    calls only get, query, upsert, update and delete by id, all safe to repeat. A read
    that races a concurrent delete on the server is repeated at once (`_READ_RACE`)."""

    _CALLS = frozenset({"get", "query", "upsert", "update", "delete", "count"})

    def __init__(self, collection: Any, server: str, retry: RetryPolicy) -> None:
        self._inner = collection
        self._server = server
        self._retry = retry

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if name not in self._CALLS:
            return attr
        call = _translated(self._server)(_reread_on_race(attr) if name in _READS else attr)

        def retried(*args: Any, **kwargs: Any) -> Any:
            return call_with_retry(
                lambda: call(*args, **kwargs), idempotent=True, policy=self._retry
            )

        return retried
