"""Reading and writing scenario YAML, with errors that name the file, the line and the field.

Reading shares the strategy loader's approach (`reference.yamldoc`): the text is
composed to YAML nodes, and each error location is walked back through the nodes to
its line. Writing streams one flow mapping per step (valid YAML, JSON-quoted strings),
so a generator can write 100,000 users without holding them; a file in that form is
read back without YAML (`written_form`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TextIO

import yaml
from pydantic import ValidationError

from memharness.scenarios.checks import check_scenario, check_scenario_data
from memharness.scenarios.model import STEP_KINDS, Loc, Scenario, iso
from memharness.scenarios.written_form import dump_line, read_written_form
from reference.yamldoc import (
    Problem,
    YamlDocError,
    compose_mapping,
    in_line_order,
    problem_at,
    read_yaml_file,
    validation_problems,
)

__all__ = [
    "Problem",
    "ScenarioError",
    "dump_line",
    "load_scenario",
    "parse_scenario",
    "validate_scenario",
    "write_header",
    "write_scenario",
    "write_user",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class ScenarioError(YamlDocError):
    """A scenario that does not load or validate; `problems` lists each failure."""


def parse_scenario(text: str, *, source: str | None = None) -> Scenario:
    """A scenario from YAML text; `source` (a file name) goes into error messages.

    A text in the form the writer writes is read without YAML (`written_form`); when it
    does not validate, it is read again as YAML to give each problem its line.
    """
    written = read_written_form(text)
    if written is not None:
        try:
            scenario = Scenario.model_validate(written)
        except ValidationError:
            pass
        else:
            if not check_scenario(scenario):
                return scenario
    data, node = compose_mapping(
        text,
        source=source,
        what="a mapping with name and users",
        error=ScenarioError,
        loader=_Loader,
    )
    return validate_scenario(data, source=source, node=node)


def load_scenario(path: str | Path) -> Scenario:
    """A scenario from a YAML file."""
    text = read_yaml_file(path, error=ScenarioError)
    return parse_scenario(text, source=str(Path(path)))


def validate_scenario(
    data: Mapping[str, Any], *, source: str | None = None, node: yaml.Node | None = None
) -> Scenario:
    """A scenario from plain data: types, and the cross-step checks of `check_scenario`.

    Every problem is reported at once, in line order: when the types fail, the cross-step
    checks run on the parts that validate (`check_scenario_data`).
    """
    try:
        scenario = Scenario.model_validate(dict(data))
    except ValidationError as exc:
        problems = validation_problems(
            exc, source=source, node=node, fix_loc=_without_tags, model=Scenario
        )
        found = check_scenario_data(data)
    else:
        problems, found = [], check_scenario(scenario)
    problems += [problem_at(source, node, loc, message) for loc, message in found]
    if problems:
        raise ScenarioError(in_line_order(problems))
    return scenario


def _without_tags(loc: tuple[int | str, ...]) -> Loc:
    # pydantic puts the union's tag after the step index (timeline.4.say.facts...);
    # the YAML has no such level, so it is dropped before walking the nodes.
    parts = list(loc)
    for i in range(2, len(parts)):
        if parts[i - 2] == "timeline" and isinstance(parts[i - 1], int) and parts[i] in STEP_KINDS:
            del parts[i]
            break
    return tuple(parts)


# ---------------------------------------------------------------------- writing
def write_header(out: TextIO, *, name: str, description: str = "", seed: int | None = None) -> None:
    """The scenario's fields before its users; then `write_user` once per user."""
    out.write(f"name: {dump_line(name)}\n")
    out.write(f"description: {dump_line(description)}\n")
    if seed is not None:
        out.write(f"seed: {seed}\n")
    out.write("users:\n")


def write_user(
    out: TextIO, user_id: str, steps: Iterable[Mapping[str, Any]], *, pii_complete: bool = False
) -> None:
    """One user, one flow-style line per step."""
    out.write(f"  - id: {dump_line(user_id)}\n")
    if pii_complete:
        out.write("    pii_complete: true\n")
    out.write("    timeline:\n")
    for step in steps:
        out.write(f"      - {dump_line(step)}\n")


def write_scenario(scenario: Scenario, out: TextIO) -> None:
    """A whole scenario as YAML that `parse_scenario` reads back to an equal scenario."""
    write_header(out, name=scenario.name, description=scenario.description, seed=scenario.seed)
    for user in scenario.users:
        steps = []
        for step in user.timeline:
            data = step.model_dump(exclude_defaults=True)
            data["at"] = iso(step.at)
            steps.append(data)
        write_user(out, user.id, steps, pii_complete=user.pii_complete)
    if scenario.adversarial:
        out.write("adversarial:\n")
        for question in scenario.adversarial:
            out.write(f"  - {dump_line(question.model_dump(exclude_none=True))}\n")
