"""`ReferenceStore`: the reference's long-term layer as a LangGraph `BaseStore`.

A LangGraph agent compiled with `store=ReferenceStore(...)` reads and writes its memories
in the reference (docs/langgraph-store.md). Items live in the LTM layer of a
`MemorySystem` (PostgreSQL + pgvector, or its in-memory twin), one fact per item and one
per embedded field (`reference.langgraph_mapping`), under the user the namespace names
(its label at `user_label`): every read and write of a namespace that names its user
goes to that user's facts only. A put supersedes the fact at `(namespace, key)`; a
delete erases (the item, its vectors, and every value the audit kept of them). Expired
items are hidden at once and removed by the system's forgetting engine when swept
(`sweep_ttl`, or the background `start_ttl_sweeper`), on the system's injected clock.

Needs the optional extra `langgraph`; without it, importing this module raises
`ImportError` saying `pip install -e '.[langgraph]'`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

try:
    from langgraph.store.base import (
        BaseStore,
        GetOp,
        IndexConfig,
        Item,
        ListNamespacesOp,
        NotProvided,
        Op,
        PutOp,
        Result,
        SearchItem,
        SearchOp,
        TTLConfig,
        validate_op_namespace,
    )
except ModuleNotFoundError as exc:  # the optional extra is not installed
    raise ImportError(
        "reference.langgraph_store needs the optional extra 'langgraph' "
        f"(module {exc.name!r} is not installed): pip install -e '.[langgraph]'"
    ) from exc

from reference.langgraph_index import SemanticIndex, best_scores
from reference.langgraph_mapping import (
    ITEM_CATEGORY,
    ITEM_TEXT,
    ITEM_VECTOR,
    VECTOR_CATEGORY,
    is_item,
    item_key,
    item_value,
    matches_filter,
    namespace_matches,
    user_of_label,
    vector_key,
)
from reference.langgraph_ttl import TtlSweeper, expired_items, fact_gone, refresh_facts
from reference.ltm.filters import LtmFilter
from reference.models import Fact
from reference.system import MemorySystem
from reference.validation import (
    check_embedding,
    check_json_object,
    check_text,
)


class ReferenceStore(BaseStore):
    """A LangGraph store on the LTM layer of `system` (see the module docstring).

    `index` is LangGraph's `IndexConfig`: `dims` must be the reference's embedding size
    (384); without `embed`, the system's embedder (MiniLM) embeds. `ttl` is LangGraph's
    `TTLConfig` (`default_ttl` and `sweep_interval_minutes` in minutes of the system's
    clock). Without `index`, a search's `query` is ignored, as in LangGraph's stores.
    """

    supports_ttl = True

    def __init__(
        self,
        system: MemorySystem,
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        user_label: int = 0,
    ) -> None:
        if system.engine is None:
            raise ValueError("system: a ReferenceStore sweeps through a forgetting engine")
        if not isinstance(user_label, int) or user_label < 0:
            raise ValueError(f"user_label: must be an index >= 0, got {user_label!r}")
        self.system = system
        self.ltm = system.ltm
        self.clock = system.clock
        self.user_label = user_label
        self.ttl_config = ttl
        self.index = SemanticIndex(index, system.embedder) if index else None
        self.index_config: IndexConfig | None = self.index.config if self.index else None
        self._lock = threading.RLock()
        self._sweeper: TtlSweeper | None = None

    def setup(self) -> None:
        """Apply the LTM's pending schema migrations (idempotent), as LangGraph's stores'
        `setup` does; a system built by `reference.factory` has already done it."""
        self.ltm.setup()

    # ------------------------------------------------------------------ BaseStore
    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order, under one lock: a reader never sees half a put."""
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        with self._lock:
            return [self._run(op) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """`batch` in a worker thread: the event loop is not blocked by the layer's I/O."""
        return await asyncio.get_running_loop().run_in_executor(None, self.batch, list(ops))

    def _run(self, op: Op) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, PutOp):
            self._put(op)
            return None
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise ValueError(f"ops: unknown operation type {type(op).__name__}")

    # ------------------------------------------------------------------ operations
    def _get(self, op: GetOp) -> Item | None:
        fact = self._item_fact(op.namespace, op.key)
        if fact is None:
            return None
        if self._refresh(op.refresh_ttl):
            fact = refresh_facts(self.ltm, [fact], self.clock.now())[0]
        return _item(fact)

    def _put(self, op: PutOp) -> None:
        user = self._user(op.namespace)
        hashed = item_key(op.namespace, op.key)
        prior = self._item_fact(op.namespace, op.key, include_dead=True)
        old_vectors = 0 if prior is None else int(prior.value["vectors"])
        if op.value is None:
            keys = {hashed, *(vector_key(hashed, i) for i in range(old_vectors))}
            self.ltm.erase(
                filter=LtmFilter(user_id=user, keys=frozenset(keys)),
                actor="langgraph",
                cause="langgraph store delete",
            )
            return
        minutes: float | None
        if isinstance(op.ttl, NotProvided):
            minutes = (self.ttl_config or {}).get("default_ttl")
        else:
            minutes = op.ttl
        expires_at = None if minutes is None else self.clock.now() + float(minutes) * 60.0
        # Everything checked before the first write: nothing half-written.
        check_json_object("value", op.value)
        if minutes is not None and not (isinstance(minutes, int | float) and minutes > 0):
            raise ValueError(f"ttl: must be a number of minutes > 0 or None, got {minutes!r}")
        texts = (
            []
            if self.index is None or op.index is False
            else self.index.texts(op.value, None if op.index is None else list(op.index))
        )
        for path, text in texts:
            check_text(f"value.{path}", text)
        embedded = [] if self.index is None else self.index.embed_documents([t for _, t in texts])
        vectors = [check_embedding("embedding", v) for v in embedded]
        stored = item_value(op.namespace, op.key, op.value, ttl=minutes, vectors=len(texts))
        check_json_object("value", stored)
        self.ltm.upsert(
            user_id=user,
            category=ITEM_CATEGORY,
            key=hashed,
            value=stored,
            text=ITEM_TEXT,
            expires_at=expires_at,
            actor="langgraph",
            embedding=ITEM_VECTOR,
            cause="langgraph store put",
        )
        for i, ((path, text), vector) in enumerate(zip(texts, vectors, strict=True)):
            self.ltm.upsert(
                user_id=user,
                category=VECTOR_CATEGORY,
                key=vector_key(hashed, i),
                value={"item": hashed, "path": path},
                text=text,
                expires_at=expires_at,
                actor="langgraph",
                embedding=vector,
                cause="langgraph store put",
            )
        if old_vectors > len(texts):  # the fields the new value no longer has
            stale = {vector_key(hashed, i) for i in range(len(texts), old_vectors)}
            self.ltm.erase(
                filter=LtmFilter(user_id=user, keys=frozenset(stale)),
                actor="langgraph",
                cause="langgraph store put",
            )

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        items = [
            f
            for f in self._items(prefix)
            if tuple(f.value["namespace"][: len(prefix)]) == prefix
            and matches_filter(f.value["value"], op.filter)
        ]
        scored: list[tuple[Fact, float | None]]
        if op.query and self.index is not None:
            scores = self._scores(self.index, op.query, prefix, {f.key for f in items})
            ranked = sorted((f for f in items if f.key in scores), key=lambda f: -scores[f.key])
            scored = [(f, scores[f.key]) for f in ranked]
        else:
            items.sort(key=lambda f: (-f.updated_at, f.value["namespace"], f.value["key"]))
            scored = [(f, None) for f in items]
        page = scored[op.offset : op.offset + op.limit]
        facts = [f for f, _ in page]
        if facts and self._refresh(op.refresh_ttl):
            facts = refresh_facts(self.ltm, facts, self.clock.now())
        return [_search_item(f, score) for f, (_, score) in zip(facts, page, strict=True)]

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: tuple[str, ...] = ()
        for condition in op.match_conditions or ():
            if condition.match_type == "prefix":
                head = []
                for label in condition.path:
                    if label == "*":
                        break
                    head.append(label)
                prefix = tuple(head)
        found = {tuple(f.value["namespace"]) for f in self._items(prefix)}
        namespaces = [
            ns
            for ns in found
            if all(namespace_matches(ns, c.match_type, c.path) for c in op.match_conditions or ())
        ]
        if op.max_depth is not None:
            namespaces = list({ns[: op.max_depth] for ns in namespaces})
        return sorted(namespaces)[op.offset : op.offset + op.limit]

    # ------------------------------------------------------------------ TTL
    def sweep_ttl(self) -> int:
        """One sweep by the system's forgetting engine now (see `_sweep_now`)."""
        return self._sweep_now()

    def _sweep_now(self) -> int:
        """One sweep by the system's forgetting engine now; returns how many store items
        it found expired and removed (their vector facts go with them, uncounted)."""
        with self._lock:
            now = self.clock.now()
            due = expired_items(self.ltm, now)
            self.system.sweep()
            return sum(1 for fact in due if fact_gone(self.ltm, fact))

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweep in a background thread every `sweep_interval_minutes` (default: the TTL
        config's) of the clock's time; the future completes when the sweeper stops.
        Without an interval, or with a sweeper running, nothing new starts."""
        interval = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if self._sweeper is not None:
            return self._sweeper.future
        if not interval:
            done: concurrent.futures.Future[None] = concurrent.futures.Future()
            done.set_result(None)
            return done
        self._sweeper = TtlSweeper(self._sweep_now, self.clock, float(interval) * 60.0)
        return self._sweeper.future

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the background sweeper; False if it did not stop within `timeout`."""
        if self._sweeper is None:
            return True
        stopped = self._sweeper.stop(timeout)
        if stopped:
            self._sweeper = None
        return stopped

    # ------------------------------------------------------------------ helpers
    def _user(self, namespace: Sequence[str]) -> str:
        if len(namespace) <= self.user_label:
            raise ValueError(
                f"namespace: {tuple(namespace)!r} has no user label at index {self.user_label}"
            )
        return user_of_label(namespace[self.user_label])

    def _refresh(self, asked: bool | None) -> bool:
        """Whether a read extends lifetimes: only when the TTL config opts in with
        `refresh_on_read: True` and the operation does not say `refresh_ttl=False`. This
        is `SqliteStore`'s rule; `PostgresStore` also refreshes when the config does not
        say (LangGraph's two stores differ): here a read never extends a lifetime unless
        the operator asked for it."""
        opted_in = bool((self.ttl_config or {}).get("refresh_on_read", False))
        return opted_in and asked is not False

    def _item_fact(
        self, namespace: Sequence[str], key: str, *, include_dead: bool = False
    ) -> Fact | None:
        found = self.ltm.facts(
            filter=LtmFilter(
                user_id=self._user(namespace),
                categories=frozenset({ITEM_CATEGORY}),
                keys=frozenset({item_key(namespace, key)}),
                include_dead=include_dead,
            )
        )
        return found[0] if found else None

    def _users(self, prefix: tuple[str, ...]) -> list[str] | None:
        """The one user a prefix names, or None: it spans users."""
        return [self._user(prefix)] if len(prefix) > self.user_label else None

    def _items(self, prefix: tuple[str, ...]) -> list[Fact]:
        """The live item facts of the user the prefix names, or of every user."""
        users = self._users(prefix)
        if users is not None:
            cats = frozenset({ITEM_CATEGORY})
            found = self.ltm.facts(filter=LtmFilter(user_id=users[0], categories=cats))
            return [f for f in found if is_item(f)]
        return self._scan(is_item)

    def _scan(self, keep: Any) -> list[Fact]:
        now, after = self.clock.now(), None
        found: list[Fact] = []
        while page := self.ltm.scan(after=after, limit=1000):
            found.extend(f for f in page if f.is_live(now) and keep(f))
            after = page[-1].fact_id
        return found

    def _scores(
        self, index: SemanticIndex, query: str, prefix: tuple[str, ...], wanted: set[str]
    ) -> dict[str, float]:
        """Each wanted item's best score over its embedded fields (cosine similarity)."""
        users = self._users(prefix)
        if users is None:
            users = sorted({f.user_id for f in self._scan(lambda f: f.key in wanted)})
        return best_scores(self.ltm, index.embed_query(query), users, wanted)


def _stamp(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, tz=UTC)


def _item(fact: Fact) -> Item:
    value = fact.value
    return Item(
        value=copy.deepcopy(value["value"]),
        key=value["key"],
        namespace=tuple(value["namespace"]),
        created_at=_stamp(fact.created_at),
        updated_at=_stamp(fact.updated_at),
    )


def _search_item(fact: Fact, score: float | None) -> SearchItem:
    value = fact.value
    return SearchItem(
        namespace=tuple(value["namespace"]),
        key=value["key"],
        value=copy.deepcopy(value["value"]),
        created_at=_stamp(fact.created_at),
        updated_at=_stamp(fact.updated_at),
        score=score,
    )


class AsyncReferenceStore(ReferenceStore):
    """`ReferenceStore` with LangGraph's async TTL surface (as `AsyncPostgresStore` and
    `AsyncSqliteStore` have it): `sweep_ttl`, `start_ttl_sweeper` and
    `stop_ttl_sweeper` are coroutines; everything else is the same store."""

    async def setup(self) -> None:  # type: ignore[override]
        await asyncio.to_thread(self.ltm.setup)

    async def sweep_ttl(self) -> int:  # type: ignore[override]
        return await asyncio.to_thread(self._sweep_now)

    async def start_ttl_sweeper(  # type: ignore[override]
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        return ReferenceStore.start_ttl_sweeper(self, sweep_interval_minutes)

    async def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:  # type: ignore[override]
        return await asyncio.to_thread(ReferenceStore.stop_ttl_sweeper, self, timeout)
