"""The A/B gate's outputs: the terminal table, `reports/<run-id>/ab.json`, and one line per
gate run in `reports/history.jsonl` (also written by the absolute SLA gate).

History lines are flat JSON objects (scalars only: `ops.<op>.<figure>` keys), so
`pandas.read_json("reports/history.jsonl", lines=True)` gives one row per gate run and one
column per figure, ready to plot a trend over commits. `gate` says which gate wrote the
line ("ab" or "sla").
"""

from __future__ import annotations

import fcntl
import json
import math
import os
import platform
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from memharness.ab.model import AbResult, OpResult
from memharness.ab.worker import OPS
from memharness.ab.worker import STRATEGY as WORKER_STRATEGY
from memharness.verdict.ab import Comparison
from memharness.verdict.intervals import Verdict, hd_quantiles


def _r(value: float, digits: int = 4) -> float | None:
    return None if math.isnan(value) or math.isinf(value) else round(value, digits)


def _pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"


def table(result: AbResult) -> list[str]:
    """Per operation: both arms' p50/p95 (n), the ratios with their intervals, the verdict."""
    judged = [op for op in result.ops if op.comparisons]
    conf = judged[0].comparisons[0].confidence if judged else 0.0
    head = (
        f"{'operation':26}{'n b/c':>10}{'base p50':>10}{'cand p50':>10}  {'p50 ratio [CI]':22}"
        f"{'base p95':>10}{'cand p95':>10}  {'p95 ratio [CI]':22}{'swap':>6}  verdict"
    )
    lines = [head, "-" * len(head)]
    for op in result.ops:
        if op.verdict is Verdict.NEW:
            c50, c95 = candidate_quantiles(result, op.op)
            n = f"-/{len(_flat(result, 'candidate', op.op))}"
            lines.append(
                f"{op.op:26}{n:>10}{'-':>10}{c50:>10.3f}  {'':22}{'-':>10}{c95:>10.3f}  "
                f"{'':22}{'':>6}  {op.verdict} (not judged)"
            )
            continue
        p50, p95 = op.comparisons
        n = f"{len(_flat(result, 'baseline', op.op))}/{len(_flat(result, 'candidate', op.op))}"
        swap = max(op.swap_alarms.values())
        verdict = "reported (not gated)" if op.verdict is Verdict.INFO else str(op.verdict)
        lines.append(
            f"{op.op:26}{n:>10}{p50.base_ms:>10.3f}{p50.cand_ms:>10.3f}  {_ci(p50):22}"
            f"{p95.base_ms:>10.3f}{p95.cand_ms:>10.3f}  {_ci(p95):22}{swap:>6.1%}  {verdict}"
        )
    gated = [op for op in judged if op.verdict is not Verdict.INFO]
    upper = judged[0].comparisons[0].upper_confidence if judged else None
    levels = f"{conf:.2%} two-sided"
    if upper is not None:
        levels = (
            f"lower bound one-sided {1 - (1 - conf) / 2:.3%} (FAIL: Bonferroni over "
            f"{2 * len(gated)} comparisons x {len(result.looks)} looks), upper {upper:.2%} "
            f"(PASS: each operation, {len(result.looks)} looks)"
        )
    lines.append(
        f"(milliseconds; Harrell–Davis quantiles; ratio = candidate/baseline with its "
        f"paired-bootstrap interval, {levels}; swap = share of label swaps the rule would fail)"
    )
    return lines


def candidate_quantiles(result: AbResult, op: str) -> tuple[float, float]:
    """The candidate's Harrell–Davis p50 and p95 of `op` (for an operation not judged)."""
    samples = np.asarray(_flat(result, "candidate", op))
    if samples.size == 0:
        return math.nan, math.nan
    p50, p95 = hd_quantiles(samples, (0.5, 0.95))
    return float(p50), float(p95)


def _ci(c: Comparison) -> str:
    return f"{c.ratio:.3f} [{c.low:.3f}, {c.high:.3f}]"


def _flat(result: AbResult, arm: str, op: str) -> list[float]:
    return [x for block in result.samples[arm].get(op, []) for x in block]


def explain(op: OpResult) -> str:
    """One sentence per operation that is not a PASS: which quantile, by how much, how sure."""
    parts = []
    for c in op.comparisons:
        if c.verdict is Verdict.PASS:
            continue
        limit = 1 + c.threshold
        lower = f"{1 - (1 - c.confidence) / 2:.3%}"
        if c.verdict is Verdict.FAIL:
            parts.append(
                f"{c.label} {_pct(c.ratio)} slower ({c.base_ms:.3f} -> {c.cand_ms:.3f} ms; "
                f"CI of the ratio {c.low:.3f}-{c.high:.3f}, its {lower} lower bound above "
                f"{limit:.2f})"
            )
        else:
            parts.append(
                f"{c.label} {_pct(c.ratio)} (CI {c.low:.3f}-{c.high:.3f} straddles {limit:.2f})"
            )
    return f"{op.verdict} {op.op}: " + "; ".join(parts)


def summary(result: AbResult) -> list[str]:
    verdict = result.verdict
    ops = result.ops
    failing = [op for op in ops if op.verdict not in (Verdict.PASS, Verdict.NEW, Verdict.INFO)]
    judged = [op for op in ops if op.verdict not in (Verdict.NEW, Verdict.INFO)]
    rounds = f"{result.rounds} of at most {result.settings.rounds} rounds"
    if result.extended:
        rounds = (
            f"{result.rounds} rounds: {result.settings.rounds}, then "
            f"{result.settings.extra_rounds} more for a suspected slowdown"
        )
    head = (
        f"A/B gate {verdict}: {sum(op.verdict is Verdict.PASS for op in judged)} of "
        f"{len(judged)} gated operations PASS ({rounds})"
    )
    lines = [head, *(f"  {explain(op)}" for op in failing)]
    for op in ops:
        if op.verdict is Verdict.INFO:
            p50, p95 = op.comparisons
            lines.append(
                f"  reported, not gated: {op.op} p50 {_ci(p50)}, p95 {_ci(p95)}"
                + ("; p50 slower beyond its threshold" if p50.verdict is Verdict.FAIL else "")
            )
    for name, why in result.new_ops.items():
        lines.append(f"  NEW {name}: the baseline cannot run it ({why}); measured, not judged")
    return lines


def document(
    result: AbResult, *, run_id: str, started_at: str, loadavg: dict[str, Any]
) -> dict[str, Any]:
    """The ab.json document: the run, the rule, per operation the figures, raw samples."""
    s = result.settings
    return {
        "run_id": run_id,
        "gate": "ab",
        "started_at": started_at,
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),  # wall-clock ok
        "verdict": result.verdict.value,
        "wall_s": round(result.wall_s, 1),
        "arms": {name: arm.as_dict() for name, arm in result.arms.items()},
        "workers": result.workers,
        "python": sys.executable,
        "platform": platform.platform(),
        "cpu_count": os.cpu_count(),
        "loadavg": loadavg,
        "settings": {
            "backend": s.backend,
            "embedder": s.embedder,
            "torch_threads": s.threads,
            "rounds": s.rounds,
            "extra_rounds": s.extra_rounds,
            "calls_per_round": {op: round(n * s.calls_scale) for op, n in OPS.items()},
            "chunk": s.chunk,
            "restart_every": s.restart_every,
            "seed": s.seed,
            "null_delay_ms": s.null_delay_ms if s.backend == "null" else None,
            "sizes": s.sizes if s.backend == "real" else None,
            "inject": None if s.inject is None else {"op": s.inject[0], "fraction": s.inject[1]},
        },
        "rule": {
            "estimator": "Harrell-Davis quantiles (scipy.stats.mstats.hdquantiles), pooled",
            "interval": "paired bootstrap over rounds (same round indices for both arms)",
            "thresholds": {"p50": s.t50, "p95": s.t95},
            "family_alpha": s.family_alpha,
            "correction": "lower bounds: Bonferroni over gated operations x quantiles x "
            "looks; upper bounds: over looks (intersection-union over operations)",
            "resamples": s.resamples,
            "fail": "CI lower bound of the ratio > 1 + T, at p50 or p95",
            "pass": "p50 CI upper bound < 1 + T, and no quantile fails",
            "gated": "operations with at least 10 calls per round; the others are reported",
            "looks": result.looks,
            "stop": "at the first look where every gated operation passes or fails",
            "otherwise": "extra rounds once for a suspected slowdown, then WARN (no failure)",
        },
        "extended": result.extended,
        "rounds_run": result.rounds,
        "first_pass": result.first_pass,
        "strategy": WORKER_STRATEGY,
        "new_ops": result.new_ops,
        "inject_ms": result.inject_ms,
        "seeding_s": result.seeding_s,
        "rounds": result.round_info,
        "ops": [_op_dict(result, op) for op in result.ops],
        "samples_ms": {
            arm: {
                op: [[round(x, 4) for x in block] for block in blocks] for op, blocks in ops.items()
            }
            for arm, ops in result.samples.items()
        },
    }


def _op_dict(result: AbResult, op: OpResult) -> dict[str, Any]:
    row: dict[str, Any] = {
        "op": op.op,
        "verdict": op.verdict.value,
        "n_baseline": len(_flat(result, "baseline", op.op)),
        "n_candidate": len(_flat(result, "candidate", op.op)),
        "message": explain(op)
        if op.verdict not in (Verdict.PASS, Verdict.NEW, Verdict.INFO)
        else None,
    }
    if op.verdict is Verdict.NEW:
        p50, p95 = candidate_quantiles(result, op.op)
        row["new"] = result.new_ops.get(op.op)
        row["p50"] = {"candidate_ms": _r(p50)}
        row["p95"] = {"candidate_ms": _r(p95)}
    for c in op.comparisons:
        row[c.label] = {
            "baseline_ms": _r(c.base_ms),
            "candidate_ms": _r(c.cand_ms),
            "ratio": _r(c.ratio),
            "ci": [_r(c.low), _r(c.high)],
            "confidence": _r(c.confidence, 6),
            "upper_confidence": None if c.upper_confidence is None else _r(c.upper_confidence, 6),
            "threshold": c.threshold,
            "verdict": c.verdict.value,
            "label_swap_fail_share": _r(op.swap_alarms[c.label]),
            "label_swap_ratio_p95": _r(op.swap_spread[c.label]),
        }
    return row


def write_json(path: Path, doc: dict[str, Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    return path


def ab_history_line(result: AbResult, doc: dict[str, Any]) -> dict[str, Any]:
    cand, base = result.arms["candidate"], result.arms["baseline"]
    line: dict[str, Any] = {
        "gate": "ab",
        "run_id": doc["run_id"],
        "date": doc["finished_at"],
        "commit": cand.sha,
        "dirty": cand.dirty,
        "baseline_commit": base.sha,
        "baseline_ref": base.ref or str(base.tree),
        "backend": result.settings.backend,
        "embedder": result.settings.embedder,
        "strategy": WORKER_STRATEGY,
        "verdict": result.verdict.value,
        "rounds": result.rounds,
        "loadavg_1m": doc["loadavg"].get("end", [None])[0],
        "inject": None
        if result.settings.inject is None
        else "=".join(map(str, result.settings.inject)),
    }
    for op in result.ops:
        if op.verdict is Verdict.NEW:
            c50, c95 = candidate_quantiles(result, op.op)
            line[f"ops.{op.op}.p50_ms"] = _r(c50)
            line[f"ops.{op.op}.p95_ms"] = _r(c95)
            line[f"ops.{op.op}.verdict"] = op.verdict.value
            continue
        p50, p95 = op.comparisons
        line.update(
            {
                f"ops.{op.op}.p50_ms": _r(p50.cand_ms),
                f"ops.{op.op}.p95_ms": _r(p95.cand_ms),
                f"ops.{op.op}.baseline_p50_ms": _r(p50.base_ms),
                f"ops.{op.op}.baseline_p95_ms": _r(p95.base_ms),
                f"ops.{op.op}.ratio_p50": _r(p50.ratio),
                f"ops.{op.op}.ratio_p95": _r(p95.ratio),
                f"ops.{op.op}.verdict": op.verdict.value,
            }
        )
    return line


def sla_history_line(
    doc: dict[str, Any], *, commit: str | None, dirty: bool | None
) -> dict[str, Any]:
    """The absolute SLA gate's history line, from its bench.json (real backends only)."""
    line: dict[str, Any] = {
        "gate": "sla",
        "run_id": doc.get("run_id"),
        "date": doc.get("finished_at"),
        "commit": commit,
        "dirty": dirty,
        "backend": "real",
        "embedder": doc.get("embedder"),
        "verdict": "PASS" if doc.get("gate", {}).get("passed") else "FAIL",
        "size": doc.get("size"),
        "strategy": doc.get("strategy"),
        "strategy_fingerprint": doc.get("strategy_fingerprint"),
        "loadavg_1m": (doc.get("loadavg_end") or [None])[0],
    }
    for op in doc.get("ops", []):
        if op.get("backend") == "null":
            continue
        line[f"ops.{op['op']}.p50_ms"] = op.get("p50_ms")
        line[f"ops.{op['op']}.p95_ms"] = op.get("p95_ms")
        line[f"ops.{op['op']}.verdict"] = op.get("verdict")
        line[f"ops.{op['op']}.slowdown"] = op.get("slowdown", 1.0)  # bench/machine.py
    return line


def append_history(path: Path, line: dict[str, Any]) -> Path:
    """Append one JSON line (locked: concurrent gate runs do not interleave lines)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(line, allow_nan=False) + "\n"
    with path.open("a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            handle.write(text)
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
    return path
