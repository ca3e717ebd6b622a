"""`memharness explain RUN_DIR`: why a strategy missed a probe, from a run's result files.

First a summary of the whole selection (narrowed by `--scenario` and `--strategy`): the
verdicts of the probes that were not clean, and the causes of the over-forgotten and never
stored facts (`memharness/sim/causes.py`), per strategy. Then, per scenario and strategy,
up to `--limit` probes that were not clean (`memharness/sim/probes.py`): the query, where
and when it was asked, each needed and forbidden fact with its verdict and, for one that
was over-forgotten or never stored, why (when it left which layer, by which rule; or what
refused it), and what each layer returned (rank, score, the facts a hit carries, the
start of its text). `--failed` keeps the probes where a needed fact was not retrieved.
Clean probes are counted, not listed: a strategy's result file records only the others.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import click

from memharness.diagnostics import failed, probe_records
from memharness.explain_summary import explain_why, summary
from memharness.report import ResultsError, load_results
from memharness.sim.probes import Verdict


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--strategy", "labels", multiple=True, help="a label or name (repeatable)")
@click.option("--scenario", "names", multiple=True, help="a scenario name (repeatable)")
@click.option("--failed", "only_failed", is_flag=True, help="only probes that missed a fact")
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="probes listed in all (0: every one); the summary always counts them all",
)
@click.option(
    "--vacuous",
    "only_vacuous",
    is_flag=True,
    help="only the probes whose forbidden (stale or erased) fact no strategy of the run "
    "returned: checks that could not have failed",
)
def explain(
    run_dir: Path,
    labels: tuple[str, ...],
    names: tuple[str, ...],
    only_failed: bool,
    limit: int,
    only_vacuous: bool,
) -> None:
    """Why strategies missed probes: a summary by verdict and cause, then probe by probe
    what each layer returned and why each needed fact was missed; and the probes whose
    stale or forbidden check could not have failed."""
    try:
        results = load_results(run_dir)
    except ResultsError as exc:
        raise click.UsageError(str(exc)) from None
    scenarios: list[dict[str, Any]] = results["scenarios"]
    _check(names, [str(s.get("name")) for s in scenarios], "--scenario", "scenario")
    chosen = [s for s in scenarios if not names or s.get("name") in names]
    vacuous = _vacuous_lines(chosen, listing=only_vacuous, limit=limit)
    if only_vacuous:
        click.echo("\n".join(vacuous) or "every forbidden fact came back under some strategy")
        return
    every = [s for sc in chosen for s in sc.get("strategies") or []]
    known = [str(s.get("label")) for s in every] + [str(s.get("name")) for s in every]
    _check(labels, known, "--strategy", "strategy")
    picked = [
        (scenario, strategy)
        for scenario in chosen
        for strategy in scenario.get("strategies") or []
        if not labels or {strategy.get("label"), strategy.get("name")} & set(labels)
    ]
    records = {id(st): _records(run_dir, st, only_failed) for _, st in picked}
    click.echo(summary([(str(st.get("label")), records[id(st)] or []) for _, st in picked]))
    left = limit or None
    last = None
    for scenario, strategy in picked:
        found = records[id(strategy)]
        if left == 0 or (found == [] and strategy.get("status") == "ok"):
            continue  # counted in the summary; nothing to list
        if scenario is not last:
            ceiling = (scenario.get("ceiling") or {}).get("recall_at_k")
            shown = "-" if ceiling is None else f"{ceiling:.3f}"
            click.echo(f"\n# {scenario.get('name')}: dense ceiling recall@k {shown}")
            last = scenario
        text, listed = _strategy(strategy, found, only_failed, left)
        click.echo(text)
        left = None if left is None else left - listed
    hidden = sum(len(r or []) for r in records.values()) - limit
    if limit and hidden > 0:
        click.echo(f"\n{hidden} more probes not listed (--limit {limit}; --limit 0 lists all)")
    if vacuous:
        click.echo("\n" + "\n".join(vacuous))


def _vacuous_lines(scenarios: list[dict[str, Any]], *, listing: bool, limit: int) -> list[str]:
    """Per scenario, the probes whose forbidden fact no strategy returned (`vacuous.py`):
    a count, and with `listing` the probes themselves (up to `limit`)."""
    lines: list[str] = []
    for scenario in scenarios:
        found = scenario.get("vacuous") or {}
        if not found.get("count"):
            continue
        lines.append(
            f"# {scenario.get('name')}: {found['count']} of the {found.get('checks')} probes "
            "with a forbidden fact could not have failed: no strategy returned that fact"
            + ("" if listing else " (--vacuous lists them)")
        )
        if listing:
            probes = found.get("probes") or []
            for probe in probes[: limit or None]:
                never = ", ".join(probe.get("never_returned") or [])
                lines.append(
                    f"  {probe.get('user')} step {probe.get('step')}: {probe.get('query')!r}"
                    f" never returned: {never}"
                )
            if found["count"] > len(probes[: limit or None]):
                lines.append(f"  ... {found['count'] - len(probes[: limit or None])} more")
    return lines


def _check(given: tuple[str, ...], known: list[str], option: str, what: str) -> None:
    for value in given:
        if value not in known:
            listed = ", ".join(sorted(set(known))) or "none"
            raise click.UsageError(f"{option} {value!r}: no such {what} in this run ({listed})")


def _records(
    run_dir: Path, strategy: dict[str, Any], only_failed: bool
) -> list[dict[str, Any]] | None:
    records = probe_records(run_dir, strategy)
    if records is None or not only_failed:
        return records
    return [r for r in records if failed(r)]


def _strategy(
    strategy: dict[str, Any],
    picked: list[dict[str, Any]] | None,
    only_failed: bool,
    left: int | None,
) -> tuple[str, int]:
    """The strategy's heading and up to `left` of its probes (None: all); how many."""
    label = strategy.get("label")
    m = strategy.get("metrics") or {}
    head = f"\n## {label} ({strategy.get('status')})"
    if strategy.get("status") != "ok":
        error = (strategy.get("error") or "").strip().splitlines()[:1]
        return f"{head}: no figures{': ' + error[0] if error else ''}", 0
    if picked is None:
        return f"{head}: {strategy.get('file')} holds no per-probe records", 0
    recall = m.get("recall_at_k")
    not_clean = m.get("probes_recorded", len(picked))
    lines = [
        f"{head}: recall@k {'-' if recall is None else f'{recall:.3f}'}, "
        f"{m.get('probes', '?')} probes, {not_clean} not clean"
        + (f", {len(picked)} missed a needed fact" if only_failed else ""),
    ]
    shown = picked if left is None else picked[: max(left, 0)]
    lines += [_probe(r) for r in shown]
    return "\n".join(lines), len(shown)


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
    for fact, why in (record.get("why") or {}).items():
        lines.append(f"  why {fact} is {verdicts.get(fact, '?')}: {explain_why(why)}")
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
