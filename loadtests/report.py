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

from loadtests.hdr import SIG_FIGS, OpHistograms, OpSummary
from loadtests.sla import QUEUE, TURN_INTENDED, TURN_QUEUED, SlaVerdict

__all__ = ["OP_ORDER", "build_report", "format_table", "ordered_ops", "write_report"]

#: Operations in the order of a turn; anything else follows, sorted.
OP_ORDER = (
    "session",
    "pii",
    "embed",
    "stm",
    "ltm",
    "promotion",
    "turn",
    QUEUE,
    TURN_QUEUED,
    TURN_INTENDED,
)


_CSV_FIELDS: tuple[str, ...] = (
    *("op", "count", "min_ms", "mean_ms", "p50_ms", "p90_ms", "p95_ms", "p99_ms"),
    *("p999_ms", "max_ms"),
)


def ordered_ops(ops: Sequence[str]) -> list[str]:
    known = [op for op in OP_ORDER if op in ops]
    return known + sorted(op for op in ops if op not in OP_ORDER)


def format_table(summaries: Sequence[OpSummary], verdicts: Sequence[SlaVerdict]) -> str:
    """A fixed-width table: count, p50/p95/p99/p99.9/max in ms, and the SLA verdict."""
    by_op = {verdict.measured_op: verdict for verdict in verdicts}
    head = (
        f"{'operation':<16}{'count':>8}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}"
        f"{'p99.9 ms':>10}{'max ms':>10}  SLA"
    )
    lines = [head, "-" * (len(head) + 24)]
    for row in summaries:
        verdict = by_op.get(row.op)
        sla = (
            f"p{verdict.sla.percentile:g}<{verdict.sla.limit_ms:g}ms {verdict.status}"
            if verdict
            else ""
        )
        lines.append(
            f"{row.op:<16}{row.count:>8}{_f(row.p50_ms)}{_f(row.p95_ms)}{_f(row.p99_ms)}"
            f"{_f(row.p999_ms)}{_f(row.max_ms)}  {sla}".rstrip()
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
) -> dict[str, object]:
    """Everything `load_hdr.json` holds."""
    ops = ordered_ops(hists.ops)
    return {
        **meta,
        "hdr": {"unit": "microseconds", "significant_figures": SIG_FIGS},
        "ops": {op: _clean(hists.summary(op).as_dict()) for op in ops},
        "slas": [verdict.as_dict() for verdict in verdicts],
        "passed": not failed,
        "failed": [verdict.message for verdict in failed],
        "histograms": hists.encode(),
    }


def write_report(report: Mapping[str, Any], run_dir: Path) -> Path:
    """load_hdr.json, and load_hdr.csv with one row per operation; returns the JSON path."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "load_hdr.json"
    path.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    slas = {sla["measured_op"]: sla for sla in report["slas"]}
    with (run_dir / "load_hdr.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow([*_CSV_FIELDS, "sla", "sla_status"])
        for op, row in report["ops"].items():
            sla = slas.get(op, {})
            writer.writerow(
                [*(row[field] for field in _CSV_FIELDS), sla.get("sla", ""), sla.get("status", "")]
            )
    return path


def _clean(data: dict[str, object]) -> dict[str, object]:
    """NaN is not JSON: an empty histogram's figures become null."""
    return {
        key: None if isinstance(value, float) and math.isnan(value) else value
        for key, value in data.items()
    }
