"""`memharness report RUN...`: the strategy comparison page."""

from __future__ import annotations

import time
from pathlib import Path

import click

__all__ = ["report"]


@click.command()
@click.argument("runs", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Page directory [default: reports/report-YYYYmmdd-HHMMSS].",
)
def report(runs: tuple[Path, ...], out: Path | None) -> None:
    """Compare strategies on one self-contained page from result files only: simulator
    runs (results.json), load runs (steps.json, load_hdr.json, load_strategies.json) and
    capacity runs (capacity.json). Per strategy: quality, p95 per layer under load and the
    highest sustainable rate, background cost, bytes per user, monthly cost; the
    quality-vs-cost frontier drawn, and which strategies are on it, first.

    Writes report.html (plots inline, nothing fetched) and report.json."""
    from memharness.comparison.inputs import PageError, read_inputs
    from memharness.comparison.page import build_page, write_page

    try:
        page = build_page(read_inputs(list(runs)))
    except (PageError, ValueError) as exc:
        raise click.ClickException(str(exc)) from None
    out = out or Path("reports") / time.strftime("report-%Y%m%d-%H%M%S")
    paths = write_page(page, out)
    for line in page.summary:
        click.echo(line)
    click.echo(f"page: {paths['html']} (+ report.json)")
