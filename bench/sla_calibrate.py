"""The absolute SLA gate's own error rates, measured: its false alarms on clean code and
its power against a slowdown that breaks an SLA.

Runs `memharness bench --size small` RUNS times as is and RUNS times with
`--bench-slow OP=MS` (alternating, so both see the same machine), and prints per run the
gate's verdict and the operations it failed, then both tables:

  .venv/bin/python -m bench.sla_calibrate --runs 5 --slow 'stm.retrieve[cached]=50'

Every run is a whole bench (seeding included, ~65 s on an idle 2-core machine). The
delay should break the SLA by a margin worth catching: 50 ms on top of
`stm.retrieve[cached]`'s ~7 ms p95 puts it ~15% over the 50 ms SLA.

`--busy N` keeps N processes spinning a pure-Python loop for the whole calibration: a
slowed machine (two of them on two cores slow the STM operations ~2x, as this machine's
slow moments do), to measure the gate judging at the reference's speed (bench/machine.py).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def one_run(run_id: str, report_dir: Path, slow: str | None) -> tuple[bool, list[str]]:
    """(passed, failed operations) of one `memharness bench --size small`."""
    command = [
        str(Path(sys.executable).with_name("memharness")),
        *("bench", "--size", "small", "--run-id", run_id, "--report-dir", str(report_dir)),
    ]
    if slow is not None:
        command += ["--", "--bench-slow", slow]
    env = {**os.environ, "MEMH_EMBEDDER_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    subprocess.run(command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, check=False)
    document = json.loads((report_dir / run_id / "bench.json").read_text(encoding="utf-8"))
    failed = [op["op"] for op in document["ops"] if op["verdict"] in ("FAIL", "INSUFFICIENT")]
    return document["gate"]["passed"], failed


@contextmanager
def busy(processes: int) -> Iterator[None]:
    """`processes` pure-Python spinners for the duration."""
    spinners = [
        subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(processes)
    ]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each kind")
    parser.add_argument("--slow", default="stm.retrieve[cached]=50", help="OP=MS to inject")
    parser.add_argument("--report-dir", type=Path, default=ROOT / "reports" / "sla-calibration")
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside the runs")
    args = parser.parse_args()
    slowed_op = args.slow.rpartition("=")[0]
    clean_alarms = caught = 0
    with busy(args.busy):
        for i in range(args.runs):
            for slow in (None, args.slow):
                kind = "slowed" if slow else "clean"
                passed, failed = one_run(f"{kind}-{i}", args.report_dir, slow)
                print(f"run {i} {kind:6} gate {'PASS' if passed else 'FAIL'} failed: {failed}")
                if slow is None:
                    clean_alarms += not passed
                else:
                    caught += slowed_op in failed
    print(f"\nfalse alarms (clean code failed the gate): {clean_alarms} of {args.runs}")
    print(f"power ({args.slow} detected on {slowed_op}): {caught} of {args.runs}")


if __name__ == "__main__":
    main()
