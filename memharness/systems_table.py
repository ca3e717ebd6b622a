"""The systems × strategies table of a run with `--system` (summary.md and the terminal).

One row per system and strategy over the run's scenarios: mean recall@k and stale@k
(over the scenarios that measured them), leakage, the statements with marked PII still
held in plaintext at the run's end, and peak bytes (summed), the slowest
scenario's turn p95, and what the system could not do (`unsupported`, counted by the
replay: `memharness/sim/peer_replay.py`). A strategy that failed on a system keeps its
row, saying so. Under the table, a line per system says what it does natively (its
`Capabilities`, as the replay recorded them).
"""

from __future__ import annotations

from typing import Any

#: What the reference does natively, for the line under the table (its own engine).
REFERENCE_NATIVE = (
    "every rule of the strategy natively (its engine): per-record deadlines on the virtual "
    "clock, hidden at once and deleted by sweeps; delete and delete-a-user's-data"
)


#: What an expired memory is, per `NativeExpiry.expired`.
_EXPIRED = {
    "readable": "readable until the system's sweep deletes it",
    "hidden": "hidden from search and kept",
    "deleted": "deleted at once",
}


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.1%}"


def _bytes(value: int) -> str:
    return f"{value / 1024:.1f} KiB" if value < 1024 * 1024 else f"{value / 1024**2:.1f} MiB"


def rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Per (system, strategy), in first-seen order: the figures of the module docstring."""
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for scenario in results.get("scenarios") or []:
        for entry in scenario.get("strategies") or []:
            system = entry.get("system") or "reference"
            label = str(entry.get("label", "?"))
            strategy = label.removeprefix(f"{system}/")
            row = found.setdefault(
                (system, strategy),
                {
                    "system": system,
                    "strategy": strategy,
                    "recall": [],
                    "stale": [],
                    "leakage": 0,
                    "pii": [0, 0],  # marked PII statements, still held raw at the end
                    "bytes": 0,
                    "turn_p95": None,
                    "failed": [],
                    "unsupported": {},
                    "capabilities": None,
                },
            )
            if entry.get("status") != "ok" or not entry.get("metrics"):
                first = (entry.get("error") or "").strip().splitlines()[:1] or [""]
                row["failed"].append(f"{scenario.get('name')}: {entry.get('status')} {first[0]}")
                continue
            m = entry["metrics"]
            for key, name in (("recall", "recall_at_k"), ("stale", "stale_at_k")):
                if m.get(name) is not None:
                    row[key].append(m[name])
            row["leakage"] += m.get("leakage") or 0
            row["pii"][0] += m.get("pii_items") or 0
            row["pii"][1] += m.get("pii_raw_at_end") or 0
            peak = (entry.get("footprint") or {}).get("peak") or {}
            row["bytes"] += sum(int(layer.get("bytes") or 0) for layer in peak.values())
            p95 = ((entry.get("latency_ms") or {}).get("turn") or {}).get("p95")
            if p95 is not None:
                row["turn_p95"] = max(p95, row["turn_p95"] or 0.0)
            for op, n in (m.get("unsupported") or {}).items():
                row["unsupported"][op] = row["unsupported"].get(op, 0) + n
            row["capabilities"] = row["capabilities"] or entry.get("capabilities")
    return list(found.values())


def native_line(system: str, capabilities: dict[str, Any] | None) -> str:
    """What `system` does natively, in words."""
    if system == "reference":
        return REFERENCE_NATIVE
    if capabilities is None:
        return "not recorded (no replay of it completed)"
    expiry = capabilities.get("native_expiry")
    if expiry is None:
        said = "no native expiry: the harness applies every time rule by sweeps (delete)"
    else:
        refresh = "refreshed on read" if expiry.get("refresh_on_read") else "not refreshed on read"
        fate = _EXPIRED.get(str(expiry.get("expired")), str(expiry.get("expired")))
        said = (
            f"native expiry at {expiry.get('granularity_s'):g} s granularity, an expired memory "
            f"{fate}, {refresh}, on the {expiry.get('clock')} clock"
        )
    can = [
        f"delete {'yes' if capabilities.get('delete', True) else 'NO'}",
        f"delete a user's data {'yes' if capabilities.get('delete_user', True) else 'NO'}",
        *(["a deleted memory's text is KEPT"] if capabilities.get("deletes_keep_text") else []),
    ]
    notes = list(capabilities.get("notes") or ())
    return "; ".join([said, *can, *notes])


def systems_markdown(results: dict[str, Any]) -> list[str]:
    """The section's lines; none for a run of the reference alone."""
    table = rows(results)
    if all(r["system"] == "reference" for r in table):
        return []
    out = [
        "## Systems × strategies",
        "",
        "Over the run's scenarios: recall and stale are means; leakage, PII raw at end "
        "(statements with marked personal data still held in plaintext when the run ended) "
        "and peak bytes are sums; turn p95 is the slowest scenario's (a peer's turn is its "
        "search and its add).",
        "",
        "| system | strategy | recall | stale | leakage | PII raw at end | peak bytes "
        "| turn p95 | cannot |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in table:
        cannot = ", ".join(f"{op} ×{n}" for op, n in sorted(r["unsupported"].items())) or "-"
        if r["failed"]:
            cannot = "FAILED: " + "; ".join(r["failed"])[:200]
        p95 = "-" if r["turn_p95"] is None else f"{r['turn_p95']:.1f} ms"
        out.append(
            f"| {r['system']} | {r['strategy']} | {_pct(_mean(r['recall']))} "
            f"| {_pct(_mean(r['stale']))} | {r['leakage']} | {r['pii'][1]} of {r['pii'][0]} "
            f"| {_bytes(r['bytes'])} | {p95} "
            f"| {cannot.replace('|', '/')} |"
        )
    out.append("")
    seen: dict[str, dict[str, Any] | None] = {}
    for r in table:
        seen[r["system"]] = seen.get(r["system"]) or r["capabilities"]
    out += [f"- **{name}**: {native_line(name, caps)}" for name, caps in seen.items()]
    out.append("")
    return out


__all__ = ["native_line", "rows", "systems_markdown"]
