"""The load test's own command-line options, added to Locust's parser.

Locust forwards custom options from the master to its workers when a test starts, so a
distributed run is configured on the master alone. The options are read into a typed
`LoadOptions` once per test start.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from loadtests.pacing import Arrivals
from memharness.verdict.histograms import TURN_INTENDED, TURN_QUEUED, Gate
from memharness.verdict.limits import DEFAULT_SLAS, Sla, parse_slas

__all__ = ["STRATEGY_ENV", "LoadOptions", "add_arguments", "default_run_id"]

#: A strategy YAML file the memory runs under (`memharness load --strategy` writes it);
#: unset: the stores' defaults (`reference.factory.default_strategy`).
STRATEGY_ENV = "MEMH_LOAD_STRATEGY"
DEFAULT_SLA_TEXT = ",".join(f"{sla.op}={sla.limit_ms:g}" for sla in DEFAULT_SLAS)


def default_run_id() -> str:
    """A run id that sorts by time: `load-YYYYmmdd-HHMMSS`."""
    return time.strftime("load-%Y%m%d-%H%M%S")


def add_arguments(parser: Any) -> None:
    """Register the memharness options on Locust's argument parser."""
    group = parser.add_argument_group("memharness", "options of the memharness load test")
    group.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="Target turns per second over all users and workers. With --open-loop: the "
        "arrival rate. Without: each user paces itself to its share (closed loop). "
        "0 (default): closed loop with --think-time.",
    )
    group.add_argument(
        "--open-loop",
        action="store_true",
        default=False,
        help="Arrivals on a fixed timeline at --rate; latency also measured from each "
        "turn's intended start (no coordinated omission).",
    )
    group.add_argument(
        "--arrivals",
        choices=["constant", "poisson"],
        default="constant",
        help="Open loop: evenly spaced or Poisson arrivals (seeded by --seed).",
    )
    group.add_argument("--seed", type=int, default=0, help="Seed of conversations and arrivals.")
    group.add_argument(
        "--think-time",
        default="1,3",
        help="Closed loop without --rate: seconds between a user's turns, uniform in MIN,MAX.",
    )
    group.add_argument(
        "--serial",
        action="store_true",
        default=False,
        help="One turn at a time per process: layer timings are then pure service times "
        "(no other user's work interleaved); the wait is recorded as 'queue'.",
    )
    group.add_argument(
        "--sla",
        default=DEFAULT_SLA_TEXT,
        help="SLAs as op=ms[@pNN],... (default p95). Default: %(default)s.",
    )
    group.add_argument(
        "--sla-gate",
        choices=["ci", "point"],
        default="ci",
        help="ci: fail when the 95%% CI of the percentile is wholly over the limit; "
        "point: fail when the point estimate is over it.",
    )
    group.add_argument(
        "--run-id", default=default_run_id(), help="Name of the report directory of this run."
    )
    group.add_argument(
        "--out-dir", default="reports", help="load_hdr.json goes to OUT_DIR/RUN_ID/."
    )
    group.add_argument(
        "--keep-data",
        action="store_true",
        default=False,
        help="Do not erase the load users' records from the memory at the end.",
    )
    group.add_argument(
        "--no-consistency-check",
        dest="check_consistency",
        action="store_false",
        default=True,
        help="Skip the servers' consistency check after the run (loadtests/consistency.py: "
        "session bookkeeping, STM -> session, LTM -> audit, namespace; then the erasure).",
    )
    group.add_argument(
        "--sample-every",
        type=float,
        default=5.0,
        help="Seconds between samples of each process's CPU and RSS (load, Redis, "
        "PostgreSQL, a local Chroma server); 0: none. Default: %(default)s.",
    )


@dataclass(frozen=True, slots=True)
class LoadOptions:
    """The memharness options of one run, validated."""

    rate: float = 0.0
    open_loop: bool = False
    arrivals: Arrivals = "constant"
    seed: int = 0
    think_time: tuple[float, float] = (1.0, 3.0)
    serial: bool = False
    slas: tuple[Sla, ...] = DEFAULT_SLAS
    sla_gate: Gate = "ci"
    run_id: str = "load"
    out_dir: str = "reports"
    keep_data: bool = False
    check_consistency: bool = True
    sample_every: float = 5.0
    #: Worker processes sharing --rate (Locust forwards --expect-workers to workers).
    workers: int = 1

    @property
    def mode(self) -> str:
        return ("open-loop" if self.open_loop else "closed-loop") + (
            ", serial" if self.serial else ""
        )

    @property
    def turn_measure(self) -> str:
        """The histogram the turn SLA is judged on: what a caller waits for."""
        if self.open_loop:
            return TURN_INTENDED
        return TURN_QUEUED if self.serial else "turn"

    @classmethod
    def from_parsed(cls, parsed: Any) -> LoadOptions:
        """From Locust's parsed options (an argparse Namespace); raises ValueError."""
        get = getattr
        low, _, high = str(get(parsed, "think_time", "1,3")).partition(",")
        think = (float(low), float(high or low))
        if not 0 <= think[0] <= think[1]:
            raise ValueError(f"--think-time {think}: expected 0 <= MIN <= MAX")
        options = cls(
            rate=float(get(parsed, "rate", 0.0) or 0.0),
            open_loop=bool(get(parsed, "open_loop", False)),
            arrivals=get(parsed, "arrivals", "constant"),
            seed=int(get(parsed, "seed", 0)),
            think_time=think,
            serial=bool(get(parsed, "serial", False)),
            slas=parse_slas(str(get(parsed, "sla", DEFAULT_SLA_TEXT))),
            sla_gate=get(parsed, "sla_gate", "ci"),
            run_id=str(get(parsed, "run_id", None) or default_run_id()),
            out_dir=str(get(parsed, "out_dir", "reports")),
            keep_data=bool(get(parsed, "keep_data", False)),
            check_consistency=bool(get(parsed, "check_consistency", True)),
            sample_every=float(get(parsed, "sample_every", 5.0)),
            workers=max(1, int(get(parsed, "expect_workers", 1) or 1)),
        )
        if not options.sample_every >= 0:
            raise ValueError(f"--sample-every {options.sample_every}: must be >= 0 seconds")
        if options.rate < 0:
            raise ValueError(f"--rate {options.rate}: must be >= 0")
        if options.open_loop and options.rate <= 0:
            raise ValueError("--open-loop needs --rate > 0 (turns per second)")
        if "/" in options.run_id or options.run_id in ("", ".", ".."):
            raise ValueError(f"--run-id {options.run_id!r}: must be a plain directory name")
        return options
