"""The short-term layer on ChromaDB: one cosine collection per namespace, scoped by metadata.

Why one collection per namespace and not one per session: a run has thousands of
sessions, each living about an hour. A collection per session would mean thousands of
HNSW indexes and segment directories, a create and a drop per session, and no single
place to sweep or count. Instead every record carries `user_id`, `session_id` and
`scope` ("user/session", one indexed equality that is both at once) in its metadata, and
every read filters on them.

Churn: Chroma's HNSW index keeps every deleted record as a tombstone that each search
walks. An embedded store therefore compacts its collection once the records it deleted
outnumber the live ones (at least 1,000): the live rows are copied into a fresh
collection that takes the old one's name (`reference.stm.chroma_generations`).

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
  (one read, of up to `scan_limit + 1` rows: a session past the limit is then listed by
  id) and ranked by `cosine_scores`. A filtered HNSW search whose allowed set is smaller
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
for cosine and gives back one within an ulp of float32 of what it was given."""

from __future__ import annotations

import bisect
import contextlib
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
from chromadb.errors import ChromaError, NotFoundError

from reference.clock import Clock
from reference.errors import ConfigurationError
from reference.keys import Namespace
from reference.models import Hit, MemoryRecord
from reference.resilience import DEFAULT_RETRY, RetryPolicy, call_with_retry
from reference.stm.access import AccessBuffer, AccessWrite, lay_records
from reference.stm.base import DEFAULT_STM_TTL_S, ShortTermStore
from reference.stm.chroma_access import ChromaAccessWriter
from reference.stm.chroma_collection import RetryingCollection, translated, unavailable
from reference.stm.chroma_generations import (
    NEXT_SUFFIX,
    generations_of,
    persist_directory,
    recover,
    shared,
)
from reference.stm.chroma_rows import (
    NOT_ACTIVE,
    Row,
    filter_ids,
    lay_rows,
    rank,
    records_of,
    rows_of,
    to_metadata,
    where_of,
)
from reference.stm.filters import StmFilter
from reference.stm.group_writes import GroupWrites
from reference.stm.memory_store import cosine_scores, storable_record, storable_vector
from reference.stm.primitives import (
    DeleteRecords,
    PurgeRecords,
    PutRecord,
    StmWrite,
    WriteAccess,
)
from reference.text_interfaces import Embedder, IntentFilter, PiiMasker

#: Score slack when deciding that no unfetched record can tie the k-th: Chroma's HNSW
#: distances are float32, the re-scored similarities float64.
_SCORE_SLACK = 1e-5

_ROW = ["metadatas", "documents", "embeddings"]
#: How many filters found to hold more than `scan_limit` records `query` remembers (then
#: it forgets them all and learns again).
_LARGE_REMEMBERED = 4096


#: The collection's index settings for writes. Chroma applies writes to the HNSW index
#: on disk only every `sync_threshold` writes (default 1,000), and until then each write
#: costs more the more writes are pending: measured on this project's 2-core machine
#: (embedded Chroma, one STM add at a time), the default made an add's p50 climb from
#: 8 to 28 ms between syncs (a saw tooth of period 1,000), and at 20,000 records gave
#: p50 15.2 / p95 25.7 ms; syncing every 200 writes kept it flat, p50 8.0 / p95 11.0 ms,
#: the syncs included (max 34 ms). Only a new collection takes these (Chroma fixes them
#: at creation); the data is durable in Chroma's log either way.
HNSW_WRITES = {"space": "cosine", "sync_threshold": 200}
#: The collection metadata key naming the embedder whose vectors the collection holds.
EMBEDDER_KEY = "memh_embedder"


class ChromaShortTermStore(ChromaAccessWriter, ShortTermStore):
    """Short-term memory in a ChromaDB collection (embedded or over HTTP)."""

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
        self._large: set[StmFilter] = set()  # filters found to hold > scan_limit records
        #: Concurrent adds share one Chroma write; its `batches` and `items` count them.
        self.writes = GroupWrites(self._upsert)
        self._access = AccessBuffer(limit=access_buffer)
        self._flusher: threading.Thread | None = None
        self._flusher_lock = threading.Lock()
        self.client = client
        from reference.stm.chroma_client import describe_chroma

        self.server = describe_chroma(client)
        self.retry = retry
        with unavailable(self.server):
            if persist_directory(client) is not None:  # only an embedded one compacts
                recover(client, namespace.stm_collection)
            collection = call_with_retry(
                lambda: translated(self.server)(client.get_or_create_collection)(
                    name=namespace.stm_collection,
                    configuration={"hnsw": {**HNSW_WRITES, "ef_search": ef_search}},
                    metadata={EMBEDDER_KEY: embedder.identity},
                    embedding_function=None,
                ),
                idempotent=True,
                policy=retry,
            )
            self.generations = generations_of(
                client,
                namespace.stm_collection,
                collection,
                wrap=lambda raw: RetryingCollection(raw, self.server, retry),
            )
            self._collection: Any = self.generations.collection
            space = (collection.configuration.get("hnsw") or {}).get("space")
            self._batch = int(client.get_max_batch_size())
        if space != "cosine":
            raise ConfigurationError(
                f"Chroma collection {namespace.stm_collection!r} exists with space "
                f"{space!r}; the short-term layer needs 'cosine' (drop the collection)"
            )
        self._check_embedder(collection)

    def _check_embedder(self, collection: Any) -> None:
        """The collection's vectors come from one embedder, recorded in its metadata when
        it was made: another is a `ConfigurationError`. A collection from before the
        record is stamped with this store's embedder."""
        metadata = dict(collection.metadata or {})
        wrote = metadata.get(EMBEDDER_KEY)
        if wrote is None:
            with unavailable(self.server):
                collection.modify(metadata={**metadata, EMBEDDER_KEY: self.embedder.identity})
        elif wrote != self.embedder.identity:
            raise ConfigurationError(
                f"Chroma collection {self.namespace.stm_collection!r} holds vectors of "
                f"embedder {wrote!r}; this store embeds with {self.embedder.identity!r} "
                "(choose that embedder and runtime: MEMH_EMBEDDER, MEMH_EMBEDDER_RUNTIME; "
                "or drop the collection)"
            )

    # ------------------------------------------------------------------ primitives
    def _apply(self, op: StmWrite) -> Any:
        result = self._apply_shared(op)
        if isinstance(op, (DeleteRecords, PurgeRecords)):
            self.generations.compact_if_due()
        return result

    @shared
    def _apply_shared(self, op: StmWrite) -> Any:
        if isinstance(op, PutRecord):
            return self._put(op.record, op.embedding)
        if isinstance(op, WriteAccess):
            if self._access.put(op.writes):
                self._flush_behind()
            return None
        if isinstance(op, DeleteRecords):
            ids = self._matching_ids(op.filter, op.now)
            self._delete_ids(ids)
            return len(ids)
        if isinstance(op, PurgeRecords):
            return self._purge(op.record_ids)
        raise TypeError(f"not a short-term write: {op!r}")

    @shared
    def _scan(self, after: str | None, limit: int, due_at: float | None) -> list[MemoryRecord]:
        if due_at is None:
            return self._scan_all(after, limit)
        return self._scan_due(due_at, after, limit)

    def _put(self, record: MemoryRecord, embedding: list[float]) -> None:
        storable_record(record)
        vector = storable_vector("embedding", embedding)
        metadata = to_metadata(record)
        if self._access.discard([record.record_id]):  # replaced: its old statistics go too
            self._access.wait()  # and a batch in flight must not land on the new record
        row = (record.record_id, vector, metadata, record.text)
        with unavailable(self.server):
            if self.fresh_ids:  # ids never repeat: concurrent adds may share one write
                self.writes.put(row)
                return
            # A caller's id may name a stored record.
            old = self._collection.get(ids=[record.record_id], include=["metadatas"])
            # upsert merges metadata; None removes the caller keys the new record lacks.
            for old_metadata in old["metadatas"] or ():
                for key in old_metadata or {}:
                    metadata.setdefault(key, None)
            self._upsert([row])

    def _upsert(self, rows: list[tuple[str, np.ndarray, dict[str, Any], str]]) -> None:
        self._collection.upsert(
            ids=[row[0] for row in rows],
            embeddings=[row[1] for row in rows],
            metadatas=[row[2] for row in rows],
            documents=[row[3] for row in rows],
        )

    @shared
    def _search(
        self, embedding: list[float], flt: StmFilter, k: int, now: float
    ) -> list[Hit[MemoryRecord]]:
        query = storable_vector("embedding", embedding)
        where = where_of(flt, now, live=False)
        if where is None:
            return []

        def small_session() -> list[Row] | None:
            # The rows, if there are at most `scan_limit`: one read past the limit tells.
            found = self._collection.get(where=where, include=_ROW, limit=self.scan_limit + 1)
            return rows_of(found) if len(found["ids"]) <= self.scan_limit else None

        def lay(rows: list[Row] | None, pending: Mapping[str, AccessWrite]) -> list[Row] | None:
            return None if rows is None else lay_rows(rows, pending)

        with unavailable(self.server):
            # A session of a few turns (the common case) costs one read. One found large
            # is remembered, and listed by id first (its ids bound the HNSW search), so
            # it does not pay for the read of `scan_limit + 1` rows each time.
            if flt not in self._large:
                rows = self._access.overlaid(small_session, lay)
                if rows is not None:
                    return rank(rows, embedding, flt, k, now)
                if len(self._large) >= _LARGE_REMEMBERED:
                    self._large.clear()
                self._large.add(flt)
            ids = self._collection.get(where=where, include=[])["ids"]
            if len(ids) > self.scan_limit:
                return self._knn(query, embedding, ids, where, flt, k, now)
            self._large.discard(flt)  # small again (swept)
            if not ids:
                return []
            rows = self._access.overlaid(
                lambda: rows_of(self._collection.get(ids=ids, include=_ROW)), lay_rows
            )
            return rank(rows, embedding, flt, k, now)

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
            return rows_of(result, nested=True)

        n = min(len(ids), k + max(k, 10))
        while True:
            rows = self._access.overlaid(functools.partial(nearest, n), lay_rows)
            hits = rank(rows, embedding, flt, k + 1, now)
            if len(rows) < n or n >= len(ids):
                return hits[:k]
            floor = float(cosine_scores(np.stack([r[2] for r in rows]), embedding).min())
            if len(hits) > k and hits[k - 1].score > floor + _SCORE_SLACK:
                return hits[:k]
            n = min(len(ids), n * 2)

    def _scan_all(self, after: str | None, limit: int) -> list[MemoryRecord]:
        # Chroma cannot order a `get` or filter ids by range, so the page is cut from the
        # sorted id list of the namespace: O(namespace) per page, fine for a short-lived
        # layer, and correct while records come and go between pages.
        def page() -> list[MemoryRecord]:
            with unavailable(self.server):
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
        where = {"$or": [{"expires_at": {"$lte": now}}, {"status": {"$in": NOT_ACTIVE}}]}

        def page() -> list[MemoryRecord]:
            with unavailable(self.server):
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
        with unavailable(self.server):
            found = self._collection.get(ids=record_ids, include=[])["ids"]
        self._delete_ids(found)
        return len(found)

    @shared
    def _fetch(self, flt: StmFilter, now: float) -> list[MemoryRecord]:
        # The where narrows by expiry; liveness is decided in Python (`flt.matches`): the
        # status, and an expiry a buffered access of this user may have moved (then the
        # where does not narrow by expiry at all).
        def matching() -> list[MemoryRecord]:
            live = not flt.include_dead and not self._access.has_user(flt.user_id)
            where = where_of(flt, now, live=live)
            if where is None:
                return []
            with unavailable(self.server):
                result = self._collection.get(
                    ids=filter_ids(flt), where=where, include=["metadatas", "documents"]
                )
            return records_of(result)

        records = self._access.overlaid(matching, lay_records)
        return sorted(
            (r for r in records if flt.matches(r, now)), key=lambda r: (r.created_at, r.record_id)
        )

    @shared
    def _count(self, flt: StmFilter | None, now: float) -> int:
        if flt is not None:
            return len(self._matching_ids(flt, now))

        # The stored count of live records, corrected by the buffered accesses: each
        # record whose liveness they change counts as they have it.
        def stored() -> tuple[int, list[MemoryRecord]]:
            unexpired = {"expires_at": {"$gt": now}}
            inactive = {"$and": [unexpired, {"status": {"$in": NOT_ACTIVE}}]}
            with unavailable(self.server):
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

    def drop(self) -> None:
        self._access.discard(self._access.ids())  # nothing left to write them to
        self.wait_for_flush()
        for name in (self.namespace.stm_collection, self.namespace.stm_collection + NEXT_SUFFIX):
            with contextlib.suppress(NotFoundError, ValueError):  # gone already (by version)
                self.client.delete_collection(name)
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
            return [r.record_id for r in self._fetch(flt, now)]
        where = where_of(flt, now, live=False)
        if where is None:
            return []
        with unavailable(self.server):
            found = self._collection.get(ids=filter_ids(flt), where=where, include=[])
        return list(found["ids"])

    def _delete_ids(self, ids: Sequence[str]) -> None:
        with unavailable(self.server):
            for start in range(0, len(ids), self._batch):
                self._collection.delete(ids=list(ids[start : start + self._batch]))
        self.generations.deleted += len(ids)
        self._access.discard(ids)  # deleted: nothing to write

    @shared
    def _fetch_records(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """These records as stored (those that exist), in no particular order."""
        if not ids:
            return []
        with unavailable(self.server):
            return records_of(
                self._collection.get(ids=list(ids), include=["metadatas", "documents"])
            )
