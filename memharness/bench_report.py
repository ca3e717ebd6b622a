"""What `memharness bench` prints from the suites' `bench.json`: the run, the machine it
ran on against the reference, one table per backend (p50, p95, p99, the SLA, headroom,
the p95's interval, the slowdown, the verdict), and the gate's verdict."""

from __future__ import annotations

import statistics
from typing import Any


def format_report(document: dict[str, Any]) -> list[str]:
    """The per-operation table, the null backend's overhead, and the gate's verdict."""
    ops = document["ops"]
    real = [op for op in ops if op["backend"] != "null"]
    null = [op for op in ops if op["backend"] == "null"]
    seeding = ", ".join(f"{k} {v:.1f} s" for k, v in document.get("seeding_s", {}).items())
    lines = [
        f"backends: {document.get('backends', {})}",
        f"sizes: {document.get('sizes', {})}",
        f"strategy: {document.get('strategy')} (fingerprint "
        f"{document.get('strategy_fingerprint')})",
        f"embedder: {document.get('embedder')} (torch threads: "
        f"{document.get('torch_threads') or 'default'})",
        f"setup and seeding: {seeding}",
        f"load average (1/5/15 min) at start {document.get('loadavg_start')}, "
        f"at end {document.get('loadavg_end')}, on {document.get('cpu_count')} cpus",
        _machine(document),
        "",
    ]
    lines += _table(real, "operation (real backends)")
    lines += ["", *_table(null, "operation (null backend: harness overhead)")]
    gate = document["gate"]
    failed = [op for op in ops if op["verdict"] in ("FAIL", "INSUFFICIENT")]
    lines.append("")
    if gate["passed"]:
        lines.append(f"SLA gate PASSED ({len(ops)} operations; {_rule(gate)})")
    else:
        lines.append(f"SLA gate FAILED ({len(failed)} of {len(ops)} operations; {_rule(gate)})")
        lines += [f"  {op['message']}" for op in failed]
    return lines


def _machine(document: dict[str, Any]) -> str:
    """The machine probe's median over the run against the reference (bench/machine.py)."""
    probes = [p for op in document["ops"] for p in op.get("probe_ms") or []]
    if not probes:
        return "machine probe: none taken"
    reference = document.get("machine_reference")
    if reference is None:
        against = "no machine reference (bench/baseline/machine.json): judged as measured"
    elif not reference.get("same_key", True):
        against = (
            "the machine reference was recorded under another key (libraries, embedder, "
            "threads or Chroma): judged as measured"
        )
    else:
        against = (
            f"reference {reference['probe_p50_ms']:.2f} ms (recorded {reference['recorded_at']})"
        )
    return f"machine probe: p50 {statistics.median(probes):.2f} ms over {len(probes)}; {against}"


def _rule(gate: dict[str, Any]) -> str:
    return (
        f"fail when the p95's {gate.get('confidence', 0.95):.0%} bootstrap CI lower bound "
        f"> SLA, n >= {gate.get('min_samples', '?')}"
    )


def _table(rows: list[dict[str, Any]], title: str) -> list[str]:
    head = (
        f"{title:46}{'n':>6}{'p50':>9}{'p95':>9}{'p99':>9}{'SLA':>6}"
        f"{'headroom':>10}{'p95 95% CI':>18}{'slowdown':>9}  verdict"
    )
    lines = [head, "-" * len(head)]
    for row in rows:
        sla = "-" if row["sla_ms"] is None else f"{row['sla_ms']:g}"
        room = "-" if row["headroom"] is None else f"{row['headroom']:.1f}x"
        low, high = row["p95_ci_ms"]
        ci = "-" if low is None else f"{low:.2f}-{high:.2f}"
        slow = f"{row.get('slowdown', 1.0):.2f}x"
        lines.append(
            f"{row['op']:46}{row['n']:>6}{_ms(row['p50_ms'])}{_ms(row['p95_ms'])}"
            f"{_ms(row['p99_ms'])}{sla:>6}{room:>10}{ci:>18}{slow:>9}  {row['verdict']}"
        )
    lines.append(
        "(milliseconds as measured; headroom and verdict at the reference machine's speed: "
        "the measured figures over the slowdown, bench/machine.py)"
    )
    return lines


def _ms(value: float | None) -> str:
    return f"{'-':>9}" if value is None else f"{value:>9.3f}"
