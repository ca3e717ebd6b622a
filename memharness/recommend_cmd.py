"""`memharness recommend RUN_DIR`: a finished run's strategies decided again under another
objective, from its results.json (nothing is replayed, nothing is written)."""

from __future__ import annotations

from pathlib import Path

import click

__all__ = ["recommend"]


@click.command()
@click.argument("run_dir", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--objective",
    "objective_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=None,
    help="the objective's YAML file  [default: the run's, else memharness/default_objective.yaml]",
)
@click.option(
    "--require",
    "requirements",
    multiple=True,
    help="a constraint in place of the objective's on the same metric, e.g. 'stale <= 10%' "
    "(repeatable)",
)
def recommend(run_dir: Path, objective_file: Path | None, requirements: tuple[str, ...]) -> None:
    """Print the run's strategies across its scenarios and the recommendation under an
    objective: constraints, then aims (docs/running-and-scenarios.md)."""
    from memharness.objective import ObjectiveError, load_objective, with_constraints
    from memharness.report import ResultsError, load_results
    from memharness.run_verdict import objective_of, verdict_terminal

    try:
        results = load_results(run_dir)
        objective = load_objective(objective_file) if objective_file else objective_of(results)
        objective = with_constraints(objective, requirements)
    except (ResultsError, ObjectiveError) as exc:
        raise click.ClickException(str(exc)) from None
    text = verdict_terminal({**results, "objective": objective.as_dict()})
    click.echo(text.lstrip("\n") if text else "no strategy completed a scenario in this run")
