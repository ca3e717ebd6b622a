"""The end-of-run report: an HDR table on stdout, `load_hdr.json` and `load_hdr.csv`.

The JSON keeps the encoded histograms beside the percentiles, so runs can be merged or
re-cut later from the file alone (reports read result files, never a live system).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from loadtests.errors import ErrorLog
from loadtests.hdr import SIG_FIGS, OpHistograms, OpSummary
from memharness.verdict.histograms import (
    QUEUE,
    QUEUE_INTENDED,
    TURN_INTENDED,
    TURN_QUEUED,
    SlaVerdict,
)

__all__ = [
    "OP_ORDER",
    "build_report",
    "format_consistency",
    "format_errors",
    "format_processes",
    "format_table",
    "ordered_ops",
    "write_report",
]

#: Operations in the order of a turn; anything else follows, sorted.
OP_ORDER = (
    "session",
    "pii",
    "embed",
    "stm",
    "ltm",
    "promotion",
    "turn",
    "turn.service",
    "turn.network",
    QUEUE,
    TURN_QUEUED,
    QUEUE_INTENDED,
    TURN_INTENDED,
)


_CSV_FIELDS: tuple[str, ...] = (
    *("op", "count", "min_ms", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms"),
    *("p999_ms", "max_ms"),
)


#: min, mean, p50, p90, p95, p99, p99.9 and max of an operation with no success.
_NO_FIGURES: tuple[float, float, float, float, float, float, float, float] = (math.nan,) * 8


def ordered_ops(ops: Sequence[str]) -> list[str]:
    known = [op for op in OP_ORDER if op in ops]
    return known + sorted(op for op in ops if op not in OP_ORDER)


def format_table(
    summaries: Sequence[OpSummary],
    verdicts: Sequence[SlaVerdict],
    errors: Mapping[str, int] | None = None,
) -> str:
    """A fixed-width table: successes, errors, p50/p95/p99/p99.9/max in ms (of the
    successes), and the SLA verdict (which counts the errors)."""
    by_op = {verdict.measured_op: verdict for verdict in verdicts}
    fails = errors or {}
    head = (
        f"{'operation':<16}{'count':>8}{'errors':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}"
        f"{'p99.9 ms':>10}{'max ms':>10}  SLA"
    )
    lines = [head, "-" * (len(head) + 24)]
    known = {row.op for row in summaries}
    rows = list(summaries) + [
        OpSummary(op, 0, *_NO_FIGURES, None) for op in fails if op not in known
    ]
    for row in rows:
        verdict = by_op.get(row.op)
        sla = (
            f"p{verdict.sla.percentile:g}<{verdict.sla.limit_ms:g}ms {verdict.status}"
            if verdict
            else ""
        )
        lines.append(
            f"{row.op:<16}{row.count:>8}{fails.get(row.op, 0):>8}"
            f"{_f(row.p50_ms)}{_f(row.p95_ms)}{_f(row.p99_ms)}{_f(row.p999_ms)}"
            f"{_f(row.max_ms)}  {sla}".rstrip()
        )
    return "\n".join(lines)


def _f(value: float) -> str:
    return f"{'-':>10}" if math.isnan(value) else f"{value:>10.3f}"


def build_report(
    hists: OpHistograms,
    verdicts: Sequence[SlaVerdict],
    *,
    failed: Sequence[SlaVerdict],
    meta: Mapping[str, object],
    errors: ErrorLog | None = None,
) -> dict[str, object]:
    """Everything `load_hdr.json` holds. `ops` are successes only; `errors` the failures
    per operation (count, rate among attempts, first messages, time to error)."""
    ops = ordered_ops(hists.ops)
    log = errors or ErrorLog()
    successes = {op: hists.histogram(op).get_total_count() for op in ops}
    by_op = log.report(successes)
    return {
        **meta,
        "hdr": {"unit": "microseconds", "significant_figures": SIG_FIGS},
        "ops": {op: _clean(hists.summary(op).as_dict()) for op in ops},
        "errors": {op: by_op[op] for op in ordered_ops(log.ops)},
        "error_total": log.total(),
        "slas": [verdict.as_dict() for verdict in verdicts],
        "passed": not failed,
        "failed": [verdict.message for verdict in failed],
        "histograms": hists.encode(),
        "error_histograms": log.time_to_error.encode(),
    }


def write_report(report: Mapping[str, Any], run_dir: Path) -> Path:
    """load_hdr.json, and load_hdr.csv with one row per operation; returns the JSON path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "load_hdr.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    slas = {sla["measured_op"]: sla for sla in report["slas"]}
    with (run_dir / "load_hdr.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        errors = report.get("errors") or {}
        writer.writerow([*_CSV_FIELDS, "errors", "sla", "sla_status"])
        for op in [*report["ops"], *(op for op in errors if op not in report["ops"])]:
            row = report["ops"].get(op) or {"op": op, "count": 0}
            sla = slas.get(op, {})
            writer.writerow(
                [
                    *(row.get(field) for field in _CSV_FIELDS),
                    (errors.get(op) or {}).get("count", 0),
                    sla.get("sla", ""),
                    sla.get("status", ""),
                ]
            )
    return path


def _clean(data: dict[str, object]) -> dict[str, object]:
    """NaN is not JSON: an empty histogram's figures become null."""
    return {
        key: None if isinstance(value, float) and math.isnan(value) else value
        for key, value in data.items()
    }


def format_errors(report: Mapping[str, Any]) -> list[str]:
    """One line per operation with errors (count, rate, time to error), then its first
    messages; nothing when no operation failed."""
    lines = []
    for op, entry in (report.get("errors") or {}).items():
        tte = entry.get("time_to_error_ms") or {}
        rate = entry.get("rate")
        lines.append(
            f"errors: {op} {entry['count']} of {entry['attempts']} "
            f"({100.0 * rate if rate is not None else math.nan:.2f}%), time to error p50 "
            f"{tte.get('p50', math.nan):.1f} ms, max {tte.get('max', math.nan):.1f} ms"
        )
        lines += [f"  {m['count']} x {m['message']}" for m in entry["messages"]]
    return lines


def format_processes(processes: Any) -> list[str]:
    """RSS per process over the run: first, peak and last sample, and the samples taken."""
    if not processes:
        return []
    return [
        f"rss {role}: first {p['rss_mb_first']:.0f} MB, peak {p['rss_mb_peak']:.0f} MB, "
        f"last {p['rss_mb_last']:.0f} MB ({p['samples']} samples); cpu {p['cpu_s']:.1f} s"
        for role, p in processes.items()
    ]


def format_consistency(consistency: Mapping[str, Any] | None) -> list[str]:
    """The consistency checks after the run: one line each, then any problem or error."""
    lines = []
    for name, part in (consistency or {}).items():
        checked = ", ".join(f"{n} {what}" for what, n in part["checked"].items())
        word = "ok" if part["ok"] else ("INCONSISTENT" if part["problem_count"] else "NOT CHECKED")
        lines.append(f"{name}: {word} ({checked})")
        lines += [f"  {text}" for text in [*part["problems"], *part["errors"]]]
    return lines
