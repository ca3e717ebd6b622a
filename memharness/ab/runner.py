"""Running the A/B gate: shared servers, one worker process per arm, interleaved rounds.

Lifecycle: the parent starts one embedded Redis and one embedded PostgreSQL (or uses
MEMH_REDIS_URL / MEMH_PG_URL) and hands their URLs to both arms' workers; each arm has
its own prefix and its own embedded Chroma directory, seeded once by the arm's first
worker with the arm's own bench/seed.py (bench small's sizes, the same seed for both).
Workers are restarted every `restart_every` rounds (both started together while nothing
is timed); after each start each arm runs one warm-up block (every operation, a third of
its calls), discarded. Never are both arms timed at once.

Where this differs from ../shared/REGRESSION.md, and why (figures from A/A runs of one
commit on this 2-core machine while another engineer's benchmarks and simulations ran):

- **Interleaving per call, not per block.** A round there is one block of each arm in
  random order. With blocks of 1.5-2 s the load changed between the two blocks of a
  round: the per-round log ratio of medians had a standard deviation of 0.10-0.24 and
  the p50 ratio's interval spanned +-10-15%, too wide to tell a 20% slowdown from a 10%
  threshold. Here a round takes the operations in a fresh random order and runs each
  call on both arms back to back (who goes first drawn per call, the same inputs for
  both): per-round deviations fell to 0.01-0.06 and p50 intervals to +-1-6%. Still one
  arm at a time. `chunk` (`--ab-chunk N`) alternates every N calls; 0 gives the blocks.
- **Both workers pinned to one CPU** (the last, `--ab-cpu`). Unpinned, the scheduler's
  placement is per process, and two A/A runs both showed the candidate 5% faster on
  `session.get` (ratios 0.947 and 0.946, intervals excluding 1); pinned, 0.987 and 0.986,
  and cheap operations' per-round deviation halved. Both arms then share that CPU's
  contention call for call.
- **Extra rounds only for a suspected slowdown**: an inconclusive comparison whose point
  ratio is over 1 + T, in an operation not already failing (`verdict.ab.suspected`). Under
  load p95 intervals span +-20-50%, so most runs have an inconclusive p95 near 1 (7 of 10
  A/A runs ended WARN, every time on a p95); more rounds there could at best turn a WARN into a
  PASS, and cost a minute. Rounds go where they can prove a FAIL.
- **Restarts every 8 rounds** (3 worker lifetimes in 24 rounds, a 4th if extended): a
  restart costs 12-25 s here (two processes loading torch and MiniLM), so every 2-4
  rounds would not fit the 4-minute budget. The bootstrap resamples rounds, not
  lifetimes (three are too few to resample). In 10 A/A runs (90 operations) the three
  lifetimes' mean log ratios scattered as much as the rounds predict in the median case,
  1.7x more at the 90th percentile, 2.8x at worst, and no lifetime's mean was off by more
  than 9%: intervals are somewhat narrower than the truth, which the thresholds' margin
  (10% against a 20% effect) absorbs.
- **Looks and an early stop; only well-sampled operations gated.** Gated on p50 and all
  13 operations, 7 of 10 A/A runs ended WARN, the background operations' intervals
  spanned +-20-80 % at 8 rounds, and a run took 424 s in CI. The gate now looks after
  every worker lifetime (`verdict.ab.looks`: rounds 8, 16, 24, and after the extra rounds)
  and stops at the first look where every gated operation (`GATED_MIN_CALLS`) PASSes or
  FAILs; the background operations are reported with their intervals. Bonferroni runs
  over the looks as well, so the family-wise 5 % holds whatever look the gate stops at.
- **Calls per operation by cost** (`worker.OPS`: 10 turns to 30 session reads per round
  and arm), so each operation gets a similar share of the time and cheap, noisier ones
  more samples; the gate's default is 24 rounds (240-720 samples per operation and arm).

Operations the baseline cannot run (it predates them: the worker's hello lists them as
`unavailable`) run on the candidate alone and are reported NEW: their figures, no
verdict, never a failure. The arms' systems run the `hybrid` strategy (`worker.STRATEGY`)
with one encryption key per gate run (sealed facts outlive a worker restart).

Thresholds (`t50`, `t95`): 10% at p50, 15% at p95, FAIL only when the whole interval is
above 1 + T, PASS when the p50 interval is under 1 + T (`verdict.ab.op_verdict`), with 5%
family-wise error of a false FAIL over gated operations x quantiles x looks (Bonferroni:
9 x 2 x 4, each lower bound one-sided at 0.07%). The upper bound that makes a PASS is
one-sided at 5% / looks (1.25%): the gate passes only when every gated operation does, an
intersection-union test (Berger 1982) whose level is each operation's own, so a false
PASS (a slowdown beyond T let through) has at most 5% over the looks, with no correction
over operations. Bonferroni there (99.86% upper bounds) left all nine operations
undecided after 8 rounds of an A/A run at load 10-15. Why these: a delay of 20% of an
operation's median added to every call moves its p50 by 20% (ratio 1.20) but its p95 by
less (20% x median / p95: 1.17 on a quiet machine, 1.09 under load, when p95 is twice
the median), so detection must come from p50. Measured (docs/latency.md): with the
slowdown injected, p50 ratios of 1.15-1.22 had lower bounds of 1.14-1.18, clear of 1.10
in 10 runs of 10; A/A, over 10 runs and 90 operations, the highest lower bound of a p50
ratio was 1.00 and the highest upper bound 1.09 (the highest p95 lower bound 0.99), so a
false FAIL needs noise far beyond anything seen. A 5% threshold would catch 20% too but
leaves no room for placement effects like the 5% above. 15% at p95 keeps tail noise from
failing builds; a tail-only regression of about 30% can still fail where p95 intervals are
within +-10% (the embedding operations on a moderately loaded machine), while the
sub-millisecond operations' p95 mostly ends inconclusive (WARN).
"""

from __future__ import annotations

import contextlib
import os
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import numpy as np

from memharness.ab.arms import AbError, ArmTree
from memharness.ab.model import ARMS, AbSettings, OpResult
from memharness.ab.processes import WorkerProcess, worker_env
from memharness.ab.worker import OPS
from memharness.verdict.ab import (
    SEED,
    compare,
    label_swap_false_alarms,
    looks,
    op_verdict,
    suspected,
)
from memharness.verdict.intervals import Verdict
from reference.crypto import generate_key

#: An operation is gated when it runs at least this many calls per round and arm (the
#: stores' calls and the turn); the background ones (1-4 calls per round: `sweep.batch`,
#: `consolidate.session`, `event.apply`, `shard.replay`) are measured and reported with
#: their intervals, not gated: a few samples per round leave their intervals too wide to
#: decide against 10 % in the gate's time, and their tails made A/A runs FAIL.
GATED_MIN_CALLS = 10


def gated(op: str) -> bool:
    """Whether `op`'s verdict counts in the gate's (see `GATED_MIN_CALLS`)."""
    return OPS.get(op, 0) >= GATED_MIN_CALLS


class Gate:
    """One run of the gate: workers of both arms, the rounds, the samples."""

    def __init__(
        self,
        settings: AbSettings,
        arms: dict[str, ArmTree],
        *,
        workdir: Path,
        log_dir: Path,
        urls: dict[str, str],
        echo: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.arms = arms
        self.workdir = workdir
        self.log_dir = log_dir
        self.urls = urls
        self.echo = echo
        self.rng = random.Random(settings.seed)
        self.tag = f"ab{self.rng.getrandbits(32):08x}"
        self.workers: dict[str, WorkerProcess] = {}
        self.logs: dict[str, IO[str]] = {}
        self.started: list[dict[str, Any]] = []
        self.sessions: list[list[str]] | None = None
        self.seeding_s: dict[str, dict[str, float]] = {}
        self.inject_ms: list[float] = []
        self.ops: dict[str, int] = {}  # the candidate's operations -> calls per round
        self.new_ops: dict[str, str] = {}  # op -> why the baseline cannot run it
        self.key = generate_key()  # one per gate run: both arms, every worker lifetime
        self.samples: dict[str, dict[str, list[list[float]]]] = {arm: {} for arm in ARMS}
        self.round_info: list[dict[str, Any]] = []
        #: The rounds after which the gate may stop (`verdict.ab.looks`).
        self.looks = looks(settings.rounds, settings.restart_every, settings.extra_rounds)

    # ------------------------------------------------------------------ workers
    def _config(self, arm: str) -> dict[str, Any]:
        s = self.settings
        first = not self.started
        return {
            "arm": arm,
            "backend": s.backend,
            "embedder": s.embedder,
            "threads": s.threads,
            "prefix": f"{self.tag}_{arm[0]}",
            "data_dir": str(self.workdir / arm),
            "sizes": s.sizes,
            "null_delay_ms": s.null_delay_ms,
            "seed_data": first,
            "sessions": self.sessions,
            "inject": None
            if s.inject is None or arm != "candidate"
            else {"op": s.inject[0], "fraction": s.inject[1]},
            "cpu": s.cpu,
            "encryption_key": self.key,
        }

    def start(self, round_index: int) -> None:
        """Start both workers together (nothing is being timed), then warm each up."""
        began = time.perf_counter()
        self.stop()
        for arm in ARMS:
            if arm not in self.logs:
                self.logs[arm] = (self.log_dir / f"worker-{arm}.log").open("a", encoding="utf-8")
            config = self._config(arm)
            env = worker_env(self.arms[arm], self.urls)
            self.workers[arm] = WorkerProcess(self.arms[arm], config, env, self.logs[arm])
        hellos: dict[str, dict[str, Any]] = {}
        for arm in ARMS:
            hello = self.workers[arm].reply(timeout=900)
            self._check(arm, hello)
            self.started.append(
                {
                    "arm": arm,
                    "round": round_index,
                    "pid": hello["pid"],
                    "reference_file": hello["reference_file"],
                    "cpus": hello.get("cpus"),
                }
            )
            if hello.get("sessions") is not None:
                self.sessions = self.sessions or hello["sessions"]
                self.seeding_s[arm] = hello["seeding_s"]
            hellos[arm] = hello
        if not self.ops:  # the first start decides what is measured and what is judged
            broken = dict(hellos["candidate"].get("unavailable") or {})
            if broken:  # the candidate is the tree under test: it must run every one
                op, why = next(iter(broken.items()))
                raise AbError(f"the candidate cannot run {op}: {why}")
            self.ops = dict(hellos["candidate"]["ops"])
            lacking = dict(hellos["baseline"].get("unavailable") or {})
            self.new_ops = {
                op: lacking.get(op, "not among the baseline's operations")
                for op in self.ops
                if op not in hellos["baseline"]["ops"]
            }
        if self.settings.inject is not None and self.settings.inject[0] not in self.ops:
            raise AbError(f"--inject: unknown operation {self.settings.inject[0]!r}")
        ready = time.perf_counter()
        for arm in self.rng.sample(ARMS, 2):
            reply = self.workers[arm].request(self._block(warmup=True, arm=arm))
            if arm == "candidate" and reply.get("inject_ms") is not None:
                self.inject_ms.append(round(float(reply["inject_ms"]), 4))
        done = time.perf_counter()
        self.echo(
            f"  workers {'started' if round_index == 0 else 'restarted'}: "
            f"{ready - began:.1f} s, warm-up {done - ready:.1f} s"
        )

    def _check(self, arm: str, hello: dict[str, Any]) -> None:
        tree = self.arms[arm].tree.resolve()
        where = Path(hello["reference_file"]).resolve()
        if not where.is_relative_to(tree):
            raise AbError(f"{arm} worker imported reference from {where}, not from {tree}")

    def stop(self) -> None:
        for worker in self.workers.values():
            worker.ask_to_exit()
        for worker in self.workers.values():
            worker.stop()
        self.workers.clear()

    def close(self, *, drop: bool) -> None:
        """Stop the workers (dropping the arms' namespaces first when `drop`)."""
        if drop:
            for worker in self.workers.values():
                with contextlib.suppress(AbError, OSError):
                    worker.request({"cmd": "drop"}, timeout=300)
        self.stop()
        for log in self.logs.values():
            log.close()

    # ------------------------------------------------------------------ rounds
    def runs(self, op: str, arm: str) -> bool:
        """Whether `arm` runs `op` (the baseline does not run the NEW ones)."""
        return arm == "candidate" or op not in self.new_ops

    def _block(
        self,
        *,
        warmup: bool,
        order: list[str] | None = None,
        seed: int | None = None,
        arm: str = "candidate",
    ) -> Any:
        ops = [op for op in self.ops if self.runs(op, arm)]
        if order is None:
            order = self.rng.sample(ops, len(ops))
        return {
            "cmd": "block",
            "order": order,
            "calls": {op: self.calls(op, warmup=warmup) for op in self.ops},
            "seed": self.rng.getrandbits(48) if seed is None else seed,
            "warmup": warmup,
        }

    def calls(self, op: str, *, warmup: bool) -> int:
        """Calls of `op` per round and arm (at least 1); a third of that (at least 5, at
        most a round's) to warm up."""
        calls = max(1, round(self.ops[op] * self.settings.calls_scale))
        return min(calls, max(5, calls // 3)) if warmup else calls

    def run_rounds(self, count: int) -> None:
        """`count` more rounds, restarting the workers every `restart_every` rounds."""
        for _ in range(count):
            index = len(self.round_info)
            if index % self.settings.restart_every == 0 or not self.workers:
                self.start(index)
            started = time.perf_counter()
            interleaved = self.settings.chunk > 0
            firsts = self._interleaved_round() if interleaved else self._block_round()
            seconds = round(time.perf_counter() - started, 2)
            load = round(os.getloadavg()[0], 2)
            self.round_info.append(
                {"candidate_first": firsts, "seconds": seconds, "loadavg_1m": load}
            )
            self.echo(f"  round {index + 1}: {seconds:.1f} s, load {load}")

    def _block_round(self) -> float:
        """One block of each arm (every op, shuffled), the arms in random order."""
        ops = list(self.ops)
        order = self.rng.sample(ops, len(ops))
        request = self._block(warmup=False, order=order)
        arms = self.rng.sample(ARMS, 2)
        for arm in arms:
            mine = {**request, "order": [op for op in order if self.runs(op, arm)]}
            reply = self.workers[arm].request(mine)
            for op, values in reply["samples"].items():
                self.samples[arm].setdefault(op, []).append(values)
        return float(arms[0] == "candidate")

    def _interleaved_round(self) -> float:
        """Every op (shuffled); its calls in chunks of `chunk`, each chunk run by both arms
        in a fresh random order on the same inputs. Returns the share of chunks the
        candidate ran first."""
        chunk = self.settings.chunk
        ops = list(self.ops)
        round_samples: dict[str, dict[str, list[float]]] = {arm: {} for arm in ARMS}
        firsts = []
        for op in self.rng.sample(ops, len(ops)):
            total = self.calls(op, warmup=False)
            for start in range(0, total, chunk):
                size = min(chunk, total - start)
                request = self._block(warmup=False, order=[op], seed=None)
                request["calls"] = {op: size}
                arms = [a for a in self.rng.sample(ARMS, 2) if self.runs(op, a)]
                if len(arms) == 2:
                    firsts.append(arms[0] == "candidate")
                for arm in arms:
                    reply = self.workers[arm].request(request)
                    round_samples[arm].setdefault(op, []).extend(reply["samples"][op])
        for arm in ARMS:
            for op, values in round_samples[arm].items():
                self.samples[arm].setdefault(op, []).append(values)
        return round(sum(firsts) / max(1, len(firsts)), 3)

    def evaluate(self, *, swaps: bool) -> list[OpResult]:
        """Every operation's comparisons on the rounds so far (verdicts not final; a
        reported operation's is INFO), with the label-swap estimates when `swaps`.

        Lower bounds (FAIL): Bonferroni over the gated operations x quantiles x the looks
        the gate may take; upper bounds (PASS, an intersection-union test over the
        operations): Bonferroni over the looks."""
        s = self.settings
        thresholds = s.thresholds
        judged = [op for op in self.ops if op not in self.new_ops and gated(op)]
        m = max(1, len(judged)) * len(thresholds) * len(self.looks)
        results = []
        for index, op in enumerate(self.ops):
            if op in self.new_ops:
                results.append(OpResult(op, [], Verdict.NEW, {}, {}))
                continue
            base = [np.asarray(r) for r in self.samples["baseline"][op]]
            cand = [np.asarray(r) for r in self.samples["candidate"][op]]
            comparisons = compare(
                op,
                base,
                cand,
                thresholds,
                comparisons=m,
                pass_comparisons=len(self.looks),
                family_alpha=s.family_alpha,
                resamples=s.resamples,
                seed=SEED + index,
            )
            alarms, spread = {}, {}
            for c in comparisons if swaps else ():
                alarms[c.label], spread[c.label] = label_swap_false_alarms(
                    base, cand, c, seed=SEED + index
                )
            verdict = op_verdict(comparisons, final=False) if gated(op) else Verdict.INFO
            results.append(OpResult(op, comparisons, verdict, alarms, spread))
        return results

    def decided(self, results: list[OpResult]) -> bool:
        """Every gated operation PASSes or FAILs, and none is a suspected slowdown."""
        return all(
            r.verdict in (Verdict.PASS, Verdict.FAIL) and not suspected(r.comparisons)
            for r in results
            if r.verdict not in (Verdict.NEW, Verdict.INFO)
        )
