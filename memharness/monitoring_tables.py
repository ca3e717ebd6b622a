"""The monitoring table of a scenario's strategies (`memharness/sim/monitoring.py`'s
figures) and the alerts each raised, for the terminal and for `summary.md`."""

from __future__ import annotations

from typing import Any

from memharness.tables import Column, render, render_markdown

__all__ = ["MONITORING_COLUMNS", "alert_lines", "monitoring_markdown", "monitoring_terminal"]

_NAME = Column("strategy", "strategy", "text")
#: Per strategy: field of `monitoring_row`, header, unit.
MONITORING_COLUMNS = (
    _NAME,
    Column("hit_rate", "hit rate", "%"),
    Column("cleanup_success", "cleanup ok", "%"),
    Column("cleanup_max_ms", "cleanup max", "ms"),
    Column("cleanup_mean_ms", "cleanup mean", "ms"),
    Column("growth", "most written in a day", "text"),
    Column("lifetime", "mean lifetime (ended / open at end)", "text"),
    Column("alerts", "alerts", "count"),
)


def monitoring_row(strategy: dict[str, Any]) -> dict[str, Any] | None:
    """One ok strategy's monitoring figures as a flat row; None without them."""
    figures = strategy.get("monitoring")
    if strategy.get("status") != "ok" or not figures:
        return None
    cleanup = figures.get("cleanup") or {}
    growth = (figures.get("growth") or {}).get("max_per_day") or {}
    lifetime = figures.get("lifetime") or {}
    return {
        "strategy": str(strategy.get("label") or strategy.get("name") or "?"),
        "hit_rate": (figures.get("retrieval") or {}).get("hit_rate"),
        "cleanup_success": cleanup.get("success_rate"),
        "cleanup_max_ms": _ms(cleanup.get("max_s")),
        "cleanup_mean_ms": _ms(cleanup.get("mean_s")),
        "growth": ", ".join(f"{kind} {n}" for kind, n in growth.items()) or "-",
        "lifetime": ", ".join(_lifetime(kind, f) for kind, f in lifetime.items()) or "-",
        "alerts": len(strategy.get("alerts") or []),
    }


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000.0


def _lifetime(kind: str, figures: dict[str, Any]) -> str:
    mean = figures.get("mean_s")
    shown = "-" if mean is None else _duration(mean)
    return f"{kind} {shown} ({figures.get('ended', 0)}/{figures.get('open_at_end', 0)})"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400.0), ("h", 3600.0), ("min", 60.0)):
        if seconds >= size:
            return f"{seconds / size:.1f} {unit}"
    return f"{seconds:.0f} s"


def alert_lines(scenario: dict[str, Any]) -> list[str]:
    """`<strategy>: <message>` for every alert a strategy of the scenario raised."""
    return [
        f"{strategy.get('label') or strategy.get('name')}: {alert['message']}"
        for strategy in scenario.get("strategies") or []
        for alert in strategy.get("alerts") or []
    ]


def _rows(scenario: dict[str, Any]) -> list[dict[str, Any]]:
    rows = (monitoring_row(s) for s in scenario.get("strategies") or [])
    return [row for row in rows if row is not None]


def monitoring_terminal(scenario: dict[str, Any]) -> str:
    """The table and the alerts raised; "" when no strategy has monitoring figures."""
    rows = _rows(scenario)
    if not rows:
        return ""
    text = render(MONITORING_COLUMNS, rows)
    return text + "".join(f"  ALERT {line}\n" for line in alert_lines(scenario))


def monitoring_markdown(scenario: dict[str, Any]) -> list[str]:
    """summary.md's lines: a heading line, the table, the alerts raised; none without
    monitoring figures."""
    rows = _rows(scenario)
    if not rows:
        return []
    out = [
        "Monitoring (hit rate: probes that retrieved a needed fact; cleanup: sweeps and "
        "forget commands; lifetime: ended / open at end):",
        "",
        render_markdown(MONITORING_COLUMNS, rows),
    ]
    alerts = alert_lines(scenario)
    if alerts:
        out += ["Alerts raised:", "", *(f"- ⚠ {line}" for line in alerts), ""]
    return out
