"""YAML documents with errors that name the file, the line and the field.

Shared by the strategy loader (`reference.forgetting.loading`) and the scenario loader
(`memharness.scenarios.loader`): the text is composed to YAML nodes first (refusing
duplicate keys, which PyYAML would keep silently), and each validation error location is
walked back through those nodes to the line of its key, giving `file:line: field: message`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import ValidationError

from reference.errors import InvalidInput

__all__ = [
    "Loc",
    "Problem",
    "YamlDocError",
    "check_duplicate_keys",
    "compose_mapping",
    "dotted",
    "line_of",
    "problem_at",
    "read_yaml_file",
    "validation_problems",
    "yaml_problem",
]

#: A location in a document: mapping keys and list indexes, outermost first.
Loc = tuple[int | str, ...]


@dataclass(frozen=True, slots=True)
class Problem:
    """One validation failure: where (file, 1-based line) and which field."""

    file: str | None
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = "".join(f"{part}:" for part in (self.file, self.line) if part is not None)
        return f"{where} {self.field}: {self.message}" if where else f"{self.field}: {self.message}"


class YamlDocError(InvalidInput):
    """A document that does not load or validate; `problems` lists each failure.

    Loaders subclass it (`StrategyError`, `ScenarioError`) and pass the subclass as
    `error=` to the functions here, so callers see their own error type.
    """

    def __init__(self, problems: list[Problem]) -> None:
        first = problems[0]
        super().__init__(first.field, first.message)
        self.problems = problems
        self.file, self.line = first.file, first.line
        self.args = ("\n".join(str(p) for p in problems),)

    @classmethod
    def single(
        cls, field: str, message: str, file: str | None = None, line: int | None = None
    ) -> Self:
        """An error with one problem."""
        return cls([Problem(file, line, field, message)])


def read_yaml_file(path: str | Path, *, error: type[YamlDocError] = YamlDocError) -> str:
    """The UTF-8 text of `path`; an unreadable file raises `error` naming the file."""
    path = Path(path)
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise error.single("(file)", f"cannot be read: {exc}", str(path)) from None


def yaml_problem(exc: yaml.YAMLError, source: str | None) -> Problem:
    """A PyYAML error as a `(yaml)` problem, with its line when the error has a mark."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        return Problem(source, line, "(yaml)", str(exc.problem or exc))
    return Problem(source, None, "(yaml)", str(exc))


def compose_mapping(
    text: str,
    *,
    source: str | None,
    what: str,
    error: type[YamlDocError] = YamlDocError,
    loader: Callable[[str], Any] = yaml.SafeLoader,
) -> tuple[dict[Any, Any], yaml.Node]:
    """The plain data of a one-document YAML text, and its node tree (for `line_of`).

    `what` completes "(document): must be ..." when the document is not a mapping
    (e.g. "a mapping of strategy fields"). Empty documents, YAML syntax errors and
    duplicate keys raise `error` too; `loader` is the PyYAML loader class to parse with.
    """
    parser = loader(text)
    try:
        node = parser.get_single_node()
        if node is None:
            raise error.single("(document)", "is empty", source, 1)
        check_duplicate_keys(node, (), source, error=error)
        data = parser.construct_document(node)
    except yaml.YAMLError as exc:
        raise error([yaml_problem(exc, source)]) from None
    finally:
        parser.dispose()
    if not isinstance(data, dict):
        raise error.single("(document)", f"must be {what}", source, 1)
    return data, node


def check_duplicate_keys(
    node: yaml.Node,
    path: Loc,
    source: str | None,
    *,
    error: type[YamlDocError] = YamlDocError,
) -> None:
    """Raise `error` at the second of two equal keys anywhere under `node` (at `path`)."""
    # PyYAML keeps the last of two equal keys silently; these documents must not.
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in seen:
                    message = f"duplicate key (first at line {seen[key.value]})"
                    raise error.single(dotted((*path, key.value)), message, source, line)
                seen[key.value] = line
                check_duplicate_keys(value, (*path, key.value), source, error=error)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            check_duplicate_keys(item, (*path, index), source, error=error)


def dotted(loc: Loc) -> str:
    """`loc` as a field name: `users[1].timeline[0].at`; the empty location is `(document)`."""
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the key itself", not a field
            continue
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(document)"


def line_of(node: yaml.Node, loc: Loc) -> int:
    """The 1-based line of the deepest key of `loc` present in the YAML node tree."""
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for key, value in node.value:
                if isinstance(key, yaml.ScalarNode) and key.value == str(part):
                    line, node = key.start_mark.line + 1, value
                    break
            else:
                break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int):
            if not 0 <= part < len(node.value):
                break
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            break
    return line


def problem_at(source: str | None, node: yaml.Node | None, loc: Loc, message: str) -> Problem:
    """A problem at `loc`, with its line in `node` when the node tree is known."""
    return Problem(source, line_of(node, loc) if node is not None else None, dotted(loc), message)


def validation_problems(
    exc: ValidationError,
    *,
    source: str | None,
    node: yaml.Node | None,
    fix_loc: Callable[[Loc], Loc] | None = None,
) -> list[Problem]:
    """Each error of a pydantic validation as a problem; `fix_loc` adapts its location."""
    problems = []
    for err in exc.errors():
        loc = fix_loc(err["loc"]) if fix_loc is not None else err["loc"]
        problems.append(problem_at(source, node, loc, err["msg"].removeprefix("Value error, ")))
    return problems
