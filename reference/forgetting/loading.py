"""Loading strategies: YAML parsing with line numbers, errors, and the registry.

YAML errors name the file, the line and the field (`hybrid.yaml:12: ttl.default_s: ...`):
the file is composed to YAML nodes first, and each pydantic error location is walked back
through those nodes to the line of its key. The models themselves are in
`reference.forgetting.strategy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from reference.errors import InvalidInput
from reference.forgetting.strategy import Strategy


# ---------------------------------------------------------------------- errors
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


class StrategyError(InvalidInput):
    """A strategy that does not load or validate; `problems` lists each failure."""

    def __init__(self, problems: list[Problem]) -> None:
        first = problems[0]
        super().__init__(first.field, first.message)
        self.problems = problems
        self.file, self.line = first.file, first.line
        self.args = ("\n".join(str(p) for p in problems),)


def _error(
    field: str, message: str, file: str | None = None, line: int | None = None
) -> StrategyError:
    return StrategyError([Problem(file, line, field, message)])


# ---------------------------------------------------------------------- YAML loading
def parse_strategy(text: str, *, source: str | None = None) -> Strategy:
    """A strategy from YAML text; `source` (a file name) goes into error messages."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            raise _error("(document)", "is empty", source, 1)
        _check_duplicate_keys(node, (), source)
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        raise _error("(yaml)", str(exc.problem or exc), source, line) from None
    except yaml.YAMLError as exc:
        raise _error("(yaml)", str(exc), source) from None
    finally:
        loader.dispose()
    if not isinstance(data, dict):
        raise _error("(document)", "must be a mapping of strategy fields", source, 1)
    return validate_strategy(data, source=source, node=node)


def load_strategy_file(path: str | Path) -> Strategy:
    """A strategy from a YAML file."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise _error("(file)", f"cannot be read: {exc}", str(path)) from None
    return parse_strategy(text, source=str(path))


def validate_strategy(
    data: Mapping[str, Any], *, source: str | None, node: yaml.Node | None = None
) -> Strategy:
    """A strategy from plain data; errors carry YAML lines when `node` is given."""
    try:
        return Strategy.model_validate(dict(data))
    except ValidationError as exc:
        problems = [
            Problem(
                source,
                _line_of(node, err["loc"]) if node is not None else None,
                _dotted(err["loc"]),
                err["msg"].removeprefix("Value error, "),
            )
            for err in exc.errors()
        ]
        raise StrategyError(problems) from None


def _dotted(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if part == "[key]":  # pydantic's marker for "the key itself", not a field
            continue
        text += f"[{part}]" if isinstance(part, int) else f".{part}" if text else str(part)
    return text or "(document)"


def _line_of(node: yaml.Node, loc: tuple[int | str, ...]) -> int:
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


def _check_duplicate_keys(node: yaml.Node, path: tuple[int | str, ...], source: str | None) -> None:
    # PyYAML keeps the last of two equal keys silently; a strategy file must not.
    if isinstance(node, yaml.MappingNode):
        seen: dict[str, int] = {}
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                line = key.start_mark.line + 1
                if key.value in seen:
                    message = f"duplicate key (first at line {seen[key.value]})"
                    raise _error(_dotted((*path, key.value)), message, source, line)
                seen[key.value] = line
                _check_duplicate_keys(value, (*path, key.value), source)
    elif isinstance(node, yaml.SequenceNode):
        for index, item in enumerate(node.value):
            _check_duplicate_keys(item, (*path, index), source)


def set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Replace the dotted `path` in a strategy's plain data (`Strategy.with_params`)."""
    parts = path.split(".")
    target: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        if isinstance(target, list):
            if not part.isdigit() or int(part) >= len(target):
                raise _error(path, f"{part!r} is not an index of this list (length {len(target)})")
            if last:
                target[int(part)] = value
            else:
                target = target[int(part)]
        elif isinstance(target, dict):
            if last:
                target[part] = value
            else:
                if target.get(part) is None:  # switch an absent rule block on
                    target[part] = {}
                target = target[part]
        else:
            raise _error(path, f"{'.'.join(parts[:depth])} is not a block with parameters")


# ---------------------------------------------------------------------- registry
#: The built-in strategies, in the order they are listed: name -> file in the package.
BUILTINS: dict[str, str] = {
    name: f"builtin/{name}.yaml"
    for name in (
        "keep_all",
        "fixed_ttl",
        "typed_ttl",
        "sliding_window",
        "importance",
        "recency_decay",
        "event_driven",
        "hybrid",
        "oracle",
    )
}


class StrategyRegistry:
    """Strategy names -> YAML files: the built-ins, plus user files once registered.

    Built-ins are parsed on first use; user files when registered (their name is inside).
    Each registry is independent: registering never changes what another one sees.
    """

    def __init__(self, *, builtins: bool = True) -> None:
        package = resources.files(__package__ or "reference.forgetting")
        self._sources: dict[str, Traversable | Path] = (
            {name: package.joinpath(rel) for name, rel in BUILTINS.items()} if builtins else {}
        )
        self._loaded: dict[str, Strategy] = {}

    def register(self, path: str | Path) -> list[str]:
        """Register a strategy file, or every *.yaml/*.yml in a directory; returns names."""
        path = Path(path)
        if path.is_dir():
            files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")])
            if not files:
                raise _error("(file)", "directory holds no *.yaml or *.yml file", str(path))
        else:
            files = [path]
        names = []
        for file in files:
            strategy = load_strategy_file(file)
            known = self._sources.get(strategy.name)
            if known is not None and str(known) != str(file):
                message = f"{strategy.name!r} is already registered (from {known})"
                raise _error("name", message, str(file), _name_line(file))
            self._sources[strategy.name] = file
            self._loaded[strategy.name] = strategy
            names.append(strategy.name)
        return names

    def names(self) -> list[str]:
        """Registered names: built-ins first, in their listing order, then user files."""
        return list(self._sources)

    def get(self, name: str) -> Strategy:
        """The strategy registered under `name`."""
        if name not in self._loaded:
            source = self._sources.get(name)
            if source is None:
                known = ", ".join(self._sources) or "none"
                raise _error("strategy", f"no strategy named {name!r}; known: {known}")
            strategy = parse_strategy(source.read_text(encoding="utf-8"), source=str(source))
            if strategy.name != name:
                raise _error("name", f"is {strategy.name!r}; expected {name!r}", str(source))
            self._loaded[name] = strategy
        return self._loaded[name]

    def load(self, path_or_name: str | Path) -> Strategy:
        """A registered strategy by name, or a strategy file by path (not registered)."""
        text = str(path_or_name)
        if isinstance(path_or_name, Path) or text.endswith((".yaml", ".yml")) or "/" in text:
            return load_strategy_file(path_or_name)
        return self.get(text)

    def all(self) -> list[Strategy]:
        """Every registered strategy, in listing order."""
        return [self.get(name) for name in self._sources]


def _name_line(file: Path) -> int | None:
    node = yaml.compose(file.read_text(encoding="utf-8"), Loader=yaml.SafeLoader)
    return None if node is None else _line_of(node, ("name",))


def load_strategy(
    path_or_name: str | Path, *, registry: StrategyRegistry | None = None
) -> Strategy:
    """A built-in (or `registry`'s) strategy by name, or a strategy YAML file by path."""
    return (registry or StrategyRegistry()).load(path_or_name)


def list_strategies(
    *, registry: StrategyRegistry | None = None, files: Iterable[str | Path] = ()
) -> list[Strategy]:
    """The built-in strategies (or `registry`'s), plus those in `files` (files or dirs)."""
    registry = registry or StrategyRegistry()
    for path in files:
        registry.register(path)
    return registry.all()
