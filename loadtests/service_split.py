"""Service time against network time, for a load driven over HTTP (`--target`).

Each call of an HTTP run is recorded three times (`loadtests/http_user.py`): its round
trip under the operation's name, the service's own time (`Server-Timing: app;dur`) as
`<op>.service`, and round trip - service as `<op>.network`. This module reads those
histograms into `load_hdr.json`'s `service_split` and the report's table: p50/p95/p99 of
each, per operation, and each SLA's verdict on the round trip with the service's time
beside it (what a caller sees, and how much of it the service itself spent).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from loadtests.hdr import OpHistograms
from memharness.verdict.histograms import SlaVerdict

__all__ = ["PARTS", "SPLIT_OPS", "format_split", "split_document"]

#: The operations split (probes are `recall`, business events `event`).
SPLIT_OPS = ("turn", "recall", "event")
#: What each part is recorded as, by the operation's name.
PARTS = {"round_trip": "{op}", "service": "{op}.service", "network": "{op}.network"}


def split_document(hists: OpHistograms) -> dict[str, Any]:
    """Per operation called: count and p50/p95/p99 (ms) of the round trip, the service
    and the network; a part the service did not report (no Server-Timing) is None."""
    out: dict[str, Any] = {}
    for op in SPLIT_OPS:
        if op not in hists:
            continue
        entry: dict[str, Any] = {}
        for part, pattern in PARTS.items():
            name = pattern.format(op=op)
            if name not in hists:
                entry[part] = None
                continue
            summary = hists.summary(name)
            entry[part] = {
                "count": summary.count,
                "p50_ms": _round(summary.p50_ms),
                "p95_ms": _round(summary.p95_ms),
                "p99_ms": _round(summary.p99_ms),
            }
        out[op] = entry
    return out


def format_split(split: Mapping[str, Any], verdicts: Sequence[SlaVerdict], url: str) -> list[str]:
    """The table of round trip / service / network percentiles, then one line per SLA on
    a split operation: its verdict on the round trip, the service's own percentile beside."""
    lines = [
        f"Service time vs network time ({url}; ms; network = round trip - Server-Timing app):",
        f"{'operation':<10}{'part':<12}{'count':>8}{'p50':>10}{'p95':>10}{'p99':>10}",
    ]
    for op, entry in split.items():
        for part in PARTS:
            figures = entry.get(part)
            if figures is None:
                lines.append(f"{op:<10}{part:<12}{'-':>8}  (no Server-Timing from the service)")
                continue
            lines.append(
                f"{op:<10}{part:<12}{figures['count']:>8}{_ms(figures['p50_ms'])}"
                f"{_ms(figures['p95_ms'])}{_ms(figures['p99_ms'])}"
            )
    if "turn" in split and "recall" not in split:
        lines.append(
            "recall    (no probes: the built-in conversations only say; --scenario or "
            "--domain play probes)"
        )
    for verdict in verdicts:
        entry = split.get(verdict.sla.op)
        if entry is None:
            continue
        key = f"p{verdict.sla.percentile:g}"
        service = _percentile_of(entry.get("service"), verdict.sla.percentile)
        network = _percentile_of(entry.get("network"), verdict.sla.percentile)
        beside = (
            f"the service's own {key} {service:.1f} ms, the network's {network:.1f} ms"
            if service is not None and network is not None
            else "the service reported no Server-Timing"
        )
        word = {"ok": "met", "marginal": "marginal", "broken": "BROKEN"}.get(
            verdict.status, verdict.status
        )
        lines.append(
            f"  SLA {verdict.sla}: {word} on the round trip "
            f"({verdict.measured_op} {key} {_value(verdict.value_ms)} ms); {beside}"
        )
    return lines


def _percentile_of(figures: Mapping[str, Any] | None, percentile: float) -> float | None:
    """The stored percentile nearest the SLA's (p50, p95 or p99)."""
    if not figures:
        return None
    key = min((50, 95, 99), key=lambda p: abs(p - percentile))
    value = figures.get(f"p{key}_ms")
    return float(value) if isinstance(value, int | float) else None


def _round(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


def _ms(value: Any) -> str:
    return f"{value:>10.2f}" if isinstance(value, int | float) else f"{'-':>10}"


def _value(value: float) -> str:
    return "-" if math.isnan(value) or math.isinf(value) else f"{value:.1f}"
