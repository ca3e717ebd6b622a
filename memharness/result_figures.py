"""Figures taken from a strategy's entry of a results document: a metric, the peak
footprint per layer and summed, the line that names a failure, and the recall/footprint
Pareto frontier. The report, the run's terminal tables and verdict, and the capacity and
comparison pages read them the same way from here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def error_line(error: str | None) -> str:
    """The line that names the exception: the first, or the last of a bare traceback."""
    lines = [line.strip() for line in (error or "").splitlines() if line.strip()]
    if not lines:
        return "(no error message recorded)"
    if lines[0].startswith("Traceback (most recent call last)"):
        return lines[-1]
    return lines[0]


def metric(strategy: dict[str, Any], name: str) -> Any:
    """The strategy's metric `name`, or None when it was not measured."""
    return (strategy.get("metrics") or {}).get(name)


def peak(strategy: dict[str, Any], index: str) -> dict[str, int] | None:
    """Per-layer peak `index` ('records' or 'bytes'), or None without a footprint."""
    peaks = (strategy.get("footprint") or {}).get("peak")
    if not peaks:
        return None
    return {layer: int((peaks.get(layer) or {}).get(index) or 0) for layer in peaks}


def peak_total(strategy: dict[str, Any], index: str) -> int | None:
    """The per-layer peaks `index` summed over the layers, or None without a footprint."""
    layers = peak(strategy, index)
    return None if layers is None else sum(layers.values())


def plottable(strategy: dict[str, Any]) -> bool:
    """Whether the strategy completed with metrics (the plots draw only those)."""
    return strategy.get("status") == "ok" and strategy.get("metrics") is not None


def pareto_frontier(points: Sequence[tuple[str, float, float]]) -> list[str]:
    """Labels of the (label, bytes, recall) points no other point dominates.

    A point is dominated when another has <= bytes and >= recall, one of them strictly;
    identical points therefore both stay. Returned by bytes ascending, then recall
    descending, then input order — the order a step line through them takes.
    """
    frontier = [
        (nbytes, -recall, i, label)
        for i, (label, nbytes, recall) in enumerate(points)
        if not any(b <= nbytes and r >= recall and (b < nbytes or r > recall) for _, b, r in points)
    ]
    return [label for *_, label in sorted(frontier)]
