"""Overload: a load run at a multiple of the highest rate that holds the SLAs, and its verdict.

`memharness load --overload` first finds the *sustainable rate*: the highest offered rate
of a rate-step run (`steps.json`, `memharness.load_results.sustainable_rate`) whose step
held every SLA (errors counted, `memharness/verdict/histograms.py`). It then offers
`factor` times that rate, open loop, for the run's duration, and judges what a service
under overload must still do:

- **stays up**: Locust ended by itself and wrote its report (exit code 0, 1 or 3, not a
  crash or a kill);
- **memory bounded**: no sampled process's RSS peak in the second half of the run is more
  than `MAX_RSS_GROWTH` times its peak in the first half. An open-loop backlog is a
  timestamp that falls behind, not a queue of objects, so nothing should grow with it;
- **says so**: the SLA verdict is broken, and the queueing time (`queue@intended`: from
  each turn's intended start to its actual start) is reported;
- **consistent afterwards**: `loadtests/consistency.py` found no problem and could reach
  every server.

All of it is read from the run's result files (`steps.json`, `load_hdr.json`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_RSS_GROWTH", "format_overload", "judge_overload"]

MAX_RSS_GROWTH = 1.25
_LAYERS = ("session", "pii", "embed", "stm", "ltm", "promotion", "turn", "turn@intended")


def judge_overload(
    report: Mapping[str, Any],
    *,
    exit_code: int,
    sustainable: float,
    factor: float,
    duration_s: float,
    source: str,
) -> dict[str, Any]:
    """The overload run's figures and verdicts, from its `load_hdr.json`. Rates are over
    the run's measured time (`run_s`: test start to the users' stop) when it has one,
    else over `duration_s`."""
    measured = report.get("run_s")
    run_s = float(measured) if isinstance(measured, int | float) and measured > 0 else duration_s
    ops = report.get("ops") or {}
    errors = report.get("errors") or {}
    turns = (ops.get("turn") or {}).get("count", 0)
    queue = ops.get("queue@intended") or {}
    processes = report.get("processes") or {}
    consistency = report.get("consistency") or {}
    growth = {role: p["rss_growth_second_half"] for role, p in processes.items()}
    bounded = bool(processes) and all(
        g <= MAX_RSS_GROWTH for role, g in growth.items() if role == "load" or g > 0
    )
    consistent = bool(consistency) and all(part.get("ok") for part in consistency.values())
    stayed_up = exit_code in (0, 1, 3, 4)
    sla_broken = not report.get("passed", True)
    return {
        "sustainable_rate": sustainable,
        "sustainable_from": source,
        "factor": factor,
        "offered_rate": round(sustainable * factor, 4),
        "duration_s": duration_s,
        "measured_s": run_s,
        "intended_turns": round(sustainable * factor * run_s),
        "completed_turns": turns,
        "achieved_rate": round(turns / run_s, 3) if run_s else None,
        "p95_ms": {op: (ops.get(op) or {}).get("p95_ms") for op in _LAYERS if op in ops},
        "queue_ms": {k: queue.get(k) for k in ("p50_ms", "p95_ms", "max_ms")} if queue else None,
        "errors": {op: entry["count"] for op, entry in errors.items()},
        "rss_mb_peak": {role: p["rss_mb_peak"] for role, p in processes.items()},
        "rss_growth_second_half": growth,
        "sla_failed": list(report.get("failed") or []),
        "consistency": {name: part.get("ok") for name, part in consistency.items()},
        "exit_code": exit_code,
        "verdicts": {
            "stayed_up": stayed_up,
            "memory_bounded": bounded,
            "sla_reported_broken": sla_broken,
            "consistent_afterwards": consistent,
        },
        "survived": stayed_up and bounded and consistent,
    }


def format_overload(summary: Mapping[str, Any]) -> str:
    """The overload figures as a few lines for the console."""
    queue = summary.get("queue_ms") or {}
    lines = [
        f"Overload: {summary['factor']:g} x the sustainable rate {summary['sustainable_rate']:g}"
        f"/s ({summary['sustainable_from']}) = {summary['offered_rate']:g} turns/s offered "
        f"for {summary['duration_s']:g} s (measured {summary['measured_s']:.1f} s)",
        f"  turns: {summary['intended_turns']} intended, {summary['completed_turns']} "
        f"completed ({summary['achieved_rate']}/s)",
        "  p95 ms: "
        + ", ".join(
            f"{op} {v:.1f}" for op, v in summary["p95_ms"].items() if isinstance(v, int | float)
        ),
        "  queueing (queue@intended) ms: "
        + ", ".join(f"{k[:-3]} {v:.0f}" for k, v in queue.items() if isinstance(v, int | float)),
        "  errors: " + (", ".join(f"{op} {n}" for op, n in summary["errors"].items()) or "none"),
        "  peak RSS MB: "
        + ", ".join(
            f"{role} {mb:.0f} (x{summary['rss_growth_second_half'][role]:.2f} in the 2nd half)"
            for role, mb in summary["rss_mb_peak"].items()
        ),
        "  consistency: "
        + (
            ", ".join(f"{k} {'ok' if v else 'NOT OK'}" for k, v in summary["consistency"].items())
            or "not checked"
        ),
        "  verdicts: "
        + ", ".join(f"{k} {'yes' if v else 'NO'}" for k, v in summary["verdicts"].items()),
        f"  survived: {'yes' if summary['survived'] else 'NO'}",
    ]
    return "\n".join(lines)
