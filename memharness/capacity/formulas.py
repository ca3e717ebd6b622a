"""Memory and disk per layer: the simulator's footprint scaled by Little's law, plus the
engines' own overheads from their published formulas (CAPACITY.md).

The simulator counts payload bytes only (`reference.footprint`: text, JSON, float32
vector). A store holds more: keys and expiry in Redis, the HNSW graph in Chroma
(hnswlib) and in pgvector, page and tuple headers in PostgreSQL. Those are added here,
each constant cited; the payload part is measured, the overheads are assumed.
"""

from __future__ import annotations

from typing import Any

from memharness.capacity.inputs import SimRun
from memharness.capacity.target import LAYERS, Target

__all__ = ["DIM", "HNSW_M", "footprint", "hnswlib_bytes", "pgvector_hnsw_bytes", "redis_bytes"]

GB = 1e9
#: all-MiniLM-L6-v2's dimensions (the reference's default embedder, and the hashing one's).
DIM = 384
#: HNSW M: Chroma's default `hnsw:M` and pgvector's default `m` are both 16.
HNSW_M = 16
#: Redis: ~50 B of overhead per key, ~30 B more with a TTL (CAPACITY.md; redis.io memory
#: optimisation notes). A session is a hash and a window list, both with a TTL, plus a
#: member of the expiry index (a sorted set: ~64 B a member with its skiplist node).
REDIS_KEYS_PER_SESSION, REDIS_KEY_B, REDIS_TTL_B, REDIS_ZSET_MEMBER_B = 2, 50, 30, 64
#: PostgreSQL heap: 23 B tuple header + 4 B line pointer, ~8 B alignment; 8 KiB pages.
PG_TUPLE_OVERHEAD_B, PG_PAGE_B, PG_PAGE_USABLE_B = 35, 8192, 8192 - 24
#: On-disk size of an hnswlib index over its RAM figure: 2–4× (CAPACITY.md); the middle.
HNSWLIB_DISK_FACTOR = 3.0


def redis_bytes(sessions: float, payload: float) -> float:
    """Redis memory for `sessions` sessions holding `payload` bytes of state."""
    per = REDIS_KEYS_PER_SESSION * (REDIS_KEY_B + REDIS_TTL_B) + REDIS_ZSET_MEMBER_B
    return payload + sessions * per


def hnswlib_bytes(n: float, dim: int = DIM, m: int = HNSW_M) -> float:
    """hnswlib's RAM at level 0: N·(4d + 8M + ~12) bytes (hnswlib's README, via Chroma)."""
    return n * (4 * dim + 8 * m + 12)


def pgvector_hnsw_bytes(n: float, dim: int = DIM, m: int = HNSW_M) -> float:
    """pgvector HNSW index size: per element an element tuple ≈ 72 + (4d + 8) B and a
    neighbour tuple ≈ 4 + 6·m·(level + 2) B (pgvector issues #735, #745), levels drawn
    with P(level ≥ l) = m^−l (mean 1/(m−1)); on 8 KiB pages."""
    mean_level = 1.0 / (m - 1)
    per = 72 + (4 * dim + 8) + 4 + 6 * m * (mean_level + 2)
    return n * per * PG_PAGE_B / PG_PAGE_USABLE_B


def _strategy_rows(sim: SimRun, strategy: str) -> dict[str, dict[str, Any]]:
    rows = sim.layers[sim.layers["strategy"] == strategy]
    if rows.empty:
        known = ", ".join(sorted(sim.layers["strategy"].unique()))
        raise ValueError(f"strategy {strategy!r} is not in sim run {sim.run_id} (it has: {known})")
    # Several scenarios: pool them (byte-seconds and turns add up).
    out = {}
    for layer, group in rows.groupby("layer"):
        turns = float(group["turns"].sum())
        out[str(layer)] = {
            "byte_s_per_turn": float((group["byte_s_per_turn"] * group["turns"]).sum() / turns),
            "record_s_per_turn": float((group["record_s_per_turn"] * group["turns"]).sum() / turns),
            "span_days": float(group["span_s"].max() / 86_400.0),
        }
    return out


def footprint(
    target: Target, sim: SimRun | None, *, lam_peak: float, lam_mean: float
) -> dict[str, dict[str, Any]]:
    """Per layer: records, payload, RAM and disk (GB) at the target, and how they were had.

    Session and STM records live minutes to hours, so they follow the peak rate; LTM facts
    live for days and more, so they follow the mean rate. The embedder and the app tier
    hold no records (their memory is per instance: the process's RSS, in the plan).
    """
    out: dict[str, dict[str, Any]] = {
        layer: {
            "records": 0.0,
            "payload_gb": 0.0,
            "ram_gb": 0.0,
            "disk_gb": 0.0,
            "memory_source": "",
        }
        for layer in LAYERS
    }
    if sim is None:
        for layer in ("session", "stm", "ltm"):
            out[layer]["memory_source"] = "no simulator run: memory not planned"
        return out
    per = _strategy_rows(sim, target.strategy)
    for layer, lam in (("session", lam_peak), ("stm", lam_peak), ("ltm", lam_mean)):
        figures = per[layer]
        records = lam * figures["record_s_per_turn"]
        payload = lam * figures["byte_s_per_turn"]
        if layer == "session":
            ram = redis_bytes(records, payload)
            disk = ram  # an RDB snapshot is about the dataset's size
            formula = "payload + sessions × (2 keys × (50 + 30 B TTL) + 64 B index)"
        elif layer == "stm":
            index = hnswlib_bytes(records)
            ram = index + max(payload - records * 4 * DIM, 0.0)  # vectors live in the index
            disk = payload + HNSWLIB_DISK_FACTOR * index
            formula = "hnswlib N·(4d + 8M + 12) + text/metadata; disk payload + 3× index"
        else:
            table = records * PG_TUPLE_OVERHEAD_B + payload
            index = pgvector_hnsw_bytes(records)
            ram = index + 0.25 * table  # the HNSW search wants its index cached
            disk = (table + index) * PG_PAGE_B / PG_PAGE_USABLE_B
            formula = "pgvector HNSW (72 + 4d + 8) + (4 + 6m(L+2)) B/row; heap +35 B/row"
        out[layer] = {
            "records": records,
            "payload_gb": payload / GB,
            "ram_gb": ram / GB,
            "disk_gb": disk / GB,
            "memory_source": f"measured: sim {sim.run_id} ({target.strategy}) by Little's law; "
            f"overheads assumed: {formula}",
            "sim_span_days": figures["span_days"],
        }
    return out
