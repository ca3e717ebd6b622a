"""The A/B gate's own error rates: false alarms (A/A) and power (an injected slowdown).

    .venv/bin/python -m bench.ab_calibrate --aa 10 --power 10
    .venv/bin/python -m bench.ab_calibrate --aa 10 --power 10 --inject 'turn[uncached]=0.2'
    .venv/bin/python -m bench.ab_calibrate --aa 2 --power 2 -- --backend null   # a dry run
    .venv/bin/python -m bench.ab_calibrate --aa 4 --power 8 \
        --inject 'sweep.batch=0.2' --inject 'consolidate.session=0.2' \
        --inject 'event.apply=0.2' --inject 'shard.replay=0.2'    # the background operations

Each run is `memharness bench --ab HEAD` executed from a clean detached worktree of HEAD
(so the candidate is exactly HEAD, whatever is uncommitted in this checkout): an A/A run
compares HEAD with itself, a power run adds `--inject OP=FRACTION` to the candidate
(several `--inject`: the power runs take them in turn, and each gets its own table).
The two kinds alternate, so both see the same stretch of machine load. Arguments after
`--` go to every run. Reports go to `reports/ab-calibration/` (not `reports/history.jsonl`:
injected runs are not history); the tables print as Markdown and are saved with every
run's verdicts, wall time and load in `reports/ab-calibration/calibration-<utc>.json`.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--aa", type=int, default=10, help="A/A runs (false alarms)")
    parser.add_argument("--power", type=int, default=10, help="runs with an injected slowdown")
    parser.add_argument(
        "--inject",
        action="append",
        default=None,
        help="OP=FRACTION (repeatable: power runs take them in turn); "
        "default stm.query[cached]=0.2",
    )
    parser.add_argument("--report-dir", type=Path, default=ROOT / "reports" / "ab-calibration")
    parser.add_argument("gate_args", nargs="*", help="after --: passed to every run")
    args = parser.parse_args(argv)
    injects: list[str] = args.inject or ["stm.query[cached]=0.2"]
    report_dir = args.report_dir.resolve()
    report_dir.mkdir(parents=True, exist_ok=True)
    stamp = f"{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    workdir = Path(tempfile.mkdtemp(prefix="memh-ab-calib-"))
    tree = workdir / "candidate"
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), "HEAD"], check=True
    )
    sha = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    kinds = _schedule(args.aa, args.power)
    runs: list[dict[str, Any]] = []
    powered = 0
    try:
        for index, kind in enumerate(kinds, 1):
            inject = injects[powered % len(injects)] if kind == "power" else None
            powered += kind == "power"
            run_id = f"calib-{stamp}-{index:02d}-{kind}"
            command = [
                sys.executable,
                "-m",
                "memharness.cli",
                "bench",
                "--ab",
                "HEAD",
                "--run-id",
                run_id,
                "--report-dir",
                str(report_dir),
                *(["--inject", inject] if inject is not None else []),
                *args.gate_args,
            ]
            started = time.perf_counter()
            done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
            wall = time.perf_counter() - started
            (report_dir / f"{run_id}.log").write_text(done.stdout + done.stderr, encoding="utf-8")
            run = _summarise(kind, report_dir / run_id / "ab.json", done.returncode, wall, inject)
            runs.append(run)
            print(f"{index}/{len(kinds)} {kind}: {run['outcome']} ({wall:.0f} s)", flush=True)
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)], check=False
        )
        shutil.rmtree(workdir, ignore_errors=True)
    lines = tables(runs, injects=injects, sha=sha, gate_args=args.gate_args)
    print("\n".join(lines))
    out = report_dir / f"calibration-{stamp}.json"
    out.write_text(
        json.dumps(
            {"commit": sha, "inject": injects, "gate_args": args.gate_args, "runs": runs},
            indent=1,
        )
        + "\n",
        encoding="utf-8",
    )
    print(f"\nsaved: {out}")
    return 0


def _schedule(aa: int, power: int) -> list[str]:
    """A/A and power runs alternating, the surplus of either kind at the end."""
    kinds: list[str] = []
    for index in range(max(aa, power)):
        kinds += ["aa"] if index < aa else []
        kinds += ["power"] if index < power else []
    return kinds


def _summarise(kind: str, path: Path, code: int, wall: float, inject: str | None) -> dict[str, Any]:
    run: dict[str, Any] = {"kind": kind, "exit": code, "wall_s": round(wall, 1), "inject": inject}
    if not path.is_file():
        run["outcome"] = f"ERROR (exit {code}, no ab.json)"
        return run
    doc = json.loads(path.read_text(encoding="utf-8"))
    ops = {op["op"]: op for op in doc["ops"] if op["verdict"] != "NEW"}  # judged ones
    verdicts = {name: op["verdict"] for name, op in ops.items()}
    run.update(
        verdict=doc["verdict"],
        rounds=doc["rounds_run"],
        extended=doc["extended"],
        loadavg=doc["loadavg"],
        verdicts=verdicts,
        fails=sorted(name for name, v in verdicts.items() if v == "FAIL"),
        warns=sorted(name for name, v in verdicts.items() if v == "WARN"),
        p50=[[name, op["p50"]["ratio"], *op["p50"]["ci"]] for name, op in ops.items()],
        swap_max=max(op[q]["label_swap_fail_share"] for op in ops.values() for q in ("p50", "p95")),
        inject_ms=doc.get("inject_ms"),
    )
    if kind == "aa":
        run["outcome"] = "false FAIL" if run["fails"] else doc["verdict"]
    else:
        target = str(inject).rpartition("=")[0]
        detected = verdicts.get(target) == "FAIL"
        others = [name for name in run["fails"] if name != target]
        run["detected"] = detected
        run["outcome"] = ("detected" if detected else "MISSED") + (
            f" + false FAIL {others}" if others else ""
        )
    return run


def tables(
    runs: list[dict[str, Any]], *, injects: list[str], sha: str, gate_args: list[str]
) -> list[str]:
    """The A/A table and one power table per injected operation, in Markdown."""
    extra = " ".join(gate_args)
    aa = [r for r in runs if r["kind"] == "aa"]
    lines = [
        f"commit {sha[:12]}; `memharness bench --ab HEAD {extra}`".rstrip(),
        "",
        f"A/A (HEAD against itself): {sum(bool(r.get('fails')) for r in aa)} false FAIL(s) "
        f"in {len(aa)} runs ({sum('verdicts' not in r for r in aa)} errors)",
        "",
        "| run | verdict | FAIL ops | WARN ops | rounds | widest p50 CI | max swap share "
        "| load 1m start-end | wall s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(aa, 1):
        lines.append(_row(i, r))
    for inject in injects:
        power = [r for r in runs if r["kind"] == "power" and r["inject"] == inject]
        lines += _power_table(power, inject)
    return lines


def _power_table(power: list[dict[str, Any]], inject: str) -> list[str]:
    target = inject.rpartition("=")[0]
    lines = [
        "",
        f"Power (`--inject {inject}`): detected in {sum(bool(r.get('detected')) for r in power)} "
        f"of {len(power)} runs",
        "",
        f"| run | {target} verdict | p50 ratio [CI] | other FAIL ops | rounds | injected ms "
        "| load 1m start-end | wall s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(power, 1):
        if "verdicts" not in r:
            lines.append(f"| {i} | {r['outcome']} | | | | | | {r['wall_s']} |")
            continue
        ratio = next((p for p in r["p50"] if p[0] == target), [target, None, None, None])
        others = ", ".join(f for f in r["fails"] if f != target) or "-"
        lines.append(
            f"| {i} | {r['verdicts'].get(target)} "
            f"| {ratio[1]:.3f} [{ratio[2]:.3f}, {ratio[3]:.3f}] | {others} | {r['rounds']} "
            f"| {_ms(r['inject_ms'])} | {_load(r)} | {r['wall_s']} |"
        )
    return lines


def _row(i: int, r: dict[str, Any]) -> str:
    if "verdicts" not in r:
        return f"| {i} | {r['outcome']} | | | | | | | {r['wall_s']} |"
    widest_ci = max(r["p50"], key=lambda p: p[3] - p[2])
    return (
        f"| {i} | {r['verdict']} | {', '.join(r['fails']) or '-'} | {', '.join(r['warns']) or '-'} "
        f"| {r['rounds']} | {widest_ci[0]} [{widest_ci[2]:.3f}, {widest_ci[3]:.3f}] "
        f"| {r['swap_max']:.1%} | {_load(r)} | {r['wall_s']} |"
    )


def _ms(values: list[float] | float | None) -> str:
    if values is None:
        return "-"
    if isinstance(values, float | int):
        return f"{values:.2f}"
    return "/".join(f"{v:.2f}" for v in values)


def _load(r: dict[str, Any]) -> str:
    return f"{r['loadavg']['start'][0]}-{r['loadavg']['end'][0]}"


if __name__ == "__main__":
    raise SystemExit(main())
