"""Alert thresholds a strategy sets on its monitoring figures, and the alerts they raise.

Seed 002 asks to watch growth per memory type, cleanup success and duration, and the
retrieval hit rate, with thresholds that alert. A strategy's `alerts` block holds them:

    alerts:
      max_growth_per_day: {conversation: 1000, episode: 500}
      min_cleanup_success: 0.99
      max_cleanup_s: 5
      min_hit_rate: 0.5

`raised` compares a run's monitoring figures (`memharness.sim.monitoring`, the same keys
the reference's counters expose) with them. Data and comparisons only: no store here.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from reference.models import MemoryType
from reference.policy.rules import Block, Seconds


class AlertRule(Block):
    """Thresholds on the monitoring figures; an omitted one never alerts.

    - `max_growth_per_day`: per memory type, the most memories of that type (STM records
      and LTM values of the category of the same name) written in one virtual day;
    - `min_cleanup_success`: the least share of cleanup operations (sweeps, forget
      commands) that completed and did what they had to;
    - `max_cleanup_s`: the longest wall time of one cleanup operation;
    - `min_hit_rate`: the least share of probes that retrieved a needed fact.
    """

    max_growth_per_day: dict[MemoryType, Annotated[int, Field(ge=0)]] = Field(default_factory=dict)
    min_cleanup_success: float | None = Field(None, ge=0, le=1)
    max_cleanup_s: Seconds | None = None
    min_hit_rate: float | None = Field(None, ge=0, le=1)


def raised(rule: AlertRule | None, monitoring: dict[str, Any] | None) -> list[dict[str, Any]]:
    """The alerts `monitoring` raises under `rule`, in a fixed order: each names the
    threshold (`alert`, its dotted field), the `limit`, the `value` seen and a `message`.
    A figure the run has no value for (no probe needed a fact, no cleanup ran) raises
    nothing."""
    if rule is None or not monitoring:
        return []
    found: list[dict[str, Any]] = []

    def alert(name: str, limit: float, value: float, message: str) -> None:
        found.append({"alert": name, "limit": limit, "value": value, "message": message})

    growth = (monitoring.get("growth") or {}).get("max_per_day") or {}
    for kind, limit in sorted(rule.max_growth_per_day.items()):
        worst = growth.get(kind.value, 0)
        if worst > limit:
            alert(
                f"max_growth_per_day.{kind.value}",
                limit,
                worst,
                f"{worst} {kind.value} memories written in one day (limit {limit})",
            )
    cleanup = monitoring.get("cleanup") or {}
    success = cleanup.get("success_rate")
    least = rule.min_cleanup_success
    if least is not None and success is not None and success < least:
        alert(
            "min_cleanup_success",
            least,
            success,
            f"cleanup success {success:.2%} (at least {least:.2%})",
        )
    longest = cleanup.get("max_s")
    if rule.max_cleanup_s is not None and longest is not None and longest > rule.max_cleanup_s:
        alert(
            "max_cleanup_s",
            rule.max_cleanup_s,
            longest,
            f"a cleanup took {longest:.3f} s (limit {rule.max_cleanup_s:g} s)",
        )
    hit_rate = (monitoring.get("retrieval") or {}).get("hit_rate")
    if rule.min_hit_rate is not None and hit_rate is not None and hit_rate < rule.min_hit_rate:
        alert(
            "min_hit_rate",
            rule.min_hit_rate,
            hit_rate,
            f"retrieval hit rate {hit_rate:.2%} (at least {rule.min_hit_rate:.2%})",
        )
    return found


__all__ = ["AlertRule", "raised"]
