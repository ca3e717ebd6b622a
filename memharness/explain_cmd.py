"""`memharness explain RUN_DIR`: why a strategy missed a probe, from a run's result files.

For each scenario and strategy of the run (narrowed by `--scenario` and `--strategy`), it
prints every probe that was not clean (`memharness/sim/probes.py`): the query, where and
when it was asked, each needed and forbidden fact with its verdict, and what each layer
returned (rank, score, the facts a hit carries, the start of its text). `--failed` keeps
the probes where a needed fact was not retrieved. Clean probes are counted, not listed:
a strategy's result file records only the others.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memharness.diagnostics import failed, probe_records
from memharness.report import ResultsError, load_results
from memharness.sim.probes import Verdict


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--strategy", "labels", multiple=True, help="a label or name (repeatable)")
@click.option("--scenario", "names", multiple=True, help="a scenario name (repeatable)")
@click.option("--failed", "only_failed", is_flag=True, help="only probes that missed a fact")
def explain(
    run_dir: Path, labels: tuple[str, ...], names: tuple[str, ...], only_failed: bool
) -> None:
    """Show, probe by probe, what each layer returned and why needed facts were missed."""
    try:
        results = load_results(run_dir)
    except ResultsError as exc:
        raise click.UsageError(str(exc)) from None
    scenarios: list[dict[str, Any]] = results["scenarios"]
    _check(names, [str(s.get("name")) for s in scenarios], "--scenario", "scenario")
    chosen = [s for s in scenarios if not names or s.get("name") in names]
    every = [s for sc in chosen for s in sc.get("strategies") or []]
    known = [str(s.get("label")) for s in every] + [str(s.get("name")) for s in every]
    _check(labels, known, "--strategy", "strategy")
    for scenario in chosen:
        ceiling = (scenario.get("ceiling") or {}).get("recall_at_k")
        shown = "-" if ceiling is None else f"{ceiling:.3f}"
        click.echo(f"# {scenario.get('name')}: dense ceiling recall@k {shown}")
        for strategy in scenario.get("strategies") or []:
            if labels and not {strategy.get("label"), strategy.get("name")} & set(labels):
                continue
            click.echo(_strategy(run_dir, strategy, only_failed=only_failed))


def _check(given: tuple[str, ...], known: list[str], option: str, what: str) -> None:
    for value in given:
        if value not in known:
            listed = ", ".join(sorted(set(known))) or "none"
            raise click.UsageError(f"{option} {value!r}: no such {what} in this run ({listed})")


def _strategy(run_dir: Path, strategy: dict[str, Any], *, only_failed: bool) -> str:
    label = strategy.get("label")
    m = strategy.get("metrics") or {}
    head = f"\n## {label} ({strategy.get('status')})"
    if strategy.get("status") != "ok":
        error = (strategy.get("error") or "").strip().splitlines()[:1]
        return f"{head}: no figures{': ' + error[0] if error else ''}"
    records = probe_records(run_dir, strategy)
    if records is None:
        return f"{head}: {strategy.get('file')} holds no per-probe records"
    picked = [r for r in records if failed(r)] if only_failed else records
    recall = m.get("recall_at_k")
    lines = [
        f"{head}: recall@k {'-' if recall is None else f'{recall:.3f}'}, "
        f"{m.get('probes', '?')} probes, {len(records)} not clean"
        + (f", {len(picked)} missed a needed fact" if only_failed else ""),
    ]
    lines += [_probe(r) for r in picked]
    return "\n".join(lines)


def _probe(record: dict[str, Any]) -> str:
    at = datetime.fromtimestamp(float(record["at"]), tz=UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    verdicts: dict[str, str] = record.get("verdicts") or {}
    lines = [
        f"\nprobe {record['user']}#{record['step']} at {at} in session {record['session']}:",
        f"  query: {record['query']}",
    ]
    for kind in ("needed", "forbidden"):
        facts = record.get(kind) or []
        if facts:
            lines.append(f"  {kind}: " + ", ".join(f"{f} ({verdicts.get(f, '?')})" for f in facts))
    listed = {*record.get("needed", []), *record.get("forbidden", [])}
    other = [f"{f} ({v})" for f, v in verdicts.items() if f not in listed]
    if other:
        lines.append("  also retrieved: " + ", ".join(other))
    for layer, hits in (record.get("hits") or {}).items():
        if not hits:
            lines.append(f"  {layer}: nothing returned")
            continue
        lines.append(f"  {layer}:")
        for rank, hit in enumerate(hits, start=1):
            facts = ", ".join(hit.get("facts") or []) or "no scenario fact"
            mark = " <- needed" if set(hit.get("facts") or []) & set(record["needed"]) else ""
            bad = [verdicts[f] for f in hit.get("facts") or [] if verdicts.get(f) in _BAD_HIT]
            mark += f" <- {', '.join(bad)}" if bad else ""
            text = json.dumps(hit.get("text", ""), ensure_ascii=False)
            lines.append(f"    {rank}. {hit['score']:.4f} [{facts}] {text}{mark}")
    return "\n".join(lines)


_BAD_HIT = frozenset({str(Verdict.STALE_HIT), str(Verdict.LEAK), str(Verdict.FORBIDDEN_HIT)})

__all__ = ["explain"]
