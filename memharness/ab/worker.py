"""One arm of the A/B gate: a long-lived process that times blocks of operations.

Run as a script (`python worker.py`; its configuration is the first line on stdin) by
`memharness.ab.runner`, with the arm's tree as cwd and first on PYTHONPATH: `reference`
(the system under test) and the arm's `bench.seed` / `bench.null_backend` (seeding that
matches the arm's own storage layout) are imported from there, by name. This file is the
harness (which operations, with which inputs, timed how) and always comes from the
candidate's tree, so a baseline that predates the gate works. It imports nothing of
`memharness`: that would be the arm's copy, or none.

Protocol: one JSON object per line; requests on stdin, replies on the original stdout
(fd 1 is pointed at stderr, the arm's log, so library output cannot corrupt replies).
The first reply is `hello` (or an `error`); then per request:

- `{"cmd": "block", "order": [op...], "calls": {op: k}, "seed": s, "warmup": bool}` ->
  `{"samples": {op: [ms...]}, "inject_ms": x}`: each op of `order` in turn, k timed
  calls each, inputs drawn from `seed` (the same seed gives both arms the same inputs);
- the hello lists `unavailable` ops ({op: why}): those this arm cannot set up (a
  baseline older than the operation); the runner reports them as new, not judged;
- `{"cmd": "drop"}` removes the arm's namespace (external servers); `{"cmd": "exit"}`.

The real arms' systems run `STRATEGY` (hybrid) with the gate run's encryption key. The
inputs (inputs.py) and the background operations (background.py: `sweep.batch`,
`consolidate.session`, `event.apply`, `shard.replay`; on the null backend, on the
in-memory stores) are loaded by path from beside this file: harness from the candidate,
`reference` and the simulator from the arm.

Injected slowdown (`inject`, candidate only): after the first warm-up block, `fraction`
x that op's warm-up median is busy-waited in every timed call of the op, measured anew by
every worker lifetime, so the delay follows the machine's load.
"""

from __future__ import annotations

import gc
import importlib
import importlib.util
import json
import os
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memharness.ab.inputs import Call, Inputs, Setup

#: The operations, and their calls per round and arm (x `--ab-calls-scale`): about the
#: same time per operation, so cheap ones get more samples (their medians are noisier).
OPS: dict[str, int] = {
    "session.get": 30,
    "session.append_message": 30,
    "stm.add": 12,
    "stm.query[uncached]": 12,
    "stm.query[cached]": 30,
    "stm.query+touch[cached]": 30,
    "ltm.upsert": 15,
    "ltm.query[cached]": 30,
    "turn[uncached]": 10,
    # Background work (memharness/ab/background.py), each sample re-seeded untimed.
    "sweep.batch": 1,
    "consolidate.session": 3,
    "event.apply": 4,
    "shard.replay": 1,
}
#: The strategy the arms' systems run (the deployed configuration).
STRATEGY = "hybrid"
STM_CACHED_QUERY = "Please remember the aisle seat on the morning flight"
LTM_CACHED_QUERY = "which hotel room do I prefer"


class Missing(Exception):
    """The arm's tree lacks a module or name the worker needs."""


def need(module: str, name: str | None = None) -> Any:
    """`module` (or `module.name`) imported from the arm's tree, or `Missing`."""
    try:
        found = importlib.import_module(module)
    except ImportError as exc:
        raise Missing(module if name is None else f"{module}.{name}") from exc
    if name is None:
        return found
    if not hasattr(found, name):
        raise Missing(f"{module}.{name}")
    return getattr(found, name)


class Arm:
    """The system under test of one arm, its seeded data, and the operations on it."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = config
        reference = need("reference")
        self.reference_file = str(reference.__file__)
        self.null = config["backend"] == "null"
        self.sizes: dict[str, int] = config["sizes"]
        if self.null:
            build_null_system = need("bench.null_backend", "build_null_system")
            delay = float(config["null_delay_ms"])
            self.system = build_null_system(
                session_delay_ms=delay, stm_delay_ms=delay, ltm_delay_ms=delay
            )
        else:
            self.system = self._build_real()
        self.ltm_user, self.ltm_key = need("bench.seed", "ltm_user"), need("bench.seed", "ltm_key")
        self.category = need("reference.models", "Category")
        self.stm_user, self.stm_session = str(self.ltm_user(0)), "stm-s0"
        self.sessions = [(str(u), str(s)) for u, s in config.get("sessions") or []]
        self.seeding_s: dict[str, float] = {}
        self.unavailable: dict[str, str] = {}  # op -> why this arm cannot run it
        if config.get("seed_data"):
            self._seed()
        if not self.sessions:
            count = self.sizes["sessions"]
            self.sessions = [(f"su{i % 100}", f"ss{i}") for i in range(count)]

    def _build_real(self) -> Any:
        settings_cls = need("reference.settings", "Settings")
        build = need("reference.factory", "build_memory_system")
        namespace_cls = need("reference.keys", "Namespace")
        embedding = need("reference.embedding")
        config = self.config
        settings = settings_cls(
            backend="embedded",
            data_dir=config["data_dir"],
            prefix=config["prefix"],
            embedder=config["embedder"],
            encryption_key=config["encryption_key"],  # one per gate run, for sealing
        )
        if settings.redis_url is None or settings.pg_url is None:
            raise RuntimeError("MEMH_REDIS_URL and MEMH_PG_URL must name the shared servers")
        self.settings = settings
        minilm = config["embedder"] == "minilm"
        if minilm and hasattr(embedding, "make_minilm"):  # the arm's MiniLM runtime, default
            inner = embedding.make_minilm(settings.embedder_runtime, threads=config.get("threads"))
        elif minilm:  # a tree from before the ONNX runtime: torch
            inner = need("reference.embedding", "MiniLMEmbedder")(threads=config.get("threads"))
        else:
            inner = need("reference.embedding", "HashingEmbedder")()
        embedder = embedding.CachedEmbedder(inner, maxsize=10_000)
        namespace = namespace_cls(config["prefix"])
        return build(settings, embedder=embedder, namespace=namespace, strategy=STRATEGY)

    def _seed(self) -> None:
        """The arm's own seed functions, at the configured sizes (once per arm)."""
        if self.null:
            return
        names = ("seed_sessions", "seed_stm", "seed_ltm")
        seed_sessions, seed_stm, seed_ltm = (need("bench.seed", name) for name in names)
        sizes, system = self.sizes, self.system
        started = time.perf_counter()
        opened = seed_sessions(system.session, count=sizes["sessions"])
        self.sessions = [(str(u), str(s)) for u, s in opened]
        mark = time.perf_counter()
        self.seeding_s["sessions"] = mark - started
        seed_stm(
            system.stm,
            user_id=self.stm_user,
            session_id=self.stm_session,
            in_session=sizes["stm_session"],
            total=sizes["stm_collection"],
            now=system.clock.now(),
        )
        self.seeding_s["stm"] = time.perf_counter() - mark
        mark = time.perf_counter()
        url = self.settings.pg_url.get_secret_value()
        seed_ltm(
            url,
            system.session.namespace,
            rows=sizes["ltm_rows"],
            per_user=sizes["ltm_facts_per_user"],
            now=system.clock.now(),
        )
        self.seeding_s["ltm"] = time.perf_counter() - mark

    def setups(self) -> dict[str, Setup]:
        """Per op: from the block's inputs and the call's index, the untimed setup that
        returns the timed call (bench/test_*_bench.py's definitions)."""
        s, stm, ltm = self.system.session, self.system.stm, self.system.ltm
        users = max(1, self.sizes["ltm_rows"] // self.sizes["ltm_facts_per_user"])
        per_user = self.sizes["ltm_facts_per_user"]
        stm_at = {"user_id": self.stm_user, "session_id": self.stm_session}

        def session_get(inp: Inputs, i: int) -> Call:
            user, sid = inp.rng.choice(self.sessions)
            return lambda: s.get(user_id=user, session_id=sid)

        def session_append(inp: Inputs, i: int) -> Call:
            user, sid = inp.rng.choice(self.sessions)
            mid = uuid.UUID(int=inp.rng.getrandbits(128)).hex
            return lambda: s.append_message(user_id=user, session_id=sid, message_id=mid)

        def stm_add(inp: Inputs, i: int) -> Call:
            text = inp.fresh("Please remember")
            return lambda: stm.add(**stm_at, text=text, force=True)

        def stm_query(text: str | None, touch: bool) -> Setup:
            def setup(inp: Inputs, i: int) -> Call:
                query = text or inp.fresh("Where is")
                return lambda: stm.query(**stm_at, text=query, k=5, touch=touch)

            return setup

        def ltm_upsert(inp: Inputs, i: int) -> Call:
            user = self.ltm_user(inp.rng.randrange(users))
            if inp.rng.random() < 0.5:
                category, key = self.ltm_key(inp.rng.randrange(per_user))
            else:
                category, key = self.category("preference"), f"ab{inp.seed}n{i}"
            text = inp.fresh("I prefer")
            return lambda: ltm.upsert(
                user_id=user, category=category, key=key, value={"value": text}, text=text
            )

        def ltm_query(inp: Inputs, i: int) -> Call:
            user = self.ltm_user(inp.rng.randrange(users))
            return lambda: ltm.query(user_id=user, text=LTM_CACHED_QUERY, k=5)

        def turn(inp: Inputs, i: int) -> Call:
            text = inp.utterance()
            return lambda: self.system.turn(**stm_at, text=text)

        return {
            **self.background_setups(),
            "session.get": session_get,
            "session.append_message": session_append,
            "stm.add": stm_add,
            "stm.query[uncached]": stm_query(None, False),
            "stm.query[cached]": stm_query(STM_CACHED_QUERY, False),
            "stm.query+touch[cached]": stm_query(STM_CACHED_QUERY, True),
            "ltm.upsert": ltm_upsert,
            "ltm.query[cached]": ltm_query,
            "turn[uncached]": turn,
        }

    def background_setups(self) -> dict[str, Setup]:
        """The background operations (background.py, on this arm's `reference`); one the
        arm cannot set up goes into `self.unavailable` with the reason."""
        found: dict[str, Setup] = {}
        try:
            module = _load_beside("background.py")
            system = self.system if not self.null else self._memory_system()
            work = module.Background(system)
            found["sweep.batch"] = _seeded(work.sweep_setup)
            found["consolidate.session"] = _seeded(work.consolidation_setup)
            found["event.apply"] = _seeded(work.event_setup)
        except Exception as exc:  # an arm older than the operations
            for op in ("sweep.batch", "consolidate.session", "event.apply"):
                self.unavailable[op] = f"{type(exc).__name__}: {exc}"
        try:
            replay = _load_beside("background.py").ShardReplay(STRATEGY)
            found["shard.replay"] = _seeded(replay.setup)
        except Exception as exc:
            self.unavailable["shard.replay"] = f"{type(exc).__name__}: {exc}"
        return found

    def _memory_system(self) -> Any:
        settings_cls = need("reference.settings", "Settings")
        build = need("reference.factory", "build_memory_system")
        settings = settings_cls(
            backend="memory",
            embedder="hashing",
            prefix=self.config["prefix"],
            encryption_key=self.config["encryption_key"],
        )
        return build(settings, strategy=STRATEGY)


def _load_beside(filename: str) -> Any:
    """A module beside this file in the candidate's tree (`memharness/ab/`), loaded by path,
    as this file runs without `memharness`; it imports the arm's `reference`, if any."""
    name = f"memh_ab_{filename.removesuffix('.py')}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(filename))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _seeded(setup: Callable[[random.Random, int], Call]) -> Setup:
    """A background setup on the block's inputs (its rng and the call's index)."""
    return lambda inp, i: setup(inp.rng, inp.seed % 1_000_000 * 100 + i)


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.arm = Arm(config)
        self.setups = self.arm.setups()
        inject = config.get("inject")
        self.inject_op: str | None = inject["op"] if inject else None
        self.inject_fraction = float(inject["fraction"]) if inject else 0.0
        self.inject_ms: float | None = None

    def hello(self) -> dict[str, Any]:
        return {
            "hello": True,
            "pid": os.getpid(),
            "reference_file": self.arm.reference_file,
            "python": sys.executable,
            "cpus": sorted(os.sched_getaffinity(0)),
            "ops": {op: n for op, n in OPS.items() if op in self.setups},
            "unavailable": self.arm.unavailable,
            "sessions": self.arm.sessions if self.arm.config.get("seed_data") else None,
            "seeding_s": self.arm.seeding_s,
        }

    def block(self, order: list[str], calls: dict[str, int], seed: int, warmup: bool) -> Any:
        harness = _load_beside("inputs.py")
        inputs: Inputs = harness.Inputs(seed)
        busy_wait = harness.busy_wait
        samples: dict[str, list[float]] = {}
        if warmup:
            gc.collect()  # the seeding's garbage is not collected inside a timed call
        for op in order:
            setup = self.setups[op]
            delay = (self.inject_ms or 0.0) / 1000.0 if op == self.inject_op else 0.0
            timings = []
            for index in range(int(calls[op])):
                call = setup(inputs, index)
                start = time.perf_counter()
                call()
                if delay:
                    busy_wait(delay)
                timings.append((time.perf_counter() - start) * 1000.0)
            samples[op] = timings
        if warmup and self.inject_op is not None and self.inject_ms is None:
            median = statistics.median(samples[self.inject_op])
            self.inject_ms = self.inject_fraction * median
        return {"samples": samples, "inject_ms": self.inject_ms}

    def drop(self) -> None:
        drop = getattr(self.arm.system, "drop", None)
        if drop is not None:
            drop()

    def close(self) -> None:
        dispose = getattr(self.arm.system, "dispose", None)
        if dispose is not None:
            dispose()


def only_the_arms_tree() -> None:
    """Let the arm's tree alone serve the project's packages: an editable install's finder
    would hand an older tree the modules it lacks, taken from another checkout."""
    sys.meta_path[:] = [f for f in sys.meta_path if "__editable__" not in str(f.__module__)]


def main() -> None:
    only_the_arms_tree()
    replies = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints go to the log, never into the replies
    sys.stdout = sys.stderr

    def send(payload: dict[str, Any]) -> None:
        replies.write(json.dumps(payload) + "\n")

    try:
        config = json.loads(sys.stdin.readline())
        if config.get("cpu") is not None:
            os.sched_setaffinity(0, {int(config["cpu"])})  # before any thread starts
        worker = Worker(config)
    except Missing as exc:
        send({"error": f"missing {exc}", "missing": str(exc)})
        return
    except Exception as exc:
        send({"error": f"{type(exc).__name__}: {exc}"})
        raise
    send(worker.hello())
    for line in sys.stdin:
        request = json.loads(line)
        command = request["cmd"]
        try:
            if command == "block":
                args = (request[key] for key in ("order", "calls", "seed", "warmup"))
                send(worker.block(*args))
            elif command == "drop":
                worker.drop()
                send({"dropped": True})
            elif command == "exit":
                worker.close()
                send({"bye": True})
                return
            else:
                send({"error": f"unknown command {command!r}"})
        except Exception as exc:
            send({"error": f"{command}: {type(exc).__name__}: {exc}"})
            raise


if __name__ == "__main__":
    main()
