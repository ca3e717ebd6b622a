"""Loading strategies: YAML parsing with line numbers, errors, and the registry.

YAML errors name the file, the line and the field (`hybrid.yaml:12: ttl.default_s: ...`),
by way of `reference.yamldoc`: the file is composed to YAML nodes first, and each pydantic
error location is walked back through those nodes to the line of its key. The models
themselves, and the validation of plain data, are in `reference.policy.strategy`.
"""

from __future__ import annotations

from collections.abc import Iterable
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import yaml

from reference.policy.strategy import Strategy, StrategyError, validate_strategy
from reference.suggest import did_you_mean
from reference.yamldoc import (
    compose_mapping,
    line_of,
    read_yaml_file,
)

__all__ = [
    "BUILTINS",
    "StrategyRegistry",
    "list_strategies",
    "load_strategy",
    "load_strategy_file",
    "parse_strategy",
]


def _error(
    field: str, message: str, file: str | None = None, line: int | None = None
) -> StrategyError:
    return StrategyError.single(field, message, file, line)


# ---------------------------------------------------------------------- YAML loading
def parse_strategy(text: str, *, source: str | None = None) -> Strategy:
    """A strategy from YAML text; `source` (a file name) goes into error messages."""
    data, node = compose_mapping(
        text, source=source, what="a mapping of strategy fields", error=StrategyError
    )
    return validate_strategy(data, source=source, node=node)


def load_strategy_file(path: str | Path) -> Strategy:
    """A strategy from a YAML file."""
    text = read_yaml_file(path, error=StrategyError)
    return parse_strategy(text, source=str(Path(path)))


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
        "hybrid_rules",
        "seed_mixed",
        "oracle",
    )
}


class StrategyRegistry:
    """Strategy names -> YAML files: the built-ins, plus user files once registered.

    Built-ins are parsed on first use; user files when registered (their name is inside).
    Each registry is independent: registering never changes what another one sees.
    """

    def __init__(self, *, builtins: bool = True) -> None:
        package = resources.files(__package__ or "reference.policy")
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
                hint = did_you_mean(name, self._sources)
                raise _error("strategy", f"no strategy named {name!r}{hint}; known: {known}")
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
    return None if node is None else line_of(node, ("name",))


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
