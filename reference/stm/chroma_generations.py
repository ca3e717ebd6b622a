"""Copy-and-swap compaction of a short-term collection, so it does not slow under churn.

Why: Chroma's local HNSW index only marks a deleted record (chroma issues #2594, #2963):
the slot stays in the graph and every search walks it. At 1,000 live records, 20,000
deleted ones made a filtered query ~10x slower, an unfiltered one ~6x, while a metadata
`get` stayed flat (docs/performance.md, "STM under churn").

How: the records deleted since the collection was made are counted (`deleted`). Once they
pass `ratio` x the live ones (and at least `min_dead`), `compact` copies the live rows
into a fresh collection `<name>.next`, drops the old one and renames the copy to `<name>`:
ids, documents, metadata (expiry and access statistics included), vectors, the index
configuration and the collection metadata (the embedder identity) carry over.

- Every store of one collection in a process shares its `Generations` (`generations_of`),
  so a swap made through one store is seen by all.
- Readers and writers of this process go on during the copy: they hold `lock` shared.
  Writes made meanwhile are journaled by id; with everything else held off (`lock`
  exclusive), each journaled id is copied again from the old collection, or deleted
  from the copy when the old one no longer has it, then the old one is dropped. So a
  record forgotten during the copy is gone from the copy too.
- Chroma 1.5.9 drops a collection's rows but leaves its HNSW directory (the vectors) on
  disk (chroma issue #5259): `compact` removes the old vector segment's directory.
- Only an embedded client compacts. Over HTTP other processes hold the collection by its
  id; their writes could land in the old one after the copy, so nothing is swapped.
- Memory: Chroma's embedded client apparently keeps a dropped collection's index in its
  index cache, so each compaction leaves its old index resident (docs/latency.md, "The
  short-term layer under churn"); a larger `ratio` compacts less often.
- A crash between drop and rename leaves only `<name>.next`, a finished copy: opening the
  store renames it (`recover`). Both present means the copy was unfinished: it is dropped.
"""

from __future__ import annotations

import contextlib
import functools
import shutil
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from chromadb.errors import ChromaError, NotFoundError

#: Suffix of the copy's name while it is being built.
NEXT_SUFFIX = ".next"
_ROW = ["metadatas", "documents", "embeddings"]
_WRITES = frozenset({"upsert", "update", "delete", "add"})
_T = TypeVar("_T")
#: What undoing a failed compaction may meet from Chroma (its Python errors, its Rust core's
#: RuntimeError/ValueError) or its files; the compaction's own error is raised instead.
_UNDO_ERRORS = (ChromaError, RuntimeError, ValueError, sqlite3.Error, OSError)


def shared(method: Callable[..., _T]) -> Callable[..., _T]:
    """A method of a store with `generations`, run holding its lock shared."""

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> _T:
        with self.generations.lock.shared():
            return method(self, *args, **kwargs)

    return run


class SharedExclusiveLock:
    """Many holders of `shared` at once, or one of `exclusive`; `shared` is reentrant in a
    thread, and a waiting `exclusive` holds off new (not nested) shared holders. A shared
    holder may wait on a thread that wants the lock shared too (a store's `_put` waits
    for the access flush): so `exclusive` waits at most `timeout_s` for the holders to
    leave, then lets the others in again and raises `TimeoutError`."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._readers = 0
        self._writer = False
        self._depth = threading.local()

    def held(self) -> bool:
        """Whether this thread holds the lock shared."""
        return bool(getattr(self._depth, "n", 0))

    @contextlib.contextmanager
    def shared(self) -> Iterator[None]:
        depth = getattr(self._depth, "n", 0)
        if depth == 0:
            with self._cond:
                while self._writer:
                    self._cond.wait()
                self._readers += 1
        self._depth.n = depth + 1
        try:
            yield
        finally:
            self._depth.n = depth
            if depth == 0:
                with self._cond:
                    self._readers -= 1
                    self._cond.notify_all()

    @contextlib.contextmanager
    def exclusive(self, timeout_s: float = 5.0) -> Iterator[None]:
        if self.held():
            raise RuntimeError("exclusive lock asked for while holding it shared")
        with self._cond:
            while self._writer:
                self._cond.wait()
            self._writer = True
            if not self._cond.wait_for(lambda: not self._readers, timeout=timeout_s):
                self._writer = False
                self._cond.notify_all()
                raise TimeoutError(f"readers still in after {timeout_s:g} s")
        try:
            yield
        finally:
            with self._cond:
                self._writer = False
                self._cond.notify_all()


class JournaledCollection:
    """The current collection (`inner`, swapped by `compact`); the ids its writes name are
    journaled while a copy is under way."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.journal: set[str] | None = None

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if name not in _WRITES:
            return attr

        def write(*args: Any, **kwargs: Any) -> Any:
            if self.journal is not None:
                self.journal.update(kwargs["ids"])
            return attr(*args, **kwargs)

        return write


class Generations:
    """The compaction state of one store's collection `name` (see the module doc)."""

    def __init__(
        self,
        client: Any,
        name: str,
        collection: JournaledCollection,
        *,
        ratio: float = 1.0,
        min_dead: int = 1000,
        wrap: Callable[[Any], Any] = lambda collection: collection,
    ) -> None:
        """`wrap` makes the store's view of a raw Chroma collection (its retries)."""
        self.client = client
        self.wrap = wrap
        self.name = name
        self.collection = collection
        self.ratio = ratio
        self.min_dead = min_dead
        self.lock = SharedExclusiveLock()
        #: How long a swap waits for the readers and writers in flight to leave.
        self.wait_s = 5.0
        self.deleted = 0
        self.compactions = 0
        self._compacting = threading.Lock()
        self._path = persist_directory(client)

    @property
    def embedded(self) -> bool:
        return self._path is not None

    def due(self) -> bool:
        """Whether the deleted records pass the share that calls for a compaction."""
        if not self.embedded or self.deleted < self.min_dead:
            return False
        with self.lock.shared():
            return self.deleted > self.ratio * int(self.collection.count())

    def compact_if_due(self) -> bool:
        """`compact` when `due` and this thread holds no shared lock; True if it ran."""
        if self.lock.held() or not self.due():
            return False
        return self.compact()

    def compact(self) -> bool:
        """Copy the live rows into a fresh collection and swap it in (the module doc).
        False when another thread is compacting already, or readers did not leave in
        time (the copy is dropped; the next due check tries again); `ValueError` over HTTP.
        """
        if not self.embedded:
            raise ValueError("only an embedded Chroma collection is compacted")
        if not self._compacting.acquire(blocking=False):
            return False
        try:
            with self.lock.exclusive(self.wait_s):
                old = self.collection.inner
                self.collection.journal = set()
            copy = self._fresh_copy(old)
            _write(copy, _rows(old, old.get(include=[])["ids"]), self._batch())
            with self.lock.exclusive(self.wait_s):
                self._swap(old, copy)
        except TimeoutError:
            self._undo()
            return False
        except BaseException:
            self._undo()
            raise
        finally:
            self._compacting.release()
        return True

    def _swap(self, old: Any, copy: Any) -> None:
        journal, self.collection.journal = self.collection.journal or set(), None
        self._replay(old, copy, sorted(journal))
        segment = vector_segment(self._path, str(old.id))
        self.client.delete_collection(self.name)
        copy.modify(name=self.name)
        self.collection.inner = self.wrap(
            self.client.get_collection(self.name, embedding_function=None)
        )
        self.deleted = 0
        self.compactions += 1
        if segment is not None and self._path is not None:
            shutil.rmtree(self._path / segment, ignore_errors=True)

    def _undo(self) -> None:
        """After a failed compaction: no journal, and one collection under the name, the
        old one or, if it was dropped already, the finished copy (`recover`)."""
        self.collection.journal = None
        with contextlib.suppress(*_UNDO_ERRORS):  # the error being raised says more
            recover(self.client, self.name)
            self.collection.inner = self.wrap(
                self.client.get_collection(self.name, embedding_function=None)
            )

    def _fresh_copy(self, old: Any) -> Any:
        self._drop_quietly(self.name + NEXT_SUFFIX)  # an unfinished copy of a crashed run
        hnsw = dict(old.configuration.get("hnsw") or {})
        return self.client.create_collection(
            self.name + NEXT_SUFFIX,
            configuration={"hnsw": hnsw},
            metadata=dict(old.metadata or {}) or None,
            embedding_function=None,
        )

    def _replay(self, old: Any, copy: Any, ids: list[str]) -> None:
        """The journaled ids as the old collection has them now: copied, or deleted."""
        batch = self._batch()
        for start in range(0, len(ids), batch):
            wanted = ids[start : start + batch]
            rows = _rows(old, wanted)
            gone = sorted(set(wanted) - set(rows["ids"]))
            if gone:
                copy.delete(ids=gone)
            _write(copy, rows, batch)

    def _batch(self) -> int:
        return int(self.client.get_max_batch_size())

    def _drop_quietly(self, name: str) -> None:
        with contextlib.suppress(NotFoundError, ValueError):
            self.client.delete_collection(name)


_shared: weakref.WeakValueDictionary[tuple[int, str], Generations] = weakref.WeakValueDictionary()
_shared_lock = threading.Lock()


def generations_of(
    client: Any, name: str, collection: Any, wrap: Callable[[Any], Any]
) -> Generations:
    """The process's `Generations` of collection `name` (just opened as `collection`) under
    `client`: made on first use, and again when the collection was dropped and made anew.
    `wrap` makes the store's view of a raw collection."""
    with _shared_lock:
        key = (id(client), name)
        found = _shared.get(key)
        if found is None or str(found.collection.inner.id) != str(collection.id):
            found = Generations(client, name, JournaledCollection(wrap(collection)), wrap=wrap)
            _shared[key] = found
        return found


def recover(client: Any, name: str) -> None:
    """Finish or undo a compaction that a crash interrupted (the module doc)."""
    names = {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}
    if name + NEXT_SUFFIX not in names:
        return
    if name in names:
        client.delete_collection(name + NEXT_SUFFIX)
    else:
        client.get_collection(name + NEXT_SUFFIX, embedding_function=None).modify(name=name)


def persist_directory(client: Any) -> Path | None:
    """The data directory of an embedded client; None for an HTTP one."""
    if hasattr(getattr(client, "_server", None), "_api_url"):
        return None
    path = client.get_settings().persist_directory
    return Path(path) if path else None


def vector_segment(path: Path | None, collection_id: str) -> str | None:
    """The id (its directory's name) of a collection's vector segment, read from the
    catalogue of an embedded Chroma (`chroma.sqlite3`)."""
    if path is None:
        return None
    catalogue = f"file:{path / 'chroma.sqlite3'}?mode=ro"
    with contextlib.closing(sqlite3.connect(catalogue, uri=True)) as db:
        row = db.execute(
            "SELECT id FROM segments WHERE collection = ? AND scope = 'VECTOR'", (collection_id,)
        ).fetchone()
    return None if row is None else str(row[0])


def _rows(collection: Any, ids: list[str]) -> dict[str, Any]:
    rows: dict[str, Any] = {"ids": [], "metadatas": [], "documents": [], "embeddings": []}
    step = 1000
    for start in range(0, len(ids), step):
        got = collection.get(ids=ids[start : start + step], include=_ROW)
        rows["ids"] += list(got["ids"])
        rows["metadatas"] += list(got["metadatas"] or [])
        rows["documents"] += list(got["documents"] or [])
        rows["embeddings"] += list(got["embeddings"] if got["embeddings"] is not None else [])
    return rows


def _write(collection: Any, rows: dict[str, Any], batch: int) -> None:
    for start in range(0, len(rows["ids"]), batch):
        end = start + batch
        metadatas = rows["metadatas"][start:end]
        documents = rows["documents"][start:end]
        collection.upsert(
            ids=rows["ids"][start:end],
            embeddings=rows["embeddings"][start:end],
            metadatas=metadatas if any(m is not None for m in metadatas) else None,
            documents=documents if any(d is not None for d in documents) else None,
        )
