"""YAML documents with errors that name the file, the line and the field.

Shared by the strategy loader (`reference.policy.loading`), the scenario loaders
(`memharness.scenarios`) and the capacity target (`memharness.capacity.target`): the text
is composed to YAML nodes first, and each validation error location is walked back through
those nodes to the line of its key, giving `file:line: field: message`.

Before anything is built from the nodes, `check_nodes` refuses, at the line and field where
they occur, what would otherwise end in a traceback, a hang or a memory blow-up:

- duplicate keys (PyYAML would keep the last one silently);
- nesting deeper than `MAX_DEPTH` levels;
- aliases that expand the document by more than `MAX_ALIAS_EXPANSION` nodes (an "alias
  bomb": nine nested anchors of ten aliases each are 10^9 nodes), and recursive aliases;
- integers of more than `MAX_INT_DIGITS` digits (Python refuses to convert 4,300 or more);
- strings with a NUL character or an unpaired surrogate (a `"\ud800"` escape), which no
  store can hold.

Values YAML resolves but cannot build (`2024-13-45` as a timestamp) are reported at their
line too. Size limits of the fields themselves (texts, ids) are the models' business.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import yaml
from pydantic import BaseModel, ValidationError

from reference.errors import InvalidInput
from reference.user_words import describe_errors

__all__ = [
    "MAX_ALIAS_EXPANSION",
    "MAX_DEPTH",
    "MAX_INT_DIGITS",
    "Loc",
    "Problem",
    "YamlDocError",
    "check_nodes",
    "compose_mapping",
    "dotted",
    "in_line_order",
    "line_of",
    "problem_at",
    "read_yaml_file",
    "validation_problems",
    "yaml_problem",
]

#: A location in a document: mapping keys and list indexes, outermost first.
Loc = tuple[int | str, ...]

#: Deepest nesting of mappings and lists a document may have (real files need under 10).
MAX_DEPTH = 64
#: How many nodes aliases may add to a document, beyond the nodes written out in it.
MAX_ALIAS_EXPANSION = 100_000
#: Longest integer, in digits (a 64-bit integer has 19 or 20).
MAX_INT_DIGITS = 100

#: libyaml's loader when PyYAML was built with it: faster, and its parser bounds nesting
#: itself where the pure-Python composer would recurse until RecursionError.
SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_INT_TAG = "tag:yaml.org,2002:int"
_STR_TAG = "tag:yaml.org,2002:str"
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


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
    """The UTF-8 text of `path`; an unreadable file raises `error` naming the file (and
    for bytes that are not UTF-8, their line)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except (OSError, ValueError) as exc:  # ValueError: a path with a NUL byte
        raise error.single("(file)", f"cannot be read: {exc}", str(path)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"is not valid UTF-8 (byte 0x{data[exc.start]:02x} at column {column})"
        raise error.single("(file)", message, str(path), line) from None


def yaml_problem(exc: yaml.YAMLError, source: str | None, text: str | None = None) -> Problem:
    """A PyYAML error as a `(yaml)` problem, with its line when the error has a mark (or,
    for a character the reader refuses, when `text` is the document's text)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        return Problem(source, line, "(yaml)", str(exc.problem or exc))
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, exc.position) + 1 if text is not None else None
        char = exc.character
        code = ord(char) if isinstance(char, str) else char
        return Problem(source, line, "(yaml)", f"character #x{code:04x}: {exc.reason}")
    return Problem(source, None, "(yaml)", str(exc))


def compose_mapping(
    text: str,
    *,
    source: str | None,
    what: str,
    error: type[YamlDocError] = YamlDocError,
    loader: Callable[[str], Any] = SAFE_LOADER,
) -> tuple[dict[Any, Any], yaml.Node]:
    """The plain data of a one-document YAML text, and its node tree (for `line_of`).

    `what` completes "(document): must be ..." when the document is not a mapping
    (e.g. "a mapping of strategy fields"). Empty documents, YAML syntax errors and what
    `check_nodes` refuses raise `error` too; `loader` is the PyYAML loader class.
    """
    parser = loader(text)
    try:
        try:
            node = parser.get_single_node()
        except RecursionError:  # the pure-Python composer recurses once per level
            raise error.single("(yaml)", f"nested deeper than {MAX_DEPTH} levels", source) from None
        if node is None:
            raise error.single("(document)", "is empty", source, 1)
        check_nodes(node, (), source, error=error)
        data = construct(parser, node, source, error=error)
    except yaml.YAMLError as exc:
        raise error([yaml_problem(exc, source, text)]) from None
    finally:
        parser.dispose()
    if not isinstance(data, dict):
        raise error.single("(document)", f"must be {what}", source, 1)
    return data, node


def construct(
    loader: Any, node: yaml.Node, source: str | None, *, error: type[YamlDocError] = YamlDocError
) -> Any:
    """The plain data of `node` (checked by `check_nodes`); a scalar YAML resolves but
    cannot build (a timestamp `2024-13-45`) raises `error` at its line."""
    try:
        return loader.construct_document(node)
    except (ValueError, OverflowError, TypeError) as exc:
        bad = _first_unbuildable(node, ())
        if bad is None:
            raise error.single("(document)", f"cannot be built: {exc}", source) from None
        loc, scalar, message = bad
        line = scalar.start_mark.line + 1
        raise error.single(dotted(loc), f"{scalar.value[:40]!r} {message}", source, line) from None


def _first_unbuildable(node: yaml.Node, path: Loc) -> tuple[Loc, yaml.Node, str] | None:
    """The first scalar under `node` that a safe constructor fails to build, and why."""
    builder = yaml.SafeLoader("")
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, Loc]] = [(node, path)]
    while stack:
        current, loc = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.ScalarNode):
            try:
                builder.construct_object(current)
            except (ValueError, OverflowError, TypeError, yaml.YAMLError) as exc:
                return loc, current, f"is not a valid {current.tag.rsplit(':', 1)[-1]}: {exc}"
        elif isinstance(current, yaml.MappingNode):
            for key, value in reversed(current.value):
                name = key.value if isinstance(key, yaml.ScalarNode) else "[key]"
                stack += [(value, (*loc, name)), (key, (*loc, name))]
        elif isinstance(current, yaml.SequenceNode):
            stack += [(item, (*loc, i)) for i, item in reversed(list(enumerate(current.value)))]
    return None


def check_nodes(
    node: yaml.Node,
    path: Loc,
    source: str | None,
    *,
    error: type[YamlDocError] = YamlDocError,
) -> None:
    """Raise `error` at the first node under `node` (at `path`) the module docstring lists
    as refused: a duplicate key, deep nesting, an alias bomb or a recursive alias, a huge
    integer, a NUL or an unpaired surrogate in a string. Each node is visited once, so an
    alias costs nothing to check, whatever it expands to."""
    _NodeCheck(source, error).size(node, path, 0, node.start_mark.line + 1)


class _NodeCheck:
    """One walk of a node graph: every node once, its expanded size memoised."""

    def __init__(self, source: str | None, error: type[YamlDocError]) -> None:
        self.source = source
        self.error = error
        self.sizes: dict[int, int | None] = {}  # None while the node is being walked
        self.heights: dict[int, int] = {}  # levels of nesting under each walked node
        self.distinct = 0

    def fail(self, loc: Loc, message: str, line: int) -> YamlDocError:
        return self.error.single(dotted(loc), message, self.source, line)

    def size(self, node: yaml.Node, path: Loc, depth: int, line: int) -> int:
        """How many nodes `node` stands for once every alias under it is expanded; `line`
        is where it is used (an alias's node carries the line of its anchor, not its own)."""
        if id(node) in self.sizes:  # written once, used again: an alias
            known = self.sizes[id(node)]
            if known is None:
                raise self.fail(path, "an alias refers to a node that contains it", line)
            if depth + self.heights[id(node)] > MAX_DEPTH:  # aliases nested in aliases
                raise self.fail(path, f"nested deeper than {MAX_DEPTH} levels", line)
            return known
        line = node.start_mark.line + 1
        if depth > MAX_DEPTH:
            raise self.fail(path, f"nested deeper than {MAX_DEPTH} levels", line)
        self.sizes[id(node)] = None
        self.distinct += 1
        total, height = 1, 0
        if isinstance(node, yaml.ScalarNode):
            self.scalar(node, path, line)
        elif isinstance(node, yaml.MappingNode):
            seen: dict[str, int] = {}
            for key, value in node.value:
                name = key.value if isinstance(key, yaml.ScalarNode) else "[key]"
                key_line = key.start_mark.line + 1 if id(key) not in self.sizes else line
                if isinstance(key, yaml.ScalarNode):
                    if key.value in seen:
                        message = f"duplicate key (first at line {seen[key.value]})"
                        raise self.fail((*path, key.value), message, key_line)
                    seen[key.value] = key_line
                for child in (key, value):
                    total += self.size(child, (*path, name), depth + 1, key_line)
                    height = max(height, 1 + self.heights[id(child)])
                self.limit(total, (*path, name), key_line)
        elif isinstance(node, yaml.SequenceNode):
            for index, item in enumerate(node.value):
                item_line = item.start_mark.line + 1 if id(item) not in self.sizes else line
                total += self.size(item, (*path, index), depth + 1, item_line)
                height = max(height, 1 + self.heights[id(item)])
                self.limit(total, (*path, index), item_line)
        self.sizes[id(node)] = total
        self.heights[id(node)] = height
        return total

    def limit(self, total: int, loc: Loc, line: int) -> None:
        if total > self.distinct + MAX_ALIAS_EXPANSION:
            message = (
                f"aliases expand the document past {MAX_ALIAS_EXPANSION:,} more nodes than "
                "it writes out (an alias bomb?)"
            )
            raise self.fail(loc, message, line)

    def scalar(self, node: yaml.ScalarNode, path: Loc, line: int) -> None:
        value = node.value
        if node.tag == _INT_TAG and len(value) > MAX_INT_DIGITS:
            message = f"is an integer of {len(value):,} digits; the limit is {MAX_INT_DIGITS}"
            raise self.fail(path, message, line)
        if node.tag == _STR_TAG and _UNSTORABLE.search(value):
            raise self.fail(path, "contains a NUL character or an unpaired surrogate", line)


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


def in_line_order(problems: list[Problem]) -> list[Problem]:
    """`problems` sorted by line (those without a line last), otherwise as given."""
    return sorted(problems, key=lambda p: (p.line is None, p.line or 0))


def validation_problems(
    exc: ValidationError,
    *,
    source: str | None,
    node: yaml.Node | None,
    fix_loc: Callable[[Loc], Loc] | None = None,
    model: type[BaseModel] | None = None,
) -> list[Problem]:
    """Each error of a pydantic validation as a problem, in the user's words
    (`reference.user_words`); `fix_loc` adapts its location; `model`, the model that was
    validated, gives the suggestions for an unknown key."""
    problems = []
    for loc, message in describe_errors(exc.errors(), model):
        loc = fix_loc(loc) if fix_loc is not None else loc
        problems.append(problem_at(source, node, loc, message))
    return in_line_order(problems)
