"""Read a run's per-probe diagnostics back: the ceiling and layer table, the probes where
strategies disagree (for `summary.md`), and each strategy's probe records (for
`memharness explain`).

Like the report, this reads result files only (`results.json` and each strategy's own
file, where `memharness/sim/probes.py` put the records of the probes that were not
clean). A strategy whose file holds no `probes` list (a failed one, or a file written
without diagnostics) has none to show, and is left out of the comparison.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memharness.sim.probes import NOT_RETRIEVED, outcome, probe_key

#: Disagreeing probes listed in summary.md per scenario (`memharness explain` has all).
DISAGREE_SHOWN = 20
QUERY_CHARS = 70
_NOT_RETRIEVED = frozenset(str(v) for v in NOT_RETRIEVED)
#: The layer table's figures after recall and its share of the ceiling.
_BREAKDOWN = (
    "recall_stm_at_k", "recall_ltm_at_k", "missed_rate", "over_forget_rate",
    "unreachable_rate", "unstored_rate",
)  # fmt: skip


def probe_records(run_dir: Path, strategy: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The strategy's probe records from its own file; None when it has none to give (not
    ok, file missing or unreadable, or made by a version without diagnostics)."""
    name = strategy.get("file")
    if strategy.get("status") != "ok" or not name:
        return None
    try:
        own = json.loads((Path(run_dir) / str(name)).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    records = own.get("probes") if isinstance(own, dict) else None
    return records if isinstance(records, list) else None


def failed(record: dict[str, Any]) -> bool:
    """Whether a needed fact of the probe was not retrieved (not only a bad hit)."""
    return any(v in _NOT_RETRIEVED for v in (record.get("verdicts") or {}).values())


def describe(result: tuple[tuple[str, str], ...]) -> str:
    """`outcome(...)` in words: `all needed retrieved, nothing bad` or the bad verdicts."""
    if not result:
        return "all needed retrieved, nothing bad"
    return "; ".join(f"{fact} {verdict}" for fact, verdict in result)


@dataclass(frozen=True)
class Disagreement:
    """A probe that came out differently under different strategies."""

    user: str
    step: int
    query: str
    #: outcome description -> labels of the strategies that got it, in run order
    groups: dict[str, list[str]]


def disagreements(run_dir: Path, scenario: dict[str, Any]) -> list[Disagreement]:
    """The probes of `scenario` whose outcome differs between its strategies (those with
    records), in the scenario's user and step order."""
    by_label: dict[str, dict[tuple[str, int], dict[str, Any]]] = {}
    for strategy in scenario.get("strategies") or []:
        records = probe_records(run_dir, strategy)
        if records is not None:
            by_label[str(strategy.get("label"))] = {probe_key(r): r for r in records}
    if len(by_label) < 2:
        return []
    keys: dict[tuple[str, int], tuple[int, dict[str, Any]]] = {}
    for kept in by_label.values():
        for key, record in kept.items():
            keys.setdefault(key, (int(record.get("user_index", 0)), record))
    found = []
    for key, (_, record) in sorted(keys.items(), key=lambda item: (item[1][0], item[0][1])):
        groups: dict[str, list[str]] = {}
        for label, kept in by_label.items():
            groups.setdefault(describe(outcome(kept.get(key))), []).append(label)
        if len(groups) > 1:
            found.append(Disagreement(key[0], key[1], str(record.get("query", "")), groups))
    return found


def disagreement_section(run_dir: Path, scenario: dict[str, Any]) -> str:
    """Markdown: the probes where strategies disagree (the first `DISAGREE_SHOWN`)."""
    found = disagreements(run_dir, scenario)
    if not found:
        return ""
    name = scenario.get("name", "?")
    lines = [
        "Probes where strategies disagree: "
        f"{len(found)}{f' (the first {DISAGREE_SHOWN})' if len(found) > DISAGREE_SHOWN else ''};"
        f" `memharness explain RUN_DIR --scenario {name}` shows each probe's hits.",
        "",
    ]
    for d in found[:DISAGREE_SHOWN]:
        query = d.query if len(d.query) <= QUERY_CHARS else d.query[: QUERY_CHARS - 1] + "…"
        parts = [
            f"{how}: {', '.join(f'`{x}`' for x in labels)}" for how, labels in d.groups.items()
        ]
        lines.append(f"- `{d.user}` step {d.step}, “{query}” — " + " · ".join(parts))
    return "\n".join(lines) + "\n"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def layer_table(scenario: dict[str, Any]) -> str:
    """Markdown: the retrieval ceiling, then each ok strategy's recall (overall, its share
    of the ceiling, per layer) and what became of the needed facts it did not retrieve."""
    ceiling = (scenario.get("ceiling") or {}).get("recall_at_k")
    lines = [
        "| strategy | recall@k | of ceiling | recall STM | recall LTM | missed | over-forget "
        "| unreachable | unstored |",
        "|---|" + "---:|" * 8,
    ]
    if ceiling is not None:
        c = scenario["ceiling"]
        lines.append(
            f"| dense ceiling ({c.get('found', '-')} of {c.get('needed', '-')}) | "
            f"{_num(ceiling)} | 1.000 | - | - | - | - | - | - |"
        )
    for strategy in scenario.get("strategies") or []:
        m = strategy.get("metrics")
        if strategy.get("status") != "ok" or not m:
            continue
        recall = m.get("recall_at_k")
        share = recall / ceiling if recall is not None and ceiling else None
        label = str(strategy.get("label")).replace("|", "\\|")
        cells = [
            f"`{label}`",
            _num(recall),
            _num(share),
            *(_num(m.get(name)) for name in _BREAKDOWN),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = [
    "Disagreement",
    "describe",
    "disagreement_section",
    "disagreements",
    "failed",
    "layer_table",
    "probe_records",
]
