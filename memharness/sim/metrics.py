"""From shard tallies to a strategy's figures (DESIGN.md, Quality metrics).

Per probe, on the top-k of each layer (the context a turn assembles):
recall@k is the share of needed facts retrieved, and recall@k per layer the share found
in that layer's top-k (STM and LTM; a fact both return counts in each; the session layer
holds message ids, not text, and a probe does not search it); stale@k the share of
probes that retrieved a superseded or invalidated fact. A needed fact not retrieved is
missed (still stored where the probe looks), over-forgotten (it had been stored where
the probe could find it, LTM or the probe's own session's STM, and no longer is),
unreachable (stored only in other sessions' STM, which a probe never sees) or unstored
(never stored: the intent filter or promotion passed it by); with recall, those five
shares add up to 1 (`probes.py` has the rules). Leakage counts erased facts that came
back, retrieved by a probe or still stored after their forget command (must be 0).
The ceiling (`ceiling.py`) is the recall@k of a dense search over every said turn, the
same under every strategy.
PII: the items are the statements whose personal values the scenario marks (`pii:`),
whatever the memory's detector found, and exactly those values are followed; a statement
marked `sensitive: true` with no values is not an item but `pii_unmeasured` (nothing to
follow: the detector is never asked). `pii_detector` scores the memory's detector against
the marks, per kind and over `all` (`pii_scoring.py`): recall per marked kind (a value
is found when detected spans cover it, whatever kind they name), precision per detected
kind on users marked `pii_complete` only (a detection overlapping no marked value is a
false positive); `pii_detector_recall` and `_precision` are its `all` row.
`pii_raw_max_s` is the longest time from such a statement until no layer showed its
values in plaintext (an STM or LTM text, an LTM value as stored): 0 when the memory
masked them on the way in. It is None when an item was still in plaintext at the end of
the run (`pii_raw_at_end` of them): its time has no bound the run can give.
`pii_sealed_max_s` is, over the items a layer held sealed (the encrypted original in an
LTM value, recoverable with the key: `pii_sealed_items` of them), the longest time from
the statement until no layer did (anonymised or deleted); None when none was sealed (a
strategy that does not seal) or one was still sealed at the end (`pii_sealed_at_end`).
Both to the resolution of the sweep ticks.
Monitoring (growth per memory type per day, lifetime per type, cleanup success and
duration, retrieval hit rate) is `monitoring.py`'s, under the result's `monitoring` key.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hdrh.histogram import HdrHistogram

from memharness.sim.monitoring import figures as monitoring_figures
from memharness.sim.pii_scoring import detector_figures
from memharness.sim.tally import LATENCY_OPS, LAYERS, ShardResult, new_histogram

#: The counts `merge` adds up over shards.
TALLIES = (
    "turns", "probes", "events", "needed", "retrieved", "retrieved_stm", "retrieved_ltm",
    "missed", "over_forgotten", "unreachable", "unstored", "stale_probes", "leaked",
    "ceiling_needed", "ceiling_found", "pii_items", "pii_raw_at_end", "pii_sealed_items",
    "pii_sealed_at_end", "pii_unmeasured",
)  # fmt: skip


def _share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def _bounded_max(times: list[float], *, open_items: int) -> float | None:
    """The longest of `times`; None without any, or when some item's time did not end
    within the run (then no longest time is known)."""
    return max(times) if times and not open_items else None


def merge(shards: Sequence[ShardResult]) -> dict[str, Any]:
    """`metrics`, `footprint`, `latency_ms`, the per-probe records (`probes`, in the
    scenario's user order) and the `ceiling` of one strategy over all its shards."""
    total = ShardResult()
    for s in shards:
        for name in TALLIES:
            setattr(total, name, getattr(total, name) + getattr(s, name))
        total.leaks.extend(s.leaks)
        total.probe_records.extend(s.probe_records)
        total.pii_raw_s.extend(s.pii_raw_s)
        total.pii_sealed_s.extend(s.pii_sealed_s)
        total.pii_detector.update(s.pii_detector)
        total.unsupported.update(s.unsupported)
    # Shards run side by side: the strategy took as long as its slowest shard.
    slowest = max(shards, key=lambda s: s.wall_s, default=ShardResult())
    wall = slowest.wall_s
    detector = detector_figures(total.pii_detector)
    metrics = {
        "recall_at_k": _share(total.retrieved, total.needed),
        "recall_stm_at_k": _share(total.retrieved_stm, total.needed),
        "recall_ltm_at_k": _share(total.retrieved_ltm, total.needed),
        "stale_at_k": _share(total.stale_probes, total.probes),
        "missed_rate": _share(total.missed, total.needed),
        "over_forget_rate": _share(total.over_forgotten, total.needed),
        "unreachable_rate": _share(total.unreachable, total.needed),
        "unstored_rate": _share(total.unstored, total.needed),
        "leakage": total.leaked,
        "pii_items": total.pii_items,
        "pii_raw_max_s": _bounded_max(total.pii_raw_s, open_items=total.pii_raw_at_end),
        "pii_raw_at_end": total.pii_raw_at_end,
        "pii_sealed_items": total.pii_sealed_items,
        "pii_sealed_max_s": _bounded_max(total.pii_sealed_s, open_items=total.pii_sealed_at_end),
        "pii_sealed_at_end": total.pii_sealed_at_end,
        "pii_unmeasured": total.pii_unmeasured,
        "pii_detector": detector,
        "pii_detector_recall": detector.get("all", {}).get("recall"),
        "pii_detector_precision": detector.get("all", {}).get("precision"),
        "turns": total.turns,
        "probes": total.probes,
        "probes_recorded": len(total.probe_records),
        "events": total.events,
        "needed": total.needed,
        "wall_s": round(wall, 4),
        # The slowest shard's time inside the reference memory (the rest is the harness).
        "inside_s": round(slowest.inside_s, 4),
        "peak_rss_mb_by_shard": [round(s.peak_rss_mb, 1) for s in shards],
        "turns_per_s": round(total.turns / wall, 1) if wall > 0 else None,
        # A system under test: the operations it could not do (`peer_replay.py`).
        "unsupported": dict(sorted(total.unsupported.items())),
    }
    return {
        "metrics": metrics,
        "leaks": total.leaks[:20],
        "probes": sorted(total.probe_records, key=lambda r: (r["user_index"], r["step"])),
        "ceiling": {
            "recall_at_k": _share(total.ceiling_found, total.ceiling_needed),
            "needed": total.ceiling_needed,
            "found": total.ceiling_found,
        },
        "footprint": footprint(shards),
        "latency_ms": latency([s.histograms for s in shards]),
        "monitoring": monitoring_figures([s.monitor for s in shards]),
        "capabilities": next((s.capabilities for s in shards if s.capabilities), None),
    }


def footprint(shards: Sequence[ShardResult]) -> dict[str, Any]:
    """Per layer [records, bytes] summed over shards at each sample: the `series` (daily
    samples and the last step's moment), each layer's `peak` over those and the samples
    taken at probe moments (a memory that fills and empties within a day is seen), and
    the `final` sample of the series."""
    series = _summed(shards, "footprint")
    sampled = [*series, *_summed(shards, "peak_footprint")]

    def layer_view(pick: Any) -> dict[str, dict[str, int]]:
        return {layer: {"records": pick(layer, 0), "bytes": pick(layer, 1)} for layer in LAYERS}

    peak = layer_view(lambda layer, i: max((p[layer][i] for p in sampled), default=0))
    final = layer_view(lambda layer, i: series[-1][layer][i] if series else 0)
    return {"peak": peak, "final": final, "series": series}


def _summed(shards: Sequence[ShardResult], field: str) -> list[dict[str, Any]]:
    """The samples in `field` of the shards, summed per time, in time order."""
    taken = [getattr(s, field) for s in shards]
    series = []
    for t in sorted({t for samples in taken for t in samples}):
        point: dict[str, Any] = {"at": t}
        for layer in LAYERS:
            pairs = [samples.get(t, {}).get(layer, (0, 0)) for samples in taken]
            point[layer] = [sum(p[0] for p in pairs), sum(p[1] for p in pairs)]
        series.append(point)
    return series


def latency(encoded: Sequence[dict[str, str]]) -> dict[str, dict[str, float | int]]:
    """p50/p95/p99 (ms) and count per operation, from the shards' HDR histograms."""
    out: dict[str, dict[str, float | int]] = {}
    for op in LATENCY_OPS:
        merged = new_histogram()
        for histograms in encoded:
            if op in histograms:
                merged.add(HdrHistogram.decode(histograms[op]))
        n = merged.get_total_count()
        if n == 0:
            continue
        out[op] = {
            "p50": merged.get_value_at_percentile(50) / 1000.0,
            "p95": merged.get_value_at_percentile(95) / 1000.0,
            "p99": merged.get_value_at_percentile(99) / 1000.0,
            "n": n,
        }
    return out
