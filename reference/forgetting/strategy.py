"""Strategies: named, validated configurations of the forgetting engine, kept in YAML.

A `Strategy` is data only: which rule blocks are on and with which parameters. The pure
decisions it implies live in `reference.forgetting.policy`; the engine that applies them
to the stores is separate. Durations are float seconds; `None` means "never".

YAML errors name the file, the line and the field (`hybrid.yaml:12: ttl.default_s: ...`):
the file is composed to YAML nodes first, and each pydantic error location is walked back
through those nodes to the line of its key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticCustomError

from reference.errors import InvalidInput
from reference.models import Category, MemoryType

DAY_S = 86_400.0
Layer = Literal["stm", "ltm"]
Seconds = Annotated[float, Field(gt=0)]


def _sorted_unique(values: tuple[Any, ...]) -> tuple[Any, ...]:
    # Sets as sorted tuples: stable YAML output and a stable fingerprint.
    return tuple(sorted(set(values)))


def _fail(message: str) -> PydanticCustomError:
    return PydanticCustomError("strategy", message)


class _Block(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class TtlRule(_Block):
    """A fixed lifetime from the moment a value is written (an LTM fact: its last update).

    STM records look up `by_type[record.type]`. LTM facts look up `by_category[category]`,
    then `by_type` under the same name (every category is also a memory type), then
    `default_s`. A key present with `null` means "never expires"; an absent key falls
    through. `by_type.session` is the session layer's (sliding) lifetime.
    """

    default_s: Seconds | None = None
    by_type: dict[MemoryType, Seconds | None] = Field(default_factory=dict)
    by_category: dict[Category, Seconds | None] = Field(default_factory=dict)

    def ttl_for(self, kind: MemoryType | Category) -> float | None:
        """The lifetime of a value of this STM type or LTM category (None: never)."""
        if isinstance(kind, Category):
            if kind in self.by_category:
                return self.by_category[kind]
            kind = MemoryType(kind.value)
        return self.by_type.get(kind, self.default_s)


class SlidingRule(_Block):
    """A memory lives while it is accessed within `window_s` of its last access."""

    window_s: Seconds


class ImportanceRule(_Block):
    """The seed's importance TTL, counted from the last access: `base * (1 + 2*score/max)`.

    A score below `low_score` gets `low_score_ttl_s` instead. Each access adds
    `access_boost` (capped at `max_score`); time since the last access takes away
    `decay_per_day`. See `reference.forgetting.importance` for the expiry instant.
    """

    base_s: Seconds = 7 * DAY_S
    low_score: float = Field(2.0, ge=0)
    low_score_ttl_s: Seconds = DAY_S
    access_boost: float = Field(1.0, ge=0)
    decay_per_day: float = Field(0.1, ge=0)
    max_score: float = Field(10.0, gt=0)

    @field_validator("max_score")
    @classmethod
    def _not_below_low_score(cls, value: float, info: Any) -> float:
        low = info.data.get("low_score")
        if low is not None and value < low:
            raise _fail(f"must be at least low_score ({low})")
        return value


class DecayRule(_Block):
    """Ranking only: similarity times `exp(-lambda_per_day * age_days)`; deletes nothing.

    `age_from: written` ages a memory from when its value was written (STM created_at,
    LTM updated_at); `last_access` from its last access, as the seed did. Written is the
    default because retrieval touches what it returns: with last-access ages, whatever
    is retrieved stays fresh, and a stale value that keeps winning never fades.
    """

    lambda_per_day: float = Field(0.1, ge=0)
    age_from: Literal["written", "last_access"] = "written"


class EventRule(_Block):
    """What one business event invalidates, among the event user's memories older than it.

    Scope: `layers`, then `types` (STM) and `categories` (LTM); omitted means any.
    Selection, all given conditions must hold:
    - `keys_from`: a payload field with a key or a list of keys. LTM facts whose key is
      in it; STM records whose `metadata[topic_field]` is in it.
    - `match_on`: payload fields whose value must equal the STM record's metadata field,
      or the LTM fact's top-level value field, of the same name.
    A payload that lacks a named field invalidates nothing (never "everything").
    """

    event: str = Field(pattern=r"^[A-Za-z][A-Za-z0-9_.:-]{0,63}$")
    layers: Annotated[tuple[Layer, ...], AfterValidator(_sorted_unique)] = ("ltm", "stm")
    types: Annotated[tuple[MemoryType, ...], AfterValidator(_sorted_unique)] | None = None
    categories: Annotated[tuple[Category, ...], AfterValidator(_sorted_unique)] | None = None
    keys_from: str | None = Field(None, min_length=1)
    topic_field: str = Field("topic", min_length=1)
    match_on: Annotated[tuple[str, ...], AfterValidator(_sorted_unique)] = ()
    action: Literal["delete", "archive"] = "archive"

    @field_validator("layers", "types", "categories")
    @classmethod
    def _not_empty(cls, value: tuple[Any, ...] | None) -> tuple[Any, ...] | None:
        if value is not None and not value:
            raise _fail("must not be empty (omit it to mean any)")
        return value


class PiiRule(_Block):
    """Personal data: masked in the session layer and STM, sealed in LTM, then anonymised.

    A sealed LTM value is a JSON object with a `_sealed` key (the ciphertext) and
    `_sealed_at` (when it was sealed); it is anonymised `anonymise_after_s` later.
    """

    mask_session_stm: bool = True
    encrypt_ltm: bool = True
    anonymise_after_s: Seconds | None = DAY_S


class ArchivalRule(_Block):
    """A user inactive for `inactive_s` is archived; archived records are hard-deleted
    `delete_after_s` later."""

    inactive_s: Seconds = 90 * DAY_S
    delete_after_s: Seconds = 30 * DAY_S


class Strategy(_Block):
    """A named configuration of the forgetting engine. Immutable; `with_params` derives."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]{0,39}$")
    description: str = Field(min_length=1, max_length=200)
    ttl: TtlRule | None = None
    sliding: SlidingRule | None = None
    importance: ImportanceRule | None = None
    decay: DecayRule | None = None
    events: tuple[EventRule, ...] = ()
    forget_commands: bool = True
    pii: PiiRule | None = None
    archival: ArchivalRule | None = None
    sweep_interval_s: Seconds = 300.0
    sweep_batch_size: int = Field(1000, ge=1, le=1_000_000)
    # Last, so that its validator sees the rule blocks above.
    oracle: bool = False

    @field_validator("description")
    @classmethod
    def _one_line(cls, value: str) -> str:
        if "\n" in value.strip():
            raise _fail("must be one line")
        return value.strip()

    @field_validator("oracle")
    @classmethod
    def _oracle_alone(cls, value: bool, info: Any) -> bool:
        # The oracle is the upper bound: any other removal rule would make it lose what
        # the probes need. Compliance rules (forget commands, PII) still apply.
        clashing = [
            b for b in ("ttl", "sliding", "importance", "archival", "events") if info.data.get(b)
        ]
        if value and clashing:
            raise _fail(f"an oracle keeps exactly what the probes need; remove {clashing}")
        return value

    def with_params(self, overrides: Mapping[str, Any]) -> Strategy:
        """A new validated strategy with dotted parameters replaced, e.g.
        `{"ttl.default_s": 600, "events.0.action": "delete", "decay": None}`."""
        data = self.model_dump(mode="json")
        for path, value in overrides.items():
            _set_path(data, path, value)
        return validate_strategy(data, source=None)

    def fingerprint(self) -> str:
        """A short stable hash of the behaviour (every field but name and description)."""
        config = self.model_dump(mode="json", exclude={"name", "description"})
        blob = json.dumps(config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        return hashlib.sha256(blob.encode()).hexdigest()[:12]

    def to_yaml(self) -> str:
        """The full configuration as YAML, which loads back into an equal strategy."""
        return yaml.safe_dump(self.model_dump(mode="json"), sort_keys=False, allow_unicode=True)


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


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
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
