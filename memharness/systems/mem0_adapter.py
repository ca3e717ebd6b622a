"""mem0 (open-source `Memory`, mem0ai 2.2) as a system under test.

How it is set up (`Mem0Adapter.open`):

- **No LLM, ever.** Every `add` passes `infer=False`: mem0 stores the utterance as one
  memory without extraction. mem0 builds an LLM client at construction whatever `infer`
  is, so its config names OpenAI with a dummy key and `http://127.0.0.1:9` (nothing
  listens there); the adapter then replaces `Memory.llm` with `ForbiddenLLM`, which
  raises if mem0 ever calls it.
- **The harness's embedder.** mem0's embedder factory only knows its own providers
  (its `langchain` one needs the `langchain` package, not installed), so the config names
  OpenAI's embedder (same dummy key and address: a client is built, never called) and
  the adapter replaces `Memory.embedding_model` with `HarnessEmbedding`, mem0's
  `EmbeddingBase` over the harness's `Embedder` (MiniLM shared and cached: no second
  model load, no download).
- **A local vector store**: Qdrant in local mode (`path=`, no server), one directory and
  one collection per adapter, and the history database (SQLite) in the same directory,
  all under `settings.data_dir / "mem0"`; `close` drops the collection and the directory.
- **Telemetry off, no network.** mem0 reads `MEM0_TELEMETRY` once, when
  `mem0.memory.telemetry` is imported; `_import_mem0` sets it to `False` before the first
  import and refuses to go on if mem0 was already imported with telemetry on. With it off,
  no PostHog client is built and the notice config is never fetched from GitHub
  (`mem0.memory.notices` checks the same flag). mem0 downloads spaCy's `en_core_web_sm`
  when spaCy is installed without it, and fastembed's BM25 model from the hub when
  fastembed is installed: `open` refuses both (neither is in the default venv: mem0 then
  skips lemmatising and BM25, and ranks by the semantic score alone).

Expiry (`capabilities.native_expiry`): mem0's own `expiration_date`, a date (day
resolution). The adapter stores `date(at + ttl_s)` (UTC); mem0 hides a memory whose
`expiration_date < today` from `search` and `get_all`, keeps it in the vector store and
never deletes it, and no read changes it. mem0 takes "today" from the wall clock
(`mem0.memory.main._payload_is_expired`), and the harness's virtual time starts years
before it, so that check cannot stay on: `search` asks mem0 with `show_expired=True` (its
check off) for its whole candidate pool and applies the same rule with the *virtual* date
(`is_expired`). It replays mem0's own order of work: mem0 takes the max(4k, 60) nearest of
the user's memories, drops the expired ones, drops those under the score threshold, ranks,
keeps k; the adapter asks for max(4k, 60) results (ranked by the semantic score alone, as
mem0 ranks them here: no BM25 without fastembed, no entity boosts with `infer=False`),
drops the expired ones and keeps k. So even mem0's quirk survives: expired near neighbours
fill the pool and can push a live memory out of the results. Tests check that the adapter
returns what mem0's own check returns on wall-clock dates. (A Qdrant filter on the date
would be simpler, but local Qdrant parses every point's date on every search, a cost mem0
never pays: 16.5 ms against 9.0 ms p50 per search at 300 memories, hashing embedder.)

Deletion: `Memory.delete` and `Memory.delete_all` remove the vectors, but mem0's history
table keeps each memory's text (the ADD row's `new_memory`, the DELETE row's
`old_memory`) until `Memory.reset()` wipes everything. `holds` therefore reads both the
vector store and the history: a deleted memory is still held (its text is on disk).
`in_vector_store` answers for the vector store alone.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import math
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from memharness.systems.base import (
    Capabilities,
    Footprint,
    Hit,
    MemoryAdapter,
    NativeExpiry,
    Written,
)
from reference.errors import InvalidInput

if TYPE_CHECKING:
    from reference.embedding import Embedder
    from reference.settings import Settings

# The registry turns a missing module into "install the extra" (`MissingExtra`); mem0
# itself is imported later, once its telemetry switch is set (`_import_mem0`).
for _module in ("mem0", "qdrant_client"):
    if importlib.util.find_spec(_module) is None:
        raise ModuleNotFoundError(f"No module named {_module!r}", name=_module)

DAY_S = 86_400.0
#: mem0's `search` default: memories whose semantic score is below it are not returned.
SEARCH_THRESHOLD = 0.1
#: An address nothing listens on: the LLM and OpenAI embedder clients mem0 builds at
#: construction point there, so even a call that should never happen cannot leave the host.
UNREACHABLE_URL = "http://127.0.0.1:9"
_SAFE_NAME = re.compile(r"[^A-Za-z0-9_-]")


def _import_mem0(home: Path) -> ModuleType:
    """`mem0.memory.main`, imported with telemetry off and its home (`MEM0_DIR`, where it
    writes an anonymous id at import) under `home` rather than `~/.mem0`, unless set."""
    # mem0 reads both once, at import, from the environment: there is no other switch, so
    # this sets the process's environment (the only global this module touches).
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ.setdefault("MEM0_DIR", str(home))
    telemetry = importlib.import_module("mem0.memory.telemetry")
    if telemetry.MEM0_TELEMETRY is not False:
        raise RuntimeError(
            "mem0 was imported with telemetry on before the mem0 adapter could turn it off; "
            "set MEM0_TELEMETRY=False in the environment"
        )
    return importlib.import_module("mem0.memory.main")


def _refuse_downloads() -> None:
    """Refuse what would make mem0 reach the network or rank differently."""
    if importlib.util.find_spec("spacy") and not importlib.util.find_spec("en_core_web_sm"):
        raise RuntimeError(
            "mem0 would download spaCy's en_core_web_sm at its first search (network); "
            "install it or uninstall spaCy"
        )
    if importlib.util.find_spec("fastembed"):
        # With fastembed, mem0's Qdrant store fetches the Qdrant/bm25 model from the hub
        # and ranks by semantic + BM25 score, which `search`'s expiry replay assumes not.
        raise RuntimeError(
            "fastembed is installed: mem0 would download its BM25 model and rank by a hybrid "
            "score the mem0 adapter does not replay; uninstall fastembed"
        )


def expiration_date(at: float, ttl_s: float) -> str:
    """mem0's `expiration_date` for a memory stored at `at` with `ttl_s` to live: the UTC
    date of `at + ttl_s`. mem0 hides it from the next midnight (UTC) on: never early,
    at most a day late."""
    return datetime.fromtimestamp(at + ttl_s, tz=UTC).date().isoformat()


def candidate_pool(k: int) -> int:
    """How many nearest memories mem0 looks at for k results (`_search_vector_store`)."""
    return max(4 * k, 60)


def is_expired(expiry: str | None, at: float) -> bool:
    """mem0's rule (`_payload_is_expired`: expired when the date is before today, and a
    date it cannot parse never expires) with virtual time `at` instead of the wall clock."""
    if not expiry:
        return False
    try:
        return date.fromisoformat(str(expiry)) < datetime.fromtimestamp(at, tz=UTC).date()
    except ValueError:
        return False


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _check_user(user_id: str) -> None:
    # mem0 rejects these too, but with a ValueError that does not name our field.
    if not isinstance(user_id, str) or not user_id.strip() or any(c.isspace() for c in user_id):
        raise InvalidInput("user_id", f"must be a non-empty string without spaces, got {user_id!r}")


def _check_memory_id(memory_id: str) -> str:
    try:
        return str(uuid.UUID(memory_id))
    except (ValueError, TypeError, AttributeError):
        raise InvalidInput("memory_id", f"not a mem0 memory id (a UUID): {memory_id!r}") from None


class Mem0Adapter(MemoryAdapter):
    """mem0's `Memory` with `infer=False`, the harness's embedder, local Qdrant.

    Lifecycle: `open` builds the `Memory`, its Qdrant collection and history database in a
    directory of its own; every call after that runs in the caller's thread, one at a time
    (local Qdrant and mem0's SQLite connection are not meant for concurrent writers);
    `close` drops the collection and the directory. Nothing is shared between instances
    but the embedder and the imported mem0 modules.
    """

    name: ClassVar[str] = "mem0"
    extra: ClassVar[str | None] = "mem0"
    capabilities = Capabilities(
        native_expiry=NativeExpiry(
            granularity_s=DAY_S, expired="hidden", refresh_on_read=False, clock="virtual"
        ),
        deletes_keep_text=True,
        notes=(
            "expiration_date is a UTC date: hidden from the midnight after at + ttl, kept "
            "in the vector store for good (mem0 has no sweep)",
            "mem0 compares with the wall-clock date; the adapter applies the same rule to "
            "mem0's candidate pool with the virtual date (mem0's own check off)",
            "delete and delete_user remove vectors, but mem0's history table keeps the "
            "text: holds() stays true until close",
            f"search drops memories under mem0's default semantic threshold {SEARCH_THRESHOLD}",
        ),
    )

    def __init__(
        self, *, memory: Any, directory: Path, collection: str, embedder: Embedder
    ) -> None:
        self._memory = memory
        self._directory = directory
        self.collection = collection
        self._dim = embedder.dim
        self._owners: dict[str, str] = {}  # memory id -> user id, for the history's rows
        self._closed = False

    @classmethod
    def open(cls, *, namespace: str, embedder: Embedder, settings: Settings) -> Mem0Adapter:
        if not isinstance(namespace, str) or not namespace:
            raise InvalidInput("namespace", f"must be a non-empty string, got {namespace!r}")
        _refuse_downloads()
        root = Path(settings.data_dir) / "mem0"
        root.mkdir(parents=True, exist_ok=True)
        main = _import_mem0(root / "home")
        embedding_base = importlib.import_module("mem0.embeddings.base").EmbeddingBase
        llm_base = importlib.import_module("mem0.llms.base").LLMBase

        collection = _collection_name(namespace)
        directory = Path(tempfile.mkdtemp(prefix=f"{collection}-", dir=root))
        dummy = {"api_key": "unused-no-network", "openai_base_url": UNREACHABLE_URL}
        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": collection,
                    "embedding_model_dims": embedder.dim,
                    "path": str(directory / "qdrant"),
                },
            },
            "embedder": {"provider": "openai", "config": {**dummy, "embedding_dims": embedder.dim}},
            "llm": {"provider": "openai", "config": dummy},
            "history_db_path": str(directory / "history.db"),
        }
        try:
            memory = main.Memory.from_config(config)
            memory.embedding_model = _harness_embedding(embedding_base, embedder)
            memory.llm = _forbidden_llm(llm_base)
        except BaseException:
            shutil.rmtree(directory, ignore_errors=True)
            raise
        return cls(memory=memory, directory=directory, collection=collection, embedder=embedder)

    # --- the interface ---------------------------------------------------------------

    def set_clock(self, at: float) -> None:
        """Nothing to do: mem0 keeps no clock of its own that the harness could set, and
        expiry is decided per search from the probe's `at`."""

    def add(
        self,
        *,
        user_id: str,
        session_id: str,
        text: str,
        at: float,
        metadata: dict[str, Any],
        ttl_s: float | None,
    ) -> Written:
        """One mem0 memory, with `expiration_date = date(at + ttl_s)` when `ttl_s` is given.
        Pass the strategy's TTL as it is: the date already rounds it up to a day (hidden
        from the midnight after `at + ttl_s`), a TTL rounded before would be late twice."""
        self._check_open()
        _check_user(user_id)
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput("text", "must be a non-empty string")
        if not _finite(at):
            raise InvalidInput("at", f"must be a finite number, got {at!r}")
        if ttl_s is not None and not (_finite(ttl_s) and ttl_s > 0):
            raise InvalidInput("ttl_s", f"must be a finite number > 0 or None, got {ttl_s!r}")
        if not isinstance(metadata, dict):
            raise InvalidInput("metadata", f"must be a dict, got {type(metadata).__name__}")
        result = self._memory.add(
            text,
            user_id=user_id,
            metadata={**metadata, "session_id": session_id, "memh_at": at},
            expiration_date=None if ttl_s is None else expiration_date(at, ttl_s),
            infer=False,
        )
        ids = [row["id"] for row in result["results"]]
        self._owners.update(dict.fromkeys(ids, user_id))
        return Written(memory_ids=ids)

    def search(
        self, *, user_id: str, query: str, k: int, at: float, read_only: bool = False
    ) -> list[Hit]:
        self._check_open()
        _check_user(user_id)
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query", "must be a non-empty string")
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise InvalidInput("k", f"must be an integer >= 1, got {k!r}")
        found = self._memory.search(
            query,
            top_k=candidate_pool(k),
            filters={"user_id": user_id},
            threshold=SEARCH_THRESHOLD,
            show_expired=True,  # mem0's check reads the wall clock: is_expired replaces it
        )
        live = [r for r in found["results"] if not is_expired(r.get("expiration_date"), at)]
        return [Hit(row["id"], row["memory"], float(row["score"])) for row in live[:k]]

    def holds(self, *, user_id: str, memory_id: str) -> bool:
        """In the vector store (hidden or not), or its text in mem0's history table."""
        self._check_open()
        _check_user(user_id)
        try:
            memory_id = _check_memory_id(memory_id)
        except InvalidInput:
            return False  # not a mem0 id: nothing of it can be held
        if self.in_vector_store(user_id=user_id, memory_id=memory_id):
            return True
        # History rows name no user: whose the memory was is known from `add`.
        if self._owners.get(memory_id) != user_id:
            return False
        rows = self._memory.db.get_history(memory_id)
        return any(row["old_memory"] or row["new_memory"] for row in rows)

    def in_vector_store(self, *, user_id: str, memory_id: str) -> bool:
        """Whether the user's memory is still a point of the collection (read-only)."""
        self._check_open()
        point = self._memory.vector_store.get(vector_id=_check_memory_id(memory_id))
        return point is not None and (point.payload or {}).get("user_id") == user_id

    def expiry_of(self, memory_id: str) -> str | None:
        """The `expiration_date` mem0 stored for the memory (None: none, or no memory)."""
        point = self._memory.vector_store.get(vector_id=_check_memory_id(memory_id))
        return None if point is None else (point.payload or {}).get("expiration_date")

    def delete(self, *, user_id: str, memory_id: str) -> None:
        """`Memory.delete`; a memory already gone is a no-op."""
        self._check_open()
        _check_user(user_id)
        point = self._memory.vector_store.get(vector_id=_check_memory_id(memory_id))
        if point is None:
            return
        if (point.payload or {}).get("user_id") != user_id:
            raise InvalidInput("memory_id", f"{memory_id} is not a memory of user {user_id!r}")
        self._memory.delete(memory_id)

    def delete_user(self, *, user_id: str) -> None:
        self._check_open()
        _check_user(user_id)
        self._memory.delete_all(user_id=user_id)

    def footprint(self) -> Footprint:
        """Points in the collection; bytes: each point's text (UTF-8) and vector
        (`dim` float32), plus every text mem0's history table keeps (deleted ones too)."""
        self._check_open()
        client = self._memory.vector_store.client
        points = client.count(collection_name=self.collection, exact=True).count
        text_bytes = 0
        offset = None
        while True:
            batch, offset = client.scroll(
                collection_name=self.collection,
                limit=1000,
                offset=offset,
                with_payload=["data"],
                with_vectors=False,
            )
            text_bytes += sum(len(str((p.payload or {}).get("data", "")).encode()) for p in batch)
            if offset is None:
                break
        history = self._memory.db.connection.execute(
            "SELECT COALESCE(SUM(LENGTH(CAST(old_memory AS BLOB))), 0)"
            " + COALESCE(SUM(LENGTH(CAST(new_memory AS BLOB))), 0) FROM history"
        ).fetchone()[0]
        return Footprint(memories=points, bytes=text_bytes + points * self._dim * 4 + history)

    def close(self) -> None:
        """Drop the collection, close Qdrant and the history database, remove the directory."""
        if self._closed:
            return
        self._closed = True
        try:
            store = self._memory.vector_store
            store.delete_col()
            if self._memory._entity_store is not None:  # only built by infer=True or spaCy
                self._memory._entity_store.delete_col()
            store.client.close()
            self._memory.close()
        finally:
            shutil.rmtree(self._directory, ignore_errors=True)

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"mem0 adapter {self.collection} is closed")


def _collection_name(namespace: str) -> str:
    """A Qdrant collection name from the namespace: its safe characters, and a hash of
    the whole so two namespaces that differ only in unsafe characters do not collide."""
    digest = hashlib.blake2b(namespace.encode(), digest_size=4).hexdigest()
    return f"memh_{_SAFE_NAME.sub('_', namespace)[:48]}_{digest}"


def _harness_embedding(base: type, embedder: Embedder) -> Any:
    """mem0's `EmbeddingBase` over the harness's embedder (built here: mem0 is imported
    only once its telemetry switch is set)."""

    class HarnessEmbedding(base):
        """What mem0 calls to embed: the harness's `Embedder`, one text or a batch."""

        def __init__(self) -> None:
            super().__init__(None)
            self.config.embedding_dims = embedder.dim
            self.embedder = embedder

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            vector: list[float] = self.embedder.embed_one(text).tolist()
            return vector

        def embed_batch(self, texts: Sequence[str], memory_action: str = "add") -> list[Any]:
            return list(self.embedder.embed(list(texts)).tolist())

    return HarnessEmbedding()


class LLMCalled(RuntimeError):
    """mem0 called its LLM, which `infer=False` must never do."""


def _forbidden_llm(base: type) -> Any:
    class ForbiddenLLM(base):
        """mem0's LLM slot, filled with something that refuses every call."""

        def __init__(self) -> None:
            super().__init__(None)

        def generate_response(self, *args: Any, **kwargs: Any) -> Literal[""]:
            raise LLMCalled("mem0 called its LLM although the adapter passes infer=False")

    return ForbiddenLLM()
