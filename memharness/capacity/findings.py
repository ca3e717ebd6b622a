"""Warnings of a plan, and how they are grouped: one line per cause, with its range, the
strategies (and layers) it concerns and, for footprint causes, the share of the planned
bytes (RAM + disk) those layers hold."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

__all__ = ["Finding", "drift_findings", "group_findings", "validation_findings"]

_STORES = ("session", "stm", "ltm")


@dataclass(frozen=True)
class Finding:
    """One warning: its cause (what groups it with others), where, and how much."""

    cause: str
    strategy: str
    text: str
    layer: str | None = None
    #: A share (an error, or a half-width when `half_width`), shown as the group's range.
    value: float | None = None
    half_width: bool = False


def validation_findings(strategy: str, validation: dict[str, Any], p_key: str) -> list[Finding]:
    """One finding per held-out figure off its limit, and one per reason it did not hold."""
    found = []
    for h in validation["holdout"]:
        where = f"step {h['held_out_step']} ({h['offered']:g}/s, {h['position']})"
        for figure in ("throughput", p_key):
            j = h[figure]
            if j["holds"] is not False:
                continue
            unit = "_ms" if figure == p_key else ""
            found.append(
                Finding(
                    f"held-out {figure} off by more than ±{j['limit']:.0%}",
                    strategy,
                    f"{strategy}: held-out {where} {figure} measured {j[f'measured{unit}']:.4g}, "
                    f"predicted {j[f'predicted{unit}']:.4g}",
                    value=j["error"],
                )
            )
    if not validation["holds"]:
        for reason in validation["reasons"]:
            cause = reason.split(":")[0]
            found.append(Finding(f"validation: {cause}", strategy, f"{strategy}: {reason}"))
    return found


def drift_findings(strategy: str, steps: Any) -> list[Finding]:
    """A step whose service time rose within it (its last third's median over its first's)."""
    if "drifts" not in steps:
        return []
    return [
        Finding(
            "drift: the system slowed within a step (last third's p50 / first third's)",
            strategy,
            f"{strategy}: step {int(row['step'])} ({row['offered']:g}/s) slowed "
            f"x{row['drift_ratio']:.2f} from its first third to its last",
            value=float(row["drift_ratio"]) - 1.0,
        )
        for _, row in steps[steps["drifts"]].iterrows()
    ]


def _pct_range(values: list[float], half_width: bool) -> str:
    if not values:
        return ""
    low, high = min(values), max(values)
    if half_width:
        texts = [f"±{v:.0%}" if v < 10 else "over ±1,000%" for v in (low, high)]
        return f" {texts[0]}" if texts[0] == texts[1] else f" {texts[0]}…{texts[1]}"
    return f" {low:+.0%}" if math.isclose(low, high) else f" {low:+.0%}…{high:+.0%}"


class Plan(Protocol):
    """What grouping reads of a strategy's plan (`memharness.capacity.report.Plan`)."""

    strategy: str
    findings: list[Finding]
    sizing: Any  # the sizing table: a DataFrame with layer, ram_gb and disk_gb


def group_findings(plans: Sequence[Plan]) -> list[str]:
    """One line per cause: its range, which strategies (and layers), and for footprint
    causes the share of the planned bytes (RAM + disk) those layers hold."""
    everyone = {p.strategy for p in plans}
    by_cause: dict[str, list[Finding]] = {}
    for plan in plans:
        for finding in plan.findings:
            by_cause.setdefault(finding.cause, []).append(finding)
    lines = []
    for cause, found in by_cause.items():
        strategies = sorted({f.strategy for f in found})
        who = (
            "every strategy"
            if set(strategies) == everyone and len(everyone) > 1
            else ", ".join(strategies)
        )
        layers = sorted({f.layer for f in found if f.layer})
        values = [f.value for f in found if f.value is not None and math.isfinite(f.value)]
        line = f"{cause}:{_pct_range(values, found[0].half_width)} for {who}"
        if layers:
            line += f" ({'/'.join(layers)})"
        share = _byte_share(plans, found)
        if share is not None:
            line += f"; these layers are {share:.2%} of the planned bytes"
        lines.append(f"{line} [{len(found)}]")
    return lines


def _byte_share(plans: Sequence[Plan], found: list[Finding]) -> float | None:
    pairs = {(f.strategy, f.layer) for f in found if f.layer in _STORES}
    if not pairs or not found[0].cause.startswith("footprint"):
        return None
    total = concerned = 0.0
    for plan in plans:
        if plan.strategy not in {s for s, _ in pairs}:
            continue
        for row in plan.sizing.itertuples():
            if row.layer in _STORES:
                size = float(row.ram_gb) + float(row.disk_gb)
                total += size
                concerned += size if (plan.strategy, row.layer) in pairs else 0.0
    return concerned / total if total else None
