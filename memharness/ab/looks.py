"""The gate's run: the servers, rounds up to each look, a stop once every gated operation
is decided (`Gate.decided`), more rounds for a suspected slowdown, and the final verdicts
(`memharness.ab.runner` says how the rounds run and why the gate is built this way)."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable
from pathlib import Path

from memharness.ab.arms import ArmTree
from memharness.ab.model import AbResult, AbSettings
from memharness.ab.processes import start_servers
from memharness.ab.runner import Gate
from memharness.verdict.ab import op_verdict, suspected
from memharness.verdict.intervals import Verdict

__all__ = ["run_ab"]


def run_ab(
    settings: AbSettings,
    arms: dict[str, ArmTree],
    *,
    workdir: Path,
    log_dir: Path,
    echo: Callable[[str], None],
) -> AbResult:
    """Run the gate: rounds, a verdict, and once more rounds if an operation is unclear."""
    started = time.perf_counter()
    external = bool(os.environ.get("MEMH_REDIS_URL") or os.environ.get("MEMH_PG_URL"))
    with contextlib.ExitStack() as stack:
        urls = start_servers(settings.backend, workdir, stack)
        gate = Gate(settings, arms, workdir=workdir, log_dir=log_dir, urls=urls, echo=echo)
        try:
            regular = [mark for mark in gate.looks if mark <= settings.rounds]
            echo(
                f"at most {settings.rounds} rounds, looking after rounds "
                f"{', '.join(map(str, regular))} and stopping once every gated operation is "
                f"decided; restarts every {settings.restart_every}, arms alternating every "
                f"{settings.chunk or 'block of'} call(s):"
            )
            for mark in regular:
                gate.run_rounds(mark - len(gate.round_info))
                looked = time.perf_counter()
                results = gate.evaluate(swaps=False)
                state = "every gated operation decided"
                if not gate.decided(results):
                    undecided = [
                        f"{r.op} (p50 {r.comparisons[0].ratio:.3f} "
                        f"[{r.comparisons[0].low:.3f}, {r.comparisons[0].high:.3f}])"
                        for r in results
                        if r.verdict is Verdict.INCONCLUSIVE
                    ]
                    suspects = [
                        f"{r.op} (a slowdown suspected)"
                        for r in results
                        if r.verdict in (Verdict.PASS, Verdict.FAIL) and suspected(r.comparisons)
                    ]
                    state = f"undecided: {', '.join(undecided + suspects)}"
                echo(f"  look after round {mark} ({time.perf_counter() - looked:.1f} s): {state}")
                if gate.decided(results):
                    break
            first_pass = {r.op: r.verdict.value for r in results}
            suspects = [
                r.op for r in results if r.verdict is not Verdict.INFO and suspected(r.comparisons)
            ]
            extended = bool(suspects) and settings.extra_rounds > 0
            if extended:
                echo(f"suspected, not proven: {', '.join(suspects)}; more rounds:")
                gate.run_rounds(settings.extra_rounds)
            looked = time.perf_counter()
            results = gate.evaluate(swaps=True)
            echo(f"  statistics: {time.perf_counter() - looked:.1f} s")
            results = [
                r
                if r.verdict in (Verdict.NEW, Verdict.INFO)
                else dataclasses.replace(r, verdict=op_verdict(r.comparisons, final=True))
                for r in results
            ]
        finally:
            gate.close(drop=external and settings.backend != "null")
    return AbResult(
        settings=settings,
        arms=arms,
        ops=results,
        rounds=len(gate.round_info),
        extended=extended,
        samples=gate.samples,
        round_info=gate.round_info,
        workers=gate.started,
        seeding_s=gate.seeding_s,
        inject_ms=gate.inject_ms,
        wall_s=time.perf_counter() - started,
        first_pass=first_pass,
        new_ops=gate.new_ops,
        looks=gate.looks,
    )
