"""The picture of a time-scaled load: p95 per layer and records per layer, per virtual day.

Drawn from a run's `load_hdr.json` alone (its `virtual_days`), into the run directory:
whether a strategy's latency drifts as its stores grow, and whether they grow.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["plot_virtual_days"]

_OPS = ("session", "stm", "ltm", "recall", "turn")
_LAYERS = ("session", "stm", "ltm")


def plot_virtual_days(report: Mapping[str, Any], path: Path) -> Path | None:
    """Write the plot of `report["virtual_days"]` to `path`; None when it has none."""
    days = report.get("virtual_days") or []
    if not days:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [entry["day"] for entry in days]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6.5), sharex=True)
    for op in _OPS:
        values = [((entry["ops"].get(op) or {}).get("p95_ms")) for entry in days]
        if any(v is not None for v in values):
            top.plot(x, [float("nan") if v is None else v for v in values], marker="o", label=op)
    top.set_ylabel("p95 (ms)")
    top.set_yscale("log")
    top.legend(loc="upper left", fontsize="small", ncol=len(_OPS))
    top.grid(alpha=0.3)
    for layer in _LAYERS:
        values = [(entry.get("records") or {}).get(layer) for entry in days]
        if any(v is not None for v in values):
            bottom.plot(
                x, [float("nan") if v is None else v for v in values], marker="o", label=layer
            )
    bottom.set_ylabel("live records")
    bottom.set_xlabel("virtual day of the load")
    bottom.legend(loc="upper left", fontsize="small")
    bottom.grid(alpha=0.3)
    scale = report.get("time_scale")
    fig.suptitle(
        f"{report.get('strategy') or 'store defaults'}: p95 and records per virtual day"
        + (f" (time scale {scale:g}x)" if isinstance(scale, int | float) else "")
    )
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
