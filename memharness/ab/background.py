"""The forgetting engine's background work as timed operations, each sample the same work.

Used by the SLA suites (bench/test_background_bench.py) and by the A/B gate's worker,
which loads this file by path from the candidate's tree: the harness (what is seeded,
what is timed) comes from the candidate, the system under test (`reference`, and the
simulator for the shard replay) from each arm's tree. So it imports nothing of
`memharness` at module level, and what an arm lacks surfaces as an ImportError or
AttributeError when an operation is set up.

Every `*_setup` does the untimed preparation of one sample and returns the timed call,
which returns what the engine did (the tests check it did the work):

- `sweep_setup`: puts `strategy.sweep_batch_size` STM records whose expiry has passed
  (one full batch, bulk-written untimed); the call is one `engine.sweep()`, which finds
  and removes them (and does the rest of a sweep: activity, sessions, the LTM pass);
- `consolidation_setup`: a session of `SESSION_RECORDS` STM records (statements of the
  user, importance over the strategy's floor) that has ended; the call is
  `engine.consolidate_session`, which writes them as LTM episodes and empties STM;
- `event_setup`: a user with `EVENT_MEMORIES` STM records and as many LTM facts, half of
  each carrying the event's match field; the call is `engine.handle_event` for the
  strategy's first `match_on` event rule, which invalidates that half;
- `ShardReplay`: the simulator's replay of one small shard in process (memory backend,
  hashing embedder), as `bench/shard_replay.py` runs it, of the population
  `memharness.run_inputs.population` generates.
"""

from __future__ import annotations

import importlib
import random
import string
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from reference.embedding import HashingEmbedder
from reference.models import Category, Event, MemoryRecord, MemoryType

#: STM records of the session a consolidation sample ends.
SESSION_RECORDS = 10
#: STM records and LTM facts of the user an event sample hits (half of each match).
EVENT_MEMORIES = 10
#: Users of the population whose first shard (of two) a replay sample replays.
REPLAY_USERS = 40

_VOCABULARY = (
    "ship deliver express parcel seat aisle window hotel room flight coffee tea address "
    "office meeting invoice refund order ticket repair heater printer budget report "
    "vegetarian spicy morning evening weekend airport taxi train museum doctor dentist"
)
_WORDS = tuple(_VOCABULARY.split())

Call = Callable[[], Any]


def _sentence(rng: random.Random) -> str:
    words = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 9)))
    nonce = "".join(rng.choice(string.ascii_lowercase) for _ in range(8))
    return f"I always prefer the {words} ref {nonce}"


class Background:
    """The background operations on one `MemorySystem` built with a strategy."""

    def __init__(self, system: Any) -> None:
        if getattr(system, "engine", None) is None:
            raise ValueError("background operations need a system with a forgetting engine")
        self.system = system
        self.engine = system.engine
        self.strategy = system.engine.strategy
        self.vectors = HashingEmbedder()  # seeds only: the timed calls embed as deployed

    # ------------------------------------------------------------------ seeding
    def _records(
        self,
        rng: random.Random,
        count: int,
        *,
        user_id: str,
        session_id: str,
        expires_at: float | None,
        metadata: Callable[[int], dict[str, Any]] = lambda i: {},
    ) -> list[MemoryRecord]:
        now = self.system.clock.now()
        texts = [_sentence(rng) for _ in range(count)]
        records = [
            MemoryRecord(
                record_id=uuid.uuid4().hex,
                user_id=user_id,
                session_id=session_id,
                text=text,
                type=MemoryType.PREFERENCE,
                created_at=now,
                last_accessed_at=now,
                importance=6.0,
                expires_at=expires_at,
                metadata=metadata(index),
            )
            for index, text in enumerate(texts)
        ]
        put_records(self.system.stm, records, self.vectors.embed(texts))
        return records

    # ------------------------------------------------------------------ operations
    def sweep_setup(self, rng: random.Random, index: int) -> Call:
        """One batch of due STM records; the call sweeps (returns `SweepStats`)."""
        batch = self.strategy.sweep_batch_size
        past = self.system.clock.now() - 1.0
        user = f"bgsweep{index % 50}"
        self._records(rng, batch, user_id=user, session_id=f"bgs{index}", expires_at=past)
        return self.engine.sweep

    def consolidation_setup(self, rng: random.Random, index: int) -> Call:
        """An ended session of statements; the call consolidates it (`Consolidation`)."""
        if not self.strategy.consolidates:
            raise ValueError(f"strategy {self.strategy.name!r} does not consolidate sessions")
        user, session = f"bgcons{index % 50}", f"bgc{index}-{uuid.uuid4().hex[:8]}"
        now = self.system.clock.now()
        self._records(
            rng,
            SESSION_RECORDS,
            user_id=user,
            session_id=session,
            expires_at=now + 3600.0,
            metadata=lambda i: {"topic": f"bg{index}t{i}"},
        )
        return lambda: self.engine.consolidate_session(user_id=user, session_id=session)

    def event_setup(self, rng: random.Random, index: int) -> Call:
        """A user's memories, half matching; the call applies the event (`EventOutcome`)."""
        rule = event_rule(self.strategy)
        if rule is None:
            raise ValueError(f"strategy {self.strategy.name!r} has no match_on event rule")
        user = f"bgevent{index}-{uuid.uuid4().hex[:8]}"
        payload = {field: f"{field}-{index}" for field in rule.match_on}
        other = {field: f"{field}-other" for field in rule.match_on}
        half = EVENT_MEMORIES // 2
        now = self.system.clock.now()
        self._records(
            rng,
            EVENT_MEMORIES,
            user_id=user,
            session_id=f"bge{index}",
            expires_at=now + 3600.0,
            metadata=lambda i: payload if i < half else other,
        )
        category = rule.categories[0] if rule.categories else Category.PREFERENCE
        for i in range(EVENT_MEMORIES):
            text = _sentence(rng)
            self.system.ltm.upsert(
                user_id=user,
                category=category,
                key=f"bgk{i}",
                value={"value": text, **(payload if i < half else other)},
                text=text,
                embedding=self.vectors.embed_one(text),
            )
        # Strictly after the writes: an event invalidates what was said before it.
        at = self.system.clock.now() + 1e-3
        event = Event(name=rule.event, user_id=user, at=at, payload=payload)
        return lambda: self.engine.handle_event(event)


def event_rule(strategy: Any) -> Any:
    """The strategy's first event rule that matches on payload fields (None: none)."""
    return next((r for r in strategy.events if r.match_on and r.keys_from is None), None)


def put_records(store: Any, records: list[MemoryRecord], vectors: np.ndarray) -> None:
    """Write records as they are (expiry included) in one bulk write on Chroma (the
    store's own metadata layout), else record by record through the store's primitive.

    The A/B gate runs this file against both arms' trees, so the write goes through what
    the arm's store has: the typed `_apply` primitive, or the `_put` of stores from before
    the primitives (the arm under comparison may be an older commit)."""
    collection = getattr(store, "_collection", None)
    if collection is not None:
        collection.add(
            ids=[r.record_id for r in records],
            embeddings=vectors,
            metadatas=[_chroma_metadata()(r) for r in records],
            documents=[r.text for r in records],
        )
        return
    if hasattr(store, "_apply"):
        put = importlib.import_module("reference.stm.primitives").PutRecord
        for record, vector in zip(records, vectors, strict=True):
            store._apply(put(record, vector))
        return
    for record, vector in zip(records, vectors, strict=True):
        store._put(record, vector)


def _chroma_metadata() -> Callable[[MemoryRecord], dict[str, Any]]:
    """The arm's Chroma metadata layout for a record (its module moved with the primitives)."""
    try:
        return importlib.import_module("reference.stm.chroma_rows").to_metadata
    except ImportError:
        return importlib.import_module("reference.stm.chroma_store")._to_metadata


def _population() -> Callable[[str, int, int], Any]:
    """The arm's generated population of one domain: `memharness.run_inputs.population`,
    or in trees from before it moved there, `bench.sim_throughput.population`."""
    try:
        return importlib.import_module("memharness.run_inputs").population
    except (ImportError, AttributeError):
        return importlib.import_module("bench.sim_throughput").population


class ShardReplay:
    """The first of two shards of a `users`-user generated population (ecommerce, seed
    1), loaded once; each sample replays it in a fresh namespace under `strategy`."""

    def __init__(self, strategy: str = "hybrid", users: int = REPLAY_USERS) -> None:
        population = _population()
        plan = importlib.import_module("memharness.sim.plan")
        runner = importlib.import_module("memharness.sim.runner")
        shard = importlib.import_module("memharness.sim.shard")
        crypto = importlib.import_module("reference.crypto")
        settings_mod = importlib.import_module("reference.settings")
        pydantic = importlib.import_module("pydantic")
        scenario = population("ecommerce", users, 1)
        settings = settings_mod.Settings(
            backend="memory",
            embedder="hashing",
            data_dir=Path(tempfile.mkdtemp(prefix="memh-replay-")),
            encryption_key=pydantic.SecretStr(crypto.generate_key()),
        )
        self.strategy = plan.StrategySpec.parse(strategy).strategy
        options = runner.RunOptions()
        members = [
            shard.SimUser(i, user)
            for i, user in enumerate(scenario.users)
            if plan.shard_of(i, 2) == 0
        ]
        times = [step.at for user in scenario.users for step in user.timeline]
        self.ticks = options.sweep_ticks(self.strategy, times)
        self.samples = plan.sample_times(times, options.sample_every_s)
        self.worker = runner.ShardWorker(settings)
        self.worker.load("shard", members, options.k)
        self.users = len(members)

    def setup(self, rng: random.Random, index: int) -> Call:
        prefix = f"replay{index}_{uuid.uuid4().hex[:6]}"
        return lambda: self.worker.replay("shard", self.strategy, prefix, self.ticks, self.samples)
