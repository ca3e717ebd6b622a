"""Replay one shard of a scenario's users against one strategy, on one virtual clock.

The shard's steps (every user's timeline) and the sweep ticks are merged in time order;
a tick runs before a step at the same moment. Each step goes through the reference's
public interface: `say` and `forget` are turns, `event` is `handle_event`, `probe` is
`recall` (which changes nothing). The replayer maps what the memory stored back to the
scenario's fact ids by the ids the stores made (an STM record id; an LTM fact id and
version), so a retrieved hit names the facts it carries and the ground truth
(`truth.py`) says whether each is needed, stale or erased.

Nothing here depends on which other users share the shard: the tick schedule comes from
the whole scenario (`plan.py`), and each user's records are scoped to that user.
"""

from __future__ import annotations

import operator
import resource
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import astuple
from typing import TYPE_CHECKING, Any

from memharness.sim.ceiling import CeilingTally, Embed, user_ceiling
from memharness.sim.pii_scoring import Detect, user_tally
from memharness.sim.replay import Replay, SimUser
from memharness.sim.tally import ShardResult
from memharness.sim.truth import UserTruth
from memharness.systems.base import MemoryAdapter
from reference.clock import VirtualClock
from reference.keys import Namespace
from reference.policy.oracle import OracleAdvice
from reference.policy.rules import ForgetCommandsRule
from reference.policy.strategy import Strategy
from reference.settings import Settings
from reference.system import MemorySystem
from reference.text_interfaces import Embedder

if TYPE_CHECKING:  # imported where it runs: the reference's replay does without it
    from memharness.sim.peer_replay import PeerReplay


class ShardReplayer:
    """One shard's users, replayed under one strategy at a time (see module docstring)."""

    def __init__(
        self,
        users: list[SimUser],
        *,
        k: int,
        max_leaks: int = 20,
    ) -> None:
        self.users = users
        self.k = k
        self.max_leaks = max_leaks
        self._truths: dict[ForgetCommandsRule, dict[int, UserTruth]] = {}
        self.sessions: dict[tuple[int, str], str] = {}
        for u in users:
            names = dict.fromkeys(getattr(s, "session", None) for s in u.user.timeline)
            names.pop(None, None)
            for n, name in enumerate(names):
                self.sessions[(u.index, str(name))] = f"{u.user_id}.s{n}"
        self.steps_total = sum(len(u.user.timeline) for u in users)
        self.steps_done = 0
        self.users_done = 0
        self.ceiling: CeilingTally | None = None  # `measure_ceiling`, or the first replay
        self.detector: Counter[str] | None = None  # `score_detector`, in the first replay
        # Every step of the shard in replay order, sorted once: a replay merges its
        # ticks and samples into it.
        self.steps: list[tuple[float, int, int, int, Any]] = [e for u in users for e in _steps(u)]
        self.steps.sort(key=_ORDER)

    def truths(self, strategy: Strategy) -> dict[int, UserTruth]:
        """Each user's ground truth under the strategy's `forget_commands` setting (the
        only part of a strategy the truth depends on), computed once per setting."""
        rule = strategy.forget_commands
        if rule not in self._truths:
            self._truths[rule] = {u.index: UserTruth.of(u.user, rule) for u in self.users}
        return self._truths[rule]

    def texts(self) -> list[str]:
        """Every text a replay embeds, to embed ahead in batches (the embedder's cache)."""
        out = []
        for u in self.users:
            for step in u.user.timeline:
                for attr in ("say", "forget", "probe"):
                    text = getattr(step, attr, None)
                    if isinstance(text, str):
                        out.append(text)
        return out

    def measure_ceiling(self, *, embed: Embed, mask: Callable[[str], str]) -> CeilingTally:
        """The shard's retrieval ceiling (`ceiling.py`), computed once: it depends on the
        scenario and the embedder, never on a strategy, so a worker measures it when it
        loads the shard (with its texts embedded) rather than in a replay."""
        if self.ceiling is None:
            self.ceiling = sum(
                (user_ceiling(u.user, embed=embed, mask=mask, k=self.k) for u in self.users),
                CeilingTally(),
            )
        return self.ceiling

    def score_detector(self, detect: Detect) -> Counter[str]:
        """The PII detector against the script's marks (`pii_scoring.py`), scored once:
        the reference builds the same detector under every strategy."""
        if self.detector is None:
            self.detector = sum((user_tally(u.user, detect) for u in self.users), Counter())
        return self.detector

    def run(
        self,
        build: Callable[[VirtualClock, Namespace, OracleAdvice | None], MemorySystem],
        strategy: Strategy,
        namespace: Namespace,
        *,
        ticks: list[float],
        samples: list[float],
        peak_samples: Sequence[float] = (),
    ) -> ShardResult:
        """Replay every user of the shard under `strategy` in `namespace`, which must be
        new (it is dropped from every layer at the end), sweeping at `ticks` and sampling
        the footprint at `samples`, and for its peak only at `peak_samples` (all from
        `plan.py`)."""
        self.steps_done = self.users_done = 0
        run = Replay(self, strategy)
        start = min((s.at for u in self.users for s in u.user.timeline), default=0.0)
        clock = VirtualClock(min([start, *ticks[:1]]))
        advice = OracleAdvice(needed_until=run.oracle_until) if strategy.oracle else None
        system = build(clock, namespace, advice)
        run.system, run.advice = system, advice
        ceiling = self.measure_ceiling(embed=system.embedder.embed, mask=system.pii.mask)
        run.result.ceiling_needed, run.result.ceiling_found = astuple(ceiling)
        run.result.pii_detector = Counter(self.score_detector(system.pii.detect))
        began = time.perf_counter()
        try:
            self._drive(run, ticks, samples, peak_samples)
        finally:
            system.drop()  # the namespace is this replay's alone
        run.result.wall_s = time.perf_counter() - began
        run.result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        run.result.histograms = run.latencies.encoded()
        return run.result

    def run_peer(
        self,
        open_adapter: Callable[[str], MemoryAdapter],
        strategy: Strategy,
        namespace: Namespace,
        *,
        settings: Settings,
        embedder: Embedder,
        ticks: list[float],
        samples: list[float],
        peak_samples: Sequence[float] = (),
    ) -> ShardResult:
        """`run` against a system under test (`peer_replay.PeerReplay`): the same ticks,
        samples, ground truth and tallies; `open_adapter(namespace)` opens it (closed at
        the end: the namespace is this replay's alone). The ceiling is the shard's (it
        depends on the embedder only); a system has no PII detector of its own to score."""
        from memharness.sim.peer_replay import PeerReplay

        self.steps_done = self.users_done = 0
        start = min((s.at for u in self.users for s in u.user.timeline), default=0.0)
        clock = VirtualClock(min([start, *ticks[:1]]))
        adapter = open_adapter(namespace.prefix)
        try:
            run = PeerReplay(
                self,
                strategy,
                adapter=adapter,
                settings=settings,
                embedder=embedder,
                clock=clock,
                namespace=namespace,
            )
            if self.ceiling is not None:
                run.result.ceiling_needed, run.result.ceiling_found = astuple(self.ceiling)
            began = time.perf_counter()
            try:
                self._drive(run, ticks, samples, peak_samples)
            finally:
                run.mirror.drop()
        finally:
            adapter.close()
        run.result.wall_s = time.perf_counter() - began
        run.result.peak_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
        run.result.histograms = run.latencies.encoded()
        return run.result

    def _drive(
        self,
        run: Replay | PeerReplay,
        ticks: list[float],
        samples: list[float],
        peak_samples: Sequence[float],
    ) -> None:
        """Every tick, sample and step of the shard through `run`, in time order."""
        for _, kind, payload in self._merged(ticks, samples, peak_samples):
            if kind == 0:
                run.tick(payload)
            elif kind == 1:
                run.sample(*payload)
            else:
                u, step, index, last = payload
                run.step(u, step, index)
                self.steps_done += 1
                self.users_done += last
        run.finish()

    def _merged(
        self, ticks: list[float], samples: list[float], peak_samples: Sequence[float]
    ) -> Iterator[tuple[float, int, Any]]:
        """Ticks (0), footprint samples (1: at, whether in the series) and steps (2) in
        time order (then kind, user, step). The steps are sorted already: the sort merges
        sorted runs."""
        entries: list[tuple[float, int, int, int, Any]] = [(t, 0, 0, 0, t) for t in ticks]
        entries += [(t, 1, 0, 0, (t, True)) for t in samples]
        in_series = set(samples)
        entries += [(t, 1, 0, 0, (t, False)) for t in peak_samples if t not in in_series]
        entries += self.steps
        entries.sort(key=_ORDER)
        for at, kind, _, _, payload in entries:
            yield at, kind, payload


_ORDER = operator.itemgetter(0, 1, 2, 3)  # the payload is never compared


def _steps(u: SimUser) -> Iterator[tuple[float, int, int, int, Any]]:
    last = len(u.user.timeline) - 1
    for i, step in enumerate(u.user.timeline):
        yield step.at, 2, u.index, i, (u, step, i, int(i == last))


__all__ = ["ShardReplayer"]
